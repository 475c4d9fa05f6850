//! `concord sql` and the DataFusion provider: answers checked against an independent
//! computation over the rows the test wrote (after deletes and updates, at older
//! versions, while writers commit), fragments skipped by their statistics (counted),
//! and every mistake a user makes refused with nothing written.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::Value;

use crate::common::*;

const SCHEMA: &str = "id bigint not null, grp varchar, qty int, price double, day date, at timestamp";

/// One row as the test wrote it: the oracle computes every answer from these.
#[derive(Debug, Clone)]
struct Row {
    id: i64,
    grp: Option<&'static str>,
    qty: Option<i64>,
    price: f64,
    day: NaiveDate,
    at: DateTime<Utc>,
}

fn row(id: i64) -> Row {
    let start = DateTime::parse_from_rfc3339("2024-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
    Row {
        id,
        grp: [Some("a"), Some("b"), Some("c"), None][(id % 4) as usize],
        qty: (id % 7 != 0).then_some((id * 13) % 50),
        price: (id % 100) as f64 / 4.0,
        day: NaiveDate::from_ymd_opt(2024, 1, 1).unwrap() + Duration::days(id % 30),
        at: start + Duration::minutes(id * 37),
    }
}

fn csv(rows: &[Row]) -> String {
    let mut s = String::from("id,grp,qty,price,day,at\n");
    for r in rows {
        let at = r.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        s.push_str(&format!(
            "{},{},{},{},{},{at}\n",
            r.id,
            r.grp.unwrap_or(""),
            r.qty.map(|q| q.to_string()).unwrap_or_default(),
            r.price,
            r.day
        ));
    }
    s
}

/// A table of ids `0..n` in `parts` appends (one fragment each).
fn table_of(n: i64, parts: i64) -> (TempTable, Vec<Row>) {
    let t = TempTable::create_with(SCHEMA);
    let rows: Vec<Row> = (0..n).map(row).collect();
    for (i, chunk) in rows.chunks((n / parts) as usize).enumerate() {
        let file = t.file(&format!("part{i}.csv"), &csv(chunk));
        ok(&["append", &t.uri, &file]);
    }
    (t, rows)
}

/// `concord sql` with `--format json`: one object per row.
fn query(uri: &str, sql: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["sql", uri, sql, "--format", "json"];
    args.extend_from_slice(extra);
    ok(&args).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64()
}

fn timestamp_text(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Runs the query set on the table at `uri` (with `extra` arguments, e.g. a version)
/// and compares each answer with the oracle's over `rows`.
fn assert_answers(uri: &str, groups_uri: &str, rows: &[Row], extra: &[&str]) {
    let mut args = vec!["--table", &format!("g={groups_uri}")].into_iter().map(String::from).collect::<Vec<_>>();
    args.extend(extra.iter().map(|s| s.to_string()));
    let extra: Vec<&str> = args.iter().map(String::as_str).collect();

    // Aggregates, NULLs skipped by count(col) and sum.
    let got = query(
        uri,
        "SELECT count(*) AS n, count(qty) AS nq, sum(qty) AS sq, min(price) AS lo, max(price) AS hi, sum(price) AS sp FROM t",
        &extra,
    );
    let qtys: Vec<i64> = rows.iter().filter_map(|r| r.qty).collect();
    let prices = rows.iter().map(|r| r.price);
    assert_eq!(int(&got[0]["n"]), Some(rows.len() as i64), "{got:?}");
    assert_eq!(int(&got[0]["nq"]), Some(qtys.len() as i64));
    assert_eq!(int(&got[0]["sq"]), (!qtys.is_empty()).then(|| qtys.iter().sum()));
    assert_eq!(got[0]["lo"].as_f64(), prices.clone().reduce(f64::min));
    assert_eq!(got[0]["hi"].as_f64(), prices.clone().reduce(f64::max));
    assert_eq!(got[0]["sp"].as_f64(), (!rows.is_empty()).then(|| prices.sum::<f64>()));

    // GROUP BY, the NULL group included, in ORDER BY order.
    let got = query(uri, "SELECT grp, count(*) AS n, sum(qty) AS sq FROM t GROUP BY grp ORDER BY grp NULLS FIRST", &extra);
    let mut expected: BTreeMap<Option<&str>, (i64, Option<i64>)> = BTreeMap::new();
    for r in rows {
        let e = expected.entry(r.grp).or_insert((0, None));
        e.0 += 1;
        if let Some(q) = r.qty {
            e.1 = Some(e.1.unwrap_or(0) + q);
        }
    }
    let got: Vec<(Option<String>, i64, Option<i64>)> =
        got.iter().map(|g| (g["grp"].as_str().map(String::from), g["n"].as_i64().unwrap(), g["sq"].as_i64())).collect();
    let expected: Vec<(Option<String>, i64, Option<i64>)> = expected.into_iter().map(|(g, (n, s))| (g.map(String::from), n, s)).collect();
    assert_eq!(got, expected);

    // ORDER BY with LIMIT: the five dearest rows with a quantity, ties by id.
    let got = query(uri, "SELECT id, price FROM t WHERE qty IS NOT NULL ORDER BY price DESC, id LIMIT 5", &extra);
    let mut sorted: Vec<&Row> = rows.iter().filter(|r| r.qty.is_some()).collect();
    sorted.sort_by(|a, b| b.price.total_cmp(&a.price).then(a.id.cmp(&b.id)));
    let expected: Vec<i64> = sorted.iter().take(5).map(|r| r.id).collect();
    assert_eq!(got.iter().map(|r| r["id"].as_i64().unwrap()).collect::<Vec<_>>(), expected);

    // A join with a second table (rows whose grp is NULL join nothing).
    let got = query(
        uri,
        "SELECT g.label, count(*) AS n, sum(t.qty) AS sq FROM t JOIN g ON t.grp = g.grp GROUP BY g.label ORDER BY g.label",
        &extra,
    );
    let labels = [("a", "alpha"), ("b", "beta"), ("c", "gamma")];
    let expected: Vec<(String, i64, Option<i64>)> = labels
        .iter()
        .filter_map(|(grp, label)| {
            let members: Vec<&Row> = rows.iter().filter(|r| r.grp == Some(grp)).collect();
            let qtys: Vec<i64> = members.iter().filter_map(|r| r.qty).collect();
            (!members.is_empty()).then(|| (label.to_string(), members.len() as i64, (!qtys.is_empty()).then(|| qtys.iter().sum())))
        })
        .collect();
    let got: Vec<(String, i64, Option<i64>)> =
        got.iter().map(|g| (g["label"].as_str().unwrap().to_string(), g["n"].as_i64().unwrap(), g["sq"].as_i64())).collect();
    assert_eq!(got, expected);

    // NULLs counted by IS NULL, never by comparisons.
    let got = query(uri, "SELECT count(*) AS n FROM t WHERE qty IS NULL OR grp IS NULL", &extra);
    assert_eq!(int(&got[0]["n"]), Some(rows.iter().filter(|r| r.qty.is_none() || r.grp.is_none()).count() as i64));
    let got = query(uri, "SELECT count(*) AS n FROM t WHERE qty <> 13", &extra);
    assert_eq!(int(&got[0]["n"]), Some(rows.iter().filter(|r| r.qty.is_some_and(|q| q != 13)).count() as i64));

    // Dates and timestamps: comparisons, bounds, truncation.
    let (from, until) = (NaiveDate::from_ymd_opt(2024, 1, 10).unwrap(), DateTime::parse_from_rfc3339("2024-01-12T00:00:00Z").unwrap());
    let got = query(uri, "SELECT count(*) AS n FROM t WHERE day >= DATE '2024-01-10' AND at < TIMESTAMP '2024-01-12T00:00:00Z'", &extra);
    assert_eq!(int(&got[0]["n"]), Some(rows.iter().filter(|r| r.day >= from && r.at < until).count() as i64));
    let got = query(uri, "SELECT min(at) AS first, max(at) AS last, max(day) AS day FROM t WHERE grp = 'b'", &extra);
    let b: Vec<&Row> = rows.iter().filter(|r| r.grp == Some("b")).collect();
    assert_eq!(got[0]["first"].as_str().map(String::from), b.iter().map(|r| r.at).min().map(timestamp_text));
    assert_eq!(got[0]["last"].as_str().map(String::from), b.iter().map(|r| r.at).max().map(timestamp_text));
    assert_eq!(got[0]["day"].as_str().map(String::from), b.iter().map(|r| r.day).max().map(|d| d.to_string()));
    let got = query(uri, "SELECT date_trunc('day', at) AS d, count(*) AS n FROM t GROUP BY 1 ORDER BY 1 LIMIT 1", &extra);
    let first_day = rows.iter().map(|r| r.at.date_naive()).min();
    if let Some(first_day) = first_day {
        assert_eq!(int(&got[0]["n"]), Some(rows.iter().filter(|r| r.at.date_naive() == first_day).count() as i64));
    }
}

/// A second table for joins: grp -> label.
fn groups_table() -> TempTable {
    let g = TempTable::create_with("grp varchar not null, label varchar not null");
    let file = g.file("g.csv", "grp,label\na,alpha\nb,beta\nc,gamma\nz,zeta\n");
    ok(&["append", &g.uri, &file]);
    g
}

/// The query set answers as the oracle does: as written, after a delete and an update
/// (no deleted row counted), at the older versions by number and by time.
#[test]
fn answers_match_an_independent_computation_across_versions() {
    // The groups table first: --as-of applies to every table of a query.
    let g = groups_table();
    let (t, mut rows) = table_of(1000, 4);
    assert_answers(&t.uri, &g.uri, &rows, &[]);
    let written = t.latest_version();
    let written_at = t.history().last().unwrap()["timestamp"].as_str().unwrap().to_string();

    ok(&["delete", &t.uri, "--where", "id % 3 = 0 OR id >= 990"]);
    let original = rows.clone();
    rows.retain(|r| !(r.id % 3 == 0 || r.id >= 990));
    assert_answers(&t.uri, &g.uri, &rows, &[]);
    let max = query(&t.uri, "SELECT max(id) AS m FROM t", &[]);
    assert_eq!(int(&max[0]["m"]), Some(989), "the deleted largest ids are not the max");

    ok(&["update", &t.uri, "--set", "qty = 1000", "--set", "price = price + 100", "--where", "grp = 'a'"]);
    for r in rows.iter_mut().filter(|r| r.grp == Some("a")) {
        r.qty = Some(1000);
        r.price += 100.0;
    }
    assert_answers(&t.uri, &g.uri, &rows, &[]);

    assert_answers(&t.uri, &g.uri, &original, &["--version", &written.to_string()]);
    assert_answers(&t.uri, &g.uri, &original, &["--as-of", &written_at]);
    assert_answers(&t.uri, &g.uri, &[], &["--version", "0"]);
}

/// Results print like scan's: CSV keeps NULL and the empty string apart, JSON is one
/// object per row, the table format has a header.
#[test]
fn formats_follow_scan() {
    let t = TempTable::create();
    let file = t.file("r.csv", "id,name,score\n1,,0.5\n2,\"\",\n");
    ok(&["append", &t.uri, &file]);
    let q = "SELECT id, name, score FROM t ORDER BY id";
    assert_eq!(ok(&["sql", &t.uri, q, "--format", "csv"]), "id,name,score\n1,,0.5\n2,\"\",\n");
    assert_eq!(
        ok(&["sql", &t.uri, q, "--format", "json"]),
        "{\"id\":1,\"name\":null,\"score\":0.5}\n{\"id\":2,\"name\":\"\",\"score\":null}\n"
    );
    let table = ok(&["sql", &t.uri, "SELECT count(*) AS rows FROM t"]);
    assert!(table.contains("| rows |") && table.contains("| 2    |"), "{table}");
    assert_eq!(ok(&["sql", &t.uri, "SELECT id FROM t WHERE id > 5", "--format", "csv"]), "id\n", "no rows: the header");
}

/// While one writer appends blocks of 100 rows and another rewrites every row
/// (update: deletion vectors and new files in one commit), every query sees one whole
/// version: no row twice, none missing, counts in whole blocks.
#[test]
fn queries_see_one_version_while_writers_commit() {
    let t = TempTable::create_with("id bigint not null, v bigint not null");
    let block = |b: i64| (b * 100..(b + 1) * 100).map(|i| format!("{i},0\n")).collect::<String>();
    ok(&["append", &t.uri, &t.file("b0.csv", &format!("id,v\n{}", block(0)))]);
    let files: Vec<String> = (1..=6).map(|b| t.file(&format!("b{b}.csv"), &format!("id,v\n{}", block(b)))).collect();
    let uri = t.uri.clone();
    let appender = std::thread::spawn(move || {
        for f in files {
            ok(&["append", &uri, &f]);
        }
    });
    let uri = t.uri.clone();
    let updater = std::thread::spawn(move || {
        for _ in 0..4 {
            // Serializable: an update that races an append re-runs on it or gives way (exit 3).
            let (code, _, stderr) = run(&["update", &uri, "--set", "v = v + 1"]);
            assert!(code == 0 || code == 3, "update: {code} {stderr}");
        }
    });
    let mut seen = std::collections::BTreeSet::new();
    while !(appender.is_finished() && updater.is_finished()) || seen.len() < 3 {
        let got = query(&t.uri, "SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM t", &[]);
        let (n, d, lo, hi) =
            (int(&got[0]["n"]).unwrap(), int(&got[0]["d"]).unwrap(), int(&got[0]["lo"]).unwrap(), int(&got[0]["hi"]).unwrap());
        assert!(n == d && n % 100 == 0 && lo == 0 && hi == n - 1, "a partial version: {got:?}");
        seen.insert(n);
        if appender.is_finished() && updater.is_finished() && seen.len() < 3 {
            break;
        }
    }
    appender.join().unwrap();
    updater.join().unwrap();
    assert_eq!(int(&query(&t.uri, "SELECT count(*) AS n FROM t", &[])[0]["n"]), Some(700));
}

/// The writer records each data file's column statistics in the manifest.
#[test]
fn data_files_carry_column_statistics() {
    let (t, _) = table_of(100, 1);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let fragments = runtime.block_on(async { open_table(&concord::StoreResolver::new(), &t.uri).await.fragments().await.unwrap() });
    let stats = &fragments[0].files[0].stats;
    let by_field = |id: u32| stats.iter().find(|s| s.field == id).unwrap_or_else(|| panic!("no stats for field {id}: {stats:?}"));
    assert_eq!((by_field(0).min.as_deref(), by_field(0).max.as_deref(), by_field(0).nulls), (Some("0"), Some("99"), 0));
    assert_eq!((by_field(1).min.as_deref(), by_field(1).max.as_deref(), by_field(1).nulls), (Some("a"), Some("c"), 25));
    assert_eq!((by_field(4).min.as_deref(), by_field(4).max.as_deref()), (Some("2024-01-01"), Some("2024-01-30")));
    assert_eq!(by_field(5).min.as_deref(), Some("2024-01-01T00:00:00Z"));
}

/// A table written before statistics existed (format 1, no stats) answers the same
/// queries, with deleted rows left out; nothing is skipped, nothing is wrong.
#[test]
fn tables_without_statistics_answer_the_same() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let t = TempTable::uncreated();
    copy_dir(&data.join("format1-table"), &t.dir.path().join("t"));
    let count: i64 = ok(&["count", &t.uri]).trim().parse().unwrap();
    let got = query(&t.uri, "SELECT count(*) AS n, sum(qty) AS sq FROM t", &[]);
    assert_eq!(int(&got[0]["n"]), Some(count));
    let expected = ok(&["scan", &t.uri, "--where", "id = 5", "--format", "csv"]);
    assert_eq!(ok(&["sql", &t.uri, "SELECT * FROM t WHERE id = 5", "--format", "csv"]), expected);
    let old = query(&t.uri, "SELECT count(*) AS n FROM t", &["--version", "5"]);
    assert_eq!(int(&old[0]["n"]), Some(10));
}

/// Mistakes exit 2 (bad input: DataFusion's message) or 7 (no table), print nothing
/// on stdout and write nothing; statements that would write are refused.
#[test]
fn mistakes_are_refused_and_nothing_is_written() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("r.csv", &csv_rows(0, 10))]);
    let before = snapshot(&t);
    let other = TempTable::create();
    let named = format!("o={}", other.uri);

    assert_mentions(&fails(&["sql", &t.uri], 2), &["QUERY"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELEC id FROM t"], 2), &["SELEC"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT nope FROM t"], 2), &["nope"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT * FROM missing"], 2), &["missing"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT id FROM t WHERE name > 1 +"], 2), &["SQL"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT sum(name) FROM t"], 2), &["sum"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1; SELECT 2"], 2), &["single"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT id / 0 FROM t"], 2), &["zero"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table", "o"], 2), &["NAME=URI"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table", "t=x"], 2), &["twice"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table", &named, "--table", &format!("O={}", other.uri)], 2), &["twice"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table", &format!("9x={}", other.uri)], 2), &["9x"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--version", "99"], 2), &["99"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--as-of", "yesterday"], 2), &["RFC 3339"]);
    let missing = t.dir.path().join("missing").to_string_lossy().into_owned();
    fails(&["sql", &missing, "SELECT 1"], 7);
    fails(&["sql", &t.uri, "SELECT 1", "--table", &format!("m={missing}")], 7);

    let target = t.dir.path().join("copied.csv").to_string_lossy().into_owned();
    let writes = [
        "INSERT INTO t VALUES (100, 'x', 1.0)".to_string(),
        "INSERT INTO o SELECT * FROM t".to_string(),
        "DELETE FROM t WHERE id = 1".to_string(),
        "UPDATE t SET score = 0".to_string(),
        "CREATE TABLE c AS SELECT * FROM t".to_string(),
        "CREATE VIEW v AS SELECT * FROM t".to_string(),
        "DROP TABLE t".to_string(),
        format!("COPY (SELECT * FROM t) TO '{target}'"),
        "SET datafusion.execution.batch_size = 1".to_string(),
        "EXPLAIN ANALYZE INSERT INTO t VALUES (100, 'x', 1.0)".to_string(),
    ];
    for statement in &writes {
        let stderr = fails(&["sql", &t.uri, statement, "--table", &named], 2);
        assert!(
            stderr.contains("only queries") || stderr.contains("not supported") || stderr.contains("Unsupported"),
            "{statement}: {stderr}"
        );
    }
    assert!(!std::path::Path::new(&target).exists(), "COPY wrote nothing");
    assert_eq!(snapshot(&t), before, "nothing committed");
    assert_eq!(other.count(), 0);
    // Reading statements are queries.
    assert!(ok(&["sql", &t.uri, "EXPLAIN SELECT count(*) FROM t WHERE id = 3"]).contains("ConcordScan"));
    assert!(ok(&["sql", &t.uri, "DESCRIBE t"]).contains("score"));
}

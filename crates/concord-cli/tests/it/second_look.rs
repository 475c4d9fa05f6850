//! A second new-user pass (issue 19, items 7, 9, 10, 12, 13, 15): promises the help and
//! README made that the commands did not keep, messages that misled, and friction.

use std::sync::Arc;

use concord::arrow::array::{ArrayRef, Date64Array, Int64Array, RecordBatch};
use serde_json::Value;

use crate::common::*;

fn json_lines(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// Item 7: `--as-of` applies to every table of a query; `--version` to `t` only;
/// `--table-version NAME=N` pins another table.
#[test]
fn sql_time_travel_applies_to_every_table() {
    let t = TempTable::create();
    let m = TempTable::create();
    ok(&["append", &t.uri, &t.file("t.csv", &csv_rows(0, 1))]);
    ok(&["append", &m.uri, &m.file("m1.csv", &csv_rows(0, 2))]);
    let then = m.history().last().unwrap()["timestamp"].as_str().unwrap().to_string();
    ok(&["append", &m.uri, &m.file("m2.csv", &csv_rows(10, 5))]);
    let count_m = |extra: &[&str]| {
        let mut args = vec!["sql", &t.uri, "SELECT (SELECT count(*) FROM m) AS n", "--format", "json"];
        let table = format!("m={}", m.uri);
        args.extend(["--table", table.as_str()]);
        args.extend_from_slice(extra);
        json_lines(&ok(&args))[0]["n"].as_i64().unwrap()
    };
    assert_eq!(count_m(&[]), 7, "latest");
    assert_eq!(count_m(&["--as-of", &then]), 2, "m as of the time given");
    assert_eq!(count_m(&["--table-version", "m=1"]), 2);
    assert_eq!(count_m(&["--table-version", "M=2"]), 7);
    assert_eq!(count_m(&["--version", "0"]), 7, "--version pins t only");
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table-version", "x=1"], 2), &["no --table is named 'x'"]);
    assert_mentions(&fails(&["sql", &t.uri, "SELECT 1", "--table-version", "t=1"], 2), &["--version"]);
}

/// Item 9: `sql` resolves column names as every other command does: exactly, else the one
/// case-insensitive match, else it asks for quotes.
#[test]
fn sql_resolves_column_names_like_every_command() {
    let t = TempTable::create_with("CustomerId bigint not null, Name varchar");
    ok(&["append", &t.uri, &t.file("a.csv", "CustomerId,Name\n1,a\n2,b\n")]);
    assert_eq!(ok(&["count", &t.uri, "--where", "customerid = 1"]).trim(), "1");
    let rows = json_lines(&ok(&["sql", &t.uri, "SELECT CustomerId, name FROM t WHERE customerid = 2", "--format", "json"]));
    assert_eq!(rows, [serde_json::json!({"CustomerId": 2, "Name": "b"})]);
    let joined = json_lines(&ok(&["sql", &t.uri, "SELECT t.customerid AS c FROM t ORDER BY c", "--format", "json"]));
    assert_eq!(joined.len(), 2);
    let two = TempTable::create_with("Id bigint, ID bigint");
    assert_mentions(&fails(&["sql", &two.uri, "SELECT id FROM t"], 2), &["double quotes", "Id", "ID"]);
    ok(&["sql", &two.uri, "SELECT \"ID\" FROM t"]);
}

/// Item 10: One naming rule for create, alter, headers and Parquet/Arrow names; any name in
/// double quotes.
#[test]
fn any_column_name_in_double_quotes() {
    let t = TempTable::create_with("\"Customer ID\" bigint not null, été int, v varchar, \"a.b\" int");
    ok(&["append", &t.uri, &t.file("a.csv", "Customer ID,été,v,a.b\n1,2,x,3\n")]);
    ok(&["alter", &t.uri, "rename-column", "v", "\"Prénom, nom\""]);
    ok(&["alter", &t.uri, "rename-column", "été", "select"]);
    ok(&["alter", &t.uri, "add-column", "\"say \"\"hi\"\"\" varchar default 'x'"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "\"Customer ID\" = 1 AND \"a.b\" = 3 AND \"select\" = 2"]).trim(), "1");
    let schema = ok(&["schema", &t.uri]);
    let definition: Vec<&str> = schema.lines().filter(|l| !l.starts_with("property ")).collect();
    assert_eq!(
        definition,
        [
            "\"Customer ID\" bigint not null",
            "select int",
            "\"Prénom, nom\" varchar",
            "\"a.b\" int",
            "\"say \"\"hi\"\"\" varchar default 'x'"
        ]
    );
    // The printed definition creates the same columns (defaults come with add-column).
    let copy = TempTable::create_with(&definition[..4].join(", "));
    assert_eq!(ok(&["schema", &copy.uri]).lines().filter(|l| !l.starts_with("property ")).collect::<Vec<_>>(), definition[..4]);
    let row = &json_lines(&ok(&["scan", &t.uri, "--format", "json"]))[0];
    assert_eq!((row["Customer ID"].as_i64(), row["Prénom, nom"].as_str()), (Some(1), Some("x")));
}

/// Item 12: Messages that named the wrong thing, or no line.
#[test]
fn messages_name_the_real_cause() {
    let t = TempTable::create_with("id bigint not null, d date, name varchar");
    // A date64 column of whole days goes into a date column (checked by value).
    let parquet = t.dir.path().join("d.parquet");
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        ("d", Arc::new(Date64Array::from(vec![86_400_000 * 19_000])) as ArrayRef),
    ])
    .unwrap();
    write_parquet(&parquet, &batch);
    ok(&["append", &t.uri, parquet.to_str().unwrap()]);
    assert_mentions(
        &fails(&["create", &t.dir.path().join("u").to_string_lossy(), "--schema", "amt decimal(80,2)"], 2),
        &["'decimal(80,2)'", "precision is from 1 to 76"],
    );
    let no_key = t.file("m.csv", "name\nx\n");
    assert_mentions(&fails(&["merge", &t.uri, &no_key, "--on", "id"], 2), &["merge key column 'id'", "not in the source"]);
    let syntax = t.file("s.ndjson", "{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3,}\n");
    assert_mentions(&fails(&["append", &t.uri, &syntax], 2), &["line 3"]);
    let typed = t.file("t.ndjson", "{\"id\": 1}\n{\"id\": 2, \"name\": 5}\n");
    assert_mentions(&fails(&["append", &t.uri, &typed], 2), &["line 2", "'name'", "a number"]);
    let now = (chrono::Utc::now() + chrono::TimeDelta::seconds(2)).format("%Y-%m-%d %H:%M:%S").to_string();
    assert_eq!(ok(&["count", &t.uri, "--as-of", &now]).trim(), "1", "a space for the T, no zone: UTC");
    assert_mentions(&fails(&["count", &t.uri, "--as-of", "tomorrow"], 2), &["RFC 3339", "2026-01-02T03:04:05Z"]);
    assert_mentions(&fails(&["sql", &t.uri, "INSERT INTO t VALUES (1, NULL, NULL)"], 2), &["only queries", "INSERT"]);
    let stderr = fails(&["vacuum", &t.uri, "--older-than", "1m"], 2);
    assert_eq!(stderr.matches("no such writer").count(), 1, "the advice once: {stderr}");
    ok(&["append", &t.uri, &t.file("k.csv", "id\n7\n"), "--idempotency-key", "k"]);
    let stderr = fails(&["delete", &t.uri, "--where", "id = 7", "--idempotency-key", "k"], 2);
    assert_mentions(&stderr, &["an append"]);
}

/// Item 13: `--json` prints one JSON object on stdout for failures too, with the contract's
/// kind and exit code.
#[test]
fn json_failures_carry_the_contract_kind() {
    let t = TempTable::create();
    let missing = TempTable::uncreated();
    let cases: Vec<(Vec<String>, &str, i64)> = vec![
        (vec!["append".into(), t.uri.clone(), t.file("bad.csv", "id\nx\n"), "--json".into()], "invalid_input", 2),
        (
            vec!["delete".into(), t.uri.clone(), "--where".into(), "id = 1".into(), "--expect-version".into(), "7".into(), "--json".into()],
            "moved",
            5,
        ),
        (vec!["delete".into(), missing.uri.clone(), "--where".into(), "id = 1".into(), "--json".into()], "not_found", 7),
        (vec!["vacuum".into(), missing.uri.clone(), "--older-than".into(), "7d".into(), "--json".into()], "not_found", 7),
    ];
    for (args, kind, code) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, stdout, stderr) = run(&args);
        assert_eq!(i64::from(got), code, "{args:?}: {stderr}");
        let outcome: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"));
        assert_eq!((outcome["error"].as_str(), outcome["exit"].as_i64()), (Some(kind), Some(code)), "{stdout}");
        assert!(!outcome["message"].as_str().unwrap().is_empty() && !stderr.is_empty());
    }
}

/// Item 15: The table format shows NULL apart from the empty string and keeps its rows
/// aligned; `schema` shows properties; `history --limit`; `create` refuses a folder
/// holding something else.
#[test]
fn outputs_and_create_keep_their_promises() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score\n1,,1\n2,\"\",2\n")]);
    let long = "x".repeat(40);
    ok(&["append", &t.uri, &t.file("b.csv", &format!("id,name,score\n3,{long},3\n"))]);
    let (code, table, stderr) = run(&["scan", &t.uri]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines.iter().any(|l| l.contains("NULL")), "{table}");
    let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|w| *w == widths[0]), "every row as wide as the header:\n{table}");
    assert!(stderr.contains("cut"), "{stderr}");
    assert!(ok(&["scan", &t.uri, "--format", "csv"]).contains(&long), "csv prints whole values");
    assert!(ok(&["schema", &t.uri]).contains("property isolation=serializable"));
    let t2 = TempTable::uncreated();
    ok(&["create", &t2.uri, "--schema", "id bigint", "--property", "isolation=snapshot"]);
    assert!(ok(&["schema", &t2.uri]).contains("property isolation=snapshot"));
    fails(&["create", &t.dir.path().join("p").to_string_lossy(), "--schema", "id bigint", "--property", "colour=blue"], 2);
    let limited: Vec<Value> = serde_json::from_str(&ok(&["history", &t.uri, "--format", "json", "--limit", "2"])).unwrap();
    assert_eq!(limited.iter().map(|v| v["version"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2]);
    let folder = t.dir.path().join("notes");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("readme.txt"), "mine").unwrap();
    let stderr = fails(&["create", folder.to_str().unwrap(), "--schema", "id bigint"], 2);
    assert_mentions(&stderr, &["not empty", "readme.txt"]);
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 1, "nothing written there");
}

/// Item 14: A long append shows its progress on stderr when stderr is a terminal (here a
/// pseudo-terminal from `script`), and nothing when it is not.
#[test]
fn long_appends_show_progress_on_a_terminal_only() {
    let t = TempTable::create_with("id bigint not null");
    let mut csv = String::from("id\n");
    for i in 0..200_000 {
        csv.push_str(&format!("{i}\n"));
    }
    let file = t.file("big.csv", &csv);
    let (code, _, stderr) = run(&["append", &t.uri, &file]);
    assert_eq!((code, stderr.as_str()), (0, ""), "nothing on stderr when it is not a terminal");
    let command = format!("{} append '{}' '{}'", concord_bin(), t.uri, file);
    let out = std::process::Command::new("script").args(["-qec", &command, "/dev/null"]).output().expect("script (util-linux) runs");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("rows read") && screen.contains("rows/s"), "progress on the terminal: {screen}");
    assert!(screen.contains("committed version 2"), "{screen}");
}

//! A new user's first hour (issue 10): the quickstart, then every command with CSV,
//! NDJSON and Parquet, mistakes on purpose. Each test is one broken promise that was
//! found that way: silent wrong data, dropped flags, misleading errors, panics.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

/// Rows of a table, as `scan --format json` prints them.
fn json_rows(uri: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["scan", uri, "--format", "json"];
    args.extend_from_slice(extra);
    ok(&args).lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect()
}

/// The row whose `id` is `id`.
fn row(uri: &str, id: i64) -> Value {
    let rows = json_rows(uri, &["--where", &format!("id = {id}")]);
    assert_eq!(rows.len(), 1, "one row with id {id}: {rows:?}");
    rows.into_iter().next().unwrap()
}

const TYPED: &str = "id bigint not null, name varchar, amount double, active boolean, day date, n int, at timestamp";

/// A table of every type with rows 1..=3.
fn typed_table() -> (TempTable, Snapshot) {
    let t = TempTable::create_with(TYPED);
    let csv = "id,name,amount,active,day,n,at\n\
               1,a,1.5,true,2024-01-01,5,2024-01-01T00:00:00Z\n\
               2,b,2.5,false,2024-01-02,6,2024-01-02T00:00:00Z\n\
               3,c,3.5,true,2024-01-03,7,2024-01-03T00:00:00Z\n";
    ok(&["append", &t.uri, &t.file("seed.csv", csv)]);
    let before = snapshot(&t);
    (t, before)
}

// 1. A value that does not fit its column is refused, by every command that writes one.

#[test]
fn update_refuses_a_value_that_does_not_fit_its_column() {
    let (t, before) = typed_table();
    for (set, column, value, ty) in [
        ("amount = 'abc'", "amount", "abc", "double"),
        ("active = 'maybe'", "active", "maybe", "boolean"),
        ("day = 'notadate'", "day", "notadate", "date"),
        ("at = 'yesterday'", "at", "yesterday", "timestamp"),
        ("n = 3000000000", "n", "3000000000", "int"),
        ("n = 1.7", "n", "1.7", "int"),
        ("n = n * 1000000000", "n", "5000000000", "int"),
    ] {
        let stderr = fails(&["update", &t.uri, "--set", set, "--where", "id = 1"], 2);
        assert_mentions(&stderr, &[&format!("'{column}'"), value, ty]);
        assert_eq!(snapshot(&t), before, "{set}: nothing committed");
    }
    // Values that do fit still work, converted exactly.
    ok(&["update", &t.uri, "--set", "n = 2.0", "--set", "amount = '4.25'", "--set", "day = '2025-02-03'", "--where", "id = 1"]);
    let r = row(&t.uri, 1);
    assert_eq!((r["n"].as_i64(), r["amount"].as_f64(), r["day"].as_str()), (Some(2), Some(4.25), Some("2025-02-03")));
}

#[test]
fn add_column_refuses_a_default_that_does_not_fit() {
    let (t, before) = typed_table();
    for (definition, value) in
        [("q int default 1.7", "1.7"), ("q int default 3000000000", "3000000000"), ("q boolean default 'maybe'", "maybe")]
    {
        let stderr = fails(&["alter", &t.uri, "add-column", definition], 2);
        assert_mentions(&stderr, &["'q'", value]);
        assert_eq!(snapshot(&t), before, "{definition}");
    }
}

#[test]
fn merge_and_overwrite_refuse_values_that_do_not_fit() {
    let (t, before) = typed_table();
    let bad = t.file("bad.csv", "id,n\n1,1.7\n");
    let stderr = fails(&["merge", &t.uri, &bad, "--on", "id"], 2);
    assert_mentions(&stderr, &["'n'", "1.7", "int"]);
    let stderr = fails(&["overwrite", &t.uri, &bad], 2);
    assert_mentions(&stderr, &["'n'", "1.7", "int"]);
    let stderr = fails(&["overwrite", &t.uri, &bad, "--where", "id = 1"], 2);
    assert_mentions(&stderr, &["'n'", "1.7"]);
    assert_eq!(snapshot(&t), before);
}

// 2. Options given with --stage are part of the staged transaction.

fn staged(args: &[&str]) -> String {
    let out = ok(args);
    assert_eq!(out.lines().count(), 1, "--stage prints one line: {out}");
    out.trim().to_string()
}

#[test]
fn expect_version_given_when_staging_holds_at_commit() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    // The table is at 1: a staged transaction expecting 0 could never commit.
    fails(&["delete", &t.uri, "--where", "true", "--stage", "--expect-version", "0"], 5);
    let id = staged(&["delete", &t.uri, "--where", "true", "--stage", "--expect-version", "1"]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 5))]);
    let stderr = fails(&["commit", &t.uri, &id], 5);
    assert_mentions(&stderr, &["expected version 1", "latest is 2"]);
    assert_eq!(t.count(), 10, "nothing deleted");
}

#[test]
fn idempotency_key_given_when_staging_holds_at_commit() {
    let t = TempTable::create();
    let rows = t.file("a.csv", &csv_rows(0, 5));
    let first = staged(&["append", &t.uri, &rows, "--stage", "--idempotency-key", "load-1"]);
    ok(&["commit", &t.uri, &first]);
    // The retry after an unclear outcome: staged again with the same key.
    let retry = staged(&["append", &t.uri, &rows, "--stage", "--idempotency-key", "load-1"]);
    let out: Value = serde_json::from_str(&ok(&["commit", &t.uri, &retry, "--json"])).unwrap();
    assert_eq!((out["version"].as_u64(), out["idempotent_replay"].as_bool()), (Some(1), Some(true)), "{out}");
    assert_eq!(t.count(), 5, "the keyed retry wrote nothing");
    assert_eq!(t.history()[1]["idempotency_key"], "load-1");
}

#[test]
fn isolation_given_when_staging_holds_at_commit() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let id = staged(&["delete", &t.uri, "--where", "id >= 0", "--stage", "--isolation", "snapshot"]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 3))]);
    ok(&["commit", &t.uri, &id]);
    // Snapshot: the delete touches only rows of its read version; serializable would
    // have re-run on the appended rows and deleted them too.
    assert_eq!(t.count(), 3);
}

#[test]
fn commit_options_that_contradict_the_staged_ones_are_refused() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let id = staged(&[
        "delete",
        &t.uri,
        "--where",
        "id = 1",
        "--stage",
        "--isolation",
        "snapshot",
        "--idempotency-key",
        "k1",
        "--expect-version",
        "1",
    ]);
    let before = snapshot(&t);
    for (flag, value, staged_value) in
        [("--isolation", "serializable", "snapshot"), ("--idempotency-key", "k2", "k1"), ("--expect-version", "2", "1")]
    {
        let stderr = fails(&["commit", &t.uri, &id, flag, value], 2);
        assert_mentions(&stderr, &[flag, value, staged_value]);
    }
    assert_eq!(snapshot(&t), before);
    // Repeating the staged value is no contradiction.
    ok(&["commit", &t.uri, &id, "--isolation", "snapshot", "--idempotency-key", "k1"]);
    assert_eq!(t.count(), 4);
}

#[test]
fn flags_a_command_cannot_honour_are_refused() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let input = t.file("b.csv", &csv_rows(10, 2));
    let id = staged(&["append", &t.uri, &input, "--stage"]);
    let before = snapshot(&t);
    for (args, flag) in [
        (vec!["commit", t.uri.as_str(), id.as_str(), "--stage"], "--stage"),
        (vec!["append", t.uri.as_str(), input.as_str(), "--stage", "--max-retries", "3"], "--max-retries"),
        (vec!["append", t.uri.as_str(), input.as_str(), "--stage", "--timeout", "5s"], "--timeout"),
    ] {
        let stderr = fails(&args, 2);
        assert_mentions(&stderr, &[flag]);
    }
    assert_eq!(snapshot(&t), before);
    // --json with --stage is honoured: the staged id as JSON.
    let out: Value = serde_json::from_str(&ok(&["append", &t.uri, &input, "--stage", "--json"])).unwrap();
    assert!(out["staged_id"].as_str().is_some_and(|s| s.len() == 36), "{out}");
}

/// Settings a command cannot use are refused, not ignored: store options and a
/// DynamoDB coordinator on a local table, a mixed workload's knobs on the bank one.
#[test]
fn settings_a_command_cannot_use_are_refused() {
    let t = TempTable::create();
    let before = snapshot(&t);
    for (args, words) in [
        (vec!["count", t.uri.as_str(), "--storage-option", "AWS_REGION=us-east-1"], &["AWS_REGION", "object stores"][..]),
        (vec!["count", t.uri.as_str(), "--commit-coordinator", "dynamodb://commits"], &["dynamodb://commits", "s3://"][..]),
        (vec!["stress", t.uri.as_str(), "--workload", "bank", "--rows", "5"], &["--rows", "bank"][..]),
        (vec!["stress", t.uri.as_str(), "--workload", "bank", "--mix", "append=1"], &["--mix", "bank"][..]),
    ] {
        let stderr = fails(&args, 2);
        assert_mentions(&stderr, words);
    }
    assert_eq!(snapshot(&t), before);
}

// 3. Merge changes only the columns its source has.

#[test]
fn merge_changes_only_the_columns_its_source_has() {
    let t = TempTable::create_with("id bigint not null, name varchar, score double, qty int not null");
    ok(&["alter", &t.uri, "add-column", "tag varchar not null default 'none'"]);
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score,qty,tag\n1,a,1.5,10,x\n2,b,2.5,20,y\n")]);
    // The source has id and score: matched rows keep name, qty and tag.
    ok(&["merge", &t.uri, &t.file("m.csv", "id,score\n2,9.5\n"), "--on", "id"]);
    let r = row(&t.uri, 2);
    assert_eq!(
        (r["name"].as_str(), r["score"].as_f64(), r["qty"].as_i64(), r["tag"].as_str()),
        (Some("b"), Some(9.5), Some(20), Some("y")),
        "{r}"
    );
    assert_eq!(row(&t.uri, 1)["score"].as_f64(), Some(1.5));
    // An inserted row lacking a not-null column without default: refused, nothing committed.
    let before = snapshot(&t);
    let stderr = fails(&["merge", &t.uri, &t.file("n.csv", "id,score\n2,1.0\n3,3.0\n"), "--on", "id"], 2);
    assert_mentions(&stderr, &["'qty'"]);
    assert_eq!(snapshot(&t), before);
    // With the column present, inserted rows take NULL or the column's default.
    ok(&["merge", &t.uri, &t.file("o.csv", "id,qty\n3,30\n1,11\n"), "--on", "id"]);
    let r = row(&t.uri, 3);
    assert_eq!(
        (r["name"].is_null(), r["score"].is_null(), r["qty"].as_i64(), r["tag"].as_str()),
        (true, true, Some(30), Some("none")),
        "{r}"
    );
    let r = row(&t.uri, 1);
    assert_eq!((r["name"].as_str(), r["qty"].as_i64(), r["tag"].as_str()), (Some("a"), Some(11), Some("x")), "{r}");
    assert_eq!(t.count(), 3);
}

/// Two partial upserts of one new key race: one row, holding both sources' columns.
#[tokio::test]
async fn concurrent_partial_upserts_of_one_new_key_leave_one_row_with_both_changes() {
    use concord::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use concord::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let resolver = concord::StoreResolver::new();
    let table = create_table(&resolver, "memory://partial-merge", SCHEMA).await;
    let names = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("name", DataType::Utf8, true)])),
        vec![Arc::new(Int64Array::from(vec![7])), Arc::new(StringArray::from(vec!["seven"]))],
    )
    .unwrap();
    let scores = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("score", DataType::Float64, true)])),
        vec![Arc::new(Int64Array::from(vec![7])), Arc::new(Float64Array::from(vec![0.7]))],
    )
    .unwrap();
    let keys = vec!["id".to_string()];
    let first = table.prepare(concord::Write::Merge { input: (&[names]).into(), on: keys.clone() }).await.unwrap();
    let second = table.prepare(concord::Write::Merge { input: (&[scores]).into(), on: keys.clone() }).await.unwrap();
    table.commit(&first, &Default::default()).await.unwrap();
    let info = table.commit(&second, &Default::default()).await.unwrap();
    assert!(info.rerun, "the second re-matched the key the first inserted");
    let rows = all_rows(&table.latest().await.unwrap()).await;
    let text = concord::arrow::util::pretty::pretty_format_batches(&rows).unwrap().to_string();
    assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 1, "{text}");
    assert!(text.contains("seven") && text.contains("0.7"), "both changes kept: {text}");
}

// 4. overwrite --where refuses rows outside its predicate.

#[test]
fn overwrite_where_refuses_rows_outside_its_predicate() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let before = snapshot(&t);
    let stderr = fails(&["overwrite", &t.uri, &t.file("o.csv", "id,name,score\n0,zero,0\n50,fifty,5\n"), "--where", "id < 2"], 2);
    assert_mentions(&stderr, &["id < 2", "50"]);
    assert_eq!(snapshot(&t), before);
    // NULL is not true either: a row the predicate cannot tell about is outside it.
    let stderr = fails(&["overwrite", &t.uri, &t.file("p.csv", "id,name,score\n1,,0\n"), "--where", "name = 'x'"], 2);
    assert_mentions(&stderr, &["name = 'x'"]);
    ok(&["overwrite", &t.uri, &t.file("q.csv", "id,name,score\n0,zero,0\n1,one,1\n"), "--where", "id < 2"]);
    assert_eq!(t.count(), 5);
}

// 5. A type mismatch in --where is bad input, found before any data file is read.

#[test]
fn a_type_mismatch_in_where_is_bad_input_found_before_reading_data() {
    let (t, before) = typed_table();
    // No data file is left: any read would fail as storage, not as bad input.
    std::fs::remove_dir_all(t.path().join("data")).unwrap();
    for (predicate, words) in [
        ("name = 1", &["'name'", "varchar"][..]),
        ("id = 'x'", &["'id'", "bigint", "'x'"][..]),
        ("at > '2026-13-01'", &["'at'", "timestamp", "2026-13-01"][..]),
        ("active = 'maybe'", &["'active'", "boolean"][..]),
        ("day in ('2024-01-01', 'nope')", &["'day'", "date", "nope"][..]),
    ] {
        for cmd in ["count", "scan", "delete"] {
            let stderr = fails(&[cmd, &t.uri, "--where", predicate], 2);
            assert_mentions(&stderr, words);
            assert!(!stderr.contains("corrupt"), "{cmd} {predicate}: {stderr}");
        }
    }
    assert_eq!(committed_state(&t.path()), before.versions);
}

#[test]
fn a_predicate_failing_on_the_data_is_bad_input_not_corruption() {
    let (t, before) = typed_table();
    // Explicit casts are the user's own: a value they cannot convert is bad input.
    let stderr = fails(&["count", &t.uri, "--where", "CAST(name AS BIGINT) = 1"], 2);
    assert!(!stderr.contains("corrupt"), "{stderr}");
    assert_mentions(&stderr, &["CAST(name AS BIGINT) = 1"]);
    assert_eq!(snapshot(&t), before);
}

// 6. One rule for column names everywhere.

#[test]
fn mixed_case_column_names_resolve_by_one_rule() {
    let t = TempTable::create_with("UserId bigint not null, Name varchar");
    ok(&["append", &t.uri, &t.file("a.csv", "UserId,Name\n5,five\n6,six\n")]);
    for predicate in ["UserId = 5", "userid = 5", "USERID = 5", "\"UserId\" = 5"] {
        assert_eq!(ok(&["count", &t.uri, "--where", predicate]).trim(), "1", "{predicate}");
    }
    let out = ok(&["scan", &t.uri, "--columns", "userid, name", "--format", "csv", "--where", "userid = 6"]);
    assert_eq!(out, "UserId,Name\n6,six\n");
    ok(&["update", &t.uri, "--set", "name = 'SIX'", "--where", "userid = 6"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "Name = 'SIX'"]).trim(), "1");
    let stderr = fails(&["count", &t.uri, "--where", "\"userid\" = 5"], 2);
    assert_mentions(&stderr, &["userid", "UserId"]);

    let both = TempTable::create_with("Id bigint, id bigint");
    ok(&["append", &both.uri, &both.file("b.csv", "Id,id\n1,2\n2,1\n")]);
    assert_eq!(json_rows(&both.uri, &["--where", "Id = 1"])[0]["Id"], 1, "the exact name wins");
    assert_eq!(json_rows(&both.uri, &["--where", "id = 1"])[0]["id"], 1);
    assert_eq!(json_rows(&both.uri, &["--where", "\"Id\" = 2"])[0]["Id"], 2);
    for args in [vec!["count", both.uri.as_str(), "--where", "ID = 1"], vec!["scan", both.uri.as_str(), "--columns", "ID"]] {
        let stderr = fails(&args, 2);
        assert_mentions(&stderr, &["ID", "Id", "id", "double quotes"]);
    }
}

// 7. CSV keeps NULL and the empty string apart, both ways.

#[test]
fn csv_keeps_null_and_the_empty_string_apart_both_ways() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score\n1,\"\",1\n2,,2\n3,\"a,b\",\n4,\" \",4\n")]);
    let rows = json_rows(&t.uri, &[]);
    assert_eq!(rows[0]["name"], "", "a quoted \"\" is the empty string");
    assert!(rows[1]["name"].is_null(), "an unquoted empty field is NULL");
    assert!(rows[2]["score"].is_null());
    assert_eq!(rows[3]["name"], " ");
    let exported = ok(&["scan", &t.uri, "--format", "csv"]);
    assert_eq!(exported, "id,name,score\n1,\"\",1.0\n2,,2.0\n3,\"a,b\",\n4,\" \",4.0\n");
    let again = TempTable::create();
    ok(&["append", &again.uri, &again.file("export.csv", &exported)]);
    assert_eq!(json_rows(&again.uri, &[]), rows, "export and re-import round-trip");
    // A quoted empty value in a column that is not text is no value of that type.
    let stderr = fails(&["append", &t.uri, &t.file("b.csv", "id,name,score\n5,x,\"\"\n")], 2);
    assert_mentions(&stderr, &["'score'", "double", "line 2"]);
}

// 8. Something that looks like a URI but is not one of a supported store.

#[test]
fn a_scheme_like_uri_that_is_not_a_supported_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for uri in ["s3:/bucket/t", "s3:bucket/t", "memory:/x", "file:/tmp/x", "gs:/b/t", "foo:bar"] {
        let out = Command::new(concord_bin()).args(["create", uri, "--schema", SCHEMA]).current_dir(dir.path()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{uri}: {stderr}");
        assert_mentions(&stderr, &[uri]);
        assert!(tree(dir.path()).is_empty(), "{uri} created {:?}", tree(dir.path()));
    }
    // A local folder whose name has a colon is still a local path when it says so.
    let out = Command::new(concord_bin()).args(["create", "./s3:x", "--schema", SCHEMA]).current_dir(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

// 9. Numbers and durations from a user never panic.

#[test]
fn durations_need_a_unit_and_a_size_that_fits() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 2))]);
    let stderr = fails(&["vacuum", &t.uri, "--older-than", "5"], 2);
    assert_mentions(&stderr, &["'5'", "unit"]);
    for (args, what) in [
        (vec!["vacuum", t.uri.as_str(), "--older-than", "100000000000d"], "100000000000d"),
        (vec!["append", t.uri.as_str(), "x.csv", "--timeout", "100000000000000000000s"], "100000000000000000000s"),
        (vec!["append", t.uri.as_str(), "x.csv", "--timeout=-5s"], "-5s"),
        (vec!["append", t.uri.as_str(), "x.csv", "--timeout", "30"], "'30'"),
    ] {
        let stderr = fails(&args, 2);
        assert_mentions(&stderr, &[what]);
    }
    // Long but representable retentions are fine: nothing is that old.
    let out: Value = serde_json::from_str(&ok(&["vacuum", &t.uri, "--older-than", "36500d", "--json"])).unwrap();
    assert_eq!(out["versions_removed"], 0);
}

/// Random strings into every numeric and duration option: a clean exit, never a panic.
#[test]
fn random_numbers_and_durations_never_panic() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 3))]);
    let input = t.file("b.csv", &csv_rows(10, 1));
    let uri = t.uri.as_str();
    let options: Vec<(Vec<&str>, &str)> = vec![
        (vec!["append", uri, &input, "--stage"], "--expect-version"),
        (vec!["append", uri, &input, "--expect-version", "999"], "--max-retries"),
        (vec!["append", uri, &input, "--expect-version", "999"], "--timeout"),
        (vec!["vacuum", uri], "--older-than"),
        (vec!["scan", uri], "--limit"),
        (vec!["scan", uri], "--version"),
        (vec!["count", uri], "--as-of"),
        (vec!["compact", uri, "--stage"], "--target-rows"),
        (vec!["restore", uri, "--stage"], ""),
        (vec!["stress", uri, "--writers", "1", "--ops", "0"], "--kill-rate"),
        (vec!["stress", uri, "--writers", "1", "--ops", "0"], "--rows"),
        (vec!["stress", uri, "--writers", "1", "--ops", "0"], "--seed"),
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let pieces = [
        "",
        "0",
        "1",
        "-1",
        "9",
        "99999999999999999999999",
        "1e309",
        "NaN",
        "inf",
        ".",
        "5",
        "s",
        "ms",
        "h",
        "d",
        "m",
        "x",
        "é",
        " ",
        "-0",
        "0.5",
        "1.5e3",
        "18446744073709551616",
        "+3",
    ];
    let mut runs = 0;
    for (base, option) in &options {
        for _ in 0..40 {
            let value: String = (0..1 + next() % 3).map(|_| pieces[(next() % pieces.len() as u64) as usize]).collect();
            let mut args = base.clone();
            if !option.is_empty() {
                args.push(option);
            }
            args.push(&value);
            let (code, _, stderr) = run(&args);
            assert!(code != 101 && !stderr.contains("panicked"), "concord {args:?} panicked: {stderr}");
            assert!(code >= 0, "concord {args:?} was killed: {stderr}");
            runs += 1;
        }
    }
    eprintln!("{runs} runs with random numbers and durations, no panic");
}

// 10. A closed stdout ends a command quietly; output streams.

#[test]
fn scan_into_a_closed_pipe_ends_quietly() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 20_000))]);
    for format in ["table", "csv", "json"] {
        let mut child = Command::new(concord_bin())
            .args(["scan", &t.uri, "--format", format])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        assert!(!first.is_empty());
        // The reader is gone (as `| head -1` does).
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{format}: {stderr}");
        assert!(stderr.is_empty(), "{format}: quiet, but printed: {stderr}");
    }
}

// 11. now() works, evaluated once per transaction, in UTC.

#[test]
fn now_is_evaluated_once_per_transaction() {
    let (t, _) = typed_table();
    let before = chrono::Utc::now();
    ok(&["update", &t.uri, "--set", "at = now()"]);
    let after = chrono::Utc::now();
    let rows = json_rows(&t.uri, &[]);
    let stamps: Vec<&str> = rows.iter().map(|r| r["at"].as_str().unwrap()).collect();
    assert!(stamps.iter().all(|s| *s == stamps[0]), "one value for the whole update: {stamps:?}");
    let at = chrono::DateTime::parse_from_rfc3339(stamps[0]).unwrap();
    assert!(at >= before - chrono::TimeDelta::milliseconds(1) && at <= after, "{at} in [{before}, {after}]");
    ok(&["alter", &t.uri, "add-column", "loaded timestamp default now()"]);
    assert!(json_rows(&t.uri, &[]).iter().all(|r| r["loaded"].is_string()));
    assert_eq!(ok(&["count", &t.uri, "--where", "at <= now() AND day < current_date()"]).trim(), "3");
    assert_eq!(ok(&["count", &t.uri, "--where", "at > now() - INTERVAL '1 hour'"]).trim(), "3");
}

// 12. doctor removes every probe object, also those an interrupted run left.

#[test]
fn doctor_leaves_nothing_behind() {
    let fresh = TempTable::uncreated();
    ok(&["doctor", &fresh.uri]);
    assert!(!fresh.path().exists(), "doctor on a new folder left {:?}", tree(&fresh.path()));

    let t = TempTable::create();
    let before = tree(&t.path());
    // What a doctor run killed between steps leaves behind (old enough to be no
    // concurrent run's).
    let leftover = t.path().join("_doctor").join("0000000001000-5a1c0d1e-0000-4000-8000-000000000000");
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("race"), "racer 3").unwrap();
    ok(&["doctor", &t.uri]);
    assert_eq!(tree(&t.path()), before, "no probe object left in the table");
    assert!(!t.path().join("_doctor").exists());

    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::write(leftover.join("list-a"), "list-a").unwrap();
    ok(&["vacuum", &t.uri, "--older-than", "1h"]);
    assert!(!leftover.join("list-a").exists(), "vacuum removes a probe's leftovers");
}

// 14. Smaller things.

#[test]
fn csv_header_names_and_column_lists_are_trimmed() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", "id, name , score\n1, a ,2\n")]);
    // Values are kept as they are (quoted on output, so that no reader trims them).
    assert_eq!(ok(&["scan", &t.uri, "--columns", "id , name", "--format", "csv"]), "id,name\n1,\" a \"\n");
}

#[test]
fn scan_of_a_file_that_is_not_a_table_exits_7() {
    let t = TempTable::create();
    let file = t.file("rows.csv", &csv_rows(0, 2));
    for cmd in ["scan", "count", "history", "append"] {
        let mut args = vec![cmd, file.as_str()];
        if cmd == "append" {
            args.push(file.as_str());
        }
        let stderr = fails(&args, 7);
        assert_mentions(&stderr, &["rows.csv", "not a Concord table"]);
    }
}

#[test]
fn an_idempotency_key_of_another_operation_is_refused() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5)), "--idempotency-key", "job-7"]);
    let before = snapshot(&t);
    let stderr = fails(&["delete", &t.uri, "--where", "id = 1", "--idempotency-key", "job-7"], 2);
    assert_mentions(&stderr, &["job-7", "append", "version 1"]);
    let id = staged(&["delete", &t.uri, "--where", "id = 1", "--stage"]);
    let stderr = fails(&["commit", &t.uri, &id, "--idempotency-key", "job-7"], 2);
    assert_mentions(&stderr, &["job-7", "append"]);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn writes_of_zero_rows_commit_nothing() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 5))]);
    let before = snapshot(&t);
    let empty = t.file("empty.csv", "id,name,score\n");
    for args in [
        vec!["append", t.uri.as_str(), empty.as_str()],
        vec!["delete", t.uri.as_str(), "--where", "id > 100"],
        vec!["update", t.uri.as_str(), "--set", "score = 0", "--where", "id > 100"],
        vec!["merge", t.uri.as_str(), empty.as_str(), "--on", "id"],
        vec!["overwrite", t.uri.as_str(), empty.as_str(), "--where", "id > 100"],
    ] {
        let out = ok(&args);
        assert!(out.contains("nothing committed"), "{args:?}: {out}");
        let mut json = args.clone();
        json.push("--json");
        let out: Value = serde_json::from_str(&ok(&json)).unwrap();
        assert_eq!(out["version"], 1, "{out}");
        assert!(out["abandoned"].is_string(), "{out}");
    }
    assert_eq!(snapshot(&t), before);
}

#[test]
fn type_names_in_messages_are_the_schema_names() {
    let t = TempTable::create();
    use concord::arrow::array::{Int64Array, RecordBatch, StringArray};
    use concord::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("score", DataType::Utf8, true)])),
        vec![Arc::new(Int64Array::from(vec![1])), Arc::new(StringArray::from(vec!["x"]))],
    )
    .unwrap();
    let path = t.dir.path().join("s.parquet");
    write_parquet(&path, &batch);
    for args in [vec!["append", t.uri.as_str(), path.to_str().unwrap()], vec!["count", t.uri.as_str(), "--where", "id + 1"]] {
        let stderr = fails(&args, 2);
        for arrow_name in ["Utf8", "Int64", "Float64", "Boolean"] {
            assert!(!stderr.contains(arrow_name), "{args:?}: {stderr}");
        }
    }
}

#[test]
fn history_table_keeps_its_header_and_plain_ranges() {
    let t = TempTable::create();
    let id = staged(&["append", &t.uri, &t.file("s.csv", &csv_rows(100, 1)), "--stage"]);
    for i in 0..8 {
        ok(&["append", &t.uri, &t.file(&format!("a{i}.csv"), &csv_rows(i * 10, 2))]);
    }
    ok(&["commit", &t.uri, &id]);
    let out = ok(&["history", &t.uri]);
    assert!(out.lines().next().unwrap().trim_start().starts_with("version"), "{out}");
    assert!(!out.contains("..="), "{out}");
    assert!(out.lines().last().unwrap().contains("8 versions, 1 to 8"), "{out}");
}

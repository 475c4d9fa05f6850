//! The CLI contract (../shared/cli-contract.md): output formats, time travel, write
//! outcomes, idempotency keys, `--help`, and stdout/stderr discipline.

use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use concord::arrow::array::{ArrayRef, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use concord::arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema, TimeUnit};
use serde_json::{json, Value};

use crate::common::*;

/// `scan --format json` output, one parsed object per line.
fn scan_json(args: &[&str]) -> Vec<Value> {
    ok(args).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON object per line ({e}): {l}"))).collect()
}

/// The rows of a version (or the latest), sorted by id.
fn rows(t: &TempTable, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["scan", t.uri.as_str(), "--format", "json"];
    args.extend_from_slice(extra);
    let mut rows = scan_json(&args);
    rows.sort_by_key(|r| r["id"].as_i64());
    rows
}

fn ids_of(rows: &[Value]) -> Vec<i64> {
    rows.iter().map(|r| r["id"].as_i64().expect("integer id")).collect()
}

fn timestamp(entry: &Value) -> DateTime<Utc> {
    let text = entry["timestamp"].as_str().expect("timestamp is a string");
    DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("{text} is not RFC 3339: {e}")).with_timezone(&Utc)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Appends a CSV (written into the temp folder) and returns the `--json` outcome.
fn append_json(t: &TempTable, name: &str, contents: &str, extra: &[&str]) -> Value {
    let file = t.file(name, contents);
    let mut args = vec!["append", t.uri.as_str(), file.as_str(), "--json"];
    args.extend_from_slice(extra);
    single_json_object(&ok(&args))
}

/// stdout that is exactly one JSON object on one line.
fn single_json_object(stdout: &str) -> Value {
    assert_eq!(stdout.lines().count(), 1, "expected one line of JSON: {stdout}");
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    assert!(v.is_object(), "not an object: {stdout}");
    v
}

#[test]
fn history_json_lists_versions_oldest_first_with_the_contract_fields() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 3))]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(4, 2)), "--idempotency-key", "batch-b"]);
    let stdout = ok(&["history", &t.uri, "--format", "json"]);
    let history: Value = serde_json::from_str(&stdout).expect("history is JSON");
    let history = history.as_array().expect("history is a JSON array");
    assert_eq!(history.len(), 3);
    let mut previous: Option<DateTime<Utc>> = None;
    for (i, v) in history.iter().enumerate() {
        assert_eq!(v["version"], json!(i), "oldest first: {v}");
        let ts = v["timestamp"].as_str().expect("timestamp is a string");
        assert!(ts.ends_with('Z'), "timestamp is UTC with Z: {ts}");
        let at = timestamp(v);
        if let Some(p) = previous {
            assert!(at > p, "timestamps increase along the chain: {history:?}");
        }
        previous = Some(at);
        assert!(v["operation"].is_string(), "{v}");
        uuid::Uuid::parse_str(v["transaction_id"].as_str().expect("transaction_id is a string")).expect("transaction_id is a UUID");
        assert!(v["attempts"].as_u64().is_some_and(|a| a >= 1), "{v}");
        assert!(v["rebased_over"].is_array(), "{v}");
        assert!(v["rerun"].is_boolean(), "{v}");
        assert!(v["idempotency_key"].is_null() || v["idempotency_key"].is_string(), "{v}");
        assert!(v.get("read_version").is_some(), "read_version present: {v}");
    }
    assert_eq!(history[0]["operation"], "create");
    assert_eq!(history[0]["read_version"], Value::Null);
    assert_eq!(history[1]["operation"], "append");
    assert_eq!(history[1]["read_version"], 0);
    assert_eq!(history[1]["idempotency_key"], Value::Null);
    assert_eq!(history[2]["read_version"], 1);
    assert_eq!(history[2]["idempotency_key"], "batch-b");
    assert_eq!(history[2]["rebased_over"], json!([]));
    assert_eq!(history[2]["rerun"], false);
}

#[test]
fn scan_formats_columns_limit_and_where() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score\n1,a,0.5\n2,,\n3,c,2.5\n")]);

    // json: one object per line, every column, nulls explicit.
    assert_eq!(
        rows(&t, &[]),
        vec![
            json!({"id": 1, "name": "a", "score": 0.5}),
            json!({"id": 2, "name": null, "score": null}),
            json!({"id": 3, "name": "c", "score": 2.5}),
        ]
    );

    // csv: a header row, then the rows.
    let csv = ok(&["scan", &t.uri, "--format", "csv"]);
    let mut lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.remove(0), "id,name,score");
    lines.sort();
    assert_eq!(lines, vec!["1,a,0.5", "2,,", "3,c,2.5"]);

    // --columns orders the output columns.
    let csv = ok(&["scan", &t.uri, "--columns", "score,id", "--format", "csv"]);
    assert_eq!(csv.lines().next(), Some("score,id"));
    for line in ok(&["scan", &t.uri, "--columns", "score,id", "--format", "json"]).lines() {
        assert!(line.starts_with("{\"score\":"), "score comes first: {line}");
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 2, "only the chosen columns: {line}");
    }
    let table = ok(&["scan", &t.uri, "--columns", "score,id"]);
    let header = table.lines().find(|l| l.contains("score")).expect("table header");
    assert!(header.find("score") < header.find("id"), "table format orders columns too: {header}");

    // --limit and --where.
    assert_eq!(scan_json(&["scan", &t.uri, "--format", "json", "--limit", "2"]).len(), 2);
    assert_eq!(ids_of(&rows(&t, &["--where", "score > 1 OR name IS NULL"])), vec![2, 3]);
    assert_eq!(ids_of(&rows(&t, &["--where", "name = 'a'"])), vec![1]);
    assert_eq!(ok(&["scan", &t.uri, "--format", "json", "--where", "id > 100"]), "");
    assert_eq!(
        ok(&["scan", &t.uri, "--format", "csv", "--where", "id > 100"]).trim(),
        "id,name,score",
        "csv keeps its header with no rows"
    );
}

#[test]
fn count_prints_one_integer_only() {
    let t = TempTable::create();
    assert_eq!(ok(&["count", &t.uri]), "0\n");
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 5))]);
    assert_eq!(ok(&["count", &t.uri]), "5\n");
    // scores are 0.1 .. 0.5
    assert_eq!(ok(&["count", &t.uri, "--where", "score > 0.25"]), "3\n");
    assert_eq!(ok(&["count", &t.uri, "--where", "name = 'n2' OR id = 5"]), "2\n");
    assert_eq!(ok(&["count", &t.uri, "--where", "id > 100"]), "0\n");
}

#[test]
fn write_commands_with_json_print_one_outcome_object() {
    let t = TempTable::create();
    let check = |v: &Value, version: u64, operation: &str, written: u64| {
        assert_eq!(v["version"], version, "{v}");
        assert_eq!(v["operation"], operation, "{v}");
        assert!(v["attempts"].as_u64().is_some_and(|a| a >= 1), "{v}");
        assert_eq!(v["rows_written"], written, "{v}");
        assert!(v["rows_deleted"].is_u64(), "{v}");
    };
    let append = append_json(&t, "a.csv", &csv_rows(1, 4), &[]);
    check(&append, 1, "append", 4);
    assert_eq!(append["rows_deleted"], 0);
    assert_eq!(append["attempts"], 1, "no contention, one attempt");

    let file = t.file("b.csv", &csv_rows(10, 2));
    let overwrite = single_json_object(&ok(&["overwrite", &t.uri, &file, "--json"]));
    check(&overwrite, 2, "overwrite", 2);

    let restore = single_json_object(&ok(&["restore", &t.uri, "1", "--json"]));
    check(&restore, 3, "restore", 0);
    assert_eq!(t.latest_version(), 3);
}

#[test]
fn time_travel_by_version_and_timestamp() {
    let t = TempTable::create();
    for (i, start) in [1u64, 10, 20].into_iter().enumerate() {
        ok(&["append", &t.uri, &t.file(&format!("{i}.csv"), &csv_rows(start, 2))]);
    }
    let history = t.history();
    let expected: Vec<Vec<i64>> = vec![vec![], vec![1, 2], vec![1, 2, 10, 11], vec![1, 2, 10, 11, 20, 21]];
    for (n, want) in expected.iter().enumerate() {
        let version = n.to_string();
        assert_eq!(ids_of(&rows(&t, &["--version", &version])), *want, "--version {n}");
        assert_eq!(ok(&["count", &t.uri, "--version", &version]), format!("{}\n", want.len()));

        let at = timestamp(&history[n]);
        let exact = rfc3339(at);
        assert_eq!(ids_of(&rows(&t, &["--as-of", &exact])), *want, "--as-of {exact} (version {n})");
        assert_eq!(ok(&["count", &t.uri, "--as-of", &exact]), format!("{}\n", want.len()));

        let between = match history.get(n + 1) {
            Some(next) => at + (timestamp(next) - at) / 2,
            None => at + chrono::Duration::hours(1),
        };
        let between = rfc3339(between);
        assert_eq!(ids_of(&rows(&t, &["--as-of", &between])), *want, "--as-of {between} (after version {n})");
        assert_eq!(ok(&["count", &t.uri, "--as-of", &between]), format!("{}\n", want.len()));
    }
    // The same instant written with an offset means the same version.
    let at = timestamp(&history[1]).with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap());
    assert_eq!(ids_of(&rows(&t, &["--as-of", &at.to_rfc3339_opts(SecondsFormat::Nanos, false)])), vec![1, 2]);
}

#[test]
fn restore_makes_an_old_version_the_newest() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score\n1,a,0.5\n2,,\n")]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 3))]);
    let v1 = rows(&t, &["--version", "1"]);
    let out = ok(&["restore", &t.uri, "1"]);
    assert!(out.contains('3'), "reports the new version: {out}");
    assert_eq!(t.latest_version(), 3);
    assert_eq!(rows(&t, &[]), v1);
    assert_eq!(t.count(), 2);
    assert_eq!(t.history()[3]["operation"], "restore");
    // The restored-over version stays readable.
    assert_eq!(ids_of(&rows(&t, &["--version", "2"])), vec![1, 2, 10, 11, 12]);
    // Restoring the empty version 0 empties the table.
    ok(&["restore", &t.uri, "0"]);
    assert_eq!(t.count(), 0);
}

#[test]
fn overwrite_replaces_all_rows() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 5))]);
    ok(&["overwrite", &t.uri, &t.file("b.csv", &csv_rows(100, 2)), &t.file("c.ndjson", "{\"id\": 200, \"name\": \"x\"}\n")]);
    assert_eq!(t.count(), 3);
    assert_eq!(ids_of(&rows(&t, &[])), vec![100, 101, 200]);
    let history = t.history();
    assert_eq!(history.len(), 3);
    assert_eq!(history[2]["operation"], "overwrite");
    assert_eq!(ids_of(&rows(&t, &["--version", "1"])), vec![1, 2, 3, 4, 5]);
}

#[test]
fn idempotency_key_makes_a_repeated_append_a_no_op() {
    let t = TempTable::create();
    let first = append_json(&t, "a.csv", &csv_rows(1, 3), &["--idempotency-key", "load-1"]);
    assert_eq!(first["version"], 1);
    // Another writer commits in between: the key is still found.
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 1))]);

    let file = t.file("a.csv", &csv_rows(1, 3));
    let (code, stdout, stderr) = run(&["append", &t.uri, &file, "--idempotency-key", "load-1", "--json"]);
    assert_eq!(code, 0, "a replay succeeds: {stderr}");
    let again = single_json_object(&stdout);
    assert_eq!(again["version"], first["version"], "reports the earlier version");
    assert_eq!(again["operation"], "append");
    assert_eq!(t.count(), 4, "nothing written twice");
    assert_eq!(t.history().len(), 3, "no new version");

    let prose = ok(&["append", &t.uri, &file, "--idempotency-key", "load-1"]);
    assert!(prose.contains('1'), "names the earlier version: {prose}");
    assert_eq!(t.count(), 4);
    assert_eq!(t.history().len(), 3);

    // A different key writes.
    let other = append_json(&t, "a.csv", &csv_rows(1, 3), &["--idempotency-key", "load-2"]);
    assert_eq!(other["version"], 3);
    assert_eq!(t.count(), 7);
}

#[test]
fn every_command_accepts_help() {
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for cmd in ["create", "append", "scan", "count", "overwrite", "restore", "history", "schema"] {
        assert!(stdout.contains(cmd), "top-level help lists {cmd}: {stdout}");
        let (code, out, err) = run(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd} --help: {err}");
        assert!(out.contains("Usage"), "{cmd} --help prints usage on stdout: {out}");
    }
    let (code, out, err) = run(&["help", "scan"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("--where"), "{out}");
}

#[test]
fn diagnostics_go_to_stderr_and_failures_print_nothing_on_stdout_unless_json_is_asked_for() {
    let t = TempTable::create();
    let missing = TempTable::uncreated();
    let bad = t.file("bad.csv", "id,name,score\nx,a,1\n");
    let failing: Vec<Vec<&str>> = vec![
        vec!["count", &missing.uri],
        vec!["scan", &missing.uri, "--format", "json"],
        vec!["history", &missing.uri, "--format", "json"],
        vec!["append", &t.uri, &bad, "--json"],
        vec!["scan", &t.uri, "--where", "nope = 1", "--format", "csv"],
        vec!["count", &t.uri, "--version", "7"],
        vec!["restore", &t.uri, "5", "--json"],
        vec!["create", &t.uri, "--schema", SCHEMA],
        vec!["create", &missing.uri, "--schema", "id uuid128"],
        vec!["scan", &t.uri, "--format", "xml"],
        vec!["frobnicate", &t.uri],
    ];
    for args in failing {
        let (code, stdout, stderr) = run(&args);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(!stderr.trim().is_empty(), "{args:?} failed without a message");
        if args.contains(&"--json") {
            // With --json, the outcome is on stdout, failures too (the contract's kinds).
            let outcome: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
            assert_eq!(outcome["exit"], serde_json::json!(code), "{args:?}: {stdout}");
            assert!(outcome["error"].is_string() && outcome["message"].is_string(), "{args:?}: {stdout}");
        } else {
            assert!(stdout.is_empty(), "{args:?} failed but printed on stdout: {stdout}");
        }
    }
    // Successful reads carry only the result on stdout.
    let (code, stdout, stderr) = run(&["count", &t.uri]);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (0, "0\n", ""));
}

#[test]
fn csv_ndjson_and_parquet_values_round_trip() {
    let t = TempTable::create_with("id bigint not null, name varchar, score double, at timestamp, d date");
    ok(&["append", &t.uri, &t.file("a.csv", "id,name,score,at,d\n1,one,1.5,2024-01-02T03:04:05Z,2024-02-03\n2,,,,\n")]);
    ok(&[
        "append",
        &t.uri,
        &t.file(
            "b.ndjson",
            "{\"id\": 3, \"name\": \"three\", \"score\": 3, \"at\": \"2024-01-02T03:04:05.250Z\", \"d\": \"2024-02-29\"}\n\
             {\"id\": 4, \"name\": null}\n",
        ),
    ]);
    // 2024-01-02T03:04:05Z in ms; 2024-02-03 is day 19756 since the epoch.
    let millis = DateTime::parse_from_rfc3339("2024-01-02T03:04:05Z").unwrap().timestamp_millis();
    let schema = Arc::new(ArrowSchema::new(vec![
        ArrowField::new("id", DataType::Int64, false),
        ArrowField::new("name", DataType::Utf8, true),
        ArrowField::new("score", DataType::Float64, true),
        ArrowField::new("at", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true),
        ArrowField::new("d", DataType::Date32, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![5, 6])),
        Arc::new(StringArray::from(vec![Some("five"), None])),
        Arc::new(Float64Array::from(vec![Some(-0.25), None])),
        Arc::new(TimestampMillisecondArray::from(vec![Some(millis + 1), None]).with_timezone("UTC")),
        Arc::new(Date32Array::from(vec![Some(19756), None])),
    ];
    let path = t.dir.path().join("c.parquet");
    write_parquet(&path, &RecordBatch::try_new(schema, columns).unwrap());
    ok(&["append", &t.uri, path.to_str().unwrap()]);

    let nulls = |id: i64| json!({"id": id, "name": null, "score": null, "at": null, "d": null});
    assert_eq!(
        rows(&t, &[]),
        vec![
            json!({"id": 1, "name": "one", "score": 1.5, "at": "2024-01-02T03:04:05Z", "d": "2024-02-03"}),
            nulls(2),
            json!({"id": 3, "name": "three", "score": 3.0, "at": "2024-01-02T03:04:05.250Z", "d": "2024-02-29"}),
            nulls(4),
            json!({"id": 5, "name": "five", "score": -0.25, "at": "2024-01-02T03:04:05.001Z", "d": "2024-02-03"}),
            nulls(6),
        ]
    );
    // Typed columns filter as their types.
    assert_eq!(ids_of(&rows(&t, &["--where", "d = DATE '2024-02-03'"])), vec![1, 5]);
    assert_eq!(ids_of(&rows(&t, &["--where", "at > TIMESTAMP '2024-01-02T03:04:05Z'"])), vec![3, 5]);
    assert_eq!(ok(&["count", &t.uri, "--where", "at IS NULL"]), "3\n");
}

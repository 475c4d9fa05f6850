//! `concord changes` and `concord consumer`: the change feed's command line (formats,
//! ranges by version and time, net changes, consumers) and its exit codes.

use crate::common::*;

/// The feed's rows as JSON objects.
fn feed(args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["changes"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    ok(&all).lines().map(|l| serde_json::from_str(l).expect("a JSON object a line")).collect()
}

#[test]
fn changes_print_each_write_as_rows_on_stable_ids() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 4))]); // v1
    ok(&["update", &t.uri, "--set", "score = 9", "--where", "id = 1"]); // v2
    ok(&["delete", &t.uri, "--where", "id = 2"]); // v3
    let rows = feed(&[&t.uri, "--from", "1"]);
    let kinds: Vec<(&str, i64)> = rows.iter().map(|r| (r["_change_type"].as_str().unwrap(), r["id"].as_i64().unwrap())).collect();
    assert_eq!(kinds, [("update_preimage", 1), ("update_postimage", 1), ("delete", 2)]);
    assert_eq!(rows[0]["_row_id"], rows[1]["_row_id"], "an update keeps its row id");
    assert_eq!(rows[1]["score"], 9.0);
    assert_eq!(rows[0]["_version"], 2);
    assert!(rows[2]["_committed_at"].as_str().unwrap().ends_with('Z'), "{}", rows[2]);
    for key in ["_txn_id", "_row_id", "_version"] {
        assert!(rows.iter().all(|r| !r[key].is_null()), "{key}");
    }
    // A range ending before the latest, a column selection, a filter.
    assert_eq!(feed(&[&t.uri, "--from", "1", "--to", "2"]).len(), 2);
    let only = feed(&[&t.uri, "--from", "0", "--columns", "id", "--where", "id = 1"]);
    assert_eq!(only.len(), 3, "the insert, then the update's two rows: {only:?}");
    assert!(only.iter().all(|r| r.get("name").is_none() && r.get("id").is_some()));
    // Net: row 1 inserted (with its last values), 3 and 4 inserted; 2 inserted and deleted.
    let net = feed(&[&t.uri, "--from", "0", "--net"]);
    let kinds: Vec<(&str, i64)> = net.iter().map(|r| (r["_change_type"].as_str().unwrap(), r["id"].as_i64().unwrap())).collect();
    assert_eq!(kinds, [("insert", 1), ("insert", 3), ("insert", 4)]);
    assert_eq!(net[0]["score"], 9.0);
    // By time: after the version current at the first update's time.
    let history: Vec<serde_json::Value> = serde_json::from_str(&ok(&["history", &t.uri, "--format", "json"])).unwrap();
    let at = history[2]["timestamp"].as_str().unwrap();
    assert_eq!(feed(&[&t.uri, "--from-time", at]).len(), 1, "the delete only");
    // Other formats.
    let csv = ok(&["changes", &t.uri, "--from", "2", "--format", "csv"]);
    assert!(csv.starts_with("id,name,score,_change_type,_row_id,_version,_txn_id,_committed_at"), "{csv}");
    let (code, parquet, _) = run(&["changes", &t.uri, "--from", "0", "--format", "parquet"]);
    assert_eq!(code, 0);
    assert!(parquet.starts_with("PAR1"), "a Parquet file");
}

#[test]
fn bad_ranges_exit_2_and_nothing_changes() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 2))]);
    let before = tree(t.dir.path());
    let err = fails(&["changes", &t.uri, "--from", "1", "--to", "0"], 2);
    assert!(err.contains("after its end"), "{err}");
    let err = fails(&["changes", &t.uri, "--from", "0", "--to", "7"], 2);
    assert!(err.contains("not retained"), "{err}");
    fails(&["changes", &t.uri], 2);
    let err = fails(&["changes", &t.uri, "--consumer", "nobody"], 2);
    assert!(err.contains("no consumer named 'nobody'"), "{err}");
    fails(&["changes", &t.uri, "--from", "0", "--columns", "nope"], 2);
    let (code, out, _) = run(&["changes", &t.uri, "--from", "1", "--to", "0", "--format", "json"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(tree(t.dir.path()), before, "reading changes writes nothing");
}

#[test]
fn consumers_read_from_their_position_move_by_compare_and_swap_and_hold_vacuum() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 2))]); // v1
    assert_eq!(ok(&["consumer", "create", &t.uri, "etl"]).trim(), "consumer etl at version 1");
    fails(&["consumer", "create", &t.uri, "etl"], 7);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(3, 2))]); // v2
    let rows = feed(&[&t.uri, "--consumer", "etl"]);
    assert_eq!(rows.len(), 2, "the changes after its position");
    assert_eq!(feed(&[&t.uri, "--consumer", "etl"]).len(), 2, "reading moves nothing");
    ok(&["consumer", "advance", &t.uri, "etl"]);
    assert!(feed(&[&t.uri, "--consumer", "etl"]).is_empty());
    // Moved by another process since the position this one read: exit 5.
    let err = fails(&["consumer", "advance", &t.uri, "etl", "--to", "1", "--expect-version", "1"], 5);
    assert!(err.contains("moved by another process"), "{err}");
    let list: Vec<serde_json::Value> = serde_json::from_str(&ok(&["consumer", "list", &t.uri, "--format", "json"])).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0]["name"].as_str(), list[0]["version"].as_u64()), (Some("etl"), Some(2)));
    // Vacuum keeps what the consumer has not read, and says who holds it.
    ok(&["consumer", "advance", &t.uri, "etl", "--to", "1"]);
    ok(&["append", &t.uri, &t.file("c.csv", &csv_rows(5, 2))]); // v3
    let report = ok(&["vacuum", &t.uri, "--older-than", "0s", "--allow-short-retention"]);
    assert!(report.contains("consumer etl holds versions from 1 on"), "{report}");
    assert_eq!(feed(&[&t.uri, "--consumer", "etl"]).len(), 4);
    ok(&["consumer", "drop", &t.uri, "etl"]);
    fails(&["consumer", "advance", &t.uri, "etl"], 2);
    fails(&["consumer", "create", &t.uri, "no/slash"], 2);
}

#[test]
fn sql_reads_changes_as_a_table() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 3))]);
    ok(&["delete", &t.uri, "--where", "id = 2"]);
    let out = ok(&["sql", &t.uri, "SELECT _change_type, count(*) AS n FROM changes('t', 0) GROUP BY 1 ORDER BY 1", "--format", "csv"]);
    assert_eq!(out.trim(), "_change_type,n\ndelete,1\ninsert,3");
    let out = ok(&["sql", &t.uri, "SELECT id FROM changes('t', 1, 2)", "--format", "csv"]);
    assert_eq!(out.trim(), "id\n2");
    fails(&["sql", &t.uri, "SELECT * FROM changes('nope', 0)"], 2);
    fails(&["sql", &t.uri, "SELECT * FROM changes('t', 2, 1)"], 2);
}

//! Older formats: tables written by format 1 (before segments, kept in
//! `tests/data/format1-table`) and format 2 (before format 3's column types, in
//! `tests/data/format2-table`) stay readable and writable through the CLI.

use std::path::PathBuf;

use crate::common::{copy_dir, ok, TempTable};

/// A copy of the kept table `tests/data/<name>-table` (as `t` in a temporary folder),
/// and the data folder.
fn fixture(name: &str) -> (TempTable, PathBuf) {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let t = TempTable::uncreated();
    copy_dir(&data.join(format!("{name}-table")), &t.dir.path().join("t"));
    (t, data)
}

/// The `format_version` of version `v` of the fixture.
fn format_of(t: &TempTable, v: u64) -> serde_json::Value {
    let file = t.dir.path().join("t/_versions").join(concord::manifest::version_file_name(v));
    serde_json::from_slice::<serde_json::Value>(&std::fs::read(file).unwrap()).unwrap()["format_version"].clone()
}

/// A table written by format 1 (tests/data/format1-table) opens, reads, travels in
/// time and accepts commits (a staged delete it holds, and new appends), which are
/// written in format 2; the old versions stay readable beside them.
#[test]
fn a_format_1_table_opens_reads_and_accepts_commits() {
    let (t, data) = fixture("format1");
    let format_of = |v: u64| format_of(&t, v);
    assert_eq!(format_of(13), 1, "the fixture is format 1");
    assert_eq!(ok(&["scan", &t.uri, "--format", "csv"]), std::fs::read_to_string(data.join("format1-expected.csv")).unwrap());
    assert_eq!(ok(&["count", &t.uri]).trim(), "19");
    assert_eq!(ok(&["count", &t.uri, "--version", "5"]).trim(), "10");
    let history: serde_json::Value = serde_json::from_str(&ok(&["history", &t.uri, "--format", "json"])).unwrap();
    let history = history.as_array().unwrap();
    assert_eq!(history.len(), 14);
    assert_eq!(history[11]["operation"], "delete");
    assert_eq!(history[11]["transactions"][0]["transaction_id"], history[11]["transaction_id"], "one transaction per format 1 version");
    // The staged delete, written by format 1, commits on today's code.
    let staged = std::fs::read_to_string(data.join("format1-staged-id.txt")).unwrap();
    ok(&["commit", &t.uri, staged.trim()]);
    assert_eq!(ok(&["count", &t.uri]).trim(), "18");
    assert_eq!(ok(&["count", &t.uri, "--where", "id = 4"]).trim(), "0");
    let file = t.file("more.csv", "id,name,score,qty\n100,x,1.5,3\n");
    ok(&["append", &t.uri, &file]);
    assert_eq!(format_of(15), 2, "new versions of format 2's types are written in format 2");
    assert_eq!(ok(&["count", &t.uri]).trim(), "19");
    assert_eq!(ok(&["count", &t.uri, "--version", "12"]).trim(), "19", "format 1 versions stay readable");
    ok(&["update", &t.uri, "--set", "score = score + 1", "--where", "id < 2"]);
    assert_eq!(
        ok(&["scan", &t.uri, "--where", "id = 0", "--columns", "score", "--format", "csv"]),
        "score\n101.5\n",
        "0.5, +100 by format 1, +1 now"
    );
}

/// A table written by format 2, before the column types of format 3 (kept in
/// tests/data/format2-table: the nine format 2 types, appends from CSV and NDJSON, a
/// delete, an update, an added and a renamed column, a compaction, and a staged
/// append), opens, reads, travels in time and accepts commits: its staged append,
/// still in format 2; then a `decimal` column, whose version is format 3.
#[test]
fn a_format_2_table_opens_reads_and_accepts_commits() {
    let (t, data) = fixture("format2");
    let format_of = |v: u64| format_of(&t, v);
    assert_eq!(format_of(8), 2, "the fixture is format 2");
    assert_eq!(ok(&["scan", &t.uri, "--format", "csv"]), std::fs::read_to_string(data.join("format2-expected.csv")).unwrap());
    assert_eq!(ok(&["count", &t.uri]).trim(), "6");
    assert_eq!(ok(&["count", &t.uri, "--version", "3"]).trim(), "8");
    assert_eq!(ok(&["count", &t.uri, "--where", "label = 'é ü' and at = '2026-12-03T12:00:00Z' and qty = 7"]).trim(), "1");
    let history: serde_json::Value = serde_json::from_str(&ok(&["history", &t.uri, "--format", "json"])).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 9);
    let staged = std::fs::read_to_string(data.join("format2-staged-id.txt")).unwrap();
    ok(&["commit", &t.uri, staged.trim()]);
    assert_eq!(format_of(9), 2, "a version of format 2's types stays format 2");
    assert_eq!(ok(&["count", &t.uri, "--where", "label = 'staged'"]).trim(), "1");
    ok(&["alter", &t.uri, "add-column", "amount decimal(10, 2) default 1.50"]);
    assert_eq!(format_of(10), concord::manifest::FORMAT_VERSION, "a decimal column makes the version format 3");
    assert_eq!(ok(&["scan", &t.uri, "--where", "id = 6", "--columns", "amount", "--format", "csv"]), "amount\n1.50\n");
    assert_eq!(ok(&["count", &t.uri, "--version", "8"]).trim(), "6", "format 2 versions stay readable");
}

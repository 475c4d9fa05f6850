//! Format 1, the table format before segments: a table it wrote (kept in
//! `tests/data/format1-table`) stays readable and writable through the CLI.

use crate::common::{copy_dir, ok, TempTable};

/// A table written by format 1 (tests/data/format1-table) opens, reads, travels in
/// time and accepts commits (a staged delete it holds, and new appends), which are
/// written in format 2; the old versions stay readable beside them.
#[test]
fn a_format_1_table_opens_reads_and_accepts_commits() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let t = TempTable::uncreated();
    copy_dir(&data.join("format1-table"), &t.dir.path().join("t"));
    let version_file = |v: u64| t.dir.path().join("t/_versions").join(concord::manifest::version_file_name(v));
    let format_of =
        |v: u64| serde_json::from_slice::<serde_json::Value>(&std::fs::read(version_file(v)).unwrap()).unwrap()["format_version"].clone();
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
    assert_eq!(format_of(15), concord::manifest::FORMAT_VERSION, "new versions are written in format 2");
    assert_eq!(ok(&["count", &t.uri]).trim(), "19");
    assert_eq!(ok(&["count", &t.uri, "--version", "12"]).trim(), "19", "format 1 versions stay readable");
    ok(&["update", &t.uri, "--set", "score = score + 1", "--where", "id < 2"]);
    assert_eq!(
        ok(&["scan", &t.uri, "--where", "id = 0", "--columns", "score", "--format", "csv"]),
        "score\n101.5\n",
        "0.5, +100 by format 1, +1 now"
    );
}

//! Bad input and bad usage: the right exit code, a message that names the problem, and
//! nothing committed (versions, row count and rows identical before and after).

use std::sync::Arc;

use concord::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use concord::arrow::datatypes::{DataType, Field as ArrowField, Schema as ArrowSchema};
use concord::manifest::version_file_name;
use concord::{CommitOptions, InputError, StoreResolver, WriteError};

use crate::common::*;

/// A table at version 1 holding ids 1..=3.
fn table_with_rows() -> (TempTable, Snapshot) {
    let t = TempTable::create();
    let f = t.file("seed.csv", &csv_rows(1, 3));
    ok(&["append", &t.uri, &f]);
    let before = snapshot(&t);
    assert_eq!(before.count, 3);
    (t, before)
}

/// A failed append of `files` (names inside the table's temp folder) exits 2, mentions
/// `words` and changes nothing.
fn append_rejected(t: &TempTable, before: &Snapshot, files: &[(&str, &str)], words: &[&str]) -> String {
    let paths: Vec<String> = files.iter().map(|(name, contents)| t.file(name, contents)).collect();
    let mut args = vec!["append", t.uri.as_str()];
    args.extend(paths.iter().map(String::as_str));
    let stderr = fails(&args, 2);
    assert_mentions(&stderr, words);
    assert_eq!(&snapshot(t), before, "a rejected append changed the table");
    stderr
}

#[test]
fn csv_with_unknown_column_is_rejected_naming_it() {
    let (t, before) = table_with_rows();
    append_rejected(&t, &before, &[("extra.csv", "id,name,bogus\n10,a,1\n")], &["bogus", "extra.csv"]);
}

#[test]
fn csv_with_non_numeric_bigint_names_column_line_and_type() {
    let (t, before) = table_with_rows();
    // Header is line 1, so the bad value is on line 3.
    let stderr =
        append_rejected(&t, &before, &[("badnum.csv", "id,name,score\n10,a,1.5\nten,b,2.5\n")], &["badnum.csv", "'id'", "bigint", "ten"]);
    assert_mentions(&stderr, &["line 3"]);
}

#[test]
fn csv_missing_not_null_column_is_rejected() {
    let (t, before) = table_with_rows();
    append_rejected(&t, &before, &[("noid.csv", "name,score\na,1.5\n")], &["noid.csv", "'id'"]);
}

#[test]
fn csv_with_empty_value_in_not_null_column_is_rejected() {
    let (t, before) = table_with_rows();
    append_rejected(&t, &before, &[("emptyid.csv", "id,name,score\n10,a,1.5\n,b,2.5\n")], &["emptyid.csv", "'id'"]);
}

#[test]
fn ndjson_string_for_bigint_names_expected_and_found_types() {
    let (t, before) = table_with_rows();
    let contents = "{\"id\": 10, \"name\": \"a\"}\n{\"id\": \"eleven\", \"name\": \"b\"}\n";
    append_rejected(&t, &before, &[("strid.ndjson", contents)], &["strid.ndjson", "'id'", "bigint", "string"]);
}

#[test]
fn parquet_with_unfitting_column_type_names_column_and_types() {
    let (t, before) = table_with_rows();
    let schema =
        Arc::new(ArrowSchema::new(vec![ArrowField::new("id", DataType::Int64, false), ArrowField::new("score", DataType::Utf8, true)]));
    let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![10, 11])), Arc::new(StringArray::from(vec![Some("0.5"), None]))];
    let batch = RecordBatch::try_new(schema, columns).unwrap();
    let path = t.dir.path().join("textscore.parquet");
    write_parquet(&path, &batch);
    let stderr = fails(&["append", &t.uri, path.to_str().unwrap()], 2);
    assert_mentions(&stderr, &["textscore.parquet", "'score'", "double", "varchar"]);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn several_files_with_a_bad_second_commit_nothing() {
    let (t, before) = table_with_rows();
    let stderr = append_rejected(
        &t,
        &before,
        &[("good.csv", csv_rows(100, 5).as_str()), ("bad.csv", "id,name,score\n200,x,not-a-number\n")],
        &["bad.csv", "'score'", "double"],
    );
    assert!(!stderr.contains("good.csv"), "the good file is not the problem: {stderr}");
    // The good file's rows are nowhere.
    assert_eq!(ok(&["count", &t.uri, "--where", "id >= 100"]).trim(), "0");
}

#[test]
fn unsupported_file_extension_is_rejected() {
    let (t, before) = table_with_rows();
    append_rejected(&t, &before, &[("rows.txt", csv_rows(10, 2).as_str())], &["rows.txt"]);
}

#[test]
fn commands_on_a_missing_table_exit_7() {
    let t = TempTable::uncreated();
    let input = t.file("rows.csv", &csv_rows(1, 2));
    for args in [
        vec!["append", t.uri.as_str(), input.as_str()],
        vec!["scan", t.uri.as_str()],
        vec!["count", t.uri.as_str()],
        vec!["history", t.uri.as_str()],
    ] {
        let stderr = fails(&args, 7);
        assert_mentions(&stderr, &[&t.uri]);
    }
    assert!(tree(&t.path()).is_empty(), "commands on a missing table created files: {:?}", tree(&t.path()));
}

#[test]
fn create_on_an_existing_table_exits_7_and_changes_nothing() {
    let (t, before) = table_with_rows();
    let schema = ok(&["schema", &t.uri, "--format", "json"]);
    let history = t.history();
    let stderr = fails(&["create", &t.uri, "--schema", "other int"], 7);
    assert_mentions(&stderr, &[&t.uri]);
    assert_eq!(ok(&["schema", &t.uri, "--format", "json"]), schema);
    assert_eq!(t.history(), history);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn unknown_uri_scheme_exits_2_listing_supported_schemes() {
    for args in [vec!["count", "foo://bucket/t"], vec!["create", "foo://bucket/t", "--schema", SCHEMA]] {
        let stderr = fails(&args, 2);
        assert_mentions(&stderr, &["foo", "file://", "memory://"]);
    }
}

#[test]
fn bad_predicates_exit_2() {
    let (t, before) = table_with_rows();
    for cmd in ["count", "scan"] {
        fails(&[cmd, &t.uri, "--where", "id >"], 2);
        let stderr = fails(&[cmd, &t.uri, "--where", "nope = 1"], 2);
        assert_mentions(&stderr, &["nope"]);
        let stderr = fails(&[cmd, &t.uri, "--where", "id + 1"], 2);
        assert_mentions(&stderr, &["boolean"]);
    }
    assert_eq!(snapshot(&t), before);
}

/// Creates a table with versions 0 (empty), 1 (3 rows) and 2 (5 rows), then truncates
/// version 2's manifest; returns the table and that manifest's file name.
fn table_with_truncated_newest_manifest() -> (TempTable, String) {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(1, 3))]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(4, 2))]);
    let dir = t.path().join("_versions");
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names[0], version_file_name(2), "the newest version sorts first");
    let newest = dir.join(&names[0]);
    let bytes = std::fs::read(&newest).unwrap();
    std::fs::write(&newest, &bytes[..bytes.len() / 2]).unwrap();
    (t, names[0].clone())
}

#[test]
fn corrupt_newest_manifest_fails_naming_the_file() {
    let (t, name) = table_with_truncated_newest_manifest();
    let stderr = fails(&["count", &t.uri], 1);
    assert_mentions(&stderr, &[&name]);
    let stderr = fails(&["scan", &t.uri], 1);
    assert_mentions(&stderr, &[&name]);
}

#[test]
fn corrupt_newest_manifest_leaves_older_versions_readable() {
    let (t, _) = table_with_truncated_newest_manifest();
    assert_eq!(ok(&["count", &t.uri, "--version", "1"]), "3\n");
    assert_eq!(ok(&["scan", &t.uri, "--version", "0", "--format", "json"]), "");
    assert_eq!(ok(&["scan", &t.uri, "--version", "1", "--format", "json"]).lines().count(), 3);
}

#[test]
fn restore_to_a_missing_version_exits_2() {
    let (t, before) = table_with_rows();
    let stderr = fails(&["restore", &t.uri, "9"], 2);
    assert_mentions(&stderr, &["9", "0 to 1"]);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn time_travel_outside_the_history_exits_2() {
    let (t, before) = table_with_rows();
    for cmd in ["count", "scan"] {
        let stderr = fails(&[cmd, &t.uri, "--as-of", "2000-01-01T00:00:00Z"], 2);
        assert_mentions(&stderr, &["2000-01-01"]);
        let stderr = fails(&[cmd, &t.uri, "--version", "99"], 2);
        assert_mentions(&stderr, &["99", "0 to 1"]);
    }
    fails(&["count", &t.uri, "--as-of", "yesterday"], 2);
    assert_eq!(snapshot(&t), before);
}

#[test]
fn expect_version_refuses_when_the_table_moved() {
    let (t, before) = table_with_rows();
    let more = t.file("more.csv", &csv_rows(10, 2));
    fails(&["append", &t.uri, &more, "--expect-version", "0"], 5);
    assert_eq!(snapshot(&t), before);
    let out: serde_json::Value = serde_json::from_str(&ok(&["append", &t.uri, &more, "--expect-version", "1", "--json"])).unwrap();
    assert_eq!(out["version"], 2);
    assert_eq!(t.count(), 5);
}

#[tokio::test]
async fn library_append_with_wrong_column_type_is_a_typed_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("t").to_string_lossy().into_owned();
    let resolver = StoreResolver::new();
    let table = create_table(&resolver, &uri, SCHEMA).await;
    let good = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![ArrowField::new("id", DataType::Int64, false), ArrowField::new("score", DataType::Float64, true)])),
        vec![Arc::new(Int64Array::from(vec![1, 2])), Arc::new(Float64Array::from(vec![0.5, 1.5]))],
    )
    .unwrap();
    assert_eq!(table.append(&[good], &CommitOptions::default()).await.expect("good append").version, 1);

    let bad = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![ArrowField::new("id", DataType::Int64, false), ArrowField::new("score", DataType::Utf8, true)])),
        vec![Arc::new(Int64Array::from(vec![3])), Arc::new(StringArray::from(vec!["high"]))],
    )
    .unwrap();
    let table = open_table(&resolver, &uri).await;
    match table.append(&[bad], &CommitOptions::default()).await {
        Err(WriteError::Input(InputError::TypeMismatch { column, expected, found, .. })) => {
            assert_eq!(column, "score");
            assert_eq!(expected, "double");
            assert_eq!(found, "varchar", "the schema's type names");
        }
        other => panic!("expected a type mismatch, got {other:?}"),
    }
    let latest = open_table(&resolver, &uri).await;
    assert_eq!(latest.version(), 1);
    assert_eq!(ids(&latest).await, vec![1, 2]);
}

/// A hand-edited manifest or segment naming an object outside the table is refused with
/// an error naming the object; earlier versions stay readable.
#[test]
fn manifests_naming_paths_outside_the_table_are_refused() {
    let t = TempTable::create();
    // 64 one-fragment appends: one segment of 64 fragments, in a file of its own; then a
    // small append, held inline in the root (format 2).
    append_one_row_fragments(&t.uri, 0, 64);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(100, 3))]);
    let latest = t.path().join("_versions").join(concord::manifest::version_file_name(65));
    let text = std::fs::read_to_string(&latest).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(manifest["segments"][1]["inline"].is_array(), "a small append is inline: {text}");
    let segment = manifest["segments"][0]["path"].as_str().unwrap().to_string();
    for evil in ["../../../etc/passwd", "/etc/passwd", "_segments/../../outside.json"] {
        manifest["segments"][0]["path"] = serde_json::Value::from(evil);
        std::fs::write(&latest, serde_json::to_vec(&manifest).unwrap()).unwrap();
        let (code, _, stderr) = run(&["count", &t.uri]);
        assert_eq!(code, 1, "{evil}: {stderr}");
        assert_mentions(&stderr, &["outside the table", evil]);
    }
    // An inline fragment naming a data file outside the table: the root is refused.
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    manifest["segments"][1]["inline"][0]["files"][0]["path"] = serde_json::Value::from("data/../../outside.parquet");
    std::fs::write(&latest, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (code, _, stderr) = run(&["count", &t.uri]);
    assert_eq!(code, 1, "{stderr}");
    assert_mentions(&stderr, &["outside the table", "data/../../outside.parquet"]);
    // A segment file naming a data file outside the table: the segment is refused.
    std::fs::write(&latest, text).unwrap();
    let segment_file = t.path().join(&segment);
    let seg = std::fs::read_to_string(&segment_file).unwrap();
    let escaped = seg.replacen("data/", "data/../../", 1);
    std::fs::write(&segment_file, escaped).unwrap();
    let (code, _, stderr) = run(&["scan", &t.uri]);
    assert_eq!(code, 1, "{stderr}");
    assert_mentions(&stderr, &["outside the table", &segment]);
    assert_eq!(ok(&["count", &t.uri, "--version", "0"]).trim(), "0", "other versions stay readable");
}

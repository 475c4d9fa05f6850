//! Schema changes and table properties through the command line: values, bad input
//! (exit 2, table unchanged) and conflicts with concurrent writers (exit 3).

use crate::common::*;

fn scan_json(uri: &str) -> Vec<serde_json::Value> {
    ok(&["scan", uri, "--format", "json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn add_drop_rename_columns_by_field_id() {
    let t = TempTable::create();
    let a = t.file("a.csv", &csv_rows(0, 2));
    ok(&["append", &t.uri, &a]);
    ok(&["alter", &t.uri, "add-column", "qty int not null default 1 + 2"]);
    ok(&["alter", &t.uri, "add-column", "note varchar"]);
    let rows = scan_json(&t.uri);
    assert_eq!((rows[0]["qty"].as_i64(), rows[0]["note"].is_null()), (Some(3), true), "old rows read the default: {rows:?}");
    // Appends without the new column get its default; with it, their value.
    let b = t.file("b.csv", "id,name,score\n10,x,1.0\n");
    let c = t.file("c.csv", "id,qty,note\n11,7,hi\n");
    ok(&["append", &t.uri, &b, &c]);
    let rows = scan_json(&t.uri);
    let qty = |id: i64| rows.iter().find(|r| r["id"].as_i64() == Some(id)).unwrap()["qty"].as_i64();
    assert_eq!((qty(10), qty(11)), (Some(3), Some(7)));
    ok(&["alter", &t.uri, "rename-column", "name", "label"]);
    assert_eq!(scan_json(&t.uri)[0]["label"].as_str(), Some("n0"), "a renamed column still reads its old files");
    ok(&["alter", &t.uri, "drop-column", "score"]);
    ok(&["alter", &t.uri, "add-column", "score varchar default 'new'"]);
    let rows = scan_json(&t.uri);
    assert_eq!(rows[0]["score"].as_str(), Some("new"), "a re-added column never reads the dropped one's data");
    let schema = ok(&["schema", &t.uri]);
    assert_eq!(
        schema.trim(),
        "id bigint not null\nlabel varchar\nqty int not null default '3'\nnote varchar\nscore varchar default 'new'\nproperty isolation=serializable"
    );
    let ops: Vec<String> = t.history().iter().map(|v| v["operation"].as_str().unwrap().to_string()).collect();
    assert_eq!(&ops[2..], ["add_column", "add_column", "append", "rename_column", "drop_column", "add_column"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "qty = 3"]).trim(), "3", "predicates see defaults too");
    // Time travel reads each version with its own schema.
    assert!(scan_json(&t.uri.to_string()).len() == 4);
    let old = ok(&["scan", &t.uri, "--version", "1", "--format", "json"]);
    assert!(old.contains("\"name\":\"n0\"") && !old.contains("qty"), "{old}");
}

#[test]
fn bad_schema_changes_exit_2_and_change_nothing() {
    let t = TempTable::create();
    let a = t.file("a.csv", &csv_rows(0, 3));
    ok(&["append", &t.uri, &a]);
    let before = committed_state(&t.path());
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec!["add-column", "name varchar"], &["already has a column 'name'"]),
        (vec!["add-column", "qty int not null"], &["not null but has no default"]),
        (vec!["add-column", "qty int default id + 1"], &["reads column 'id'", "constant"]),
        (vec!["add-column", "qty int default 'abc'"], &["'abc' is not a valid int"]),
        (vec!["add-column", "qty uuid128"], &["unknown column type 'uuid128'"]),
        (vec!["add-column", "qty decimal(40, 50)"], &["column type 'decimal(40, 50)'", "scale 50 is larger than the precision 40"]),
        (vec!["add-column", "\"\" int"], &["not a valid column name"]),
        (vec!["add-column", "\"a\tb\" int"], &["not a valid column name", "control characters"]),
        (vec!["rename-column", "name", "\" x\""], &["not a valid column name", "whitespace"]),
        (vec!["drop-column", "nope"], &["unknown column 'nope'", "id, name, score"]),
        (vec!["rename-column", "nope", "x"], &["unknown column 'nope'"]),
        (vec!["rename-column", "name", "score"], &["already has a column 'score'"]),
        (vec!["set-property", "isolation=eventual"], &["'eventual'", "serializable or snapshot"]),
        (vec!["set-property", "colour=blue"], &["unknown table property 'colour'", "isolation"]),
        (vec!["set-property", "isolation"], &["key=value"]),
    ];
    for (args, mentions) in cases {
        let mut full = vec!["alter", t.uri.as_str()];
        full.extend(args.iter().copied());
        let (code, stdout, stderr) = run(&full);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: stdout {stdout}");
        for m in mentions {
            assert!(stderr.contains(m), "{args:?}: '{m}' not in: {stderr}");
        }
        assert_eq!(committed_state(&t.path()), before, "{args:?} changed the table");
    }
    let single = TempTable::create_with("only bigint");
    let (code, _, stderr) = run(&["alter", &single.uri, "drop-column", "only"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("last column"), "{stderr}");
}

/// Exit 3: a staged append that writes a column, committed after that column was
/// dropped; a staged delete whose predicate reads it. The message names the winning
/// version, its operation and the column.
#[test]
fn writes_that_a_schema_change_invalidated_exit_3() {
    let t = TempTable::create();
    let a = t.file("a.csv", &csv_rows(0, 4));
    ok(&["append", &t.uri, &a]);
    let staged_append = ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 2)), "--stage"]).trim().to_string();
    let without_name = t.file("c.csv", "id,score\n20,1.5\n");
    let staged_ok = ok(&["append", &t.uri, &without_name, "--stage"]).trim().to_string();
    let staged_delete = ok(&["delete", &t.uri, "--where", "name = 'n1'", "--stage"]).trim().to_string();
    ok(&["alter", &t.uri, "drop-column", "name"]);
    let before = committed_state(&t.path());
    for staged in [&staged_append, &staged_delete] {
        let (code, stdout, stderr) = run(&["commit", &t.uri, staged]);
        assert_eq!(code, 3, "{stderr}");
        assert!(stdout.is_empty());
        for m in ["version 2", "drop_column", "'name'"] {
            assert!(stderr.contains(m), "'{m}' not in: {stderr}");
        }
        assert_eq!(committed_state(&t.path()), before, "nothing of the loser is visible");
    }
    // An append that never wrote the dropped column rebases.
    let out: serde_json::Value = serde_json::from_str(&ok(&["commit", &t.uri, &staged_ok, "--json"])).unwrap();
    assert_eq!((out["version"].as_u64(), out["rebased_over"].clone()), (Some(3), serde_json::json!([2])));
    assert_eq!(t.count(), 5);
    // Two writers adding the same column name: the second is incompatible.
    let first = ok(&["alter", &t.uri, "add-column", "flag boolean", "--stage"]).trim().to_string();
    ok(&["alter", &t.uri, "add-column", "flag int default 0"]);
    let (code, _, stderr) = run(&["commit", &t.uri, &first]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("'flag'") && stderr.contains("add_column"), "{stderr}");
}

/// The table property `isolation` sets the default level of every write; a write can
/// still override it.
#[test]
fn isolation_property_sets_the_default() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 10))]);
    ok(&["alter", &t.uri, "set-property", "isolation=snapshot"]);
    let commit_delete_over_append = |extra: &[&str]| -> serde_json::Value {
        let staged = ok(&["delete", &t.uri, "--where", "id % 2 = 0", "--stage"]).trim().to_string();
        let next = t.latest_version() * 100;
        ok(&["append", &t.uri, &t.file(&format!("n{next}.csv"), &csv_rows(next, 2))]);
        let mut args = vec!["commit", t.uri.as_str(), staged.as_str(), "--json"];
        args.extend(extra);
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let snapshot = commit_delete_over_append(&[]);
    assert_eq!(snapshot["rerun"], false, "snapshot by default now: the appended even row is kept");
    let serializable = commit_delete_over_append(&["--isolation", "serializable"]);
    assert_eq!(serializable["rerun"], true, "an explicit level overrides the table's");
    ok(&["alter", &t.uri, "unset-property", "isolation"]);
    let back = commit_delete_over_append(&[]);
    assert_eq!(back["rerun"], true, "unset: back to serializable");
    let ops: Vec<String> = t.history().iter().map(|v| v["operation"].as_str().unwrap().to_string()).collect();
    assert_eq!(ops.iter().filter(|o| *o == "set_properties").count(), 2);
}

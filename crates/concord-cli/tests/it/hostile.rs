//! Oversized and malicious input: every limit fails cleanly (a typed error, exit 2 for
//! bad arguments, nothing committed) instead of exhausting the stack or memory.

use std::fs::OpenOptions;

use concord::limits::{MAX_COLUMNS, MAX_EXPRESSION_OPERATORS, MAX_METADATA_BYTES};
use concord::manifest::version_file_name;
use concord::schema::SchemaParseError;
use concord::{PredicateError, ScanError, Schema, StoreResolver};

use crate::common::*;

fn joined(parts: impl Iterator<Item = String>, sep: &str) -> String {
    parts.collect::<Vec<_>>().join(sep)
}

/// A table at version 1 with ids 0..10.
fn ten_rows() -> TempTable {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 10))]);
    t
}

#[test]
fn long_and_deep_expressions_fail_cleanly_and_big_in_lists_work() {
    let t = ten_rows();
    // The largest accepted: a 500-term OR chain (999 operators), run by a debug build.
    let or_500 = joined((0..500).map(|i| format!("id = {i}")), " OR ");
    assert_eq!(ok(&["count", &t.uri, "--where", &or_500]), "10\n");
    let in_list = format!("id IN ({})", joined((0..10_000).map(|i| i.to_string()), ","));
    assert_eq!(ok(&["count", &t.uri, "--where", &in_list]), "10\n");
    let versions = committed_state(&t.path());
    let too_deep = [
        joined((0..2_000).map(|i| format!("id = {i}")), " OR "),
        format!("{}id = 1{}", "(".repeat(5_000), ")".repeat(5_000)),
        format!("{} = 1", joined((0..3_000).map(|_| "id".to_string()), " + ")),
    ];
    for predicate in &too_deep {
        for args in [vec!["delete", &t.uri, "--where", predicate], vec!["update", &t.uri, "--set", "score = 1", "--where", predicate]] {
            let (code, _, stderr) = run(&args);
            assert_eq!(code, 2, "{stderr}");
            assert!(stderr.contains(&format!("the limit is {MAX_EXPRESSION_OPERATORS}")), "{stderr}");
            assert!(stderr.len() < 1_000, "the message shows the expression abbreviated: {} bytes", stderr.len());
        }
    }
    let set_deep = format!("score = {}", joined((0..3_000).map(|_| "score".to_string()), " + "));
    let (code, _, stderr) = run(&["update", &t.uri, "--set", &set_deep]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(committed_state(&t.path()), versions, "nothing committed");
    assert_eq!(t.count(), 10);
}

#[tokio::test]
async fn the_library_reports_a_too_complex_expression_as_a_typed_error() {
    let t = ten_rows();
    let table = open_table(&StoreResolver::new(), &t.uri).await;
    let deep = joined((0..2_000).map(|i| format!("id = {i}")), " OR ");
    match table.count(Some(&deep)).await {
        Err(ScanError::Predicate(PredicateError::TooComplex { operators, limit, .. })) => {
            assert_eq!((operators, limit), (3_999, MAX_EXPRESSION_OPERATORS));
        }
        other => panic!("expected TooComplex, got {other:?}"),
    }
}

#[test]
fn too_many_columns_and_overlong_names_are_refused() {
    // A million columns is refused by counting, before any per-column work.
    let million = joined((0..1_000_000).map(|i| format!("c{i} int")), ",");
    assert_eq!(Schema::parse(&million), Err(SchemaParseError::TooManyColumns { count: 1_000_000, limit: MAX_COLUMNS }));
    let t = TempTable::uncreated();
    let over = joined((0..=MAX_COLUMNS).map(|i| format!("c{i} int")), ",");
    let (code, _, stderr) = run(&["create", &t.uri, "--schema", &over]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("10001 columns") && stderr.contains("at most 10000"), "{stderr}");
    assert!(!t.path().exists(), "nothing created");
    let long_name = format!("{} int", "n".repeat(10_000));
    let (code, _, stderr) = run(&["create", &t.uri, "--schema", &long_name]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("10000 bytes"), "{stderr}");
    // Wide tables up to the limit work: 2,000 columns, then one more added.
    let wide = joined((0..2_000).map(|i| format!("c{i} int")), ",");
    ok(&["create", &t.uri, "--schema", &wide]);
    ok(&["alter", &t.uri, "add-column", "extra varchar"]);
    assert_eq!(ok(&["schema", &t.uri]).lines().filter(|l| !l.trim().is_empty() && !l.starts_with("property ")).count(), 2_001);
    let (code, _, stderr) = run(&["alter", &t.uri, "add-column", &format!("{} int", "m".repeat(300))]);
    assert_eq!(code, 2, "{stderr}");
}

/// Grows `path` to just over the metadata limit without writing it (a sparse file).
fn make_oversized(path: &std::path::Path) {
    OpenOptions::new().write(true).open(path).unwrap().set_len(MAX_METADATA_BYTES + 1).unwrap();
}

#[test]
fn oversized_metadata_objects_are_refused_before_being_read() {
    // 64 fragments, the first of ten rows: a segment too large to be held inline; the
    // delete leaves that first fragment with a deletion vector.
    let t = ten_rows();
    append_one_row_fragments(&t.uri, 100, 63);
    ok(&["delete", &t.uri, "--where", "id < 3"]);
    let limit = MAX_METADATA_BYTES.to_string();
    // A segment and a deletion vector (version 65 uses both).
    for dir in ["_segments", "_deletions"] {
        let victim = std::fs::read_dir(t.path().join(dir))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .max_by_key(|p| p.metadata().unwrap().modified().unwrap())
            .unwrap();
        let original = std::fs::read(&victim).unwrap();
        make_oversized(&victim);
        let (code, _, stderr) = run(&["scan", &t.uri]);
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(&limit) && stderr.contains(victim.file_name().unwrap().to_str().unwrap()), "{dir}: {stderr}");
        std::fs::write(&victim, original).unwrap();
    }
    // The newest manifest: refused, naming it; older versions stay readable.
    let newest = t.path().join("_versions").join(version_file_name(65));
    make_oversized(&newest);
    let (code, _, stderr) = run(&["count", &t.uri]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(&limit) && stderr.contains(&version_file_name(65)), "{stderr}");
    assert_eq!(ok(&["count", &t.uri, "--version", "64"]), "73\n");
}

#[test]
fn deeply_nested_or_huge_json_in_a_manifest_is_a_typed_error() {
    let t = ten_rows();
    let newest = t.path().join("_versions").join(version_file_name(1));
    let hostile = [
        "[".repeat(1_000_000),
        format!("{{\"format_version\":1,\"version\":1,\"note\":\"{}\"}}", "x".repeat(50 << 20)),
        format!("{{\"format_version\":1,\"version\":1,\"segments\":[{}]}}", "{\"a\":".repeat(100_000)),
    ];
    for (i, bytes) in hostile.iter().enumerate() {
        std::fs::write(&newest, bytes).unwrap();
        let (code, _, stderr) = run(&["count", &t.uri]);
        assert_eq!(code, 1, "case {i}: {stderr}");
        assert!(stderr.contains(&version_file_name(1)) && stderr.len() < 2_000, "case {i}: {stderr}");
        assert_eq!(ok(&["count", &t.uri, "--version", "0"]), "0\n");
    }
}

#[test]
fn a_sixteen_mib_string_value_round_trips() {
    let t = TempTable::create();
    let big = "z".repeat(16 << 20);
    ok(&["append", &t.uri, &t.file("big.csv", &format!("id,name,score\n1,{big},1.0\n2,small,2.0\n"))]);
    assert_eq!(ok(&["count", &t.uri, "--where", "length(name) = 16777216"]), "1\n");
    ok(&["update", &t.uri, "--set", "name = 'gone'", "--where", "id = 1"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "name = 'gone'"]), "1\n");
}

/// Parquet files that made the parquet crate panic or exhaust memory (found by the
/// `data_file` fuzz target: a corrupt embedded Arrow schema, a negative column-chunk
/// offset, a bit width over 32 in a dictionary page, a dictionary page claiming 2^31
/// values, a footer claiming 2^31 booleans the crate looped over), given to `append`:
/// refused with exit 2 or read, never a crash, a hang or a panic message.
#[test]
fn parquet_files_that_crashed_the_parquet_crate_are_refused_cleanly() {
    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/data_file");
    let t = TempTable::create();
    for name in ["crash-1", "crash-2", "crash-3", "crash-4", "timeout-1"] {
        let input = t.dir.path().join(format!("{name}.parquet"));
        std::fs::copy(corpus.join(name), &input).unwrap();
        let (code, _, stderr) = run(&["append", &t.uri, input.to_str().unwrap()]);
        assert!(code == 0 || code == 2, "{name}: exit {code}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        if name == "timeout-1" {
            assert!(code == 2 && stderr.contains("booleans"), "exit {code}: {stderr}");
        }
    }
}

//! Values never change silently (issue 19, items 1-6 and 11): overflow, precision,
//! dates, binary, infinities, floats, typed input. Every write refuses a value that
//! does not convert exactly (exit 2, naming the column and the value), and what a scan
//! exports re-imports as itself.

use std::sync::Arc;

use concord::arrow::array::{ArrayRef, Float32Array, Int64Array, RecordBatch, TimestampNanosecondArray};
use serde_json::Value;

use crate::common::*;

fn json_rows(uri: &str) -> Vec<Value> {
    ok(&["scan", uri, "--format", "json"]).lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect()
}

/// Item 1: Arithmetic is checked: bigint overflow is refused like int overflow, in SET
/// values and in defaults, and so is a finite double that would become infinite.
#[test]
fn arithmetic_that_overflows_is_refused_not_wrapped() {
    let t = TempTable::create_with("id bigint not null, n int, s double");
    ok(&["append", &t.uri, &t.file("a.csv", "id,n,s\n2,1,1.5\n")]);
    let before = snapshot(&t);
    for (set, column) in [
        ("id = id * 9223372036854775807", "id"),
        ("n = n * 2147483647 * 2", "n"),
        ("s = 1e400", "s"),
        ("s = 1e308 * 10", "s"),
        ("id = id / 0", "id"),
    ] {
        let stderr = fails(&["update", &t.uri, "--set", set, "--where", "id = 2"], 2);
        assert_mentions(&stderr, &[column]);
        assert_eq!(snapshot(&t), before, "{set}: nothing committed");
    }
    let stderr = fails(&["update", &t.uri, "--set", "id = id * 9223372036854775807", "--where", "id = 2"], 2);
    assert_mentions(&stderr, &["id * 9223372036854775807", "overflow"]);
    for definition in ["x bigint default 9223372036854775807 + 1", "y double default 1e308 * 10", "z double default 1e400"] {
        let stderr = fails(&["alter", &t.uri, "add-column", definition], 2);
        assert_mentions(&stderr, &[&format!("'{}'", &definition[..1])]);
        assert_eq!(snapshot(&t), before, "{definition}");
    }
    // Predicates are checked too: an overflow is an error, not a wrong answer.
    fails(&["count", &t.uri, "--where", "id * 9223372036854775807 < 0"], 2);
    // What fits still works, and explicit infinities are values.
    ok(&["update", &t.uri, "--set", "id = id * 4611686018427387903", "--set", "s = -1e308 * 1", "--where", "id = 2"]);
    ok(&["update", &t.uri, "--set", "s = cast('inf' as double)"]);
    assert_eq!(json_rows(&t.uri)[0]["id"], serde_json::json!(9223372036854775806i64));
    assert_eq!(json_rows(&t.uri)[0]["s"], "Infinity");
}

/// Item 2: Nanoseconds are refused by a microsecond column (from CSV, NDJSON, Parquet and
/// predicates), never cut off; zero nanoseconds fit.
#[test]
fn nanoseconds_are_refused_not_cut_off() {
    let t = TempTable::create_with("id bigint not null, x timestamp");
    let before = snapshot(&t);
    let csv = t.file("ns.csv", "id,x\n1,2024-01-01T00:00:00.123456789Z\n");
    assert_mentions(&fails(&["append", &t.uri, &csv], 2), &["'x'", "2024-01-01T00:00:00.123456789Z"]);
    let json = t.file("ns.ndjson", "{\"id\": 1, \"x\": \"2024-01-01T00:00:00.123456789Z\"}\n");
    assert_mentions(&fails(&["append", &t.uri, &json], 2), &["line 1", "'x'"]);
    let parquet = t.dir.path().join("ns.parquet");
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ("x", Arc::new(TimestampNanosecondArray::from(vec![1_700_000_000_123_456_000, 1_700_000_000_123_456_789])) as ArrayRef),
    ])
    .unwrap();
    write_parquet(&parquet, &batch);
    assert_mentions(&fails(&["append", &t.uri, parquet.to_str().unwrap()], 2), &["'x'", "2023-11-14T22:13:20.123456789"]);
    assert_eq!(snapshot(&t), before);
    // A literal more precise than the column matches nothing that could be stored: refused.
    ok(&["append", &t.uri, &t.file("us.csv", "id,x\n1,2023-11-14T22:13:20.123456Z\n")]);
    let stderr = fails(&["count", &t.uri, "--where", "x = '2023-11-14T22:13:20.123456789Z'"], 2);
    assert_mentions(&stderr, &["2023-11-14T22:13:20.123456789Z", "more precise"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "x = '2023-11-14T22:13:20.123456Z'"]).trim(), "1");
    assert_eq!(ok(&["count", &t.uri, "--where", "x = '2023-11-14T22:13:20.123456000Z'"]).trim(), "1");
    // now() is stored at the column's precision.
    ok(&["update", &t.uri, "--set", "x = now()"]);
}

/// Item 3: One rule for dates: a time of day other than midnight (UTC) does not fit.
#[test]
fn a_time_of_day_does_not_fit_a_date() {
    let t = TempTable::create_with("id bigint not null, d date, ts timestamp");
    ok(&["append", &t.uri, &t.file("a.csv", "id,d,ts\n1,2024-03-03,2024-03-03T10:30:00Z\n2,2024-03-04,2024-03-04T00:00:00Z\n")]);
    let before = snapshot(&t);
    assert_mentions(&fails(&["append", &t.uri, &t.file("b.csv", "id,d\n3,2024-03-03T10:00:00\n")], 2), &["'d'", "2024-03-03T10:00:00"]);
    assert_mentions(&fails(&["append", &t.uri, &t.file("b.ndjson", "{\"id\": 3, \"d\": \"2024-03-03T10:00:00Z\"}\n")], 2), &["'d'"]);
    assert_mentions(&fails(&["update", &t.uri, "--set", "d = '2024-03-03T10:00:00'", "--where", "id = 1"], 2), &["'d'"]);
    assert_mentions(&fails(&["update", &t.uri, "--set", "d = ts", "--where", "id = 1"], 2), &["'d'"]);
    assert_eq!(snapshot(&t), before);
    // Midnight fits, by every path.
    ok(&["append", &t.uri, &t.file("c.csv", "id,d\n3,2024-03-05T00:00:00Z\n")]);
    ok(&["update", &t.uri, "--set", "d = ts", "--where", "id = 2"]);
    let days: Vec<String> = json_rows(&t.uri).iter().map(|r| r["d"].as_str().unwrap().to_string()).collect();
    assert_eq!(days, ["2024-03-03", "2024-03-05", "2024-03-04"]);
}

/// Item 4: Binary columns: scans print hex, and appends read hex back (CSV and NDJSON).
#[test]
fn binary_exports_re_import_as_themselves() {
    let t = TempTable::create_with("id bigint not null, b binary");
    ok(&["append", &t.uri, &t.file("a.csv", "id,b\n1,616263\n2,\n3,\"\"\n")]);
    let csv = ok(&["scan", &t.uri, "--format", "csv"]);
    assert_eq!(csv, "id,b\n1,616263\n2,\n3,\"\"\n");
    assert_eq!(ok(&["count", &t.uri, "--where", "b = X'616263'"]).trim(), "1", "616263 is stored as the bytes abc");
    let copy = TempTable::create_with("id bigint not null, b binary");
    ok(&["append", &copy.uri, &copy.file("export.csv", &csv)]);
    let json = ok(&["scan", &t.uri, "--format", "json"]);
    let other = TempTable::create_with("id bigint not null, b binary");
    ok(&["append", &other.uri, &other.file("export.ndjson", &json)]);
    assert_eq!(ok(&["scan", &copy.uri, "--format", "csv"]), csv);
    assert_eq!(ok(&["scan", &other.uri, "--format", "json"]), json);
    assert_mentions(&fails(&["append", &t.uri, &t.file("bad.csv", "id,b\n4,abc\n")], 2), &["'b'", "hex"]);
}

/// Item 5: Doubles: overflow to infinity is refused; explicit infinities and NaN are stored,
/// and a JSON export writes them as strings that re-import as themselves.
#[test]
fn infinities_and_nan_round_trip_and_overflow_is_refused() {
    let t = TempTable::create_with("id bigint not null, x double, f float");
    assert_mentions(&fails(&["append", &t.uri, &t.file("big.csv", "id,x\n1,1e400\n")], 2), &["'x'", "1e400"]);
    assert_mentions(&fails(&["append", &t.uri, &t.file("big.csv", "id,f\n1,1e39\n")], 2), &["'f'", "1e39"]);
    ok(&["append", &t.uri, &t.file("special.csv", "id,x,f\n1,inf,-inf\n2,-inf,NaN\n3,NaN,1.5\n4,,\n")]);
    assert_eq!(ok(&["count", &t.uri, "--where", "x is null"]).trim(), "1");
    let json = ok(&["scan", &t.uri, "--format", "json"]);
    assert!(json.contains("\"Infinity\"") && json.contains("\"-Infinity\"") && json.contains("\"NaN\""), "{json}");
    let copy = TempTable::create_with("id bigint not null, x double, f float");
    ok(&["append", &copy.uri, &copy.file("export.ndjson", &json)]);
    assert_eq!(ok(&["count", &copy.uri, "--where", "x is null"]).trim(), "1", "not turned into NULLs");
    assert_eq!(ok(&["scan", &copy.uri, "--format", "json"]), json);
    let csv = ok(&["scan", &t.uri, "--format", "csv"]);
    let again = TempTable::create_with("id bigint not null, x double, f float");
    ok(&["append", &again.uri, &again.file("export.csv", &csv)]);
    assert_eq!(ok(&["scan", &again.uri, "--format", "csv"]), csv);
}

/// Item 6: A float column refuses integers (and digits) it cannot hold exactly.
#[test]
fn a_float_column_refuses_what_it_would_round() {
    let t = TempTable::create_with("id bigint not null, f float, d double");
    ok(&["append", &t.uri, &t.file("a.csv", "id,f,d\n1,0.1,0.1\n")]);
    let before = snapshot(&t);
    assert_mentions(&fails(&["append", &t.uri, &t.file("b.csv", "id,f\n2,16777217\n")], 2), &["'f'", "16777217"]);
    assert_mentions(&fails(&["update", &t.uri, "--set", "f = 16777217"], 2), &["'f'", "16777217"]);
    assert_mentions(&fails(&["update", &t.uri, "--set", "d = 9007199254740993"], 2), &["'d'", "9007199254740993"]);
    assert_mentions(&fails(&["update", &t.uri, "--set", "f = d * 1.23456789"], 2), &["'f'"]);
    assert_eq!(snapshot(&t), before);
    ok(&["update", &t.uri, "--set", "f = 16777216", "--set", "d = 9007199254740992"]);
    let parquet = t.dir.path().join("f.parquet");
    let batch = RecordBatch::try_from_iter([
        ("id", Arc::new(Int64Array::from(vec![5])) as ArrayRef),
        ("f", Arc::new(Float32Array::from(vec![0.1f32])) as ArrayRef),
    ])
    .unwrap();
    write_parquet(&parquet, &batch);
    ok(&["append", &t.uri, parquet.to_str().unwrap()]);
}

/// Item 11: Parquet and Arrow input are checked by value, as CSV is: pandas' int64 goes into
/// an int column when every value fits; the first that does not is named.
#[test]
fn typed_input_is_checked_by_value() {
    let t = TempTable::create_with("id bigint not null, n int");
    let parquet = t.dir.path().join("n.parquet");
    let batch = |n: Vec<i64>| {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from((1..=n.len() as i64).collect::<Vec<_>>())) as ArrayRef),
            ("n", Arc::new(Int64Array::from(n)) as ArrayRef),
        ])
        .unwrap()
    };
    write_parquet(&parquet, &batch(vec![1, 2, 3]));
    ok(&["append", &t.uri, parquet.to_str().unwrap()]);
    assert_eq!(t.count(), 3);
    write_parquet(&parquet, &batch(vec![1, 5_000_000_000, 3]));
    assert_mentions(&fails(&["append", &t.uri, parquet.to_str().unwrap()], 2), &["'n'", "5000000000", "line 2"]);
    assert_eq!(t.count(), 3);
}

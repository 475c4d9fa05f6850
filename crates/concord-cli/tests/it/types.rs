//! Column types through the command line: schema strings, CSV and NDJSON in and out
//! (what `scan` prints appends back as itself), and values that do not fit refused
//! with exit 2 naming the column, the value and the type.

use crate::common::{ok, run, TempTable};

/// One column of each flat type, with nulls.
const EVERY_TYPE: &str = "id bigint not null, b boolean, i8 tinyint, i16 smallint, u8 utinyint, u16 usmallint, u32 uint, \
u64 ubigint, f float, d double, money decimal(15, 2), wide decimal(38, 10), huge decimal(60, 5), s varchar, raw binary, \
key fixed(4), u uuid, day date, clock time, at timestamp, at_ns timestamp_ns, wall timestamp_ntz, wall_ns timestamp_ntz_ns";

const CSV: &str = "id,b,i8,i16,u8,u16,u32,u64,f,d,money,wide,huge,s,raw,key,u,day,clock,at,at_ns,wall,wall_ns
1,true,-128,-32768,255,65535,4294967295,18446744073709551615,0.1,1e300,-9999999999999.99,1234567890123456789012345678.0123456789,123456789012345678901234567890123456789012345678901234.56789,é,00ff,deadbeef,550e8400-e29b-41d4-a716-446655440000,2024-02-29,23:59:59.999999,2024-01-01T00:00:00.123456Z,2024-01-01T00:00:00.123456789Z,2024-01-01T10:30:00.5,1677-09-21T00:12:43.145224193
2,,,,,,,,,,,,,,,,,,,,,,
";

/// Rows of every type appended from CSV print as CSV and as NDJSON that append back
/// as the same rows; `schema` prints the types as written.
#[test]
fn every_type_goes_through_csv_and_ndjson_and_back() {
    let t = TempTable::create_with(EVERY_TYPE);
    let schema = ok(&["schema", &t.uri]);
    assert!(schema.contains("decimal(15, 2)") && schema.contains("timestamp_ntz_ns") && schema.contains("fixed(4)"), "{schema}");
    ok(&["append", &t.uri, &t.file("in.csv", CSV)]);
    let csv = ok(&["scan", &t.uri, "--format", "csv"]);
    let json = ok(&["scan", &t.uri, "--format", "json"]);
    assert!(csv.contains(",-9999999999999.99,1234567890123456789012345678.0123456789,"), "{csv}");
    assert!(csv.contains(",2024-01-01T00:00:00.123456789Z,2024-01-01T10:30:00.500,1677-09-21T00:12:43.145224193"), "{csv}");
    for (name, text) in [("out.csv", &csv), ("out.ndjson", &json)] {
        let copy = TempTable::create_with(EVERY_TYPE);
        ok(&["append", &copy.uri, &t.file(name, text)]);
        assert_eq!(ok(&["scan", &copy.uri, "--format", "csv"]), csv, "{name} re-imports as itself");
    }
    for (filter, n) in [
        ("money = -9999999999999.99", "1"),
        ("money in (1.5, -9999999999999.99)", "1"),
        ("money between -9999999999999.99 and 0", "1"),
        ("wide = 1234567890123456789012345678.0123456789", "1"),
        ("wide = 1234567890123456789012345678.012345678", "0"),
        ("u64 = 18446744073709551615", "1"),
        ("at_ns = '2024-01-01T00:00:00.123456789Z'", "1"),
        ("at_ns = '2024-01-01T00:00:00.123456788Z'", "0"),
        ("clock > '12:00:00'", "1"),
        ("wall = '2024-01-01T10:30:00.5'", "1"),
        ("huge is null", "1"),
        ("u = '550e8400-e29b-41d4-a716-446655440000'", "1"),
        ("u = '550e8400e29b41d4a716446655440000'", "1"),
        ("key = 'deadbeef'", "1"),
        ("raw = '00ff'", "1"),
        ("raw in ('00', 'ff')", "0"),
    ] {
        assert_eq!(ok(&["count", &t.uri, "--where", filter]).trim(), n, "{filter}");
    }
}

/// A value that does not fit its column is refused (exit 2) with the column, the value
/// and the type named: more decimal places than the scale, a negative unsigned number,
/// a zone on a wall-clock timestamp, nanoseconds in a time, a UUID of the wrong length.
#[test]
fn values_that_do_not_fit_the_new_types_exit_2_naming_them() {
    let t = TempTable::create_with("id int, money decimal(5, 2), n utinyint, wall timestamp_ntz, clock time, u uuid");
    for (csv, value, column) in [
        ("id,money\n1,1.234\n", "1.234", "money"),
        ("id,money\n1,1000\n", "1000", "money"),
        ("id,n\n1,-1\n", "-1", "n"),
        ("id,n\n1,256\n", "256", "n"),
        ("id,wall\n1,2024-01-01T10:00:00Z\n", "2024-01-01T10:00:00Z", "wall"),
        ("id,clock\n1,10:00:00.0000001\n", "10:00:00.0000001", "clock"),
        ("id,u\n1,550e8400\n", "550e8400", "u"),
    ] {
        let (code, _, stderr) = run(&["append", &t.uri, &t.file("bad.csv", csv)]);
        assert_eq!(code, 2, "{csv}: {stderr}");
        assert!(stderr.contains(value) && stderr.contains(column), "{csv}: {stderr}");
    }
    let (code, _, stderr) = run(&["create", &TempTable::uncreated().uri, "--schema", "x decimal(77, 2)"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("precision is from 1 to 76"), "{stderr}");
    let (code, _, stderr) = run(&["update", &t.uri, "--set", "money = 1.005"]);
    assert_eq!(code, 0, "no rows: nothing to refuse ({stderr})");
    ok(&["append", &t.uri, &t.file("ok.csv", "id,money\n1,1.5\n")]);
    let (code, _, stderr) = run(&["update", &t.uri, "--set", "money = money / 7"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("money"), "{stderr}");
}

/// `alter widen-column` widens a column in place (history says `widen_column`; old rows
/// read as the wider type); a change that is not a widening is exit 2 naming the rule.
#[test]
fn alter_widen_column_widens_in_place() {
    let t = TempTable::create_with("id int, amount decimal(5, 2), ratio float");
    ok(&["append", &t.uri, &t.file("a.csv", "id,amount,ratio\n2147483647,999.99,0.5\n")]);
    ok(&["alter", &t.uri, "widen-column", "id", "bigint"]);
    ok(&["alter", &t.uri, "widen-column", "amount", "decimal(12, 2)"]);
    ok(&["alter", &t.uri, "widen-column", "ratio", "double"]);
    let schema = ok(&["schema", &t.uri, "--format", "json"]);
    assert!(schema.contains("bigint") && schema.contains("decimal(12, 2)") && schema.contains("double"), "{schema}");
    ok(&["append", &t.uri, &t.file("b.csv", "id,amount,ratio\n9223372036854775807,9999999999.99,0.1\n")]);
    assert_eq!(ok(&["scan", &t.uri, "--format", "csv"]), "id,amount,ratio\n2147483647,999.99,0.5\n9223372036854775807,9999999999.99,0.1\n");
    let history = ok(&["history", &t.uri, "--format", "json"]);
    assert_eq!(history.matches("\"widen_column\"").count(), 6, "3 versions, each naming its operation and its transaction's: {history}");
    let (code, _, stderr) = run(&["alter", &t.uri, "widen-column", "id", "int"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("column 'id' is bigint, which does not widen to int"), "{stderr}");
    let (code, _, stderr) = run(&["alter", &t.uri, "widen-column", "amount", "decimal(20, 3)"]);
    assert_eq!(code, 2, "{stderr}");
}

/// `merge --on` matches keys of the new types exactly: a decimal and a nanosecond
/// timestamp key; `update --set` computes in them.
#[test]
fn merge_on_decimal_and_nanosecond_keys() {
    let t = TempTable::create_with("k decimal(10, 2) not null, at timestamp_ns not null, v varchar");
    ok(&["append", &t.uri, &t.file("a.csv", "k,at,v\n1.10,2024-01-01T00:00:00.000000001Z,a\n1.10,2024-01-01T00:00:00.000000002Z,b\n")]);
    let changes = t.file("m.csv", "k,at,v\n1.1,2024-01-01T00:00:00.000000002Z,B\n2.00,2024-01-01T00:00:00.000000002Z,c\n");
    ok(&["merge", &t.uri, &changes, "--on", "k,at"]);
    assert_eq!(
        ok(&["scan", &t.uri, "--format", "csv"]).lines().skip(1).collect::<std::collections::BTreeSet<_>>(),
        ["1.10,2024-01-01T00:00:00.000000001Z,a", "1.10,2024-01-01T00:00:00.000000002Z,B", "2.00,2024-01-01T00:00:00.000000002Z,c"]
            .into_iter()
            .collect()
    );
    ok(&["update", &t.uri, "--set", "k = k * 2", "--where", "v = 'c'"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "k = 4.00"]).trim(), "1");
}

/// Nested columns from the command line: the schema string, NDJSON in and out (what
/// `scan --format json` prints appends back as itself), filters and SQL on nested
/// fields, `alter` by path; CSV refuses a nested column by name (exit 2).
#[test]
fn nested_columns_through_ndjson_filters_and_alter() {
    let schema = "id bigint not null, tags list<varchar>, payload struct<user struct<id bigint not null, name varchar>, raw binary>, \
                  attrs map<varchar, list<int>>, emb float[3]";
    let t = TempTable::create_with(schema);
    let rows = r#"{"id": 1, "tags": ["a", "b"], "payload": {"user": {"id": 7, "name": "ann"}, "raw": "00ff"}, "attrs": {"x": [1, 2]}, "emb": [0.5, 1, -2.25]}
{"id": 2, "tags": null, "payload": null, "attrs": null, "emb": null}
{"id": 3, "tags": [null, "c"], "payload": {"user": null}, "attrs": {"y": null, "z": []}, "emb": [1, null, 3]}
"#;
    ok(&["append", &t.uri, &t.file("in.ndjson", rows)]);
    let json = ok(&["scan", &t.uri, "--format", "json"]);
    assert!(json.contains(r#""payload":{"user":{"id":7,"name":"ann"},"raw":"00ff"}"#), "{json}");
    let copy = TempTable::create_with(schema);
    ok(&["append", &copy.uri, &t.file("out.ndjson", &json)]);
    assert_eq!(ok(&["scan", &copy.uri, "--format", "json"]), json, "NDJSON re-imports as itself");
    for (filter, n) in [("payload.user.id = 7", "1"), ("array_has(tags, 'c')", "1"), ("emb[3] = 3", "1"), ("attrs['x'][2] = 2", "1")] {
        assert_eq!(ok(&["count", &t.uri, "--where", filter]).trim(), n, "{filter}");
    }
    let sql = ok(&["sql", &t.uri, "select payload.user.name as who from t where cardinality(tags) = 2 order by id"]);
    assert!(sql.contains("ann"), "{sql}");
    ok(&[
        "update",
        &t.uri,
        "--set",
        "payload = named_struct('user', named_struct('id', 9, 'name', 'zed'), 'raw', NULL)",
        "--where",
        "id = 2",
    ]);
    assert_eq!(ok(&["count", &t.uri, "--where", "payload.user.name = 'zed'"]).trim(), "1");
    // SET on a struct's field keeps the struct's other fields.
    ok(&["update", &t.uri, "--set", "payload.user.name = upper(payload.user.name)", "--set", "payload.raw = NULL", "--where", "id = 1"]);
    assert_eq!(ok(&["count", &t.uri, "--where", "payload.user.name = 'ANN' and payload.user.id = 7 and payload.raw is null"]).trim(), "1");
    let (code, _, stderr) = run(&["update", &t.uri, "--set", "payload.user.id = NULL", "--where", "id = 1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("NULL in id"), "{stderr}");
    ok(&["alter", &t.uri, "add-column", "payload.user.email varchar"]);
    ok(&["alter", &t.uri, "rename-column", "payload.user.name", "full_name"]);
    assert!(
        ok(&["schema", &t.uri]).contains("payload struct<user struct<id bigint not null, full_name varchar, email varchar>, raw binary>")
    );
    assert_eq!(ok(&["count", &t.uri, "--where", "payload.user.full_name = 'ANN' and payload.user.email is null"]).trim(), "1");
    let (code, _, stderr) = run(&["append", &t.uri, &t.file("in.csv", "id,tags\n4,x\n")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("column 'tags'") && stderr.contains("NDJSON"), "{stderr}");
    let (code, _, stderr) = run(&["scan", &t.uri, "--format", "csv"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("column 'tags' is nested"), "{stderr}");
    let (code, _, stderr) = run(&["merge", &t.uri, &t.file("m.ndjson", r#"{"id": 1, "tags": ["a"]}"#), "--on", "tags"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("'tags' is list<varchar>: merge keys are flat columns"), "{stderr}");
}

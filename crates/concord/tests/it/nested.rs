//! Nested columns (FORMAT.md §6): lists, structs, maps and vectors store their values
//! exactly, with NULL at every level, read back as their own Arrow types, filter on
//! nested fields and refuse what does not fit.

use std::io::Cursor;
use std::sync::Arc;

use concord::arrow::array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use concord::arrow::datatypes::{DataType, Field as ArrowField};
use concord::{CommitOptions, Env, ScanOptions, Schema, Table};

use crate::conformance::local_backends;

const SCHEMA: &str =
    "id bigint not null, tags list<varchar>, payload struct<user struct<id bigint not null, name varchar>, at timestamp>, \
                      attrs map<varchar, list<int>>, emb float[3]";

/// Rows with NULL at every level: a NULL list, a list holding a NULL, an empty list; a
/// NULL struct, a struct with a NULL struct field, a NULL leaf; a NULL map, a map whose
/// value is NULL; a NULL vector and a vector holding a NULL.
const ROWS: &str = r#"
{"id": 1, "tags": ["a", "b"], "payload": {"user": {"id": 7, "name": "ann"}, "at": "2024-01-02T03:04:05.123456Z"}, "attrs": {"x": [1, 2]}}
{"id": 2, "tags": null, "payload": null, "attrs": null}
{"id": 3, "tags": [null, "c"], "payload": {"user": null, "at": null}, "attrs": {"y": null, "z": []}}
{"id": 4, "tags": [], "payload": {"user": {"id": 8, "name": null}, "at": null}, "attrs": {}}
"#;

fn rows(schema: &Schema) -> RecordBatch {
    let arrow = schema.arrow_schema();
    let without_emb = Arc::new(arrow.project(&[0, 1, 2, 3]).unwrap());
    let mut reader = concord::arrow::json::ReaderBuilder::new(without_emb).build(Cursor::new(ROWS.trim())).unwrap();
    let batch = reader.next().unwrap().unwrap();
    let DataType::FixedSizeList(item, 3) = arrow.field(4).data_type().clone() else { panic!("emb is a vector") };
    let values = Float32Array::from(vec![
        Some(0.5),
        Some(-1.0),
        Some(2.25),
        None,
        None,
        None,
        Some(1.0),
        None,
        Some(3.0),
        Some(0.0),
        Some(0.0),
        Some(0.0),
    ]);
    let nulls = concord::arrow::buffer::NullBuffer::from(vec![true, false, true, true]);
    let emb: ArrayRef = Arc::new(FixedSizeListArray::try_new(item, 3, Arc::new(values), Some(nulls)).unwrap());
    let mut columns = batch.columns().to_vec();
    columns.push(emb);
    RecordBatch::try_new(arrow, columns).unwrap()
}

/// Appended and read back equal, schema included; the manifest keeps every nested
/// field's id and each data file carries them.
#[tokio::test]
async fn nested_values_round_trip_with_nulls_at_every_level() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse(SCHEMA).unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let input = rows(&schema);
    table.append(std::slice::from_ref(&input), &CommitOptions::default()).await.unwrap();
    let table = table.latest().await.unwrap();
    assert_eq!(table.schema(), &schema);
    let read = table.scan(ScanOptions::default()).await.unwrap().collect().await.unwrap();
    let read = concord::arrow::compute::concat_batches(&input.schema(), &read).unwrap();
    assert_eq!(read, input);
    for (filter, ids) in [
        ("payload.user.id = 7", vec![1]),
        ("payload['user']['name'] IS NULL AND payload IS NOT NULL", vec![3, 4]),
        ("array_has(tags, 'c')", vec![3]),
        ("cardinality(tags) = 0", vec![4]),
        ("emb[2] = -1.0", vec![1]),
    ] {
        let scan = table.scan(ScanOptions { filter: Some(filter.into()), ..Default::default() }).await.unwrap();
        let batches = scan.collect().await.unwrap();
        let got: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<concord::arrow::array::Int64Array>().unwrap().values().to_vec())
            .collect();
        assert_eq!(got, ids, "{filter}");
    }
}

/// Typed input of another shape goes in when its values fit: a struct's fields in
/// another order, large lists, a list of exactly the vector's length; a NULL in a
/// field that is not nullable, a list of another length and a value that does not fit
/// the leaf's type are refused, naming the column.
#[tokio::test]
async fn nested_input_is_matched_by_name_and_checked_by_value() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("p struct<a bigint not null, b varchar>, v float[2]").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let input = |json: &str| {
        let fields = vec![
            ArrowField::new(
                "p",
                DataType::Struct(vec![ArrowField::new("b", DataType::Utf8, true), ArrowField::new("a", DataType::Int32, true)].into()),
                true,
            ),
            ArrowField::new("v", DataType::LargeList(Arc::new(ArrowField::new("item", DataType::Float64, true))), true),
        ];
        let mut reader = concord::arrow::json::ReaderBuilder::new(Arc::new(concord::arrow::datatypes::Schema::new(fields)))
            .build(Cursor::new(json.to_string()))
            .unwrap();
        reader.next().unwrap().unwrap()
    };
    let ok = input(r#"{"p": {"b": "x", "a": 1}, "v": [0.5, 1.5]}"#);
    table.append(&[ok], &CommitOptions::default()).await.unwrap();
    for (json, says) in [
        (r#"{"p": {"b": "x", "a": null}, "v": [0.5, 1.5]}"#, "NULL"),
        (r#"{"p": {"b": "x", "a": 1}, "v": [0.5]}"#, "a list of 1 values"),
        (r#"{"p": {"b": "x", "a": 1}, "v": [16777217.0, 1.5]}"#, "16777217"),
    ] {
        let err = match table.append(&[input(json)], &CommitOptions::default()).await {
            Ok(_) => panic!("{json} was taken"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(says), "{json}: {err}");
    }
    let read = table.latest().await.unwrap().scan(ScanOptions::default()).await.unwrap().collect().await.unwrap();
    assert_eq!(read.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
}

/// Nested schema evolution: struct fields added, dropped, renamed and widened by path
/// (`p.a`), by field id, as metadata only: files written before read the new schema.
#[tokio::test]
async fn struct_fields_evolve_by_id_without_rewriting_files() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("id bigint, p struct<a tinyint, b varchar>, l list<struct<x int>>").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let o = CommitOptions::default();
    let json = r#"{"id": 1, "p": {"a": 5, "b": "old"}, "l": [{"x": 1}]}"#;
    let mut reader = concord::arrow::json::ReaderBuilder::new(schema.arrow_schema()).build(Cursor::new(json)).unwrap();
    table.append(&[reader.next().unwrap().unwrap()], &o).await.unwrap();
    table.add_column("p.c double", &o).await.unwrap();
    table.add_column("l.element.y varchar", &o).await.unwrap();
    table.rename_column("p.b", "bee", &o).await.unwrap();
    table.widen_column("p.a", "bigint", &o).await.unwrap();
    table.drop_column("l.element.x", &o).await.unwrap();
    let t = table.latest().await.unwrap();
    assert_eq!(t.schema().definition(), "id bigint, p struct<a bigint, bee varchar, c double>, l list<struct<y varchar>>");
    let ids: Vec<u32> = t.schema().fields.iter().flat_map(|f| f.column_type.children()).map(|f| f.id).collect();
    assert_eq!(ids, vec![3, 4, 7, 5], "ids stay with their fields; new ones are never reused");
    let rows = t.scan(ScanOptions::default()).await.unwrap().collect().await.unwrap();
    let mut out = Vec::new();
    let mut writer = concord::arrow::json::LineDelimitedWriter::new(&mut out);
    writer.write_batches(&rows.iter().collect::<Vec<_>>()).unwrap();
    writer.finish().unwrap();
    assert_eq!(String::from_utf8(out).unwrap().trim(), r#"{"id":1,"p":{"a":5,"bee":"old"},"l":[{}]}"#);
    assert_eq!(t.count(Some("p.bee = 'old' and p.a = 5")).await.unwrap(), 1);
    for (bad, says) in
        [("p.a.z int", "not a struct"), ("p.d int not null", "nullable and has no default"), ("p.c int", "already has a column")]
    {
        let err = t.add_column(bad, &o).await.unwrap_err().to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = t.drop_column("l.element", &o).await.unwrap_err().to_string();
    assert!(err.contains("only columns and struct fields"), "{err}");
    t.drop_column("l.element.y", &o).await.unwrap_err();
    assert!(matches!(t.drop_column("p.nope", &o).await, Err(concord::WriteError::Alter(_))));
    // Beside a flat column, a dotted name is a new column of that name (as before nested types).
    t.add_column("id.x int", &o).await.unwrap();
    assert!(t.latest().await.unwrap().schema().field("id.x").is_some());
}

/// The conflict rules over nested changes: ours prepared on the same version as the
/// winner, committed after it.
#[tokio::test]
async fn concurrent_nested_changes_rebase_or_conflict_by_rule() {
    use concord::{CommitError, Write, WriteError};
    let def = "id bigint, p struct<a tinyint, b varchar>";
    let write = |sql: &str| -> Write {
        let (kind, arg) = sql.split_once(' ').unwrap();
        match kind {
            "add" => Write::AddColumn { definition: arg.into() },
            "drop" => Write::DropColumn { name: arg.into() },
            "rename" => {
                let (from, to) = arg.split_once(' ').unwrap();
                Write::RenameColumn { from: from.into(), to: to.into() }
            }
            "widen" => {
                let (name, to) = arg.split_once(' ').unwrap();
                Write::WidenColumn { name: name.into(), to: to.into() }
            }
            "delete" => Write::Delete { filter: arg.into() },
            _ => {
                let schema = Schema::parse(def).unwrap();
                let mut reader =
                    concord::arrow::json::ReaderBuilder::new(schema.arrow_schema()).build(Cursor::new(arg.to_string())).unwrap();
                Write::Append { input: (&[reader.next().unwrap().unwrap()]).into() }
            }
        }
    };
    let append = r#"append {"id": 2, "p": {"a": 1, "b": "x"}}"#;
    let cases: [(&str, &str, bool); 10] = [
        ("add p.email varchar", "add p.email bigint", false),
        ("add p.email varchar", "drop p", false),
        ("add p.email varchar", "add p.phone varchar", true),
        (append, "add p.email varchar", true),
        (append, "rename p.a aa", true),
        (append, "widen p.a bigint", true),
        (append, "drop p.b", false),
        ("delete p.a = 1", "rename p.a aa", false),
        ("delete p.a = 1", "add p.c int", true),
        ("rename p.a x", "rename p.a y", false),
    ];
    for (ours, theirs, rebases) in cases {
        let f = local_backends().into_iter().next().unwrap();
        let table = Table::create(f.location.clone(), Env::system(), Schema::parse(def).unwrap()).await.unwrap();
        let mine = table.prepare(write(ours)).await.unwrap();
        let winner = table.prepare(write(theirs)).await.unwrap();
        table.commit(&winner, &CommitOptions::default()).await.unwrap();
        let outcome = table.commit(&mine, &CommitOptions::default()).await;
        match (rebases, &outcome) {
            (true, Ok(_)) => {}
            (false, Err(WriteError::Commit(CommitError::Incompatible { .. }))) => {}
            _ => panic!(
                "ours '{ours}' over theirs '{theirs}': expected {}, got {outcome:?}",
                if rebases { "a rebase" } else { "incompatible" }
            ),
        }
    }
}

/// Struct leaves keep statistics: a filter on `p.a` or `p.u.k` opens only the fragments
/// that may match; a NULL struct counts as NULL leaves; a field added later (no
/// statistics in older files) prunes nothing and finds its rows.
#[tokio::test]
async fn statistics_of_struct_leaves_prune_fragments() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("id bigint, p struct<a bigint, u struct<k decimal(10, 2)>>, tags list<int>").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    for json in [
        r#"{"id": 1, "p": {"a": 1, "u": {"k": 1.50}}, "tags": [1]}"#,
        r#"{"id": 2, "p": {"a": 5, "u": {"k": 200.25}}, "tags": [5]}"#,
        r#"{"id": 3, "p": null, "tags": null}"#,
    ] {
        let mut reader = concord::arrow::json::ReaderBuilder::new(schema.arrow_schema()).build(Cursor::new(json)).unwrap();
        table.append(&[reader.next().unwrap().unwrap()], &CommitOptions::default()).await.unwrap();
    }
    table.add_column("p.b varchar", &CommitOptions::default()).await.unwrap();
    let table = table.latest().await.unwrap();
    for (filter, rows, opened) in [
        ("p.a = 5", 1, 1),
        ("p.u.k > 100", 1, 1),
        ("p.a >= 1 and p.u.k < 2", 1, 1),
        ("p.a is null", 1, 1),
        ("p.b is null", 3, 3),
        ("p.b = 'x'", 0, 2), // the third file has no p at all (all NULL): its leaves are NULL
        ("array_has(tags, 5)", 1, 3),
    ] {
        let scan = table.scan(ScanOptions { filter: Some(filter.into()), ..Default::default() }).await.unwrap();
        let metrics = scan.metrics_handle();
        let batches = scan.collect().await.unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), rows, "{filter}");
        let m = *metrics.lock().unwrap();
        assert_eq!((m.fragments_total, m.files_opened), (3, opened), "{filter}: {m:?}");
    }
}

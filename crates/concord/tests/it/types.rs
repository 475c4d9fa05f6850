//! Column types (FORMAT.md §2): every type stores its values exactly and reads back as
//! its own Arrow type; statistics prune on the new ones; values that do not fit are
//! refused.

use std::sync::Arc;

use concord::arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Decimal256Array, FixedSizeBinaryArray, Float32Array, Float64Array,
    Int16Array, Int32Array, Int64Array, Int8Array, RecordBatch, StringArray, Time64MicrosecondArray, TimestampMicrosecondArray,
    TimestampNanosecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use concord::arrow::datatypes::i256;
use concord::{ColumnType, CommitOptions, Env, ScanOptions, Schema, Table};

use crate::conformance::local_backends;

/// One column of each type, as a schema string.
pub(crate) fn every_type() -> String {
    ColumnType::ALL.iter().enumerate().map(|(i, t)| format!("c{i} {t}")).collect::<Vec<_>>().join(", ")
}

/// Three rows of every type: each type's smallest, a NULL, and its largest (or a
/// typical value).
pub(crate) fn every_type_rows(schema: &Schema) -> RecordBatch {
    let arrow = schema.arrow_schema();
    let columns: Vec<ArrayRef> = ColumnType::ALL
        .iter()
        .map(|t| -> ArrayRef {
            match t {
                ColumnType::Boolean => Arc::new(BooleanArray::from(vec![Some(false), None, Some(true)])),
                ColumnType::Tinyint => Arc::new(Int8Array::from(vec![Some(i8::MIN), None, Some(i8::MAX)])),
                ColumnType::Smallint => Arc::new(Int16Array::from(vec![Some(i16::MIN), None, Some(i16::MAX)])),
                ColumnType::Int => Arc::new(Int32Array::from(vec![Some(i32::MIN), None, Some(i32::MAX)])),
                ColumnType::Bigint => Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(i64::MAX)])),
                ColumnType::Utinyint => Arc::new(UInt8Array::from(vec![Some(0), None, Some(u8::MAX)])),
                ColumnType::Usmallint => Arc::new(UInt16Array::from(vec![Some(0), None, Some(u16::MAX)])),
                ColumnType::Uint => Arc::new(UInt32Array::from(vec![Some(0), None, Some(u32::MAX)])),
                ColumnType::Ubigint => Arc::new(UInt64Array::from(vec![Some(0), None, Some(u64::MAX)])),
                ColumnType::Float => Arc::new(Float32Array::from(vec![Some(f32::MIN), None, Some(0.1)])),
                ColumnType::Double => Arc::new(Float64Array::from(vec![Some(-0.0), None, Some(f64::MAX)])),
                ColumnType::Decimal { precision: 15, scale: 2 } => Arc::new(
                    Decimal128Array::from(vec![Some(-999_999_999_999_999), None, Some(12_345)]).with_precision_and_scale(15, 2).unwrap(),
                ),
                ColumnType::Varchar => Arc::new(StringArray::from(vec![Some(""), None, Some("é")])),
                ColumnType::Binary => Arc::new(BinaryArray::from(vec![Some(b"".as_ref()), None, Some(b"\x00\xff".as_ref())])),
                ColumnType::Fixed(16) | ColumnType::Uuid => Arc::new(
                    FixedSizeBinaryArray::try_from_sparse_iter_with_size([Some([0u8; 16]), None, Some([0xab; 16])].into_iter(), 16)
                        .unwrap(),
                ),
                ColumnType::Date => Arc::new(Date32Array::from(vec![Some(-719_162), None, Some(2_932_896)])),
                ColumnType::Time => Arc::new(Time64MicrosecondArray::from(vec![Some(0), None, Some(86_399_999_999)])),
                ColumnType::Timestamp => Arc::new(
                    TimestampMicrosecondArray::from(vec![Some(i64::MIN + 1), None, Some(1_700_000_000_123_456)]).with_timezone("UTC"),
                ),
                ColumnType::TimestampNs => {
                    Arc::new(TimestampNanosecondArray::from(vec![Some(-1), None, Some(1_700_000_000_123_456_789)]).with_timezone("UTC"))
                }
                ColumnType::TimestampNtz => Arc::new(TimestampMicrosecondArray::from(vec![Some(-1), None, Some(1_700_000_000_123_456)])),
                ColumnType::TimestampNtzNs => {
                    Arc::new(TimestampNanosecondArray::from(vec![Some(-1), None, Some(1_700_000_000_123_456_789)]))
                }
                other => panic!("no rows for {other}"),
            }
        })
        .collect();
    RecordBatch::try_new(arrow, columns).unwrap()
}

/// A table of every type takes rows of each and reads them back equal, schema
/// included (a `uuid` column reads back as Arrow's `arrow.uuid` extension type).
#[tokio::test]
async fn every_type_round_trips_exactly_with_its_arrow_type() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse(&every_type()).unwrap();
    assert_eq!(Schema::parse(&schema.definition()).unwrap(), schema, "the definition parses back");
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let rows = every_type_rows(&schema);
    table.append(std::slice::from_ref(&rows), &CommitOptions::default()).await.unwrap();
    let table = table.latest().await.unwrap();
    assert_eq!(table.schema(), &schema, "the manifest keeps every type");
    let scan = table.scan(ScanOptions::default()).await.unwrap();
    assert_eq!(scan.schema(), rows.schema());
    let read = scan.collect().await.unwrap();
    let read = concord::arrow::compute::concat_batches(&rows.schema(), &read).unwrap();
    assert_eq!(read, rows);
    let uuid = read.schema().field(ColumnType::ALL.iter().position(|t| *t == ColumnType::Uuid).unwrap()).clone();
    assert_eq!(uuid.metadata().get("ARROW:extension:name").map(String::as_str), Some("arrow.uuid"));
}

/// Statistics of the new types prune fragments: a filter on a decimal, a nanosecond
/// timestamp or a small integer opens only the file that may match.
#[tokio::test]
async fn statistics_of_decimals_and_nanosecond_timestamps_prune() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("price decimal(15, 2), at timestamp_ns, n tinyint, big decimal(50, 10)").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    for k in 0..3i64 {
        let price = Decimal128Array::from(vec![k as i128 * 1000 + 1, k as i128 * 1000 + 2]).with_precision_and_scale(15, 2).unwrap();
        let at = TimestampNanosecondArray::from(vec![k * 1_000_000_000 + 1, k * 1_000_000_000 + 2]).with_timezone("UTC");
        let n = Int8Array::from(vec![k as i8 * 10, k as i8 * 10 + 1]);
        let big = Decimal256Array::from(vec![i256::from_i128(k as i128), i256::from_i128(k as i128 + 1)])
            .with_precision_and_scale(50, 10)
            .unwrap();
        let batch = RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(price), Arc::new(at), Arc::new(n), Arc::new(big)]).unwrap();
        table.append(&[batch], &CommitOptions::default()).await.unwrap();
    }
    let table = table.latest().await.unwrap();
    for (filter, rows) in [
        ("price = 20.01", 1),
        ("price > 10.02", 2),
        ("at = '1970-01-01T00:00:02.000000001Z'", 1),
        ("n >= 20", 2),
        ("big = 0.0000000003", 1),
    ] {
        let scan = table.scan(ScanOptions { filter: Some(filter.into()), ..Default::default() }).await.unwrap();
        let metrics = scan.metrics_handle();
        let batches = scan.collect().await.unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), rows, "{filter}");
        let m = *metrics.lock().unwrap();
        assert_eq!((m.fragments_total, m.files_opened), (3, 1), "{filter}: {m:?}");
    }
}

/// Typed input is checked by value: a decimal with more digits after its point than
/// the column's scale, a negative number into an unsigned column, a zoned timestamp
/// into a zone-less one, nanoseconds into microseconds: each refused, naming the value.
#[tokio::test]
async fn values_that_do_not_fit_the_new_types_are_refused() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("d decimal(5, 2), u uint, w timestamp_ntz, t time").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let arrow = concord::arrow::datatypes::Schema::new(vec![
        concord::arrow::datatypes::Field::new("d", concord::arrow::datatypes::DataType::Decimal128(6, 3), true),
        concord::arrow::datatypes::Field::new("u", concord::arrow::datatypes::DataType::Int64, true),
    ]);
    let batch = |d: i128, u: i64| {
        RecordBatch::try_new(
            Arc::new(arrow.clone()),
            vec![Arc::new(Decimal128Array::from(vec![d]).with_precision_and_scale(6, 3).unwrap()), Arc::new(Int64Array::from(vec![u]))],
        )
        .unwrap()
    };
    // 1.230 fits decimal(5, 2) exactly; 1.234 does not; -1 is no uint.
    table.append(&[batch(1230, 7)], &CommitOptions::default()).await.unwrap();
    let err = table.append(&[batch(1234, 7)], &CommitOptions::default()).await.unwrap_err().to_string();
    assert!(err.contains("1.234") && err.contains("decimal(5, 2)"), "{err}");
    let err = table.append(&[batch(1000, -1)], &CommitOptions::default()).await.unwrap_err().to_string();
    assert!(err.contains("-1") && err.contains("uint"), "{err}");
    let zoned = concord::arrow::datatypes::Schema::new(vec![concord::arrow::datatypes::Field::new(
        "w",
        concord::arrow::datatypes::DataType::Timestamp(concord::arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into())),
        true,
    )]);
    let zoned =
        RecordBatch::try_new(Arc::new(zoned), vec![Arc::new(TimestampMicrosecondArray::from(vec![0]).with_timezone("UTC"))]).unwrap();
    let err = table.append(&[zoned], &CommitOptions::default()).await.unwrap_err().to_string();
    assert!(err.contains("timestamp_ntz"), "{err}");
    let table = table.latest().await.unwrap();
    assert_eq!(table.count(None).await.unwrap(), 1, "only the exact append landed");
}

/// Widening changes a column's type without rewriting a file: values written before
/// read back as the same values of the wider type, new rows take the wider range,
/// statistics of a widened float never prune a row that matches (its bound text "0.1"
/// is not the double 0.100000001...), and a change that is not a widening is refused.
#[tokio::test]
async fn widened_columns_read_old_files_as_the_same_values() {
    let f = local_backends().into_iter().next().unwrap();
    let schema = Schema::parse("n int, r float, d decimal(10, 2), u uint, s tinyint").unwrap();
    let table = Table::create(f.location.clone(), Env::system(), schema.clone()).await.unwrap();
    let old = RecordBatch::try_new(
        schema.arrow_schema(),
        vec![
            Arc::new(Int32Array::from(vec![i32::MIN, 7])),
            Arc::new(Float32Array::from(vec![0.1f32, -2.5])),
            Arc::new(Decimal128Array::from(vec![12_345, -1]).with_precision_and_scale(10, 2).unwrap()),
            Arc::new(UInt32Array::from(vec![u32::MAX, 0])),
            Arc::new(Int8Array::from(vec![-128, 127])),
        ],
    )
    .unwrap();
    table.append(&[old], &CommitOptions::default()).await.unwrap();
    let o = CommitOptions::default();
    for (column, to) in [("n", "bigint"), ("r", "double"), ("d", "decimal(20, 2)"), ("u", "bigint"), ("s", "smallint")] {
        table.widen_column(column, to, &o).await.unwrap();
    }
    // tinyint -> smallint -> int: a second widening of one column.
    table.widen_column("s", "int", &o).await.unwrap();
    for (column, to) in [("n", "int"), ("n", "double"), ("d", "decimal(20, 3)"), ("u", "int"), ("r", "decimal(20, 2)")] {
        let err = table.widen_column(column, to, &o).await.unwrap_err().to_string();
        assert!(err.contains("does not widen"), "{column} to {to}: {err}");
    }
    let table = table.latest().await.unwrap();
    assert_eq!(table.schema().definition(), "n bigint, r double, d decimal(20, 2), u bigint, s int");
    let wide = table.schema().arrow_schema();
    let new = RecordBatch::try_new(
        wide.clone(),
        vec![
            Arc::new(Int64Array::from(vec![i64::MAX])),
            Arc::new(Float64Array::from(vec![0.1])),
            Arc::new(Decimal128Array::from(vec![10i128.pow(19)]).with_precision_and_scale(20, 2).unwrap()),
            Arc::new(Int64Array::from(vec![-1])),
            Arc::new(Int32Array::from(vec![100_000])),
        ],
    )
    .unwrap();
    table.append(&[new], &o).await.unwrap();
    let table = table.latest().await.unwrap();
    let read = concord::arrow::compute::concat_batches(&wide, &table.scan(ScanOptions::default()).await.unwrap().collect().await.unwrap())
        .unwrap();
    let expected = RecordBatch::try_new(
        wide.clone(),
        vec![
            Arc::new(Int64Array::from(vec![i32::MIN as i64, 7, i64::MAX])),
            Arc::new(Float64Array::from(vec![0.1f32 as f64, -2.5, 0.1])),
            Arc::new(Decimal128Array::from(vec![12_345, -1, 10i128.pow(19)]).with_precision_and_scale(20, 2).unwrap()),
            Arc::new(Int64Array::from(vec![u32::MAX as i64, 0, -1])),
            Arc::new(Int32Array::from(vec![-128, 127, 100_000])),
        ],
    )
    .unwrap();
    assert_eq!(read, expected);
    // 0.1f32 is 0.100000001490116..., greater than the double 0.1: it matches.
    assert_eq!(table.count(Some("r > 0.1")).await.unwrap(), 1);
    assert_eq!(table.count(Some("r = 0.1")).await.unwrap(), 1);
    assert_eq!(table.count(Some("d = 123.45 and n = -2147483648 and u = 4294967295")).await.unwrap(), 1);
}

/// Two writers widen one column to different types at once: whichever commits second
/// rebases if the winner's type still widens to its own, and is incompatible (naming
/// the column and the winner's type) if the winner went wider than it asks.
#[tokio::test]
async fn concurrent_widenings_rebase_or_conflict_by_type() {
    let f = local_backends().into_iter().next().unwrap();
    let table = Table::create(f.location.clone(), Env::system(), Schema::parse("s tinyint").unwrap()).await.unwrap();
    let o = CommitOptions::default();
    let to_int = table.prepare(concord::Write::WidenColumn { name: "s".into(), to: "int".into() }).await.unwrap();
    let to_bigint = table.prepare(concord::Write::WidenColumn { name: "s".into(), to: "bigint".into() }).await.unwrap();
    table.commit(&to_int, &o).await.unwrap();
    let info = table.commit(&to_bigint, &o).await.unwrap();
    assert_eq!(info.rebased_over, vec![1]);
    assert_eq!(table.latest().await.unwrap().schema().definition(), "s bigint");
    let g = local_backends().into_iter().nth(1).unwrap();
    let table = Table::create(g.location.clone(), Env::system(), Schema::parse("s tinyint").unwrap()).await.unwrap();
    let to_int = table.prepare(concord::Write::WidenColumn { name: "s".into(), to: "int".into() }).await.unwrap();
    let to_bigint = table.prepare(concord::Write::WidenColumn { name: "s".into(), to: "bigint".into() }).await.unwrap();
    table.commit(&to_bigint, &o).await.unwrap();
    let err = table.commit(&to_int, &o).await.unwrap_err().to_string();
    assert!(err.contains("changed column 's' from tinyint to bigint"), "{err}");
    assert_eq!(table.latest().await.unwrap().schema().definition(), "s bigint");
}

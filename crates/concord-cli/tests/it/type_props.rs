//! A property test of the column types: seeded random schemas (every type, random
//! parameters, lists, structs, maps and vectors nested to depth 3, random nulls at
//! every level) and rows; appended through the library they read back equal, and what
//! `scan --format json` prints (and, for flat schemas, `--format csv`) appends into a
//! fresh table of the same schema as the same rows.

use std::sync::Arc;

use concord::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Decimal256Array, FixedSizeBinaryArray, FixedSizeListArray,
    Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, ListArray, MapArray, RecordBatch, StringArray, StructArray,
    Time64MicrosecondArray, TimestampMicrosecondArray, TimestampNanosecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use concord::arrow::buffer::{NullBuffer, OffsetBuffer};
use concord::arrow::datatypes::{i256, DataType};
use concord::{ColumnType, CommitOptions, Env, RandomSource, ScanOptions, Schema, StdRandom, Table};

use crate::common::{location, ok, TempTable};

/// Seeds run on every CI run (a failing seed is printed; keep it here);
/// `CONCORD_TYPE_SEEDS=a..b` runs others. Seed 10 found that a float exactly halfway
/// between two shortest decimal forms (269.390625) printed as one and was refused as
/// the other.
const SEEDS: std::ops::Range<u64> = 1..13;

fn seeds() -> std::ops::Range<u64> {
    let given = std::env::var("CONCORD_TYPE_SEEDS").ok();
    let parsed = given.as_deref().and_then(|s| s.split_once("..")).and_then(|(a, b)| Some(a.parse().ok()?..b.parse().ok()?));
    parsed.unwrap_or(SEEDS)
}
const ROWS: usize = 40;

struct Gen(StdRandom);

impl Gen {
    fn below(&self, n: u64) -> u64 {
        self.0.next_u64() % n
    }
    fn int(&self, lo: i64, hi: i64) -> i64 {
        lo + (self.0.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }
    fn valid(&self, nulls: bool) -> bool {
        !nulls || self.below(4) != 0
    }

    /// A random type; nested ones (to `depth` more levels) one time in three.
    fn column_type(&self, depth: u32) -> ColumnType {
        if depth > 0 && self.below(3) == 0 {
            let field = |name: &str| {
                let nullable = self.below(3) != 0;
                let t = self.column_type(depth - 1);
                format!("{name} {t}{}", if nullable { "" } else { " not null" })
            };
            let text = match self.below(4) {
                0 => format!("list<{}>", field("").trim_start()),
                1 => format!("struct<{}>", (0..1 + self.below(3)).map(|i| field(&format!("f{i}"))).collect::<Vec<_>>().join(", ")),
                2 => format!("map<{}, {}>", ["varchar", "int", "bigint"][self.below(3) as usize], field("").trim_start()),
                _ => format!("{}[{}]", field("").trim_start(), 1 + self.below(4)),
            };
            return text.parse().unwrap();
        }
        match self.below(22) {
            11 => {
                let precision = 1 + self.below(76) as u8;
                ColumnType::Decimal { precision, scale: self.below(u64::from(precision) + 1) as u8 }
            }
            14 => ColumnType::Fixed(1 + self.below(16) as u16),
            i => ColumnType::ALL[i as usize].clone(),
        }
    }

    /// `n` values of type `t`, some NULL when `nulls`.
    fn values(&self, t: ColumnType, nulls: bool) -> ArrayRef {
        self.values_n(t, nulls, ROWS)
    }

    fn nulls(&self, n: usize, nulls: bool) -> Option<NullBuffer> {
        nulls.then(|| NullBuffer::from((0..n).map(|_| self.valid(true)).collect::<Vec<bool>>()))
    }

    fn values_n(&self, t: ColumnType, nulls: bool, n: usize) -> ArrayRef {
        if !t.is_nested() {
            return self.flat(t, nulls, n);
        }
        let valid = self.nulls(n, nulls);
        let is_valid = |i: usize| valid.as_ref().is_none_or(|v| v.is_valid(i));
        match (t.arrow_type(), t.children().as_slice()) {
            (DataType::List(item), [element]) => {
                let lengths: Vec<usize> = (0..n).map(|i| if is_valid(i) { self.below(4) as usize } else { 0 }).collect();
                let values = self.values_n(element.column_type.clone(), element.nullable, lengths.iter().sum());
                Arc::new(ListArray::new(item, OffsetBuffer::from_lengths(lengths), values, valid))
            }
            (DataType::FixedSizeList(item, size), [element]) => {
                let values = self.values_n(element.column_type.clone(), element.nullable, n * size as usize);
                Arc::new(FixedSizeListArray::new(item, size, values, valid))
            }
            (DataType::Struct(fields), children) => {
                // A NULL struct's fields are NULL where they may be (as readers rebuild them).
                let columns = children.iter().map(|c| self.values_n(c.column_type.clone(), c.nullable, n)).collect();
                Arc::new(StructArray::new(fields, columns, valid))
            }
            (DataType::Map(entries, _), [key, value]) => {
                // Keys distinct within a map (JSON objects hold a key once).
                let lengths: Vec<usize> = (0..n).map(|i| if is_valid(i) { self.below(4) as usize } else { 0 }).collect();
                let keys: ArrayRef = match key.column_type {
                    ColumnType::Varchar => {
                        Arc::new(StringArray::from(lengths.iter().flat_map(|&l| (0..l).map(|k| format!("k{k}"))).collect::<Vec<_>>()))
                    }
                    ColumnType::Int => Arc::new(Int32Array::from_iter_values(lengths.iter().flat_map(|&l| 0..l as i32))),
                    _ => Arc::new(Int64Array::from_iter_values(lengths.iter().flat_map(|&l| 0..l as i64))),
                };
                let values = self.values_n(value.column_type.clone(), value.nullable, keys.len());
                let DataType::Struct(kv) = entries.data_type().clone() else { unreachable!() };
                let entries_array = StructArray::new(kv, vec![keys, values], None);
                Arc::new(MapArray::new(entries, OffsetBuffer::from_lengths(lengths), entries_array, valid, false))
            }
            _ => unreachable!("{t}"),
        }
    }

    fn flat(&self, t: ColumnType, nulls: bool, n: usize) -> ArrayRef {
        macro_rules! prim {
            ($array:ty, $value:expr) => {
                Arc::new((0..n).map(|_| self.valid(nulls).then(|| $value)).collect::<$array>())
            };
        }
        match t {
            ColumnType::Boolean => prim!(BooleanArray, self.below(2) == 1),
            ColumnType::Tinyint => prim!(Int8Array, self.0.next_u64() as i8),
            ColumnType::Smallint => prim!(Int16Array, self.0.next_u64() as i16),
            ColumnType::Int => prim!(Int32Array, self.0.next_u64() as i32),
            ColumnType::Bigint => prim!(Int64Array, self.0.next_u64() as i64),
            ColumnType::Utinyint => prim!(UInt8Array, self.0.next_u64() as u8),
            ColumnType::Usmallint => prim!(UInt16Array, self.0.next_u64() as u16),
            ColumnType::Uint => prim!(UInt32Array, self.0.next_u64() as u32),
            ColumnType::Ubigint => prim!(UInt64Array, self.0.next_u64()),
            ColumnType::Float => prim!(Float32Array, self.int(-1_000_000, 1_000_000) as f32 / 64.0),
            ColumnType::Double => prim!(Float64Array, self.int(-1 << 40, 1 << 40) as f64 / 1e6),
            ColumnType::Decimal { precision, scale } => {
                let digits = |p: u8| (0..p.min(30)).fold(0i128, |v, _| v * 10 + self.below(10) as i128);
                let signed = |v: i128| if self.below(2) == 0 { v } else { -v };
                if precision <= 38 {
                    let a: Decimal128Array = (0..n).map(|_| self.valid(nulls).then(|| signed(digits(precision)))).collect();
                    Arc::new(a.with_precision_and_scale(precision, scale as i8).unwrap())
                } else {
                    let a: Decimal256Array =
                        (0..n).map(|_| self.valid(nulls).then(|| i256::from_i128(signed(digits(precision))))).collect();
                    Arc::new(a.with_precision_and_scale(precision, scale as i8).unwrap())
                }
            }
            ColumnType::Varchar => {
                const PIECES: [&str; 8] = ["a", "é", ",", "\"", " ", "x y", "日本", "\n"];
                prim!(StringArray, (0..self.below(5)).map(|_| PIECES[self.below(8) as usize]).collect::<String>())
            }
            ColumnType::Binary => {
                let values: Vec<Option<Vec<u8>>> =
                    (0..n).map(|_| self.valid(nulls).then(|| (0..self.below(6)).map(|_| self.0.next_u64() as u8).collect())).collect();
                Arc::new(BinaryArray::from_iter(values))
            }
            ColumnType::Fixed(_) | ColumnType::Uuid => {
                let width = if let ColumnType::Fixed(w) = t { usize::from(w) } else { 16 };
                let width = width.max(1);
                let values: Vec<Option<Vec<u8>>> =
                    (0..n).map(|_| self.valid(nulls).then(|| (0..width).map(|_| self.0.next_u64() as u8).collect())).collect();
                Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(values.into_iter(), width as i32).unwrap())
            }
            ColumnType::Date => prim!(Date32Array, self.int(-25_567, 2_932_896) as i32),
            ColumnType::Time => prim!(Time64MicrosecondArray, self.int(0, 86_399_999_999)),
            ColumnType::Timestamp => Arc::new(
                (0..n)
                    .map(|_| self.valid(nulls).then(|| self.int(-2_208_988_800_000_000, 7_258_118_400_000_000)))
                    .collect::<TimestampMicrosecondArray>()
                    .with_timezone("UTC"),
            ),
            ColumnType::TimestampNs => Arc::new(
                (0..n)
                    .map(|_| self.valid(nulls).then(|| self.0.next_u64() as i64))
                    .collect::<TimestampNanosecondArray>()
                    .with_timezone("UTC"),
            ),
            ColumnType::TimestampNtz => {
                prim!(TimestampMicrosecondArray, self.int(-2_208_988_800_000_000, 7_258_118_400_000_000))
            }
            ColumnType::TimestampNtzNs => prim!(TimestampNanosecondArray, self.0.next_u64() as i64),
            other => panic!("no values for {other}"),
        }
    }
}

/// A random schema (1 to 8 columns, an `id` first) and rows of it.
fn random_table(seed: u64) -> (Schema, RecordBatch) {
    let g = Gen(StdRandom::seeded(seed));
    let columns = 1 + g.below(8) as usize;
    let mut definition = vec!["id bigint not null".to_string()];
    let types: Vec<(ColumnType, bool)> = (0..columns).map(|_| (g.column_type(3), g.below(2) == 0)).collect();
    for (i, (t, nullable)) in types.iter().enumerate() {
        definition.push(format!("c{i} {t}{}", if *nullable { "" } else { " not null" }));
    }
    let schema = Schema::parse(&definition.join(", ")).unwrap();
    let mut arrays: Vec<ArrayRef> = vec![Arc::new(Int64Array::from((0..ROWS as i64).collect::<Vec<_>>()))];
    arrays.extend(types.iter().map(|(t, nullable)| g.values(t.clone(), *nullable)));
    let batch = RecordBatch::try_new(schema.arrow_schema(), arrays).unwrap();
    (schema, batch)
}

async fn rows_of(uri: &str) -> RecordBatch {
    let table = Table::open(location(&concord::StoreResolver::new(), uri), Env::system()).await.unwrap();
    let schema = table.schema().arrow_schema();
    let batches = table.scan(ScanOptions::default()).await.unwrap().collect().await.unwrap();
    let all = concord::arrow::compute::concat_batches(&schema, &batches).unwrap();
    // Rows in id order (files may come back in any order of fragments).
    let order = concord::arrow::compute::sort_to_indices(all.column(0), None, None).unwrap();
    concord::arrow::compute::take_record_batch(&all, &order).unwrap()
}

#[test]
fn random_schemas_round_trip_through_the_library_ndjson_and_csv() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for seed in seeds() {
        let (schema, batch) = random_table(seed);
        let t = TempTable::uncreated();
        runtime.block_on(async {
            let table = Table::create(location(&concord::StoreResolver::new(), &t.uri), Env::system(), schema.clone()).await.unwrap();
            table.append(std::slice::from_ref(&batch), &CommitOptions::default()).await.unwrap();
        });
        let read = runtime.block_on(rows_of(&t.uri));
        assert_eq!(read, batch, "seed {seed}: {} reads back as appended", schema.definition());
        let flat = schema.fields.iter().all(|f| !f.column_type.is_nested());
        for format in if flat { &["csv", "json"][..] } else { &["json"][..] } {
            let text = ok(&["scan", &t.uri, "--format", format]);
            let copy = TempTable::create_with(&schema.definition());
            ok(&["append", &copy.uri, &t.file(&format!("out-{seed}.{format}"), &text)]);
            let again = runtime.block_on(rows_of(&copy.uri));
            assert_eq!(again, batch, "seed {seed}: {} through {format}", schema.definition());
        }
    }
}

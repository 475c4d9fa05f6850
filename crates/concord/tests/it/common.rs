//! Shared test helpers for the library: tables, rows, the oracle's predicates. The
//! CLI's tests include this file too (their `common` re-exports it).

#![allow(dead_code)]

use std::path::Path;

use concord::arrow::array::RecordBatch;
use concord::{Env, Schema, StoreResolver, Table, TableLocation};
use futures::TryStreamExt;

/// The schema most tests use.
pub const SCHEMA: &str = "id bigint not null, name varchar, score double";

/// CSV text with a header and rows `id = start..start+n`, name `n<id>`, score `id/10`.
pub fn csv_rows(start: u64, n: u64) -> String {
    let mut s = String::from("id,name,score\n");
    for id in start..start + n {
        s.push_str(&format!("{id},n{id},{}\n", id as f64 / 10.0));
    }
    s
}

/// All files under `dir`, relative, sorted: to prove a failed write changed nothing.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(base, &p, out);
                } else {
                    out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Versions and manifests only (data files of failed writes may remain for cleanup).
pub fn committed_state(dir: &Path) -> Vec<String> {
    tree(dir).into_iter().filter(|p| p.starts_with("_versions/")).collect()
}

/// Library access: resolve a URI with a fresh resolver and the system environment.
pub fn location(resolver: &StoreResolver, uri: &str) -> TableLocation {
    resolver.resolve(uri).expect("uri resolves")
}

pub async fn create_table(resolver: &StoreResolver, uri: &str, schema: &str) -> Table {
    Table::create(location(resolver, uri), Env::system(), Schema::parse(schema).unwrap()).await.expect("create")
}

pub async fn open_table(resolver: &StoreResolver, uri: &str) -> Table {
    Table::open(location(resolver, uri), Env::system()).await.expect("open")
}

/// All rows of a table version, as batches.
pub async fn all_rows(table: &Table) -> Vec<RecordBatch> {
    table.scan(Default::default()).await.expect("scan").into_stream().try_collect().await.expect("rows")
}

/// The `id` column of every row, sorted, or the error that stopped the scan.
pub async fn try_ids(table: &Table) -> Result<Vec<i64>, String> {
    use concord::arrow::array::{AsArray, Int64Array};
    let scan = table.scan(Default::default()).await.map_err(|e| e.to_string())?;
    let batches: Vec<RecordBatch> = scan.into_stream().try_collect().await.map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for b in batches {
        let col: &Int64Array = b.column_by_name("id").expect("id column").as_primitive();
        out.extend(col.values().iter().copied());
    }
    out.sort_unstable();
    Ok(out)
}

/// The `id` column of every row, sorted.
pub async fn ids(table: &Table) -> Vec<i64> {
    use concord::arrow::array::{AsArray, Int64Array};
    let mut out = Vec::new();
    for b in all_rows(table).await {
        let col = b.column_by_name("id").expect("id column");
        let col: &Int64Array = col.as_primitive();
        out.extend(col.values().iter().copied());
    }
    out.sort_unstable();
    out
}

/// Writes `batch` as a Parquet file (for inputs in Parquet form).
pub fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).expect("create parquet file");
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).expect("parquet writer");
    writer.write(batch).expect("write batch");
    writer.close().expect("close parquet");
}

/// A row test on `id`: the reference oracle's meaning of a SQL predicate.
pub type RowTest = fn(i64) -> bool;

/// SQL predicates on `id` that tests delete with, and their meaning for the oracle.
pub const PREDICATES: [(&str, RowTest); 11] = [
    ("id % 2 = 0", |id| id % 2 == 0),
    ("id % 3 = 1", |id| id % 3 == 1),
    ("id % 7 = 0", |id| id % 7 == 0),
    ("id < 5", |id| id < 5),
    ("id < 20", |id| id < 20),
    ("id >= 5", |id| id >= 5),
    ("id >= 80", |id| id >= 80),
    ("id = 3", |id| id == 3),
    ("id = 4", |id| id == 4),
    ("id > 100", |id| id > 100),
    ("id >= 0", |id| id >= 0),
];

/// The oracle's meaning of `sql` (one of [`PREDICATES`]).
pub fn oracle_predicate(sql: &str) -> RowTest {
    PREDICATES.iter().find(|(p, _)| *p == sql).unwrap_or_else(|| panic!("no oracle for predicate {sql}")).1
}

/// Rows of [`SCHEMA`]'s columns: the given ids, names `n<id>`, scores equal to the ids.
pub fn rows(schema: &Schema, ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    use concord::arrow::array::{Float64Array, Int64Array, StringArray};
    let ids: Vec<i64> = ids.into_iter().collect();
    // Only these three columns, whatever else the version has (a handle opened while
    // another writer adds a column sees four).
    let arrow = schema.arrow_schema();
    let mut fields: Vec<_> = ["id", "name", "score"].iter().map(|n| arrow.field_with_name(n).expect("a SCHEMA column").clone()).collect();
    let mut columns: Vec<concord::arrow::array::ArrayRef> = vec![
        std::sync::Arc::new(Int64Array::from(ids.clone())),
        std::sync::Arc::new(StringArray::from(ids.iter().map(|i| format!("n{i}")).collect::<Vec<_>>())),
        std::sync::Arc::new(Float64Array::from(ids.iter().map(|i| *i as f64).collect::<Vec<_>>())),
    ];
    // The simulation's table also has a decimal and a nested column: derived from the id.
    if let (Ok(amount), Ok(meta)) = (arrow.field_with_name("amount"), arrow.field_with_name("meta")) {
        let json: String = ids
            .iter()
            .map(|i| format!("{{\"amount\": \"{}.{:02}\", \"meta\": {{\"k\": {i}, \"tags\": [\"n{i}\"]}}}}\n", i / 100, i % 100))
            .collect();
        let extra = std::sync::Arc::new(concord::arrow::datatypes::Schema::new(vec![amount.clone(), meta.clone()]));
        let batch = concord::arrow::json::ReaderBuilder::new(extra).build(std::io::Cursor::new(json)).unwrap().next().unwrap().unwrap();
        fields.extend([amount.clone(), meta.clone()]);
        columns.extend(batch.columns().iter().cloned());
    }
    RecordBatch::try_new(std::sync::Arc::new(concord::arrow::datatypes::Schema::new(fields)), columns).unwrap()
}

/// Appends `n` one-row fragments (ids `first..first + n`) to the table at `uri` through
/// the library: after 64 of them the table has a segment in a file of its own (format
/// 2 holds smaller ones inline in the root).
pub fn append_one_row_fragments(uri: &str, first: i64, n: i64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let table = open_table(&StoreResolver::new(), uri).await;
        for id in first..first + n {
            table.append(rows(table.schema(), [id]), &concord::CommitOptions::default()).await.expect("append");
        }
    });
}

/// Files of `dir/sub` in the order they were written (names are random UUIDs), so a
/// seed picks the same objects on every run.
pub fn files_under(dir: &Path, sub: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> =
        std::fs::read_dir(dir.join(sub)).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    out.sort_by_key(|p| (p.metadata().and_then(|m| m.modified()).ok(), p.clone()));
    out
}

/// The change feed's promise over a table's whole history: the rows of version 0 (none)
/// with each version's changes applied in turn (every preimage must match the row it
/// removes) are the rows of the latest version, row id by row id; so are they with the
/// changes of the whole range applied at once, and with its net changes. `Err`
/// describes the first violation.
pub async fn check_feed(table: &Table) -> Result<(), String> {
    use concord::changes::RowsById;
    use concord::{ChangeOptions, ScanOptions};
    let latest = table.latest().await.map_err(|e| e.to_string())?;
    let last = latest.version();
    let rows_of = |t: Table| async move {
        let scan = t.scan(ScanOptions { row_ids: true, ..ScanOptions::default() }).await.map_err(|e| e.to_string())?;
        let schema = scan.schema();
        let rows: Vec<RecordBatch> = scan.into_stream().try_collect().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((schema.clone(), RowsById::new(schema, &rows).map_err(|e| e.to_string())?))
    };
    let (schema, expected) = rows_of(latest.clone()).await?;
    // A branch's chain starts at the version it was made from, with that version's rows.
    let first = latest.history().await.map_err(|e| e.to_string())?.first().map_or(0, |v| v.version);
    let start = || async {
        match first {
            0 => RowsById::new(schema.clone(), &[]).map_err(|e| e.to_string()),
            v => Ok(rows_of(latest.checkout(v).await.map_err(|e| e.to_string())?).await?.1),
        }
    };
    let in_last_schema = ChangeOptions { schema_of: Some(last), ..ChangeOptions::default() };
    let mut stepwise = start().await?;
    for v in first + 1..=last {
        let feed = latest.changes(v - 1, Some(v), &in_last_schema).await.map_err(|e| format!("changes of version {v}: {e}"))?;
        let changes = feed.collect().await.map_err(|e| format!("changes of version {v}: {e}"))?;
        stepwise.apply(&changes).map_err(|e| format!("version {v}: {e}"))?;
    }
    if let Some(id) = stepwise.first_difference(&expected) {
        return Err(format!("row {id}: version by version, the changes do not give the latest rows"));
    }
    for net in [false, true] {
        let options = ChangeOptions { net, ..ChangeOptions::default() };
        let changes = latest.changes(first, None, &options).await.map_err(|e| e.to_string())?.collect().await.map_err(|e| e.to_string())?;
        let mut whole = start().await?;
        whole.apply(&changes).map_err(|e| format!("the whole range (net: {net}): {e}"))?;
        if let Some(id) = whole.first_difference(&expected) {
            return Err(format!("row {id}: the whole range's changes (net: {net}) do not give the latest rows"));
        }
    }
    Ok(())
}

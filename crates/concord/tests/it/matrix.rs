//! The contract's conflict matrix, cell by cell, under both isolation levels.
//!
//! For every (our operation T, winning operation W): T is prepared against version 2,
//! W is prepared and committed (version 3), then T commits. The test asserts T's
//! outcome (rebase, re-run, incompatible naming W, or abandoned for maintenance) and
//! the resulting rows, against a small reference model: W applied to the base, then T
//! applied to that (for snapshot, T's delete/update/merge touches only rows that
//! existed in its read version).

use std::sync::Arc;

use concord::arrow::array::{Array, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use concord::arrow::datatypes::Int64Type;
use concord::{Assignment, CommitError, CommitOptions, IsolationLevel, PreparedTransaction, StoreResolver, Table, Write, WriteError};

use crate::common::*;

/// `x` is an `int` so that a winner may widen it to `bigint`.
const SCHEMA: &str = "id bigint not null, x int, tag varchar";

/// One row of the model: id, x, tag, extra (the column a winner may add), and whether
/// the row existed in T's read version (snapshot's visibility).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    id: i64,
    x: Option<i64>,
    tag: Option<String>,
    extra: Option<i64>,
    seen: bool,
}

fn row(id: i64, x: i64, tag: Option<&str>) -> Row {
    Row { id, x: Some(x), tag: tag.map(str::to_string), extra: None, seen: false }
}

/// The model of a table: its rows and its column names.
#[derive(Debug, Clone)]
struct Model {
    rows: Vec<Row>,
    columns: Vec<&'static str>,
    /// Default of `extra` for rows written without it.
    extra_default: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Append,
    AppendNoTag,
    Delete,
    DeleteOnTag,
    Update,
    UpdateTag,
    Merge,
    MergeNoTag,
    Overwrite,
    Restore,
    AddColumn,
    DropColumn,
    Widen,
    Compact,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Rebase,
    Rerun,
    Incompatible,
    Abandoned,
}

use Op::*;
use Outcome::{Abandoned as A, Incompatible as I, Rebase as R, Rerun as X};

/// The winners, in the matrix's column order.
const WINNERS: [Op; 10] = [Append, Delete, Update, Merge, Overwrite, Restore, AddColumn, DropColumn, Widen, Compact];

/// The matrix under serializable: (T, outcome over each winner in `WINNERS` order).
/// T's data: append writes `tag` (the column the winner drops); the "no tag" variants
/// do not; delete/update "on tag" read or set it. Widen makes `x` (an `int`) a `bigint`:
/// rows written or read as `int` still mean the same, so everything rebases over it,
/// and it over everything (over a winner that widened `x` already it changes nothing).
const SERIALIZABLE: [(Op, [Outcome; 10]); 14] = [
    //            append delete update merge overwr restore addcol dropcol widen compact
    (Append, [R, R, R, R, R, R, R, I, R, R]),
    (AppendNoTag, [R, R, R, R, R, R, R, R, R, R]),
    (Delete, [X, R, X, X, X, X, R, R, R, X]),
    (DeleteOnTag, [X, R, X, X, X, X, R, I, R, X]),
    (Update, [X, X, X, X, X, X, R, R, R, X]),
    (UpdateTag, [X, X, X, X, X, X, R, I, R, X]),
    (Merge, [X, X, X, X, X, X, R, I, R, X]),
    (MergeNoTag, [X, X, X, X, X, X, R, R, R, X]),
    (Overwrite, [R, R, R, R, R, R, R, R, R, R]),
    (Restore, [R, R, R, R, R, R, R, R, R, R]),
    (AddColumn, [R, R, R, R, R, R, I, R, R, R]),
    (DropColumn, [R, R, R, R, R, R, R, R, R, R]),
    (Widen, [R, R, R, R, R, R, R, R, R, R]),
    (Compact, [R, X, X, X, A, A, R, R, R, A]),
];

/// Where snapshot differs: rows a winner appended or inserted are not re-examined, and
/// a delete does not chase rows an overwrite or restore replaced.
fn snapshot_outcome(ours: Op, winner: Op, serializable: Outcome) -> Outcome {
    match (ours, winner) {
        (Delete | DeleteOnTag, Append | Overwrite | Restore) => R,
        (Update | UpdateTag | Merge | MergeNoTag, Append) => R,
        _ => serializable,
    }
}

fn base_model() -> Model {
    let rows = (0..10).map(|id| Row { seen: true, ..row(id, id * 10, Some(&format!("t{id}"))) }).collect();
    Model { rows, columns: vec!["id", "x", "tag"], extra_default: None }
}

impl Model {
    fn has(&self, column: &str) -> bool {
        self.columns.contains(&column)
    }

    /// A row as this model's schema stores it (absent columns: default or NULL).
    fn fit(&self, mut r: Row) -> Row {
        if !self.has("tag") {
            r.tag = None;
        }
        r.extra = if self.has("extra") { r.extra.or(self.extra_default) } else { None };
        r
    }

    /// `op` applied as the winner (`seen` marks rows of the read version) or as T
    /// (`visible_all`: serializable, or a re-run on the whole new table).
    fn apply(&mut self, op: Op, as_ours: bool, visible_all: bool) {
        let visible = |r: &Row| visible_all || r.seen;
        match op {
            Append | AppendNoTag => {
                let tagged = op == Append;
                let new = if as_ours { [(100, 1000), (101, 1010)] } else { [(50, 500), (51, 510)] };
                for (id, x) in new {
                    let tag = format!("a{id}");
                    let r = self.fit(row(id, x, tagged.then_some(tag.as_str())));
                    self.rows.push(r);
                }
            }
            Delete | DeleteOnTag => {
                let test: Box<dyn Fn(&Row) -> bool> = match (op, as_ours) {
                    (Delete, true) => Box::new(|r| r.id % 2 == 0),
                    (DeleteOnTag, true) => Box::new(|r| r.tag.as_deref() == Some("t4")),
                    _ => Box::new(|r| r.id == 3),
                };
                self.rows.retain(|r| !(visible(r) && test(r)));
            }
            Update | UpdateTag => {
                for r in self.rows.iter_mut().filter(|r| visible(r)) {
                    match (op, as_ours) {
                        (Update, true) if r.id < 3 => r.x = r.x.map(|x| x + 1),
                        (UpdateTag, true) if r.id < 3 => r.tag = Some("u".into()),
                        (_, false) if r.id < 4 => r.x = r.x.map(|x| x * 2),
                        _ => {}
                    }
                }
            }
            Merge | MergeNoTag => {
                let source: Vec<(i64, i64, &str)> =
                    if as_ours { vec![(2, 222, "m2"), (100, 1000, "m100")] } else { vec![(2, 2000, "wm2"), (61, 610, "wm61")] };
                for (id, x, tag) in source {
                    // A replaced row keeps its identity (snapshot sees it); an inserted one is new.
                    let replaced = self.rows.iter().any(|r| r.id == id && visible(r) && r.seen);
                    self.rows.retain(|r| !(r.id == id && visible(r)));
                    let tag = (op == Merge).then_some(tag);
                    let r = Row { seen: replaced && !as_ours, ..self.fit(row(id, x, tag)) };
                    self.rows.push(r);
                }
            }
            Overwrite => {
                let new = if as_ours { vec![(300, 3000)] } else { vec![(200, 2000), (201, 2010)] };
                self.rows = new.into_iter().map(|(id, x)| self.fit(row(id, x, Some(&format!("o{id}"))))).collect();
            }
            // Version 1 holds ids 0..5 (the same rows as in the read version).
            Restore => {
                let v1 = base_model();
                self.rows = v1.rows.into_iter().filter(|r| r.id < 5).collect();
                self.columns = v1.columns;
                self.extra_default = None;
            }
            AddColumn => {
                if !self.has("extra") {
                    self.columns.push("extra");
                    self.extra_default = if as_ours { None } else { Some(5) };
                    let d = self.extra_default;
                    for r in &mut self.rows {
                        r.extra = d;
                    }
                }
            }
            DropColumn => {
                self.columns.retain(|c| *c != "tag");
                for r in &mut self.rows {
                    r.tag = None;
                }
            }
            Widen | Compact => {}
        }
    }

    fn sorted(&self) -> Vec<(i64, Option<i64>, Option<String>, Option<i64>)> {
        let mut out: Vec<_> = self.rows.iter().map(|r| (r.id, r.x, r.tag.clone(), r.extra)).collect();
        out.sort();
        out
    }
}

/// Rows of the table's current schema: id, x, tag, with tag NULL when `tagged` is false.
fn batch(table: &Table, rows: &[(i64, i64, &str)], tagged: bool) -> RecordBatch {
    let schema = table.schema().arrow_schema();
    let columns = schema
        .fields()
        .iter()
        .map(|f| -> Arc<dyn Array> {
            match f.name().as_str() {
                "id" => Arc::new(Int64Array::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                "x" if f.data_type() == &concord::arrow::datatypes::DataType::Int32 => {
                    Arc::new(Int32Array::from(rows.iter().map(|r| r.1 as i32).collect::<Vec<_>>()))
                }
                "x" => Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                "tag" => Arc::new(StringArray::from(rows.iter().map(|r| tagged.then_some(r.2)).collect::<Vec<_>>())),
                other => panic!("unexpected column {other}"),
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns).unwrap()
}

fn set(column: &str, expr: &str) -> Vec<Assignment> {
    vec![Assignment { column: column.into(), expr: expr.into() }]
}

async fn prepare(table: &Table, op: Op, as_ours: bool) -> PreparedTransaction {
    let append_rows: Vec<(i64, i64, &str)> =
        if as_ours { vec![(100, 1000, "a100"), (101, 1010, "a101")] } else { vec![(50, 500, "a50"), (51, 510, "a51")] };
    let result = match op {
        Append | AppendNoTag => table.prepare(Write::Append { input: (&[batch(table, &append_rows, op == Append)]).into() }).await,
        Delete if as_ours => table.prepare(Write::Delete { filter: "id % 2 = 0".into() }).await,
        DeleteOnTag if as_ours => table.prepare(Write::Delete { filter: "tag = 't4'".into() }).await,
        Delete | DeleteOnTag => table.prepare(Write::Delete { filter: "id = 3".into() }).await,
        Update if as_ours => table.prepare(Write::Update { set: set("x", "x + 1"), filter: Some("id < 3".into()) }).await,
        UpdateTag if as_ours => table.prepare(Write::Update { set: set("tag", "'u'"), filter: Some("id < 3".into()) }).await,
        Update | UpdateTag => table.prepare(Write::Update { set: set("x", "x * 2"), filter: Some("id < 4".into()) }).await,
        Merge | MergeNoTag => {
            let source: Vec<(i64, i64, &str)> =
                if as_ours { vec![(2, 222, "m2"), (100, 1000, "m100")] } else { vec![(2, 2000, "wm2"), (61, 610, "wm61")] };
            table.prepare(Write::Merge { input: (&[batch(table, &source, op == Merge)]).into(), on: ["id".to_string()].to_vec() }).await
        }
        Overwrite => {
            let new: Vec<(i64, i64, String)> =
                if as_ours { vec![(300, 3000, "o300".into())] } else { vec![(200, 2000, "o200".into()), (201, 2010, "o201".into())] };
            let new: Vec<(i64, i64, &str)> = new.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
            table.prepare(Write::Overwrite { input: (&[batch(table, &new, true)]).into(), filter: None }).await
        }
        Restore => table.prepare(Write::Restore { version: 1 }).await,
        AddColumn if as_ours => table.prepare(Write::AddColumn { definition: "extra bigint".into() }).await,
        AddColumn => table.prepare(Write::AddColumn { definition: "extra int default 5".into() }).await,
        DropColumn => table.prepare(Write::DropColumn { name: "tag".into() }).await,
        Widen => table.prepare(Write::WidenColumn { name: "x".into(), to: "bigint".into() }).await,
        Compact => table.prepare(Write::Compact { target_rows: concord::limits::DEFAULT_COMPACT_TARGET_ROWS }).await,
    };
    result.unwrap_or_else(|e| panic!("preparing {op:?}: {e}"))
}

/// The latest version's rows in model form, and its column names.
async fn actual(table: &Table) -> (Vec<(i64, Option<i64>, Option<String>, Option<i64>)>, Vec<String>) {
    let latest = table.latest().await.unwrap();
    let columns = latest.schema().names().iter().map(|s| s.to_string()).collect();
    let mut out = Vec::new();
    for b in all_rows(&latest).await {
        for i in 0..b.num_rows() {
            // `x` is an int until a winner widens it; `extra` is an int or a bigint.
            let int64 = |name: &str| {
                let c = b.column_by_name(name)?;
                let c = concord::arrow::compute::cast(c, &concord::arrow::datatypes::DataType::Int64).unwrap();
                let c = c.as_primitive::<Int64Type>();
                c.is_valid(i).then(|| c.value(i))
            };
            let tag = b.column_by_name("tag").map(|c| c.as_string::<i32>()).and_then(|c| c.is_valid(i).then(|| c.value(i).to_string()));
            let extra = int64("extra");
            out.push((int64("id").unwrap(), int64("x"), tag, extra));
        }
    }
    out.sort();
    (out, columns)
}

async fn run_cell(ours: Op, winner: Op, isolation: IsolationLevel, expected: Outcome) -> Result<(), String> {
    let resolver = StoreResolver::new();
    let uri = format!("memory://matrix-{ours:?}-{winner:?}-{}", isolation.as_str());
    let table = create_table(&resolver, &uri, SCHEMA).await;
    let opts = CommitOptions::default();
    let base = base_model();
    let to_batch = |range: std::ops::Range<i64>| {
        let rows: Vec<(i64, i64, String)> = range.map(|id| (id, id * 10, format!("t{id}"))).collect();
        rows
    };
    for part in [0..5, 5..10] {
        let rows = to_batch(part);
        let rows: Vec<(i64, i64, &str)> = rows.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
        table.append(&[batch(&table, &rows, true)], &opts).await.unwrap();
    }
    let ours_txn = prepare(&table, ours, true).await;
    let winner_txn = prepare(&table, winner, false).await;
    let won = table.commit(&winner_txn, &opts).await.map_err(|e| format!("winner failed: {e}"))?;
    let options = CommitOptions { isolation: Some(isolation), ..CommitOptions::default() };
    let result = table.commit(&ours_txn, &options).await;
    // A data write whose re-run left it nothing to change (its rows were all replaced)
    // re-ran and commits nothing; the model below checks that nothing was left.
    let nothing_left = matches!(&result, Ok(info) if info.abandoned.is_some() && info.rerun && ours != Op::Compact);
    let got = match &result {
        Ok(_) if nothing_left => X,
        Ok(info) if info.abandoned.is_some() => A,
        Ok(info) if info.rerun => X,
        Ok(info) => {
            if info.rebased_over != vec![won.version] {
                return Err(format!("rebased over {:?}, expected [{}]", info.rebased_over, won.version));
            }
            R
        }
        Err(WriteError::Commit(CommitError::Incompatible { winner_version, winner_operation, reason })) => {
            if *winner_version != won.version || *winner_operation != won.operation.name() || reason.to_string().is_empty() {
                return Err(format!("incompatible error names version {winner_version} ({winner_operation}): {reason}"));
            }
            I
        }
        Err(e) => return Err(format!("failed: {e}")),
    };
    if got != expected {
        return Err(format!("outcome {got:?}, expected {expected:?} ({result:?})"));
    }
    let mut model = base;
    model.apply(winner, false, true);
    if matches!(got, R | X) {
        let serializable = isolation == IsolationLevel::Serializable;
        // Documented: an update or merge re-runs on the whole new table after an
        // overwrite or restore, under both levels.
        let whole_table = matches!((ours, winner), (Update | UpdateTag | Merge | MergeNoTag, Overwrite | Restore));
        model.apply(ours, true, serializable || whole_table);
    }
    let (rows, columns) = actual(&table).await;
    if rows != model.sorted() {
        return Err(format!("rows differ:\n  got      {rows:?}\n  expected {:?}", model.sorted()));
    }
    if columns != model.columns {
        return Err(format!("columns {columns:?}, expected {:?}", model.columns));
    }
    let versions = table.latest().await.unwrap().version();
    let expected_versions = if matches!(got, R | X) && !nothing_left { 4 } else { 3 };
    if versions != expected_versions {
        return Err(format!(
            "latest version {versions}, expected {expected_versions}: a failed or abandoned transaction must leave no version"
        ));
    }
    Ok(())
}

/// Every cell of the contract's matrix (14 of our operations × 10 winners × 2 isolation
/// levels = 280 cells): outcome and rows.
#[tokio::test]
async fn every_cell_of_the_conflict_matrix() {
    let mut failures = Vec::new();
    let mut cells = 0;
    for (ours, outcomes) in SERIALIZABLE {
        for (winner, serializable) in WINNERS.iter().zip(outcomes) {
            for isolation in [IsolationLevel::Serializable, IsolationLevel::Snapshot] {
                let expected = match isolation {
                    IsolationLevel::Serializable => serializable,
                    IsolationLevel::Snapshot => snapshot_outcome(ours, *winner, serializable),
                    other => panic!("no outcomes for {other}"),
                };
                cells += 1;
                if let Err(e) = run_cell(ours, *winner, isolation, expected).await {
                    failures.push(format!("{ours:?} over {winner:?} ({}): {e}", isolation.as_str()));
                }
            }
        }
    }
    assert_eq!(cells, 280);
    assert!(failures.is_empty(), "{} of {cells} cells failed:\n{}", failures.len(), failures.join("\n"));
}

//! Update: `SET column = expression [WHERE predicate]`. The matching live rows are
//! deleted (delta deletion vectors, as a delete) and their new values written as new
//! fragments; applying it is a delete plus an append. A re-run evaluates the update
//! on the fragments in scope of the new base and adds (or, for everything, replaces)
//! both parts.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::cast;
use datafusion::physical_expr::PhysicalExpr;
use roaring::RoaringBitmap;

use crate::env::Env;
use crate::error::{InputError, PredicateError, ScanError, WriteError};
use crate::format::manifest::{Assignment, Fragment, FragmentDeletion, NewFragment};
use crate::format::schema::{Field, Schema};
use crate::io::predicate::{self, Predicate};
use crate::io::scan::{self, ScanPlan};
use crate::io::{deletion, writer};
use crate::storage::TableStore;

/// An update planned against one schema.
pub(crate) struct CompiledUpdate {
    schema: Schema,
    predicate: Option<Predicate>,
    /// Table column index -> its new value.
    assignments: Vec<(usize, Arc<dyn PhysicalExpr>)>,
    /// Field ids read or set.
    pub columns: Vec<u32>,
}

pub(crate) fn compile(schema: &Schema, sql: Option<&str>, set: &[Assignment]) -> Result<CompiledUpdate, PredicateError> {
    let predicate = sql.map(|s| predicate::compile(s, schema)).transpose()?;
    let mut columns: Vec<u32> = predicate.iter().flat_map(|p| p.fields.iter().map(|f| f.id)).collect();
    let mut assignments = Vec::with_capacity(set.len());
    for a in set {
        let index = schema.fields.iter().position(|f| f.name == a.column).ok_or_else(|| PredicateError::UnknownColumn {
            sql: format!("{} = {}", a.column, a.expr),
            column: a.column.clone(),
            known: schema.names().join(", "),
        })?;
        let (expr, read) = predicate::compile_value(&a.expr, schema)?;
        columns.push(schema.fields[index].id);
        columns.extend(read);
        assignments.push((index, expr));
    }
    columns.sort_unstable();
    columns.dedup();
    Ok(CompiledUpdate { schema: schema.clone(), predicate, assignments, columns })
}

/// Runs the update on `fragments`: the rows it deletes and the new rows it writes.
pub(crate) async fn run(
    store: &TableStore,
    env: &Env,
    update: &CompiledUpdate,
    fragments: &[Fragment],
) -> Result<(Vec<FragmentDeletion>, Vec<NewFragment>), WriteError> {
    let fields: Vec<Field> = update.schema.fields.clone();
    let output = update.schema.arrow_schema();
    let mut deletions = Vec::new();
    let mut new_rows: Vec<RecordBatch> = Vec::new();
    // The same predicate over the same rows as the matching below: the scan yields
    // exactly the matched rows. Planned once (planning costs far more than a fragment).
    let plan = Arc::new(ScanPlan { fields, output, predicate: recompile(update)? });
    for fragment in fragments {
        let matches = match &update.predicate {
            Some(p) => scan::fragment_matches(store, fragment, p).await?,
            None => {
                let mut all = RoaringBitmap::new();
                all.insert_range(0..fragment.physical_rows as u32);
                all - deletion::of_fragment(store, fragment.deletion.as_ref()).await?.as_ref()
            }
        };
        if matches.is_empty() {
            continue;
        }
        for batch in scan::read_fragment(store, fragment, plan.clone()).await? {
            new_rows.push(apply_set(update, &batch).map_err(|e| match e {
                SetFailure::Predicate(p) => WriteError::Predicate(p),
                SetFailure::Input(i) => WriteError::Input(i),
            })?);
        }
        let count = matches.len();
        let path = deletion::write(store, env, matches).await?;
        deletions.push(FragmentDeletion { fragment_id: fragment.id, path, rows: count });
    }
    let written = writer::write_fragments(store, env, &update.schema, &new_rows).await?;
    Ok((deletions, written))
}

/// Predicates are not `Clone`; the scan plan needs its own.
fn recompile(update: &CompiledUpdate) -> Result<Option<Predicate>, ScanError> {
    Ok(match &update.predicate {
        None => None,
        Some(p) => Some(predicate::compile(&p.sql, &update.schema)?),
    })
}

/// Why new values could not be computed: the expression failed, or broke a constraint.
enum SetFailure {
    Predicate(PredicateError),
    Input(InputError),
}

/// New values of `batch` (all table columns, table order): SET columns replaced.
fn apply_set(update: &CompiledUpdate, batch: &RecordBatch) -> Result<RecordBatch, SetFailure> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for (index, expr) in &update.assignments {
        let field = &update.schema.fields[*index];
        let invalid = |reason: String| PredicateError::Invalid { sql: format!("{} = ...", field.name), reason };
        let value = expr.evaluate(batch).and_then(|v| v.into_array(batch.num_rows())).map_err(|e| SetFailure::Predicate(invalid(e.to_string())))?;
        let value = cast(&value, &field.column_type.arrow_type()).map_err(|e| SetFailure::Predicate(invalid(e.to_string())))?;
        if !field.nullable && value.null_count() > 0 {
            let row = (0..value.len()).find(|i| value.is_null(*i)).unwrap_or(0) as u64 + 1;
            return Err(SetFailure::Input(InputError::NullInNonNullable { file: "the update".into(), column: field.name.clone(), row }));
        }
        columns[*index] = value;
    }
    RecordBatch::try_new(batch.schema(), columns)
        .map_err(|e| SetFailure::Predicate(PredicateError::Invalid { sql: "SET".into(), reason: e.to_string() }))
}

//! Update: `SET column = expression [WHERE predicate]`. The matching live rows are
//! deleted (delta deletion vectors, as a delete) and their new values written as new
//! fragments; applying it is a delete plus an append. A re-run evaluates the update
//! on the fragments in scope of the new base and adds (or, for everything, replaces)
//! both parts.

mod set_paths;

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use chrono::{DateTime, Utc};
use datafusion::physical_expr::PhysicalExpr;
use roaring::RoaringBitmap;

use super::delete::{self, DeletionState};
use super::Cx;
use crate::env::Env;
use crate::error::{CommitError, InputError, PredicateError, ScanError, WriteError};
use crate::format::manifest::{Assignment, Fragment, FragmentDeletion, Manifest, NewFragment};
use crate::format::schema::ColumnNameError;
use crate::format::schema::{Field, Schema};
use crate::io::deletion;
use crate::io::predicate::{self, Predicate};
use crate::io::scan::{self, ScanPlan};
use crate::io::values::{self, CastFailure};
use crate::io::write;
use crate::storage::TableStore;
use crate::txn::conflict::RerunScope;

/// Re-runs an update (its `predicate` and `set`) on the fragments in scope of the new
/// base: both its deletions and its new rows (`parts`) are added (or, for everything,
/// replaced).
pub(super) async fn rerun(
    cx: &Cx<'_>,
    base: &Manifest,
    scope: &RerunScope,
    (predicate, set): (Option<&str>, &[Assignment]),
    (deletions, fragments): (&mut Vec<FragmentDeletion>, &mut Vec<NewFragment>),
    state: &mut DeletionState,
) -> Result<(), CommitError> {
    let update = compile(&base.schema, predicate, set, cx.now).map_err(|e| CommitError::rerun(base.version, e))?;
    let in_scope = delete::fragments_in_scope(cx.store, base, scope).await?;
    let (more_deletions, more_fragments) =
        run(cx.store, cx.env, &update, &in_scope).await.map_err(|e| CommitError::rerun(base.version, e))?;
    match scope {
        RerunScope::Everything => {
            *deletions = more_deletions;
            *fragments = more_fragments;
            state.forget();
        }
        RerunScope::Fragments(_) => {
            deletions.extend(more_deletions);
            fragments.extend(more_fragments);
        }
    }
    Ok(())
}

/// Why an update cannot be planned: a bad expression, or a SET column that names no
/// column (or several).
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpdatePlanError {
    #[error(transparent)]
    Predicate(#[from] PredicateError),
    #[error(transparent)]
    Column(#[from] ColumnNameError),
}

impl From<UpdatePlanError> for WriteError {
    fn from(e: UpdatePlanError) -> Self {
        match e {
            UpdatePlanError::Predicate(p) => WriteError::Predicate(p),
            UpdatePlanError::Column(c) => WriteError::Column(c),
        }
    }
}

/// An update planned against one schema.
pub(crate) struct CompiledUpdate {
    schema: Schema,
    predicate: Option<Predicate>,
    /// Table column index -> its new value, and the clause as written (for messages).
    assignments: Vec<(usize, Arc<dyn PhysicalExpr>, String)>,
    /// Field ids read or set.
    pub columns: Vec<u32>,
}

/// Plans `SET ... WHERE sql` against `schema`, with `now()` fixed at `now`.
pub(crate) fn compile(
    schema: &Schema,
    sql: Option<&str>,
    set: &[Assignment],
    now: DateTime<Utc>,
) -> Result<CompiledUpdate, UpdatePlanError> {
    let predicate = sql.map(|s| predicate::compile(s, schema, now)).transpose()?;
    let mut columns: Vec<u32> = predicate.iter().flat_map(|p| p.fields.iter().map(|f| f.id)).collect();
    let set = set_paths::fold_struct_fields(schema, set)?;
    let mut assignments = Vec::with_capacity(set.len());
    for a in &set {
        let field = schema.resolve(&a.column)?;
        let index = schema.fields.iter().position(|f| f.id == field.id).expect("resolved");
        if assignments.iter().any(|(i, _, _)| *i == index) {
            return Err(PredicateError::Invalid {
                sql: format!("{} = {}", a.column, a.expr),
                reason: format!("column '{}' is set twice", field.name),
            }
            .into());
        }
        let (expr, read) = predicate::compile_value(&a.expr, schema, now)?;
        columns.push(schema.fields[index].id);
        columns.extend(read);
        assignments.push((index, expr, format!("{} = {}", a.column, a.expr)));
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
    // Each row read with its id: its new version keeps it.
    let plan = Arc::new(ScanPlan::new(fields, output, recompile(update)?).with_row_ids());
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
    let written = write::write_fragments_keeping_ids(store, env, &update.schema, &new_rows).await?;
    Ok((deletions, written))
}

/// Predicates are not `Clone`; the scan plan needs its own.
fn recompile(update: &CompiledUpdate) -> Result<Option<Predicate>, ScanError> {
    Ok(match &update.predicate {
        None => None,
        Some(p) => Some(predicate::compile(&p.sql, &update.schema, p.now)?),
    })
}

/// Why new values could not be computed: the expression failed, or broke a constraint.
enum SetFailure {
    Predicate(PredicateError),
    Input(InputError),
}

/// New values of `batch` (all table columns, table order, then the row id): SET columns replaced. A
/// value that does not fit its column is refused (the rule of every write: see
/// `io::cast`), never stored as NULL or rounded.
fn apply_set(update: &CompiledUpdate, batch: &RecordBatch) -> Result<RecordBatch, SetFailure> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for (index, expr, clause) in &update.assignments {
        let field = &update.schema.fields[*index];
        let failed = |reason: String| PredicateError::Failed { sql: clause.clone(), reason: format!("column '{}': {reason}", field.name) };
        let value =
            expr.evaluate(batch).and_then(|v| v.into_array(batch.num_rows())).map_err(|e| SetFailure::Predicate(failed(e.to_string())))?;
        let value = values::to_column(&value, &field.column_type, values::Source::Any).map_err(|e| {
            SetFailure::Input(match e {
                CastFailure::Type { found } => InputError::TypeMismatch {
                    file: format!("SET {clause}"),
                    column: field.name.clone(),
                    expected: field.column_type.sql_name(),
                    found,
                },
                CastFailure::Value { value, .. } => InputError::ValueDoesNotFit {
                    source_name: format!("SET {clause}"),
                    column: field.name.clone(),
                    value,
                    expected: field.column_type.sql_name(),
                },
            })
        })?;
        if !field.nullable && value.null_count() > 0 {
            let row = (0..value.len()).find(|i| value.is_null(*i)).unwrap_or(0) as u64 + 1;
            return Err(SetFailure::Input(InputError::NullInNonNullable { file: "the update".into(), column: field.name.clone(), row }));
        }
        columns[*index] = value;
    }
    RecordBatch::try_new(batch.schema(), columns)
        .map_err(|e| SetFailure::Predicate(PredicateError::Invalid { sql: "SET".into(), reason: e.to_string() }))
}

//! Deciding, for our transaction and one winner committed since our read version,
//! whether we may rebase or must fail. Pure: no I/O. One named rule per case.

use std::ops::Range;

use crate::error::IncompatibleReason;
use crate::format::manifest::{field_ids_left_for, CompactGroup, FragmentDeletion, IsolationLevel, Operation, FIELD_ID_BLOCK};
use crate::format::schema::{ColumnType, Schema};

/// Which fragments of the base a re-run reads (what a [`Resolution::Rerun`] asks for).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum RerunScope {
    /// Fragments whose ids fall in these ranges (those a winner added).
    Fragments(Vec<Range<u64>>),
    /// Every fragment: the winner replaced the table.
    Everything,
}

impl RerunScope {
    /// The union of `current` (if any) and `more`.
    pub(crate) fn widen(current: Option<RerunScope>, more: RerunScope) -> RerunScope {
        match (current, more) {
            (Some(RerunScope::Everything), _) | (_, RerunScope::Everything) => RerunScope::Everything,
            (Some(RerunScope::Fragments(mut a)), RerunScope::Fragments(b)) => {
                a.extend(b);
                RerunScope::Fragments(a)
            }
            (None, scope) => scope,
        }
    }
}

/// What to do about one winning transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Resolution {
    /// Our transaction means the same on top of the winner: take the next version.
    Rebase,
    /// Our transaction depends on data the winner changed: re-execute it on this part
    /// of the new state, then rebase.
    Rerun(RerunScope),
    /// No serial order ending with our transaction exists.
    Incompatible {
        /// What the winner did.
        reason: IncompatibleReason,
    },
}

/// A transaction committed after our read version.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub(crate) struct Winner<'a> {
    /// What it did.
    pub(crate) operation: &'a Operation,
    /// The table's schema after it (its version's).
    pub(crate) schema: &'a Schema,
    /// Ids of the fragments its version added (ids are assigned in commit order).
    pub(crate) added: Range<u64>,
}

impl<'a> Winner<'a> {
    /// The transaction `operation` of a version whose schema is `schema` and which added
    /// the fragments `added`. (A shared version's transactions are judged one by one;
    /// schema changes never share a version, so they all have its schema.)
    pub(crate) fn new(operation: &'a Operation, schema: &'a Schema, added: Range<u64>) -> Self {
        Winner { operation, schema, added }
    }
}

/// The resolution of `ours` (prepared against `our_schema`) over `winner`.
pub(crate) fn resolve(ours: &Operation, our_schema: &Schema, isolation: IsolationLevel, winner: Winner<'_>) -> Resolution {
    let theirs = winner.schema;
    let their_op = winner.operation;
    if matches!(their_op, Operation::DeleteBranch) {
        return rule_deleted_branch_takes_nothing();
    }
    match ours {
        Operation::Create | Operation::Branch { .. } => rule_create_never_races(),
        Operation::Append { fragments } => rule_written_columns_still_fit(written_fields(fragments), our_schema, theirs),
        Operation::Overwrite { .. } => rule_overwrite_rebases(),
        Operation::Restore { .. } => rule_restore_rebases(),
        Operation::Delete { columns, deletions, .. } => rule_read_columns_still_exist(columns, our_schema, theirs)
            .unwrap_or_else(|| rule_delete_over(their_op, isolation, winner.added, &touched(deletions))),
        // An update's rows carry every column, but only the columns it reads or sets are
        // its own: a winner dropping another column just drops it from the new rows too.
        Operation::Update { columns, deletions, .. } => rule_read_columns_still_exist(columns, our_schema, theirs)
            .unwrap_or_else(|| rule_rewrite_over(their_op, isolation, winner.added, &touched(deletions))),
        // A partial merge's rows, like an update's, carry every column but own only the
        // key and source columns (its `columns`); a full merge writes its source rows.
        Operation::Merge { columns, deletions, fragments, partial, .. } => rule_read_columns_still_exist(columns, our_schema, theirs)
            .or_else(|| match partial {
                Some(_) => None,
                None => incompatible_only(rule_written_columns_still_fit(written_fields(fragments), our_schema, theirs)),
            })
            .unwrap_or_else(|| rule_rewrite_over(their_op, isolation, winner.added, &touched(deletions))),
        // The delete half decides re-runs; the rows it writes must still fit.
        Operation::ReplaceWhere { columns, deletions, fragments, .. } => rule_read_columns_still_exist(columns, our_schema, theirs)
            .or_else(|| incompatible_only(rule_written_columns_still_fit(written_fields(fragments), our_schema, theirs)))
            .unwrap_or_else(|| rule_delete_over(their_op, isolation, winner.added, &touched(deletions))),
        Operation::AddColumn { column } => match rule_added_name_still_free(&column.name, column.parent, our_schema, theirs) {
            Resolution::Rebase if column.field_id.is_none() => rule_added_ids_still_left(&column.column_type, theirs),
            other => other,
        },
        Operation::DropColumn { .. } => rule_drop_rebases(),
        Operation::RenameColumn { field_id, from, to } => rule_renamed_column_unchanged(*field_id, from, to, theirs),
        Operation::WidenColumn { field_id, name, from, to } => {
            rule_widened_column_still_narrower(*field_id, name, from.clone(), to.clone(), theirs)
        }
        Operation::SetProperties { .. } => rule_properties_rebase(),
        Operation::Compact { .. } => rule_compaction_yields(their_op),
        Operation::Withdraw { .. } => rule_withdrawal_rebases(),
        Operation::DeleteBranch => rule_branch_deletion_rebases(),
    }
}

/// A deleted branch's chain ends with its deletion: nothing commits after it.
fn rule_deleted_branch_takes_nothing() -> Resolution {
    Resolution::Incompatible { reason: IncompatibleReason::BranchDeleted }
}

/// A branch's deletion ends its chain whatever committed before it.
fn rule_branch_deletion_rebases() -> Resolution {
    Resolution::Rebase
}

fn written_fields(fragments: &[crate::format::manifest::NewFragment]) -> Vec<u32> {
    fragments.iter().flat_map(|f| f.files.iter()).flat_map(|f| f.fields.iter().copied()).collect()
}

fn touched(deletions: &[FragmentDeletion]) -> Vec<u64> {
    deletions.iter().map(|d| d.fragment_id).collect()
}

fn incompatible_only(resolution: Resolution) -> Option<Resolution> {
    match resolution {
        Resolution::Rebase => None,
        other => Some(other),
    }
}

/// Fragments a compaction winner rewrote (its inputs).
fn compacted(groups: &[CompactGroup]) -> Vec<u64> {
    groups.iter().flat_map(|g| g.inputs.iter().map(|i| i.fragment_id)).collect()
}

/// Overwrite replaces every row whatever happened since its read: always rebases.
/// (Columns added since read as their default in its rows; columns dropped since are
/// dropped from them.)
fn rule_overwrite_rebases() -> Resolution {
    Resolution::Rebase
}

/// Dropping a column rebases over anything; if a winner dropped it already, the drop
/// commits as a no-op.
fn rule_drop_rebases() -> Resolution {
    Resolution::Rebase
}

/// Property changes apply to the newest properties: always rebase.
fn rule_properties_rebase() -> Resolution {
    Resolution::Rebase
}

/// Adding a column (or a struct's field) conflicts only with a winner that made the
/// same name taken beside it (added it too, or renamed a field to it), or removed the
/// struct it goes into.
fn rule_added_name_still_free(name: &str, parent: Option<u32>, ours: &Schema, theirs: &Schema) -> Resolution {
    let beside = match parent {
        None => Some(theirs.fields.as_slice()),
        Some(p) => theirs.struct_fields_of(p),
    };
    let Some(beside) = beside else {
        let column = parent.and_then(|p| ours.field_by_id_deep(p)).map_or_else(|| name.to_string(), |f| f.name.clone());
        return Resolution::Incompatible { reason: IncompatibleReason::ColumnRemoved { column } };
    };
    match beside.iter().find(|f| f.name == name) {
        Some(taken) if ours.field_by_id_deep(taken.id).is_none_or(|f| f.name != name) => Resolution::Incompatible {
            reason: IncompatibleReason::ColumnAddedToo { name: name.to_string(), column_type: taken.column_type.clone() },
        },
        _ => Resolution::Rebase,
    }
}

/// An add takes the ids after the winner's: the chain's block (a branch's, FORMAT.md §7)
/// must still hold them. (A merge's replay of a branch's add keeps the branch's ids.)
fn rule_added_ids_still_left(column_type: &ColumnType, theirs: &Schema) -> Resolution {
    match field_ids_left_for(theirs, column_type) {
        true => Resolution::Rebase,
        false => Resolution::Incompatible { reason: IncompatibleReason::FieldIdsUsedUp { limit: FIELD_ID_BLOCK - 1 } },
    }
}

/// Renaming conflicts with a winner that removed or renamed the same column, or that
/// took the new name.
fn rule_renamed_column_unchanged(field_id: u32, from: &str, to: &str, theirs: &Schema) -> Resolution {
    let reason = match theirs.field_by_id_deep(field_id) {
        None => IncompatibleReason::ColumnRemoved { column: from.to_string() },
        Some(f) if f.name != from => IncompatibleReason::ColumnRenamed { from: from.to_string(), to: f.name.clone() },
        Some(_) => match theirs.siblings_of(field_id).and_then(|beside| beside.iter().find(|f| f.name == to)) {
            Some(taken) if taken.id != field_id => IncompatibleReason::NameTaken { name: to.to_string() },
            _ => return Resolution::Rebase,
        },
    };
    Resolution::Incompatible { reason }
}

/// Widening conflicts with a winner that removed the column, or changed its type to one
/// that does not widen to ours (a winner that widened it as far, or to a type between,
/// leaves ours meaning the same: rebase).
fn rule_widened_column_still_narrower(field_id: u32, name: &str, from: ColumnType, to: ColumnType, theirs: &Schema) -> Resolution {
    match theirs.field_by_id_deep(field_id) {
        None => Resolution::Incompatible { reason: IncompatibleReason::ColumnRemoved { column: name.to_string() } },
        Some(f) if f.column_type == to || f.column_type.widens_to(&to) => Resolution::Rebase,
        Some(f) => Resolution::Incompatible {
            reason: IncompatibleReason::ColumnTypeChanged { column: name.to_string(), from, to: f.column_type.clone() },
        },
    }
}

/// Compaction yields (contract matrix, row "compact"): a winner that may have changed
/// the fragments it rewrites (deleted rows in them, replaced or compacted them) makes it
/// re-check every group against the new state: redo groups whose deletions changed,
/// drop groups with a fragment gone, abandon if none is left. Other winners: rebase.
fn rule_compaction_yields(winner: &Operation) -> Resolution {
    match winner {
        Operation::Delete { .. }
        | Operation::Update { .. }
        | Operation::Merge { .. }
        | Operation::ReplaceWhere { .. }
        | Operation::Overwrite { .. }
        | Operation::Restore { .. }
        | Operation::Compact { .. } => Resolution::Rerun(RerunScope::Everything),
        Operation::Create
        | Operation::Append { .. }
        | Operation::AddColumn { .. }
        | Operation::DropColumn { .. }
        | Operation::RenameColumn { .. }
        | Operation::WidenColumn { .. }
        | Operation::SetProperties { .. }
        | Operation::Withdraw { .. }
        | Operation::Branch { .. }
        | Operation::DeleteBranch => Resolution::Rebase,
    }
}

/// A withdrawal (cooperative commits) changes no data: it rebases over anything, and
/// anything rebases over it.
fn rule_withdrawal_rebases() -> Resolution {
    Resolution::Rebase
}

/// A predicate (SQL, by column name) can be re-evaluated only if every column it reads
/// still exists in the winner's schema under the same name and type.
fn rule_read_columns_still_exist(read: &[u32], ours: &Schema, theirs: &Schema) -> Option<Resolution> {
    read.iter().find_map(|id| {
        let name = ours.field_by_id(*id).map_or_else(|| format!("#{id}"), |f| f.name.clone());
        let mine = ours.field_by_id(*id);
        let reason = match (mine, theirs.field_by_id(*id)) {
            (_, None) => IncompatibleReason::ColumnRemoved { column: name },
            (Some(m), Some(t)) if m.name != t.name => IncompatibleReason::ColumnRenamed { from: m.name.clone(), to: t.name.clone() },
            // A widened column holds the same values: a predicate means the same on it
            // (and on a struct given new fields).
            (Some(m), Some(t)) if !m.column_type.still_fits(&t.column_type, true) => {
                IncompatibleReason::ColumnTypeChanged { column: m.name.clone(), from: m.column_type.clone(), to: t.column_type.clone() }
            }
            _ => return None,
        };
        Some(Resolution::Incompatible { reason })
    })
}

/// Update or merge over a winner (contract matrix, rows "update" and "merge/upsert"):
/// - a winner that removed, rewrote or moved rows of fragments this update rewrote
///   (delete, update, replace, merge or compaction of an overlapping fragment), or
///   replaced the table (overwrite, restore): re-run the whole update on the new state,
///   so that it applies its SET to the winner's version of the rows and never brings
///   back rows the winner removed (a merge re-matches its keys: it replaces whatever
///   rows then hold them);
/// - a winner that added fragments (append; update, replace, merge or compaction
///   elsewhere): serializable re-runs on them (a merge re-matches keys the winner
///   inserted, so two concurrent upserts of one new key leave one row; a compaction's
///   output holds rows of fragments appended since our read); snapshot leaves rows it
///   never saw;
/// - otherwise (schema and property changes, disjoint deletes) rebase.
fn rule_rewrite_over(winner: &Operation, isolation: IsolationLevel, added: Range<u64>, touched: &[u64]) -> Resolution {
    let overlaps = |deletions: &[FragmentDeletion]| deletions.iter().any(|d| touched.contains(&d.fragment_id));
    match winner {
        Operation::Overwrite { .. } | Operation::Restore { .. } => Resolution::Rerun(RerunScope::Everything),
        Operation::Delete { deletions, .. }
        | Operation::Update { deletions, .. }
        | Operation::ReplaceWhere { deletions, .. }
        | Operation::Merge { deletions, .. }
            if overlaps(deletions) =>
        {
            Resolution::Rerun(RerunScope::Everything)
        }
        Operation::Compact { groups, .. } if compacted(groups).iter().any(|id| touched.contains(id)) => {
            Resolution::Rerun(RerunScope::Everything)
        }
        Operation::Append { .. }
        | Operation::Update { .. }
        | Operation::ReplaceWhere { .. }
        | Operation::Merge { .. }
        | Operation::Compact { .. }
            if isolation == IsolationLevel::Serializable && !added.is_empty() =>
        {
            Resolution::Rerun(RerunScope::Fragments(vec![added]))
        }
        _ => Resolution::Rebase,
    }
}

/// Delete over a winner (contract matrix, row "delete"):
/// - append: serializable re-evaluates the predicate on the appended fragments;
///   snapshot leaves rows it never saw;
/// - delete: deletion vectors merge when applied;
/// - update, replace, merge: they added fragments (new versions of rows): re-run on
///   them like on an append (snapshot: only if they rewrote fragments we delete from,
///   so that their new version of a row we delete does not survive);
/// - compaction: our deletions in fragments it rewrote would be lost with them, so
///   re-run on its output fragments (under snapshot too when it rewrote fragments we
///   delete from; serializable always, as its output may hold rows appended since);
/// - overwrite / restore: serializable re-runs on the new table; under snapshot the
///   rows it saw are gone, nothing to do;
/// - schema and property changes: rebase (a dropped predicate column fails earlier).
fn rule_delete_over(winner: &Operation, isolation: IsolationLevel, added: Range<u64>, touched: &[u64]) -> Resolution {
    let serializable = isolation == IsolationLevel::Serializable;
    match winner {
        Operation::Append { .. } if serializable && !added.is_empty() => Resolution::Rerun(RerunScope::Fragments(vec![added])),
        Operation::Overwrite { .. } | Operation::Restore { .. } if serializable => Resolution::Rerun(RerunScope::Everything),
        Operation::ReplaceWhere { .. } | Operation::Update { .. } | Operation::Merge { .. } if serializable && !added.is_empty() => {
            Resolution::Rerun(RerunScope::Fragments(vec![added]))
        }
        // Snapshot too: the winner rewrote rows of fragments we delete from; its new
        // versions of those rows must not survive our delete (no lost delete).
        Operation::ReplaceWhere { deletions, .. } | Operation::Update { deletions, .. } | Operation::Merge { deletions, .. }
            if !added.is_empty() && deletions.iter().any(|d| touched.contains(&d.fragment_id)) =>
        {
            Resolution::Rerun(RerunScope::Fragments(vec![added]))
        }
        Operation::Compact { groups, .. }
            if !added.is_empty() && (serializable || compacted(groups).iter().any(|id| touched.contains(id))) =>
        {
            Resolution::Rerun(RerunScope::Fragments(vec![added]))
        }
        Operation::Create
        | Operation::Append { .. }
        | Operation::Overwrite { .. }
        | Operation::Restore { .. }
        | Operation::Delete { .. }
        | Operation::ReplaceWhere { .. }
        | Operation::Update { .. }
        | Operation::Merge { .. }
        | Operation::Compact { .. }
        | Operation::AddColumn { .. }
        | Operation::DropColumn { .. }
        | Operation::RenameColumn { .. }
        | Operation::WidenColumn { .. }
        | Operation::SetProperties { .. }
        | Operation::Withdraw { .. }
        | Operation::Branch { .. }
        | Operation::DeleteBranch => Resolution::Rebase,
    }
}

/// Create commits version 0 only; losing it means the table exists (reported as such).
fn rule_create_never_races() -> Resolution {
    Resolution::Rebase
}

/// Restore installs an old state whatever happened since: always rebases.
fn rule_restore_rebases() -> Resolution {
    Resolution::Rebase
}

/// Data written for our schema still fits the winner's schema: every column we wrote
/// exists there by field id with the same type, and every not-null column of the winner's
/// schema without a default was written by us. (Appends over appends, overwrites, restores that keep the
/// schema: rebase.)
fn rule_written_columns_still_fit(mut written: Vec<u32>, ours: &Schema, theirs: &Schema) -> Resolution {
    if written.is_empty() {
        return Resolution::Rebase; // no rows written: no column values to miss or mistype
    }
    written.sort_unstable();
    written.dedup();
    for id in &written {
        let mine = ours.field_by_id(*id);
        match (mine, theirs.field_by_id(*id)) {
            (Some(m), None) => return Resolution::Incompatible { reason: IncompatibleReason::ColumnRemoved { column: m.name.clone() } },
            // Values of a narrower type read as the wider one (FORMAT.md §7); nested
            // fields are read by id, whatever their names.
            (Some(m), Some(t)) if !m.column_type.still_fits(&t.column_type, false) => {
                return Resolution::Incompatible {
                    reason: IncompatibleReason::ColumnTypeChanged {
                        column: m.name.clone(),
                        from: m.column_type.clone(),
                        to: t.column_type.clone(),
                    },
                };
            }
            _ => {}
        }
    }
    if let Some(missing) = theirs.fields.iter().find(|f| !f.nullable && f.default.is_none() && written.binary_search(&f.id).is_err()) {
        return Resolution::Incompatible { reason: IncompatibleReason::ColumnNowRequired { column: missing.name.clone() } };
    }
    Resolution::Rebase
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::manifest::Manifest;
    use crate::format::schema::{ColumnType, Field};

    fn schema(def: &str) -> Schema {
        Schema::parse(def).unwrap()
    }

    fn win(manifest: &Manifest, added: Range<u64>) -> Winner<'_> {
        Winner::new(&manifest.transaction().operation, &manifest.schema, added)
    }

    fn manifest_of(operation: Operation) -> Manifest {
        Manifest::test_version(chrono::Utc::now(), schema("id bigint not null, name varchar"), vec![(operation, None)])
    }

    /// Row "delete" of the contract's matrix, both isolation levels.
    #[test]
    fn delete_rule_table() {
        use IsolationLevel::{Serializable as S, Snapshot as N};
        let delete = Operation::Delete { predicate: "id = 1".into(), columns: vec![0], deletions: vec![] };
        let append = Operation::Append { fragments: vec![] };
        let cases: Vec<(&str, Operation, IsolationLevel, Resolution)> = vec![
            ("append, serializable", append.clone(), S, Resolution::Rerun(RerunScope::Fragments(std::iter::once(10..12).collect()))),
            ("append, snapshot", append, N, Resolution::Rebase),
            ("delete", delete.clone(), S, Resolution::Rebase),
            (
                "overwrite, serializable",
                Operation::Overwrite { fragments: vec![], schema: None },
                S,
                Resolution::Rerun(RerunScope::Everything),
            ),
            ("overwrite, snapshot", Operation::Overwrite { fragments: vec![], schema: None }, N, Resolution::Rebase),
            ("restore, serializable", Operation::Restore { version: 1 }, S, Resolution::Rerun(RerunScope::Everything)),
        ];
        let ours_schema = schema("id bigint not null, name varchar");
        let empty_overwrite = Operation::Overwrite { fragments: vec![], schema: None };
        let winner = manifest_of(delete.clone());
        assert_eq!(resolve(&empty_overwrite, &ours_schema, S, win(&winner, 0..0)), Resolution::Rebase, "no rows, nothing to misfit");
        for (name, winner_op, isolation, expected) in cases {
            let winner = manifest_of(winner_op);
            let got = resolve(&delete, &ours_schema, isolation, win(&winner, 10..12));
            assert_eq!(got, expected, "{name}");
        }
        let mut dropped = manifest_of(Operation::Restore { version: 1 });
        dropped.schema = schema("name varchar");
        dropped.schema.fields[0].id = 1;
        let got = resolve(&delete, &ours_schema, S, win(&dropped, 0..0));
        assert!(matches!(got, Resolution::Incompatible { reason } if reason.to_string().contains("removed column 'id'")));
        let mut renamed = manifest_of(Operation::Restore { version: 1 });
        renamed.schema.fields[0].name = "key".into();
        let got = resolve(&delete, &ours_schema, S, win(&renamed, 0..0));
        assert!(matches!(got, Resolution::Incompatible { reason } if reason.to_string().contains("renamed column 'id' to 'key'")));
    }

    #[test]
    fn written_columns_rule_table() {
        let base = schema("id bigint not null, name varchar");
        let cases: Vec<(&str, Schema, Vec<u32>, bool)> = vec![
            ("same schema", base.clone(), vec![0, 1], true),
            ("column we did not write was dropped", Schema { fields: vec![base.fields[0].clone()], next_field_id: 2 }, vec![0], true),
            ("column we wrote was dropped", Schema { fields: vec![base.fields[0].clone()], next_field_id: 2 }, vec![0, 1], false),
            (
                "column type changed",
                Schema {
                    fields: vec![base.fields[0].clone(), Field { column_type: ColumnType::Bigint, ..base.fields[1].clone() }],
                    next_field_id: 2,
                },
                vec![0, 1],
                false,
            ),
            (
                "new required column we lack",
                {
                    let mut s = base.clone();
                    s.fields.push(Field {
                        id: 2,
                        name: "z".into(),
                        column_type: ColumnType::Int,
                        nullable: false,
                        default: None,
                        widened_from: None,
                    });
                    s
                },
                vec![0, 1],
                false,
            ),
        ];
        for (name, theirs, written, rebases) in cases {
            let got = rule_written_columns_still_fit(written, &base, &theirs);
            assert_eq!(got == Resolution::Rebase, rebases, "{name}: {got:?}");
        }
    }

    /// Schema changes and compaction as our operation: one row per rule.
    #[test]
    fn schema_change_and_compaction_rule_table() {
        use crate::format::manifest::{CompactGroup, CompactInput, NewColumn};
        let ours_schema = schema("id bigint not null, name varchar");
        let add = |name: &str| Operation::AddColumn {
            column: NewColumn {
                name: name.into(),
                column_type: ColumnType::Int,
                nullable: true,
                default: None,
                parent: None,
                field_id: None,
            },
        };
        let rename = Operation::RenameColumn { field_id: 1, from: "name".into(), to: "label".into() };
        let with_schema = |op: Operation, def: &str| {
            let mut m = manifest_of(op);
            m.schema = schema(def);
            m
        };
        // A branch's block (its ids from 2^24) with one id left, then none.
        let block = |left: u32| {
            let mut m = with_schema(add("other"), "id bigint not null, name varchar, other int");
            m.schema.next_field_id = crate::format::manifest::MAIN_FIELD_IDS + FIELD_ID_BLOCK - 1 - left;
            m
        };
        let mut dropped_name = with_schema(Operation::DropColumn { field_id: 1, name: "name".into() }, "id bigint not null");
        dropped_name.schema.next_field_id = 2;
        let compact = Operation::Compact {
            target_rows: 10,
            groups: vec![CompactGroup { inputs: vec![CompactInput { fragment_id: 3, deletion: None, live_rows: 1 }], outputs: vec![] }],
        };
        let cases: Vec<(&str, Operation, Manifest, bool)> = vec![
            ("add over an add of another name", add("qty"), with_schema(add("other"), "id bigint not null, name varchar, other int"), true),
            (
                "add over an add of the same name",
                add("qty"),
                with_schema(add("qty"), "id bigint not null, name varchar, qty bigint"),
                false,
            ),
            ("add over a rename to the same name", add("label"), with_schema(rename.clone(), "id bigint not null, label varchar"), false),
            ("add over an add, one id left in the branch's block", add("qty"), block(1), true),
            ("add over an add that took the branch's last id", add("qty"), block(0), false),
            ("rename over an append", rename.clone(), manifest_of(Operation::Append { fragments: vec![] }), true),
            ("rename over a drop of the column", rename.clone(), dropped_name.clone(), false),
            ("rename over a rename of the column", rename.clone(), with_schema(rename.clone(), "id bigint not null, label varchar"), false),
            ("drop over a drop of the column: no-op", Operation::DropColumn { field_id: 1, name: "name".into() }, dropped_name, true),
            (
                "properties over anything",
                Operation::SetProperties { set: Default::default(), unset: vec![] },
                manifest_of(Operation::Overwrite { fragments: vec![], schema: None }),
                true,
            ),
            ("compaction over an append", compact.clone(), manifest_of(Operation::Append { fragments: vec![] }), true),
        ];
        for (name, ours, winner, rebases) in cases {
            let got = resolve(&ours, &ours_schema, IsolationLevel::Serializable, win(&winner, 12..12));
            assert_eq!(got == Resolution::Rebase, rebases, "{name}: {got:?}");
            if !rebases {
                assert!(matches!(got, Resolution::Incompatible { .. }), "{name}: {got:?}");
            }
        }
        let over_delete = resolve(
            &compact,
            &ours_schema,
            IsolationLevel::Serializable,
            win(&manifest_of(Operation::Delete { predicate: "id = 1".into(), columns: vec![0], deletions: vec![] }), 12..12),
        );
        assert_eq!(over_delete, Resolution::Rerun(RerunScope::Everything), "compaction re-checks its groups after a delete");
        // A delete whose fragments a compaction rewrote re-runs on its output, under both levels.
        let delete = Operation::Delete {
            predicate: "id = 1".into(),
            columns: vec![0],
            deletions: vec![crate::format::manifest::FragmentDeletion { fragment_id: 3, path: "d".into(), rows: 1 }],
        };
        for isolation in [IsolationLevel::Serializable, IsolationLevel::Snapshot] {
            let got = resolve(&delete, &ours_schema, isolation, win(&manifest_of(compact.clone()), 12..13));
            let added = std::iter::once(12..13).collect();
            assert_eq!(got, Resolution::Rerun(RerunScope::Fragments(added)), "{isolation:?}");
        }
    }
}

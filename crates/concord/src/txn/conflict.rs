//! Deciding, for our transaction and one winner committed since our read version,
//! whether we may rebase or must fail. Pure: no I/O. One named rule per case.

use crate::format::manifest::{Manifest, Operation};
use crate::format::schema::Schema;

/// What to do about one winning transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Our transaction means the same on top of the winner: take the next version.
    Rebase,
    /// No serial order ending with our transaction exists.
    Incompatible { reason: String },
}

/// The resolution of `ours` (prepared against `our_schema`) over `winner`.
pub fn resolve(ours: &Operation, our_schema: &Schema, winner: &Manifest) -> Resolution {
    match ours {
        Operation::Create => rule_create_never_races(),
        Operation::Append { fragments } | Operation::Overwrite { fragments } => {
            let written = fragments.iter().flat_map(|f| f.files.iter()).flat_map(|f| f.fields.iter().copied());
            rule_written_columns_still_fit(written.collect(), our_schema, &winner.schema)
        }
        Operation::Restore { .. } => rule_restore_rebases(),
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
/// schema was written by us. (Appends over appends, overwrites, restores that keep the
/// schema: rebase.)
fn rule_written_columns_still_fit(mut written: Vec<u32>, ours: &Schema, theirs: &Schema) -> Resolution {
    written.sort_unstable();
    written.dedup();
    for id in &written {
        let mine = ours.field_by_id(*id);
        match (mine, theirs.field_by_id(*id)) {
            (Some(m), None) => {
                return Resolution::Incompatible { reason: format!("it removed column '{}', which this write sets", m.name) };
            }
            (Some(m), Some(t)) if m.column_type != t.column_type => {
                return Resolution::Incompatible {
                    reason: format!("it changed column '{}' from {} to {}", m.name, m.column_type, t.column_type),
                };
            }
            _ => {}
        }
    }
    if let Some(missing) = theirs.fields.iter().find(|f| !f.nullable && written.binary_search(&f.id).is_err()) {
        return Resolution::Incompatible {
            reason: format!("it made column '{}' required (not null), and this write has no values for it", missing.name),
        };
    }
    Resolution::Rebase
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::{ColumnType, Field};

    fn schema(def: &str) -> Schema {
        Schema::parse(def).unwrap()
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
                Schema { fields: vec![base.fields[0].clone(), Field { column_type: ColumnType::Bigint, ..base.fields[1].clone() }], next_field_id: 2 },
                vec![0, 1],
                false,
            ),
            ("new required column we lack", {
                let mut s = base.clone();
                s.fields.push(Field { id: 2, name: "z".into(), column_type: ColumnType::Int, nullable: false });
                s
            }, vec![0, 1], false),
        ];
        for (name, theirs, written, rebases) in cases {
            let got = rule_written_columns_still_fit(written, &base, &theirs);
            assert_eq!(got == Resolution::Rebase, rebases, "{name}: {got:?}");
        }
    }
}

//! Schema and property changes. Pure: the next schema (or properties) from the base
//! version's. Columns are identified by field id, so no data file is rewritten:
//! old files read an added column as its default, and a dropped column's data stays in
//! them, unread.

use std::collections::BTreeMap;

use super::NextState;
use crate::format::manifest::{field_id_block_end, Manifest, NewColumn, Operation};
use crate::format::schema::{ColumnType, Field, Schema};

/// `base` with `operation`'s schema or property change: its rows untouched.
pub(super) fn apply(base: &Manifest, operation: &Operation) -> NextState {
    NextState {
        schema: schema_after(&base.schema, operation),
        properties: properties_after(base, operation),
        ..NextState::with_segments(base, base.segments.clone(), base.next_ids())
    }
}

/// The base's schema after `operation` (unchanged for non-schema operations).
fn schema_after(base: &Schema, operation: &Operation) -> Schema {
    let mut schema = base.clone();
    match operation {
        Operation::AddColumn { column } => {
            let NewColumn { name, mut column_type, nullable, default, parent, field_id } = column.clone();
            // Field ids are assigned at commit: concurrent adds never share one. The
            // column (or struct field) first, then its nested fields, depth-first. A
            // merged add keeps the branch's (as the branch assigned them); the target's
            // counter moves only within its own block.
            let id = field_id.unwrap_or(schema.next_field_id);
            let mut next = id + 1;
            column_type.assign_ids(&mut next);
            if field_id.is_none() || field_id_block_end(id) == field_id_block_end(schema.next_field_id) {
                schema.next_field_id = schema.next_field_id.max(next);
            }
            let field = Field { id, name, column_type, nullable, default, widened_from: None };
            match parent.and_then(|p| schema.field_by_id_deep_mut(p)).map(|p| &mut p.column_type) {
                Some(ColumnType::Struct(fields)) => fields.push(field),
                // The conflict rules refuse an add whose struct is gone.
                Some(_) => {}
                None if parent.is_some() => {}
                None => schema.fields.push(field),
            }
        }
        // Already gone (a winner dropped it): nothing to do.
        Operation::DropColumn { field_id, .. } => schema.remove_deep(*field_id),
        Operation::RenameColumn { field_id, to, .. } => {
            if let Some(f) = schema.field_by_id_deep_mut(*field_id) {
                f.name = to.clone();
            }
        }
        // Already as wide (a winner widened it as far): nothing to do.
        Operation::WidenColumn { field_id, to, .. } => {
            if let Some(f) = schema.field_by_id_deep_mut(*field_id).filter(|f| f.column_type.widens_to(to)) {
                f.widened_from = f.widened_from.clone().or(Some(f.column_type.clone()));
                f.column_type = to.clone();
            }
        }
        _ => {}
    }
    schema
}

/// The base's properties after `operation` (unchanged unless it sets properties).
fn properties_after(base: &Manifest, operation: &Operation) -> BTreeMap<String, String> {
    let mut properties = base.properties.clone();
    if let Operation::SetProperties { set, unset } = operation {
        for key in unset {
            properties.remove(key);
        }
        properties.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    properties
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::ColumnType;

    #[test]
    fn schema_changes_by_field_id() {
        let base = Schema::parse("id bigint not null, name varchar").unwrap();
        let add = Operation::AddColumn {
            column: NewColumn {
                name: "qty".into(),
                column_type: ColumnType::Int,
                nullable: false,
                default: Some("1".into()),
                parent: None,
                field_id: None,
            },
        };
        let added = schema_after(&base, &add);
        assert_eq!((added.fields[2].id, added.next_field_id), (2, 3));
        let renamed = schema_after(&added, &Operation::RenameColumn { field_id: 1, from: "name".into(), to: "label".into() });
        assert_eq!(renamed.names(), vec!["id", "label", "qty"]);
        let dropped = schema_after(&renamed, &Operation::DropColumn { field_id: 1, name: "name".into() });
        assert_eq!(dropped.names(), vec!["id", "qty"]);
        assert_eq!(
            schema_after(&dropped, &Operation::DropColumn { field_id: 1, name: "name".into() }),
            dropped,
            "dropping twice is a no-op"
        );
        let readded = schema_after(
            &dropped,
            &Operation::AddColumn {
                column: NewColumn {
                    name: "name".into(),
                    column_type: ColumnType::Varchar,
                    nullable: true,
                    default: None,
                    parent: None,
                    field_id: None,
                },
            },
        );
        assert_eq!(readded.field("name").unwrap().id, 3, "a re-added column never reuses the old id");
    }
}

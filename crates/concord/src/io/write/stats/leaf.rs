//! Statistics of struct leaves: the flat fields reached from a column through structs
//! only (`payload.user.id`), recorded per data file under the leaf's field id and used
//! to skip fragments for filters on them.
//!
//! Invariants: a leaf's value is NULL where it or any struct above it is NULL (its
//! NULL count says so); a file without a leaf's statistics has unknown bounds for it
//! (never "all NULL"); elements of lists, maps and vectors have no statistics here.

use std::sync::Arc;

use arrow::array::{make_array, Array, ArrayRef, AsArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{Field as ArrowField, Schema as ArrowSchema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};

use super::{column_stats, Summary};
use crate::format::manifest::{ColumnStats, Fragment};
use crate::format::schema::{ColumnType, Field};

/// A struct leaf a filter reads, as pruning names it.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    /// Its path (`payload.user.id`): the column name pruning sees.
    pub path: String,
    /// The field id of the column it is in.
    pub column: u32,
    /// The leaf.
    pub field: Field,
}

/// Statistics of the struct leaves of column `field` over `arrays` (its pieces in one
/// file), each under the leaf's id.
pub(crate) fn leaf_stats(field: &Field, arrays: &[&ArrayRef]) -> Vec<ColumnStats> {
    let ColumnType::Struct(_) = field.column_type else { return Vec::new() };
    let mut leaves: Vec<(Field, Vec<ArrayRef>)> = Vec::new();
    for array in arrays {
        let mut found = Vec::new();
        collect(field, array, None, &mut found);
        for (i, (leaf, values)) in found.into_iter().enumerate() {
            match leaves.get_mut(i) {
                Some((_, pieces)) => pieces.push(values),
                None => leaves.push((leaf, vec![values])),
            }
        }
    }
    leaves.iter().map(|(leaf, pieces)| column_stats(leaf, &pieces.iter().collect::<Vec<_>>())).collect()
}

/// The leaves under struct `field` (values `array`, NULL also where `above` is).
fn collect(field: &Field, array: &ArrayRef, above: Option<&NullBuffer>, out: &mut Vec<(Field, ArrayRef)>) {
    let ColumnType::Struct(children) = &field.column_type else { return };
    let s = array.as_struct();
    let nulls = NullBuffer::union(above, s.nulls());
    for (child, values) in children.iter().zip(s.columns()) {
        match &child.column_type {
            ColumnType::Struct(_) => collect(child, values, nulls.as_ref(), out),
            t if t.is_nested() => {}
            _ => {
                let all = NullBuffer::union(nulls.as_ref(), values.nulls());
                let data = values.to_data().into_builder().nulls(all).build().expect("the same values with more NULLs");
                out.push((child.clone(), make_array(data)));
            }
        }
    }
}

/// What `fragment`'s statistics say about `leaf`.
pub(crate) fn leaf_summary(fragment: &Fragment, leaf: &Leaf) -> Summary {
    let [file] = fragment.files.as_slice() else { return Summary::default() };
    if !file.fields.contains(&leaf.column) {
        // The column is NULL in every row (nested columns have no default): so is the leaf.
        return Summary { min: None, max: None, nulls: Some(fragment.physical_rows) };
    }
    file.stats.iter().find(|s| s.field == leaf.field.id).map(|s| crate::io::write::stats::summary_of(s, &leaf.field)).unwrap_or_default()
}

/// `physical` for pruning: each `get_field` chain that reaches a flat field of a column
/// (of `fields`) through structs becomes a column named by its path, appended to
/// `schema`. `None` if there is none.
pub(crate) fn as_leaf_columns(
    physical: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
    fields: &[Field],
) -> Option<(Arc<dyn PhysicalExpr>, SchemaRef, Vec<Leaf>)> {
    let mut leaves: Vec<Leaf> = Vec::new();
    let rewritten = physical
        .clone()
        .transform_down(|e| {
            let Some(leaf) = leaf_of(&e, fields) else { return Ok(Transformed::no(e)) };
            let index = schema.fields().len() + leaves.iter().position(|l| l.path == leaf.path).unwrap_or(leaves.len());
            let column: Arc<dyn PhysicalExpr> = Arc::new(Column::new(&leaf.path, index));
            if !leaves.iter().any(|l| l.path == leaf.path) {
                leaves.push(leaf);
            }
            Ok(Transformed::yes(column))
        })
        .ok()?
        .data;
    if leaves.is_empty() {
        return None;
    }
    let mut all: Vec<ArrowField> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    all.extend(leaves.iter().map(|l| l.field.column_type.arrow_field(&l.path, true)));
    Some((rewritten, Arc::new(ArrowSchema::new(all)), leaves))
}

/// The struct leaf `expr` reads, if it is `get_field(... get_field(column, a) ..., z)`.
fn leaf_of(expr: &Arc<dyn PhysicalExpr>, fields: &[Field]) -> Option<Leaf> {
    let mut names = Vec::new();
    let mut at = expr.clone();
    let column = loop {
        if let Some(c) = at.downcast_ref::<Column>() {
            break fields.iter().find(|f| f.name == c.name())?;
        }
        let f = at.downcast_ref::<ScalarFunctionExpr>().filter(|f| f.name() == "get_field")?;
        let (base, path) = f.args().split_first()?;
        let mut these = Vec::new();
        for p in path {
            match p.downcast_ref::<Literal>()?.value() {
                ScalarValue::Utf8(Some(n)) | ScalarValue::LargeUtf8(Some(n)) | ScalarValue::Utf8View(Some(n)) => these.push(n.clone()),
                _ => return None,
            }
        }
        names.splice(0..0, these);
        at = base.clone();
    };
    let mut field = column;
    for name in &names {
        let ColumnType::Struct(children) = &field.column_type else { return None };
        field = children.iter().find(|c| &c.name == name)?;
    }
    if field.column_type.is_nested() || names.is_empty() {
        return None;
    }
    let path = std::iter::once(column.name.as_str()).chain(names.iter().map(String::as_str)).collect::<Vec<_>>().join(".");
    Some(Leaf { path, column: column.id, field: field.clone() })
}

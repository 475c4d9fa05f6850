//! Matching a data file's columns to the table schema by field id.
//!
//! Invariant: a column is identified by its field id, never by name or position, so a
//! renamed column still reads its old files and a column added later reads as its
//! default (NULL without one).

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

use crate::format::schema::Field;

/// Rebuilds `batch` (columns named as in the file, whose columns have ids
/// `file_fields` by position in `file_schema`) as `target` (fields `wanted`).
pub(crate) fn to_table_columns(
    batch: &RecordBatch,
    file_schema: &SchemaRef,
    file_fields: &[u32],
    wanted: &[Field],
    target: &SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    let rows = batch.num_rows();
    let columns = wanted
        .iter()
        .zip(target.fields().iter())
        .map(|(field, out)| {
            let found = batch
                .schema()
                .fields()
                .iter()
                .position(|bf| file_schema.index_of(bf.name()).ok().and_then(|i| file_fields.get(i)).copied() == Some(field.id));
            let column = match found {
                Some(i) if field.column_type.is_nested() && batch.column(i).data_type() != out.data_type() => {
                    return crate::io::values::nested::by_id(batch.column(i), &field.column_type, out.data_type());
                }
                Some(i) => batch.column(i).clone(),
                None => field.default_array(rows),
            };
            if column.data_type() == out.data_type() {
                return Ok(column);
            }
            // Files are written in the table's types; a value that does not convert
            // means the file is not what its manifest says (never a silent NULL).
            cast_with_options(&column, out.data_type(), &CastOptions { safe: false, ..Default::default() })
        })
        .collect::<Result<Vec<ArrayRef>, ArrowError>>()?;
    RecordBatch::try_new_with_options(target.clone(), columns, &RecordBatchOptions::new().with_row_count(Some(rows)))
}

/// `schema` with its top-level `Utf8` columns as `Utf8View`, as SQL reads them (what
/// DataFusion's own Parquet tables do): a view decodes without copying the bytes of a
/// dictionary- or plain-encoded page and compares by its inline prefix first.
pub(crate) fn with_string_views(schema: &arrow::datatypes::Schema) -> arrow::datatypes::Schema {
    use arrow::datatypes::{DataType, Field};
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => f.as_ref().clone().with_data_type(DataType::Utf8View),
            _ => f.as_ref().clone(),
        })
        .collect();
    arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// Whether `schema` has a column read as string views.
pub(crate) fn has_string_views(schema: &arrow::datatypes::Schema) -> bool {
    schema.fields().iter().any(|f| f.data_type() == &arrow::datatypes::DataType::Utf8View)
}

/// The file column index holding field `id`, if the file has it.
pub(crate) fn file_column(file_fields: &[u32], id: u32) -> Option<usize> {
    file_fields.iter().position(|f| *f == id)
}

//! Concord schemas as Iceberg schemas (FORMAT.md §6's type table), with the same field
//! ids all the way down: Iceberg readers map the Parquet files' columns by these ids.

use serde_json::{json, Value};

use crate::format::schema::types::ColumnType;
use crate::format::schema::{Field, Schema};

/// Why a type has no Iceberg type that reads its stored values exactly.
pub(crate) fn unsupported(column_type: &ColumnType) -> Option<&'static str> {
    match column_type {
        ColumnType::Ubigint => Some("Iceberg has no unsigned 64-bit integer, and its decimal(20, 0) cannot read the stored INT64"),
        ColumnType::Decimal { precision, .. } if *precision > 38 => Some("Iceberg decimals stop at precision 38"),
        ColumnType::TimestampNs | ColumnType::TimestampNtzNs => Some("nanosecond timestamps need Iceberg v3, not yet written"),
        _ => None,
    }
}

/// The first field (depth first) whose type Iceberg cannot read: (its path, its type, why).
pub(crate) fn first_unsupported(schema: &Schema) -> Option<(String, String, &'static str)> {
    fn walk(field: &Field, path: String) -> Option<(String, String, &'static str)> {
        if let Some(why) = unsupported(&field.column_type) {
            return Some((path, field.column_type.sql_name(), why));
        }
        match &field.column_type {
            ColumnType::List(e) | ColumnType::Vector(e, _) => walk(e, format!("{path}.{}", e.name)),
            ColumnType::Struct(fields) => fields.iter().find_map(|f| walk(f, format!("{path}.{}", f.name))),
            ColumnType::Map(k, v) => walk(k, format!("{path}.{}", k.name)).or_else(|| walk(v, format!("{path}.{}", v.name))),
            _ => None,
        }
    }
    schema.fields.iter().find_map(|f| walk(f, f.name.clone()))
}

/// The Iceberg schema JSON of `schema` (callers check [`first_unsupported`] first).
pub(crate) fn schema_json(schema: &Schema, schema_id: i32) -> Value {
    json!({"type": "struct", "schema-id": schema_id, "fields": schema.fields.iter().map(field_json).collect::<Vec<_>>()})
}

fn field_json(field: &Field) -> Value {
    let mut json = json!({"id": field.id, "name": field.name, "required": !field.nullable, "type": type_json(&field.column_type)});
    if let Ok(Some(value)) = initial_default(field) {
        json["initial-default"] = value;
    }
    json
}

/// A field's default as Iceberg v3's `initial-default` (JSON single-value form: what a
/// data file lacking the column reads as); `Err` when it has no exact form.
pub(crate) fn initial_default(field: &Field) -> Result<Option<Value>, &'static str> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{DataType, Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
    use arrow::datatypes::{TimeUnit, TimestampMicrosecondType, UInt16Type, UInt32Type, UInt8Type};
    if field.default.is_none() {
        return Ok(None);
    }
    let value = field.default_array(1);
    if value.is_null(0) {
        return Ok(None);
    }
    let micros = |v: i64| chrono::DateTime::from_timestamp_micros(v).ok_or("a timestamp out of range");
    let json = match value.data_type() {
        DataType::Boolean => json!(value.as_boolean().value(0)),
        DataType::Int8 => json!(value.as_primitive::<Int8Type>().value(0)),
        DataType::Int16 => json!(value.as_primitive::<Int16Type>().value(0)),
        DataType::Int32 => json!(value.as_primitive::<Int32Type>().value(0)),
        DataType::Int64 => json!(value.as_primitive::<Int64Type>().value(0)),
        DataType::UInt8 => json!(value.as_primitive::<UInt8Type>().value(0)),
        DataType::UInt16 => json!(value.as_primitive::<UInt16Type>().value(0)),
        DataType::UInt32 => json!(value.as_primitive::<UInt32Type>().value(0)),
        DataType::Float32 => Value::from(f64::from(value.as_primitive::<Float32Type>().value(0))),
        DataType::Float64 => Value::from(value.as_primitive::<Float64Type>().value(0)),
        DataType::Utf8 => json!(value.as_string::<i32>().value(0)),
        DataType::Decimal128(..) => json!(crate::io::values::display_value(value.as_ref(), 0)),
        DataType::Date32 => {
            let days = value.as_primitive::<Date32Type>().value(0);
            json!((micros(i64::from(days) * 86_400_000_000)?.date_naive()).format("%Y-%m-%d").to_string())
        }
        DataType::Timestamp(TimeUnit::Microsecond, zone) => {
            let at = micros(value.as_primitive::<TimestampMicrosecondType>().value(0))?;
            let text = at.format("%Y-%m-%dT%H:%M:%S%.6f").to_string();
            json!(if zone.is_some() { format!("{text}+00:00") } else { text })
        }
        _ => return Err("Concord has no Iceberg initial-default form for a default of this type"),
    };
    // A NaN or infinite float has no JSON form.
    if json.is_null() {
        return Err("a NaN or infinite default has no Iceberg initial-default form");
    }
    Ok(Some(json))
}

/// The Iceberg type of `column_type`: the unsigned types widen to the next signed type
/// that holds every value; a vector is a list.
pub(crate) fn type_json(column_type: &ColumnType) -> Value {
    let name = |s: &str| Value::String(s.to_string());
    match column_type {
        ColumnType::Boolean => name("boolean"),
        ColumnType::Tinyint | ColumnType::Smallint | ColumnType::Int | ColumnType::Utinyint | ColumnType::Usmallint => name("int"),
        ColumnType::Bigint | ColumnType::Uint => name("long"),
        ColumnType::Ubigint => name("decimal(20, 0)"),
        ColumnType::Float => name("float"),
        ColumnType::Double => name("double"),
        ColumnType::Decimal { precision, scale } => Value::String(format!("decimal({precision}, {scale})")),
        ColumnType::Varchar => name("string"),
        ColumnType::Binary => name("binary"),
        ColumnType::Fixed(n) => Value::String(format!("fixed[{n}]")),
        ColumnType::Uuid => name("uuid"),
        ColumnType::Date => name("date"),
        ColumnType::Time => name("time"),
        ColumnType::Timestamp => name("timestamptz"),
        ColumnType::TimestampNs => name("timestamptz_ns"),
        ColumnType::TimestampNtz => name("timestamp"),
        ColumnType::TimestampNtzNs => name("timestamp_ns"),
        ColumnType::List(e) | ColumnType::Vector(e, _) => json!({
            "type": "list", "element-id": e.id, "element": type_json(&e.column_type), "element-required": !e.nullable,
        }),
        ColumnType::Struct(fields) => json!({"type": "struct", "fields": fields.iter().map(field_json).collect::<Vec<_>>()}),
        ColumnType::Map(k, v) => json!({
            "type": "map", "key-id": k.id, "key": type_json(&k.column_type),
            "value-id": v.id, "value": type_json(&v.column_type), "value-required": !v.nullable,
        }),
    }
}

/// The largest field id in `schema`, nested fields included.
pub(crate) fn last_column_id(schema: &Schema) -> u32 {
    fn walk(field: &Field) -> u32 {
        let children = match &field.column_type {
            ColumnType::List(e) | ColumnType::Vector(e, _) => walk(e),
            ColumnType::Struct(fields) => fields.iter().map(walk).max().unwrap_or(0),
            ColumnType::Map(k, v) => walk(k).max(walk(v)),
            _ => 0,
        };
        field.id.max(children)
    }
    schema.fields.iter().map(walk).max().unwrap_or(0)
}

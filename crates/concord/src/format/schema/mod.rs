//! Table schema: columns with stable field ids and SQL type names.
//!
//! Invariant: a field id is never reused within a table, so a data file's columns are
//! matched to the schema by id, never by name or position.

pub(crate) mod types;

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::format::schema::types::SUPPORTED_TYPES;
pub use crate::format::schema::types::{ColumnType, MAX_DECIMAL128_PRECISION, MAX_DECIMAL_PRECISION};

/// Metadata key under which Parquet stores a column's field id.
pub(crate) const PARQUET_FIELD_ID_KEY: &str = "PARQUET:field_id";

/// A column of a table, or a nested field of one (a list's element, a struct's field, a
/// map's key or value, a vector's element: see [`ColumnType::children`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// Stable id, unique within the table's whole history.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    /// Whether it may be NULL.
    pub nullable: bool,
    /// Value of rows written before the column existed (and of rows appended without
    /// it), as text castable to the column type; `None` reads as NULL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The type the column had before it was first widened (`alter widen-column`);
    /// `None` if it never was. Files written before hold values of an older type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widened_from: Option<ColumnType>,
}

impl Field {
    /// `rows` copies of the value this column has in a data file that lacks it.
    pub fn default_array(&self, rows: usize) -> ArrayRef {
        let to = self.column_type.arrow_type();
        match &self.default {
            None => new_null_array(&to, rows),
            Some(text) => {
                let one: ArrayRef = Arc::new(StringArray::from(vec![text.as_str()]));
                match cast(&one, &to) {
                    Ok(value) if value.is_valid(0) => {
                        let indices = arrow::array::UInt32Array::from(vec![0u32; rows]);
                        arrow::compute::take(&value, &indices, None).expect("index 0 of a one-row array")
                    }
                    // Defaults are checked when the column is added; an unreadable one reads as NULL.
                    _ => new_null_array(&to, rows),
                }
            }
        }
    }
}

/// A table's columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// The columns, in order.
    pub fields: Vec<Field>,
    /// The id the next added column receives.
    pub next_field_id: u32,
}

/// A schema definition string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaParseError {
    /// No column given.
    #[error("the schema has no columns; give at least one, e.g. \"id bigint not null, name varchar\"")]
    Empty,
    /// Not `name type [not null]`.
    #[error("column definition '{definition}' is not of the form \"name type [not null]\"")]
    BadDefinition {
        /// The definition as given.
        definition: String,
    },
    /// A type Concord does not have.
    #[error("unknown column type '{type_name}'; supported types: {}", SUPPORTED_TYPES)]
    UnknownType {
        /// The type as given.
        type_name: String,
    },
    /// A parameterised type with bad parameters (`decimal(80, 2)`, `fixed(0)`).
    #[error("column type '{type_name}': {why}")]
    BadTypeParameters {
        /// The type as given.
        type_name: String,
        /// What is wrong.
        why: String,
    },
    /// Two columns of one name.
    #[error("column '{name}' is defined twice")]
    DuplicateColumn {
        /// The name.
        name: String,
    },
    /// A default at create (defaults come with added columns).
    #[error("'{definition}': defaults are given when adding a column (concord alter <uri> add-column \"name type default expr\"), not at create")]
    DefaultAtCreate {
        /// The definition as given.
        definition: String,
    },
    /// More than [`MAX_COLUMNS`] columns.
    #[error("the schema has {count} columns; a table has at most {limit}")]
    TooManyColumns {
        /// Columns given.
        count: usize,
        /// [`MAX_COLUMNS`].
        limit: usize,
    },
    /// A name longer than [`MAX_COLUMN_NAME_BYTES`].
    #[error("a column name of {bytes} bytes is longer than the {limit} allowed")]
    NameTooLong {
        /// Its length.
        bytes: usize,
        /// [`MAX_COLUMN_NAME_BYTES`].
        limit: usize,
    },
    /// A name that breaks the naming rule (see [`check_column_name`]).
    #[error("{name:?} is not a valid column name: {why}")]
    BadName {
        /// The name.
        name: String,
        /// The rule it breaks.
        why: &'static str,
    },
    /// A double-quoted name without its closing quote.
    #[error("'{definition}': the column name's double quote is not closed")]
    UnclosedQuote {
        /// The definition as given.
        definition: String,
    },
}

/// A column name that picks out no column, or several.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ColumnNameError {
    /// No column has the name.
    #[error("unknown column '{name}'; the table has: {known}")]
    Unknown {
        /// The name.
        name: String,
        /// The table's columns.
        known: String,
    },
    /// Several columns match the name ignoring case.
    #[error("column name '{name}' matches {} columns that differ only in case ({}); write the one you mean in double quotes with its exact case, e.g. \"{}\"", candidates.len(), candidates.join(", "), candidates[0])]
    Ambiguous {
        /// The name.
        name: String,
        /// The columns it matches.
        candidates: Vec<String>,
    },
    /// A nested column named as a merge key.
    #[error(
        "column '{name}' is {column_type}: merge keys are flat columns (integers, decimals, text, dates, timestamps, ...), not nested ones"
    )]
    NestedKey {
        /// The name.
        name: String,
        /// Its type.
        column_type: String,
    },
}

/// Most columns a table may have (wider tables are rejected at create and add-column).
pub const MAX_COLUMNS: usize = 10_000;
/// Longest column name, in bytes.
pub const MAX_COLUMN_NAME_BYTES: usize = 256;

/// One column definition: `name type [not null] [default <SQL expression>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Its name.
    pub name: String,
    /// Its type.
    pub column_type: ColumnType,
    /// Whether it may be NULL.
    pub nullable: bool,
    /// The default's SQL expression, as written (evaluated when the column is added).
    pub default_sql: Option<String>,
}

impl ColumnSpec {
    /// Parses `name type [not null] [default <SQL expression>]`. The name may be
    /// written in double quotes (`"Customer ID" bigint`; `""` is a quote inside it),
    /// and must then be one: any name that follows [`check_column_name`].
    pub fn parse(definition: &str) -> Result<ColumnSpec, SchemaParseError> {
        let bad = || SchemaParseError::BadDefinition { definition: definition.trim().to_string() };
        let (name, rest) = split_name(definition.trim_start())
            .ok_or_else(|| SchemaParseError::UnclosedQuote { definition: definition.trim().to_string() })?;
        let (head, default_sql) = match find_word(rest, "default") {
            Some(at) => {
                let expr = rest[at + "default".len()..].trim();
                if expr.is_empty() {
                    return Err(bad());
                }
                (&rest[..at], Some(expr.to_string()))
            }
            None => (rest, None),
        };
        if name.is_empty() && head.trim().is_empty() {
            return Err(bad());
        }
        let (type_text, nullable) = crate::format::schema::types::nested::split_nullability(head.trim());
        if type_text.is_empty() {
            return Err(bad());
        }
        // Nested types keep their spacing (a struct field's quoted name may hold spaces).
        let column_type: ColumnType = if type_text.contains(['<', '[']) {
            type_text.parse()?
        } else {
            type_text.split_whitespace().collect::<Vec<_>>().join(" ").parse()?
        };
        check_column_name(&name)?;
        Ok(ColumnSpec { name, column_type, nullable, default_sql })
    }
}

/// The one naming rule for columns (create, add and rename alike): any text of 1 to
/// [`MAX_COLUMN_NAME_BYTES`] bytes without control characters or surrounding
/// whitespace. Names that are not plain SQL identifiers (spaces, other characters,
/// dots, keywords) are written in double quotes in schemas and expressions.
pub fn check_column_name(name: &str) -> Result<(), SchemaParseError> {
    let bad = |why| Err(SchemaParseError::BadName { name: name.to_string(), why });
    if name.is_empty() {
        return bad("a name has at least one character");
    }
    if name.len() > MAX_COLUMN_NAME_BYTES {
        return Err(SchemaParseError::NameTooLong { bytes: name.len(), limit: MAX_COLUMN_NAME_BYTES });
    }
    if name.chars().any(char::is_control) {
        return bad("control characters (line breaks, tabs, ...) are not allowed");
    }
    if name.trim() != name {
        return bad("a name does not start or end with whitespace");
    }
    Ok(())
}

/// A column name as written in a schema: as it is if it is a plain identifier (ASCII
/// letters, digits and `_`, not starting with a digit), else in double quotes.
pub fn quote_column_name(name: &str) -> String {
    let mut chars = name.chars();
    let plain =
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// A user's column reference (`--columns`, `--on`, `--set`, `alter`): a name in double
/// quotes is taken exactly (with `""` for a quote), else as written.
pub(crate) fn unquote(reference: &str) -> Option<&str> {
    reference.strip_prefix('"').and_then(|n| n.strip_suffix('"')).filter(|_| reference.len() >= 2)
}

/// The leading column name of `text` (double-quoted, or up to the first whitespace)
/// and the rest. `None`: an unclosed quote.
pub(super) fn split_name(text: &str) -> Option<(String, &str)> {
    let Some(quoted) = text.strip_prefix('"') else {
        let end = text.find(char::is_whitespace).unwrap_or(text.len());
        return Some((text[..end].to_string(), &text[end..]));
    };
    let mut name = String::new();
    let mut chars = quoted.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '"' {
            if matches!(chars.peek(), Some((_, '"'))) {
                chars.next();
                name.push('"');
                continue;
            }
            return Some((name, &quoted[i + 1..]));
        }
        name.push(c);
    }
    None
}

/// `definition` split at its top-level commas: not inside double or single quotes,
/// parentheses or angle brackets (`decimal(10, 2)`, `map<varchar, int>`).
pub(super) fn split_columns(definition: &str) -> Vec<&str> {
    let (mut parts, mut start, mut depth) = (Vec::new(), 0, 0i32);
    let mut quote: Option<char> = None;
    for (i, c) in definition.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '<') => depth += 1,
            (None, ')' | '>') => depth -= 1,
            (None, ',') if depth <= 0 => {
                parts.push(&definition[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&definition[start..]);
    parts
}

/// Byte offset of `word` as a whole whitespace-separated word, case-insensitively.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(word) {
        let at = from + i;
        let before = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let end = at + word.len();
        let after = end == lower.len() || lower.as_bytes()[end].is_ascii_whitespace();
        if before && after {
            return Some(at);
        }
        from = end;
    }
    None
}

impl Schema {
    /// Parses `"id bigint not null, name varchar"`; field ids are assigned in order from 0.
    /// Defaults are given when adding a column (`alter ... add-column`), not here.
    pub fn parse(definition: &str) -> Result<Schema, SchemaParseError> {
        let parts: Vec<&str> = split_columns(definition).into_iter().map(str::trim).filter(|p| !p.is_empty()).collect();
        if parts.len() > MAX_COLUMNS {
            return Err(SchemaParseError::TooManyColumns { count: parts.len(), limit: MAX_COLUMNS });
        }
        let mut fields: Vec<Field> = Vec::new();
        let mut names = std::collections::HashSet::new();
        for (idx, part) in parts.into_iter().enumerate() {
            let spec = ColumnSpec::parse(part)?;
            if spec.default_sql.is_some() {
                return Err(SchemaParseError::DefaultAtCreate { definition: part.to_string() });
            }
            if !names.insert(spec.name.clone()) {
                return Err(SchemaParseError::DuplicateColumn { name: spec.name });
            }
            fields.push(Field {
                id: idx as u32,
                name: spec.name,
                column_type: spec.column_type,
                nullable: spec.nullable,
                default: None,
                widened_from: None,
            });
        }
        if fields.is_empty() {
            return Err(SchemaParseError::Empty);
        }
        // Nested fields are numbered after the columns, depth-first.
        let mut next_field_id = fields.len() as u32;
        for f in &mut fields {
            f.column_type.assign_ids(&mut next_field_id);
        }
        Ok(Schema { fields, next_field_id })
    }

    /// The column of exactly this name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The column a user's `name` refers to, by the one rule every command follows: the
    /// column of exactly that name, else the one column whose name matches ignoring
    /// case. A name in double quotes (`"Id"`) matches exactly only.
    pub fn resolve(&self, name: &str) -> Result<&Field, ColumnNameError> {
        let unknown = || ColumnNameError::Unknown { name: name.to_string(), known: self.names().join(", ") };
        if let Some(quoted) = unquote(name) {
            return self.field(&quoted.replace("\"\"", "\"")).ok_or_else(unknown);
        }
        if let Some(exact) = self.field(name) {
            return Ok(exact);
        }
        let mut matching = self.fields.iter().filter(|f| f.name.eq_ignore_ascii_case(name) || f.name.to_lowercase() == name.to_lowercase());
        match (matching.next(), matching.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => Err(unknown()),
            (Some(a), Some(b)) => {
                let mut candidates = vec![a.name.clone(), b.name.clone()];
                candidates.extend(matching.map(|f| f.name.clone()));
                Err(ColumnNameError::Ambiguous { name: name.to_string(), candidates })
            }
        }
    }

    /// The column with field id `id`.
    pub fn field_by_id(&self, id: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.id == id)
    }

    /// The column names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.fields.iter().map(|f| f.name.as_str()).collect()
    }

    /// The Arrow schema of scans (current names, no field-id metadata).
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(ArrowSchema::new(self.fields.iter().map(|f| f.column_type.arrow_field(&f.name, f.nullable)).collect::<Vec<_>>()))
    }

    /// The Arrow schema written to data files: carries each column's field id.
    pub fn arrow_schema_with_field_ids(&self) -> SchemaRef {
        Arc::new(ArrowSchema::new(
            self.fields
                .iter()
                .map(|f| {
                    let field = f.column_type.arrow_field_ids(&f.name, f.nullable, true);
                    let mut metadata = field.metadata().clone();
                    metadata.insert(PARQUET_FIELD_ID_KEY.to_string(), f.id.to_string());
                    field.with_metadata(metadata)
                })
                .collect::<Vec<_>>(),
        ))
    }

    /// Human-readable definition, parseable by [`Schema::parse`].
    pub fn definition(&self) -> String {
        self.definition_columns().join(", ")
    }

    /// Each column's definition, as [`ColumnSpec::parse`] reads it.
    pub fn definition_columns(&self) -> Vec<String> {
        self.fields
            .iter()
            .map(|f| {
                let default = f.default.as_ref().map_or(String::new(), |d| format!(" default {}", sql_literal(d)));
                format!("{} {}{}{default}", quote_column_name(&f.name), f.column_type, if f.nullable { "" } else { " not null" })
            })
            .collect()
    }
}

/// `text` as a SQL string literal.
pub fn sql_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_definitions_with_ids_in_order() {
        let s = Schema::parse("id bigint not null, name varchar, score double, at timestamp").unwrap();
        assert_eq!(s.names(), vec!["id", "name", "score", "at"]);
        assert_eq!(s.fields.iter().map(|f| f.id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert!(!s.fields[0].nullable && s.fields[1].nullable);
        assert_eq!(s.next_field_id, 4);
        assert_eq!(Schema::parse(&s.definition()).unwrap(), s);
    }

    #[test]
    fn rejects_bad_definitions() {
        assert_eq!(Schema::parse(""), Err(SchemaParseError::Empty));
        assert!(matches!(Schema::parse("id"), Err(SchemaParseError::BadDefinition { .. })));
        assert!(matches!(Schema::parse("id uuid128"), Err(SchemaParseError::UnknownType { .. })));
        assert!(matches!(Schema::parse("a int, a bigint"), Err(SchemaParseError::DuplicateColumn { .. })));
        assert!(matches!(Schema::parse("a int default 1"), Err(SchemaParseError::DefaultAtCreate { .. })));
    }

    #[test]
    fn names_resolve_exactly_then_ignoring_case() {
        let s = Schema::parse("UserId bigint, Id int, id int").unwrap();
        assert_eq!(s.resolve("userid").unwrap().name, "UserId");
        assert_eq!(s.resolve("Id").unwrap().name, "Id");
        assert_eq!(s.resolve("\"id\"").unwrap().name, "id");
        assert!(matches!(s.resolve("ID"), Err(ColumnNameError::Ambiguous { candidates, .. }) if candidates == ["Id", "id"]));
        assert!(matches!(s.resolve("\"userid\""), Err(ColumnNameError::Unknown { .. })));
        assert!(matches!(s.resolve("nope"), Err(ColumnNameError::Unknown { .. })));
    }

    #[test]
    fn column_specs_with_defaults() {
        let s = ColumnSpec::parse("qty int not null default 1 + 2").unwrap();
        assert_eq!((s.name.as_str(), s.column_type, s.nullable, s.default_sql.as_deref()), ("qty", ColumnType::Int, false, Some("1 + 2")));
        let s = ColumnSpec::parse("defaulted varchar DEFAULT 'a, b'").unwrap();
        assert_eq!((s.name.as_str(), s.default_sql.as_deref()), ("defaulted", Some("'a, b'")));
        assert!(ColumnSpec::parse("x int default").is_err());
        let f = Field {
            id: 3,
            name: "x".into(),
            column_type: ColumnType::Timestamp,
            nullable: true,
            default: Some("2024-01-02T03:04:05Z".into()),
            widened_from: None,
        };
        let a = f.default_array(3);
        assert_eq!((a.len(), a.null_count()), (3, 0));
    }
}

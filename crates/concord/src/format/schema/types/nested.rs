//! Nested column types (`list<T>`, `struct<a T, ...>`, `map<K, V>`, `T[n]`): their SQL
//! spelling, their Arrow types, their manifest form and their field ids (FORMAT.md §6).
//!
//! Invariants: every nested field (a list's element, a struct's field, a map's key and
//! value, a vector's element) is a [`Field`] with an id unique in the table, assigned
//! depth-first after the top-level columns and never reused; data files carry the ids
//! as `PARQUET:field_id`, so readers match nested fields by id, as columns are.

use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field as ArrowField, Fields};
use serde::{Deserialize, Serialize};

use crate::format::schema::types::ColumnType;
use crate::format::schema::{
    check_column_name, quote_column_name, split_columns, split_name, unquote, ColumnNameError, Field, Schema, SchemaParseError,
    PARQUET_FIELD_ID_KEY,
};

/// Arrow's name of a list's or vector's element field (pyarrow's and arrow-rs's default).
const ELEMENT: &str = "item";
/// Arrow's name of a map's entries, key and value fields (pyarrow's).
const ENTRIES: &str = "entries";
const KEY: &str = "key";
const VALUE: &str = "value";

/// A nested field of `column_type` named `name` (id assigned later: [`assign_ids`]).
fn child(name: &str, column_type: ColumnType, nullable: bool) -> Field {
    Field { id: 0, name: name.to_string(), column_type, nullable, default: None, widened_from: None }
}

impl ColumnType {
    /// The nested fields of a nested type, in order (none for a flat type).
    pub fn children(&self) -> Vec<&Field> {
        match self {
            ColumnType::List(element) | ColumnType::Vector(element, _) => vec![element],
            ColumnType::Struct(fields) => fields.iter().collect(),
            ColumnType::Map(key, value) => vec![key, value],
            _ => Vec::new(),
        }
    }

    fn children_mut(&mut self) -> Vec<&mut Field> {
        match self {
            ColumnType::List(element) | ColumnType::Vector(element, _) => vec![element],
            ColumnType::Struct(fields) => fields.iter_mut().collect(),
            ColumnType::Map(key, value) => vec![key, value],
            _ => Vec::new(),
        }
    }

    /// Whether this is a nested type.
    pub fn is_nested(&self) -> bool {
        matches!(self, ColumnType::List(_) | ColumnType::Struct(_) | ColumnType::Map(..) | ColumnType::Vector(..))
    }

    /// Gives every nested field an id, depth-first, from `next` (which ends past the last).
    pub(crate) fn assign_ids(&mut self, next: &mut u32) {
        for field in self.children_mut() {
            field.id = *next;
            *next += 1;
            field.column_type.assign_ids(next);
        }
    }

    /// This type's nested fields and theirs, depth-first.
    #[cfg(test)]
    pub(crate) fn walk(&self) -> Vec<&Field> {
        let mut out = Vec::new();
        for f in self.children() {
            out.push(f);
            out.extend(f.column_type.walk());
        }
        out
    }

    /// Whether values of `self` and `other` have the same shape and types, whatever the
    /// field ids (names of struct fields and nullability included).
    pub fn same_shape(&self, other: &ColumnType) -> bool {
        if !self.is_nested() {
            return self == other;
        }
        if std::mem::discriminant(self) != std::mem::discriminant(other) {
            return false;
        }
        if let (ColumnType::Vector(_, n), ColumnType::Vector(_, m)) = (self, other) {
            if n != m {
                return false;
            }
        }
        let (a, b) = (self.children(), other.children());
        a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| x.name == y.name && x.nullable == y.nullable && x.column_type.same_shape(&y.column_type))
    }

    /// Whether values of this type (a column or field as a writer or predicate saw it)
    /// still fit `to`, the same field after concurrent schema changes: the same type,
    /// a widened one, or a nested type whose fields all remain (by id; a winner may add
    /// fields), each still fitting. With `names`, nested fields must keep their names
    /// too (a predicate names them; data files match them by id only).
    pub(crate) fn still_fits(&self, to: &ColumnType, names: bool) -> bool {
        if self == to || self.widens_to(to) {
            return true;
        }
        let kept = |a: &Field, b: &Field| a.id == b.id && (!names || a.name == b.name) && a.column_type.still_fits(&b.column_type, names);
        match (self, to) {
            (ColumnType::Struct(mine), ColumnType::Struct(theirs)) => {
                mine.iter().all(|m| theirs.iter().find(|t| t.id == m.id).is_some_and(|t| kept(m, t)))
            }
            (ColumnType::Vector(a, n), ColumnType::Vector(b, m)) => n == m && kept(a, b),
            (ColumnType::List(a), ColumnType::List(b)) => kept(a, b),
            (ColumnType::Map(k, v), ColumnType::Map(l, w)) => kept(k, l) && kept(v, w),
            _ => false,
        }
    }
}

impl Schema {
    /// The column or nested field with id `id`, at any depth.
    pub fn field_by_id_deep(&self, id: u32) -> Option<&Field> {
        fn find(fields: Vec<&Field>, id: u32) -> Option<&Field> {
            fields.into_iter().find_map(|f| if f.id == id { Some(f) } else { find(f.column_type.children(), id) })
        }
        find(self.fields.iter().collect(), id)
    }

    /// The same, to change it.
    pub(crate) fn field_by_id_deep_mut(&mut self, id: u32) -> Option<&mut Field> {
        fn find(fields: Vec<&mut Field>, id: u32) -> Option<&mut Field> {
            fields.into_iter().find_map(|f| if f.id == id { Some(f) } else { find(f.column_type.children_mut(), id) })
        }
        find(self.fields.iter_mut().collect(), id)
    }

    /// The fields named beside field `id`: the table's columns, or its struct's fields
    /// (`None` for a list's element, a map's key or value, or an unknown id).
    pub(crate) fn siblings_of(&self, id: u32) -> Option<&[Field]> {
        if self.fields.iter().any(|f| f.id == id) {
            return Some(&self.fields);
        }
        self.struct_fields(|fields| fields.iter().any(|f| f.id == id))
    }

    /// The fields of the struct with field id `id` (`None` if it is not a struct).
    pub(crate) fn struct_fields_of(&self, id: u32) -> Option<&[Field]> {
        match &self.field_by_id_deep(id)?.column_type {
            ColumnType::Struct(fields) => Some(fields),
            _ => None,
        }
    }

    fn struct_fields(&self, pick: impl Fn(&[Field]) -> bool) -> Option<&[Field]> {
        fn find<'a>(fields: Vec<&'a Field>, pick: &dyn Fn(&[Field]) -> bool) -> Option<&'a [Field]> {
            fields.into_iter().find_map(|f| match &f.column_type {
                ColumnType::Struct(children) if pick(children) => Some(children.as_slice()),
                t => find(t.children(), pick),
            })
        }
        find(self.fields.iter().collect(), &pick)
    }

    /// Removes the column or struct field with id `id`, at any depth.
    pub(crate) fn remove_deep(&mut self, id: u32) {
        fn remove(fields: &mut Vec<Field>, id: u32) {
            fields.retain(|f| f.id != id);
            for f in fields.iter_mut() {
                remove_in(&mut f.column_type, id);
            }
        }
        fn remove_in(t: &mut ColumnType, id: u32) {
            match t {
                ColumnType::Struct(fields) => remove(fields, id),
                other => other.children_mut().into_iter().for_each(|c| remove_in(&mut c.column_type, id)),
            }
        }
        remove(&mut self.fields, id);
    }

    /// The column or nested field a user's path names: a column name by the one rule
    /// ([`Schema::resolve`]), then `.field` for a struct's field (exactly, else the one
    /// matching ignoring case), `.element` for a list's or vector's element, `.key` and
    /// `.value` for a map's. A name holding a dot is written in double quotes
    /// (`"a.b".c`); a column whose whole name matches is taken first.
    pub fn resolve_path(&self, path: &str) -> Result<&Field, ColumnNameError> {
        let whole = self.resolve(path.trim());
        let segments = split_path(path.trim());
        if whole.is_ok() || segments.len() < 2 {
            return whole;
        }
        let mut field = self.resolve(&segments[0])?;
        for segment in &segments[1..] {
            let name = unquote(segment).map_or_else(|| segment.to_string(), |q| q.replace("\"\"", "\""));
            let children = field.column_type.children();
            let unknown = || ColumnNameError::Unknown {
                name: path.trim().to_string(),
                known: children.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            };
            let exact = children.iter().find(|c| c.name == name).copied();
            let found = match (&field.column_type, exact) {
                (ColumnType::Struct(_), Some(f)) => Some(f),
                (ColumnType::Struct(_), None) if unquote(segment).is_none() => {
                    let mut matching = children.iter().filter(|c| c.name.to_lowercase() == name.to_lowercase());
                    match (matching.next(), matching.next()) {
                        (Some(one), None) => Some(*one),
                        _ => None,
                    }
                }
                (ColumnType::List(_) | ColumnType::Vector(..), _) if name.eq_ignore_ascii_case("element") => children.first().copied(),
                (ColumnType::Map(..), _) if name.eq_ignore_ascii_case("key") => children.first().copied(),
                (ColumnType::Map(..), _) if name.eq_ignore_ascii_case("value") => children.get(1).copied(),
                _ => None,
            };
            field = found.ok_or_else(unknown)?;
        }
        Ok(field)
    }
}

/// A dotted path's segments (dots inside double quotes belong to the name; quoted
/// segments keep their quotes).
pub(crate) fn split_path(path: &str) -> Vec<String> {
    let (mut segments, mut current, mut quoted) = (Vec::new(), String::new(), false);
    for c in path.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                current.push(c);
            }
            '.' if !quoted => segments.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    segments.push(current);
    segments.into_iter().map(|s| s.trim().to_string()).collect()
}

/// `T` or `T not null` (an element's or a value's type): the type and whether NULL is allowed.
fn element_spec(text: &str) -> Result<(ColumnType, bool), SchemaParseError> {
    let (type_text, nullable) = split_nullability(text);
    Ok((type_text.parse()?, nullable))
}

/// `text` without a trailing `not null` (or `null`), and whether it allows NULL.
pub(crate) fn split_nullability(text: &str) -> (&str, bool) {
    let trimmed = text.trim_end();
    let lower = trimmed.to_ascii_lowercase();
    if let Some(rest) = lower.strip_suffix("not null") {
        if rest.ends_with(char::is_whitespace) {
            let cut = rest.trim_end().len();
            return (trimmed[..cut].trim_end(), false);
        }
    }
    if let Some(rest) = lower.strip_suffix("null") {
        if rest.ends_with(char::is_whitespace) {
            return (trimmed[..rest.trim_end().len()].trim_end(), true);
        }
    }
    (trimmed, true)
}

/// The text inside `name<...>` (case-insensitive name), if `text` is written so.
fn angled<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = text.find('<')?;
    (text[..open].trim().eq_ignore_ascii_case(name) && text.ends_with('>')).then(|| &text[open + 1..text.len() - 1])
}

/// Parses a nested type's SQL spelling; `None` if `text` is not one.
pub(super) fn parse(text: &str) -> Option<Result<ColumnType, SchemaParseError>> {
    let bad = |why: &str| SchemaParseError::BadTypeParameters { type_name: text.to_string(), why: why.to_string() };
    if let Some(inner) = text.strip_suffix(']') {
        let open = top_level_open_bracket(inner)?;
        let size = inner[open + 1..].trim();
        return Some((|| {
            let size: u32 = size
                .parse()
                .ok()
                .filter(|n| (1..=i32::MAX as u32).contains(n))
                .ok_or_else(|| bad("the size in T[n] is a whole number from 1"))?;
            let (t, nullable) = element_spec(&inner[..open])?;
            Ok(ColumnType::Vector(Box::new(child("element", t, nullable)), size))
        })());
    }
    if let Some(inner) = angled(text, "list").or_else(|| angled(text, "array")) {
        return Some(element_spec(inner).map(|(t, nullable)| ColumnType::List(Box::new(child("element", t, nullable)))));
    }
    if let Some(inner) = angled(text, "map") {
        return Some((|| {
            let parts = split_columns(inner);
            let [key, value] = parts.as_slice() else { return Err(bad("write map<key type, value type>")) };
            let (key_type, _) = element_spec(key)?;
            let (value_type, nullable) = element_spec(value)?;
            Ok(ColumnType::Map(Box::new(child("key", key_type, false)), Box::new(child("value", value_type, nullable))))
        })());
    }
    if let Some(inner) = angled(text, "struct") {
        return Some((|| {
            let mut fields: Vec<Field> = Vec::new();
            for part in split_columns(inner).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
                let (name, rest) = split_name(part).ok_or_else(|| SchemaParseError::UnclosedQuote { definition: part.to_string() })?;
                check_column_name(&name)?;
                if rest.trim().is_empty() {
                    return Err(bad("write struct<name type, ...>"));
                }
                let (t, nullable) = element_spec(rest)?;
                if fields.iter().any(|f| f.name == name) {
                    return Err(SchemaParseError::DuplicateColumn { name });
                }
                fields.push(child(&name, t, nullable));
            }
            if fields.is_empty() {
                return Err(bad("a struct has at least one field"));
            }
            Ok(ColumnType::Struct(fields))
        })());
    }
    None
}

/// Byte offset of the `[` that opens `text`'s last top-level bracket (`float[768]`).
fn top_level_open_bracket(text: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in text.char_indices().rev() {
        match c {
            '>' | ')' => depth += 1,
            '<' | '(' => depth -= 1,
            '[' if depth == 0 => return Some(i),
            _ => {}
        }
    }
    None
}

/// `T` or `T not null`.
fn spec(field: &Field) -> String {
    format!("{}{}", field.column_type.sql_name(), if field.nullable { "" } else { " not null" })
}

/// The SQL spelling of a nested type (`None` for a flat one); parses back as the type.
pub(super) fn sql_name(t: &ColumnType) -> Option<String> {
    Some(match t {
        ColumnType::List(element) => format!("list<{}>", spec(element)),
        ColumnType::Vector(element, n) => format!("{}[{n}]", spec(element)),
        ColumnType::Map(key, value) => format!("map<{}, {}>", key.column_type.sql_name(), spec(value)),
        ColumnType::Struct(fields) => {
            let parts: Vec<String> = fields.iter().map(|f| format!("{} {}", quote_column_name(&f.name), spec(f))).collect();
            format!("struct<{}>", parts.join(", "))
        }
        _ => return None,
    })
}

/// The Arrow field of a nested field, named `name`; with `ids`, carrying its field id.
fn arrow_child(field: &Field, name: &str, ids: bool) -> ArrowField {
    let out = field.column_type.arrow_field_ids(name, field.nullable, ids);
    if !ids {
        return out;
    }
    let mut metadata = out.metadata().clone();
    metadata.insert(PARQUET_FIELD_ID_KEY.to_string(), field.id.to_string());
    out.with_metadata(metadata)
}

/// The Arrow type of a nested type (see [`ColumnType::arrow_type_ids`]).
pub(super) fn arrow_type(t: &ColumnType, ids: bool) -> ArrowType {
    match t {
        ColumnType::List(element) => ArrowType::List(Arc::new(arrow_child(element, ELEMENT, ids))),
        ColumnType::Vector(element, n) => ArrowType::FixedSizeList(Arc::new(arrow_child(element, ELEMENT, ids)), *n as i32),
        ColumnType::Map(key, value) => {
            let entries = ArrowType::Struct(Fields::from(vec![arrow_child(key, KEY, ids), arrow_child(value, VALUE, ids)]));
            ArrowType::Map(Arc::new(ArrowField::new(ENTRIES, entries, false)), false)
        }
        ColumnType::Struct(fields) => {
            ArrowType::Struct(Fields::from(fields.iter().map(|f| arrow_child(f, &f.name, ids)).collect::<Vec<_>>()))
        }
        _ => unreachable!("flat types are mapped in types.rs"),
    }
}

/// The nested type storing an Arrow nested type's values exactly (field ids 0: the
/// schema assigns them), or why there is none.
pub(super) fn from_arrow(t: &ArrowType) -> Result<ColumnType, String> {
    let field = |f: &ArrowField, name: &str| -> Result<Field, String> {
        let column_type = ColumnType::from_arrow(f).map_err(|why| format!("{}: {why}", f.name()))?;
        Ok(child(name, column_type, f.is_nullable()))
    };
    Ok(match t {
        ArrowType::List(f) | ArrowType::LargeList(f) | ArrowType::ListView(f) | ArrowType::LargeListView(f) => {
            ColumnType::List(Box::new(field(f, "element")?))
        }
        ArrowType::FixedSizeList(f, n) => match u32::try_from(*n) {
            Ok(n) if n > 0 => ColumnType::Vector(Box::new(field(f, "element")?), n),
            _ => return Err(format!("a fixed-size list of {n} values is not stored; the nearest type is list<...>")),
        },
        ArrowType::Struct(fields) => {
            if fields.is_empty() {
                return Err("a struct without fields has no Concord column type".into());
            }
            let mut out: Vec<Field> = Vec::with_capacity(fields.len());
            for f in fields {
                check_column_name(f.name()).map_err(|e| e.to_string())?;
                if out.iter().any(|o| &o.name == f.name()) {
                    return Err(format!("the struct has two fields named '{}'", f.name()));
                }
                out.push(field(f, f.name())?);
            }
            ColumnType::Struct(out)
        }
        ArrowType::Map(entries, _) => {
            let ArrowType::Struct(kv) = entries.data_type() else { return Err("a map's entries are not a struct".into()) };
            let [k, v] = kv.iter().collect::<Vec<_>>()[..] else { return Err("a map's entries are not a key and a value".into()) };
            ColumnType::Map(Box::new(Field { nullable: false, ..field(k, "key")? }), Box::new(field(v, "value")?))
        }
        other => unreachable!("{other} is not nested"),
    })
}

/// A nested type as a manifest spells it: an object whose nested fields carry their
/// ids (a flat type is its SQL name). Private mirror of [`ColumnType`]'s nested variants.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum Repr {
    List { element: Box<Field> },
    Struct { fields: Vec<Field> },
    Map { key: Box<Field>, value: Box<Field> },
    Vector { element: Box<Field>, size: u32 },
}

impl Repr {
    pub(super) fn of(t: &ColumnType) -> Option<Repr> {
        Some(match t.clone() {
            ColumnType::List(element) => Repr::List { element },
            ColumnType::Struct(fields) => Repr::Struct { fields },
            ColumnType::Map(key, value) => Repr::Map { key, value },
            ColumnType::Vector(element, size) => Repr::Vector { element, size },
            _ => return None,
        })
    }

    pub(super) fn into_type(self) -> ColumnType {
        match self {
            Repr::List { element } => ColumnType::List(element),
            Repr::Struct { fields } => ColumnType::Struct(fields),
            Repr::Map { key, value } => ColumnType::Map(key, value),
            Repr::Vector { element, size } => ColumnType::Vector(element, size),
        }
    }
}

/// The field id an Arrow field carries (`PARQUET:field_id`), if any.
pub(crate) fn arrow_field_id(field: &ArrowField) -> Option<u32> {
    field.metadata().get(PARQUET_FIELD_ID_KEY).and_then(|id| id.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::Schema;

    #[test]
    fn nested_types_parse_print_and_get_ids_depth_first() {
        let s = Schema::parse(
            "id bigint not null, tags list<varchar>, payload struct<user struct<id bigint not null, \"e mail\" varchar>, at timestamp>, \
             attrs map<varchar, list<int not null>>, emb float not null[4]",
        )
        .unwrap();
        assert_eq!(
            s.definition(),
            "id bigint not null, tags list<varchar>, payload struct<user struct<id bigint not null, \"e mail\" varchar>, at timestamp>, \
             attrs map<varchar, list<int not null>>, emb float not null[4]"
        );
        assert_eq!(Schema::parse(&s.definition()).unwrap(), s);
        // Top-level 0..5, then nested depth-first.
        let ids: Vec<(String, u32)> = s.fields.iter().flat_map(|f| f.column_type.walk()).map(|f| (f.name.clone(), f.id)).collect();
        let expected = [
            ("element", 5),
            ("user", 6),
            ("id", 7),
            ("e mail", 8),
            ("at", 9),
            ("key", 10),
            ("value", 11),
            ("element", 12),
            ("element", 13),
        ];
        assert_eq!(ids, expected.map(|(n, i)| (n.to_string(), i)));
        assert_eq!(s.next_field_id, 14);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Schema>(&json).unwrap(), s);
        assert!(json.contains("\"kind\":\"struct\""), "{json}");
        for f in &s.fields {
            let back = ColumnType::from_arrow(&f.column_type.arrow_field("x", true)).unwrap();
            assert!(back.same_shape(&f.column_type), "{} maps back from Arrow", f.column_type);
        }
        for bad in ["list<>", "map<int>", "struct<>", "struct<a int, a int>", "float[0]", "list<nope>"] {
            assert!(bad.parse::<ColumnType>().is_err(), "{bad}");
        }
    }
}

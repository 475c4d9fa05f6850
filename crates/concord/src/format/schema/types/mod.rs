//! Column types: their SQL names (the manifest's spelling), their Arrow types, the
//! canonical mapping of Arrow input types, and widening (FORMAT.md §6, §7).

pub(crate) mod nested;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType as ArrowType, Field as ArrowField, TimeUnit};
use serde::{Deserialize, Serialize};

use crate::format::schema::{Field, SchemaParseError};

/// Column types, spelled as SQL names in manifests and on the command line (FORMAT.md
/// §2 maps each to its Arrow and Iceberg types).
///
/// Invariant: a type's SQL name parses back to the same type, so manifests store types
/// as their names (the names of format 2's nine types are unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnType {
    /// `boolean`.
    Boolean,
    /// `tinyint`: 8-bit integers.
    Tinyint,
    /// `smallint`: 16-bit integers.
    Smallint,
    /// `int`: 32-bit integers.
    Int,
    /// `bigint`: 64-bit integers.
    Bigint,
    /// `utinyint`: 8-bit unsigned integers.
    Utinyint,
    /// `usmallint`: 16-bit unsigned integers.
    Usmallint,
    /// `uint`: 32-bit unsigned integers.
    Uint,
    /// `ubigint`: 64-bit unsigned integers.
    Ubigint,
    /// `float`: 32-bit floating point.
    Float,
    /// `double`: 64-bit floating point.
    Double,
    /// `decimal(p, s)`: `p` significant digits (1 to 76), `s` of them after the point
    /// (0 to `p`); decimal128 up to precision 38, decimal256 above.
    Decimal {
        /// Significant digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// `varchar`: UTF-8 text.
    Varchar,
    /// `binary`: bytes.
    Binary,
    /// `fixed(n)`: exactly `n` bytes.
    Fixed(u16),
    /// `uuid`: 16 bytes (Arrow's `arrow.uuid` extension type).
    Uuid,
    /// `date`: days.
    Date,
    /// `time`: a time of day in microseconds, no zone.
    Time,
    /// `timestamp` (alias `timestamptz`): microseconds since the epoch, UTC.
    Timestamp,
    /// `timestamp_ns`: nanoseconds since the epoch, UTC.
    TimestampNs,
    /// `timestamp_ntz`: a date and time of day in microseconds, no zone (a wall clock).
    TimestampNtz,
    /// `timestamp_ntz_ns`: a date and time of day in nanoseconds, no zone.
    TimestampNtzNs,
    /// `list<T>`: lists of values of one type; the element is a field with its own id.
    List(Box<Field>),
    /// `struct<a T, b U, ...>`: named fields, each with its own id.
    Struct(Vec<Field>),
    /// `map<K, V>`: keys (never NULL) to values; key and value are fields with ids.
    Map(Box<Field>, Box<Field>),
    /// `T[n]`: exactly `n` values of type `T` (a vector, e.g. `float[768]`).
    Vector(Box<Field>, u32),
}

/// Largest `decimal` precision (decimal256).
pub const MAX_DECIMAL_PRECISION: u8 = 76;
/// Largest `decimal` precision stored as decimal128.
pub const MAX_DECIMAL128_PRECISION: u8 = 38;

/// The types a schema string can name, for messages.
pub(crate) const SUPPORTED_TYPES: &str = "boolean, tinyint, smallint, int, bigint, utinyint, usmallint, uint, ubigint, float, double, \
decimal(p, s), varchar, binary, fixed(n), uuid, date, time, timestamp, timestamp_ns, timestamp_ntz, timestamp_ntz_ns, \
list<T>, struct<name T, ...>, map<K, V>, T[n]";

impl ColumnType {
    /// One of each type (parameterised ones with typical parameters), for tests.
    pub const ALL: [ColumnType; 22] = [
        ColumnType::Boolean,
        ColumnType::Tinyint,
        ColumnType::Smallint,
        ColumnType::Int,
        ColumnType::Bigint,
        ColumnType::Utinyint,
        ColumnType::Usmallint,
        ColumnType::Uint,
        ColumnType::Ubigint,
        ColumnType::Float,
        ColumnType::Double,
        ColumnType::Decimal { precision: 15, scale: 2 },
        ColumnType::Varchar,
        ColumnType::Binary,
        ColumnType::Fixed(16),
        ColumnType::Uuid,
        ColumnType::Date,
        ColumnType::Time,
        ColumnType::Timestamp,
        ColumnType::TimestampNs,
        ColumnType::TimestampNtz,
        ColumnType::TimestampNtzNs,
    ];

    /// The SQL name (as in schemas, manifests and messages).
    pub fn sql_name(&self) -> String {
        if let Some(name) = crate::format::schema::types::nested::sql_name(self) {
            return name;
        }
        let name = match *self {
            ColumnType::Boolean => "boolean",
            ColumnType::Tinyint => "tinyint",
            ColumnType::Smallint => "smallint",
            ColumnType::Int => "int",
            ColumnType::Bigint => "bigint",
            ColumnType::Utinyint => "utinyint",
            ColumnType::Usmallint => "usmallint",
            ColumnType::Uint => "uint",
            ColumnType::Ubigint => "ubigint",
            ColumnType::Float => "float",
            ColumnType::Double => "double",
            ColumnType::Decimal { precision, scale } => return format!("decimal({precision}, {scale})"),
            ColumnType::Varchar => "varchar",
            ColumnType::Binary => "binary",
            ColumnType::Fixed(n) => return format!("fixed({n})"),
            ColumnType::Uuid => "uuid",
            ColumnType::Date => "date",
            ColumnType::Time => "time",
            ColumnType::Timestamp => "timestamp",
            ColumnType::TimestampNs => "timestamp_ns",
            ColumnType::TimestampNtz => "timestamp_ntz",
            ColumnType::TimestampNtzNs => "timestamp_ntz_ns",
            ColumnType::List(_) | ColumnType::Struct(_) | ColumnType::Map(..) | ColumnType::Vector(..) => unreachable!("named above"),
        };
        name.to_string()
    }

    /// The Arrow type of its values (as scans return them: no field ids).
    pub fn arrow_type(&self) -> ArrowType {
        self.arrow_type_ids(false)
    }

    /// The Arrow type of its values; with `ids`, nested fields carry their field ids
    /// (`PARQUET:field_id`), as written to data files.
    pub(crate) fn arrow_type_ids(&self, ids: bool) -> ArrowType {
        let utc = || Some("UTC".into());
        match *self {
            ColumnType::Boolean => ArrowType::Boolean,
            ColumnType::Tinyint => ArrowType::Int8,
            ColumnType::Smallint => ArrowType::Int16,
            ColumnType::Int => ArrowType::Int32,
            ColumnType::Bigint => ArrowType::Int64,
            ColumnType::Utinyint => ArrowType::UInt8,
            ColumnType::Usmallint => ArrowType::UInt16,
            ColumnType::Uint => ArrowType::UInt32,
            ColumnType::Ubigint => ArrowType::UInt64,
            ColumnType::Float => ArrowType::Float32,
            ColumnType::Double => ArrowType::Float64,
            ColumnType::Decimal { precision, scale } if precision <= MAX_DECIMAL128_PRECISION => {
                ArrowType::Decimal128(precision, scale as i8)
            }
            ColumnType::Decimal { precision, scale } => ArrowType::Decimal256(precision, scale as i8),
            ColumnType::Varchar => ArrowType::Utf8,
            ColumnType::Binary => ArrowType::Binary,
            ColumnType::Fixed(n) => ArrowType::FixedSizeBinary(i32::from(n)),
            ColumnType::Uuid => ArrowType::FixedSizeBinary(16),
            ColumnType::Date => ArrowType::Date32,
            ColumnType::Time => ArrowType::Time64(TimeUnit::Microsecond),
            ColumnType::Timestamp => ArrowType::Timestamp(TimeUnit::Microsecond, utc()),
            ColumnType::TimestampNs => ArrowType::Timestamp(TimeUnit::Nanosecond, utc()),
            ColumnType::TimestampNtz => ArrowType::Timestamp(TimeUnit::Microsecond, None),
            ColumnType::TimestampNtzNs => ArrowType::Timestamp(TimeUnit::Nanosecond, None),
            ColumnType::List(_) | ColumnType::Struct(_) | ColumnType::Map(..) | ColumnType::Vector(..) => {
                crate::format::schema::types::nested::arrow_type(self, ids)
            }
        }
    }

    /// The Arrow field of a column of this type: [`Self::arrow_type`], and for `uuid`
    /// the `arrow.uuid` extension name (pyarrow reads it as `pa.uuid()`).
    pub fn arrow_field(&self, name: &str, nullable: bool) -> ArrowField {
        self.arrow_field_ids(name, nullable, false)
    }

    /// [`Self::arrow_field`], with nested field ids if `ids` (see [`Self::arrow_type_ids`]).
    pub(crate) fn arrow_field_ids(&self, name: &str, nullable: bool, ids: bool) -> ArrowField {
        let field = ArrowField::new(name, self.arrow_type_ids(ids), nullable);
        match self {
            ColumnType::Uuid => field.with_metadata(HashMap::from([(ARROW_EXTENSION_NAME_KEY.to_string(), UUID_EXTENSION.to_string())])),
            _ => field,
        }
    }

    /// The type of a column that stores an Arrow field's values exactly, by the
    /// canonical mapping (FORMAT.md §2): e.g. `large_string` as `varchar`, a dictionary
    /// as its values, second and millisecond timestamps as `timestamp`. `Err`: the
    /// nearest type Concord has, or why there is none.
    pub fn from_arrow(field: &ArrowField) -> Result<ColumnType, String> {
        let uuid = field.metadata().get(ARROW_EXTENSION_NAME_KEY).is_some_and(|n| n == UUID_EXTENSION);
        if uuid && field.data_type() == &ArrowType::FixedSizeBinary(16) {
            return Ok(ColumnType::Uuid);
        }
        from_arrow_type(field.data_type())
    }

    /// Whether a column of this type can become a column of type `to` without
    /// rewriting a file: every value reads as the same value of `to` (FORMAT.md §7):
    /// an integer into a wider one of the same signedness, an unsigned one into a
    /// wider signed one, `float` into `double`, a decimal into one of higher precision
    /// and the same scale.
    pub fn widens_to(&self, to: &ColumnType) -> bool {
        use ColumnType::*;
        let integer = |t: ColumnType| match t {
            Tinyint => Some((true, 8)),
            Smallint => Some((true, 16)),
            Int => Some((true, 32)),
            Bigint => Some((true, 64)),
            Utinyint => Some((false, 8)),
            Usmallint => Some((false, 16)),
            Uint => Some((false, 32)),
            Ubigint => Some((false, 64)),
            _ => None,
        };
        match (self.clone(), to.clone()) {
            (Float, Double) => true,
            (Decimal { precision: p, scale: s }, Decimal { precision: q, scale: t }) => s == t && q > p,
            _ => match (integer(self.clone()), integer(to.clone())) {
                (Some((signed, bits)), Some((into_signed, into_bits))) => into_bits > bits && (signed == into_signed || into_signed),
                _ => false,
            },
        }
    }

    /// Whether format 2 (nine types) has this type.
    pub(crate) fn in_format_2(&self) -> bool {
        use ColumnType::*;
        matches!(self, Boolean | Int | Bigint | Float | Double | Varchar | Binary | Date | Timestamp)
    }

    /// Whether values of this type are integers.
    pub fn is_integer(&self) -> bool {
        self.arrow_type().is_integer()
    }
}

/// Metadata key of an Arrow extension type's name.
pub(crate) const ARROW_EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
/// The name of Arrow's canonical UUID extension type.
const UUID_EXTENSION: &str = "arrow.uuid";

pub(super) fn from_arrow_type(t: &ArrowType) -> Result<ColumnType, String> {
    use ArrowType as A;
    let utc = |zone: &Option<Arc<str>>| zone.as_deref().is_some_and(|z| matches!(z, "UTC" | "+00:00" | "Z" | "Etc/UTC" | "utc"));
    Ok(match t {
        A::Boolean => ColumnType::Boolean,
        A::Int8 => ColumnType::Tinyint,
        A::Int16 => ColumnType::Smallint,
        A::Int32 => ColumnType::Int,
        A::Int64 => ColumnType::Bigint,
        A::UInt8 => ColumnType::Utinyint,
        A::UInt16 => ColumnType::Usmallint,
        A::UInt32 => ColumnType::Uint,
        A::UInt64 => ColumnType::Ubigint,
        A::Float16 | A::Float32 => ColumnType::Float,
        A::Float64 => ColumnType::Double,
        A::Decimal32(p, s) | A::Decimal64(p, s) | A::Decimal128(p, s) | A::Decimal256(p, s) => {
            if *s < 0 || *s as u8 > *p {
                return Err(format!(
                    "decimal({p}, {s}) has a scale outside 0 to its precision; the nearest type is decimal({}, 0)",
                    (*p as i32 - *s as i32).clamp(1, 76)
                ));
            }
            ColumnType::Decimal { precision: *p, scale: *s as u8 }
        }
        A::Utf8 | A::LargeUtf8 | A::Utf8View => ColumnType::Varchar,
        A::Binary | A::LargeBinary | A::BinaryView => ColumnType::Binary,
        A::FixedSizeBinary(n) => match u16::try_from(*n) {
            Ok(n) if n > 0 => ColumnType::Fixed(n),
            _ => return Err(format!("fixed({n}) is not a width Concord stores (1 to {}); the nearest type is binary", u16::MAX)),
        },
        A::Date32 | A::Date64 => ColumnType::Date,
        A::Time32(_) | A::Time64(_) => ColumnType::Time,
        A::Timestamp(TimeUnit::Nanosecond, zone) if utc(zone) => ColumnType::TimestampNs,
        A::Timestamp(_, zone) if utc(zone) => ColumnType::Timestamp,
        A::Timestamp(TimeUnit::Nanosecond, None) => ColumnType::TimestampNtzNs,
        A::Timestamp(_, None) => ColumnType::TimestampNtz,
        A::Timestamp(unit, Some(zone)) => {
            let nearest = if *unit == TimeUnit::Nanosecond { "timestamp_ns" } else { "timestamp" };
            return Err(format!(
                "timestamps in zone {zone} are not stored with their zone; the nearest type is {nearest} (UTC instants): convert the column to UTC first (pyarrow: pc.cast(column, pa.timestamp(unit, tz=\"UTC\")))"
            ));
        }
        A::List(_) | A::LargeList(_) | A::ListView(_) | A::LargeListView(_) | A::FixedSizeList(..) | A::Struct(_) | A::Map(..) => {
            return crate::format::schema::types::nested::from_arrow(t)
        }
        A::Dictionary(_, values) => return from_arrow_type(values),
        A::RunEndEncoded(_, values) => return from_arrow_type(values.data_type()),
        A::Null => {
            return Err("a column of the Arrow null type holds no values to take a type from; give it the type its values will have \
                 (pyarrow: pa.array([None, ...], pa.string())), and NULLs go into any nullable column"
                .into())
        }
        other => return Err(format!("Arrow type {other} has no Concord column type; supported types: {SUPPORTED_TYPES}")),
    })
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sql_name())
    }
}

// Manifests spell a flat type as its SQL name and a nested one as an object whose
// fields carry their ids (`crate::format::schema::types::nested::Repr`).
impl Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match crate::format::schema::types::nested::Repr::of(self) {
            Some(repr) => repr.serialize(serializer),
            None => serializer.serialize_str(&self.sql_name()),
        }
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelled {
            Name(String),
            Nested(crate::format::schema::types::nested::Repr),
        }
        match Spelled::deserialize(deserializer)? {
            Spelled::Name(name) => name.parse().map_err(serde::de::Error::custom),
            Spelled::Nested(repr) => Ok(repr.into_type()),
        }
    }
}

impl FromStr for ColumnType {
    type Err = SchemaParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(nested) = crate::format::schema::types::nested::parse(s.trim()) {
            return nested;
        }
        let lower = s.trim().to_ascii_lowercase();
        let unknown = || SchemaParseError::UnknownType { type_name: s.trim().to_string() };
        if let Some(args) = parenthesised(&lower, &["decimal", "numeric"]) {
            let bad = |why: String| SchemaParseError::BadTypeParameters { type_name: s.trim().to_string(), why };
            let parts: Vec<&str> = args.split(',').map(str::trim).collect();
            let number =
                |t: &str| t.parse::<u8>().map_err(|_| bad(format!("'{t}' is not a whole number from 0 to {MAX_DECIMAL_PRECISION}")));
            let (precision, scale) = match parts.as_slice() {
                [p] => (number(p)?, 0),
                [p, s] => (number(p)?, number(s)?),
                _ => return Err(bad("write decimal(precision, scale), e.g. decimal(15, 2)".into())),
            };
            if !(1..=MAX_DECIMAL_PRECISION).contains(&precision) {
                return Err(bad(format!("the precision is from 1 to {MAX_DECIMAL_PRECISION}")));
            }
            if scale > precision {
                return Err(bad(format!("the scale {scale} is larger than the precision {precision}")));
            }
            return Ok(ColumnType::Decimal { precision, scale });
        }
        if let Some(args) = parenthesised(&lower, &["fixed"]) {
            return match args.trim().parse::<u16>() {
                Ok(n) if n > 0 => Ok(ColumnType::Fixed(n)),
                _ => Err(SchemaParseError::BadTypeParameters {
                    type_name: s.trim().to_string(),
                    why: format!("the width is a whole number of bytes from 1 to {}", u16::MAX),
                }),
            };
        }
        let t = match lower.as_str() {
            "boolean" | "bool" => ColumnType::Boolean,
            "tinyint" | "int1" => ColumnType::Tinyint,
            "smallint" | "int2" | "short" => ColumnType::Smallint,
            "int" | "integer" | "int4" => ColumnType::Int,
            "bigint" | "long" | "int8" => ColumnType::Bigint,
            "utinyint" => ColumnType::Utinyint,
            "usmallint" => ColumnType::Usmallint,
            "uint" | "uinteger" => ColumnType::Uint,
            "ubigint" => ColumnType::Ubigint,
            "float" | "real" | "float4" => ColumnType::Float,
            "double" | "double precision" | "float8" => ColumnType::Double,
            "decimal" | "numeric" => {
                return Err(SchemaParseError::BadTypeParameters {
                    type_name: s.trim().to_string(),
                    why: "give its precision and scale, e.g. decimal(15, 2)".into(),
                })
            }
            "varchar" | "string" | "text" => ColumnType::Varchar,
            "binary" | "bytea" | "varbinary" | "blob" => ColumnType::Binary,
            "uuid" => ColumnType::Uuid,
            "date" => ColumnType::Date,
            "time" => ColumnType::Time,
            "timestamp" | "timestamptz" => ColumnType::Timestamp,
            "timestamp_ns" | "timestamptz_ns" => ColumnType::TimestampNs,
            "timestamp_ntz" => ColumnType::TimestampNtz,
            "timestamp_ntz_ns" => ColumnType::TimestampNtzNs,
            _ => return Err(unknown()),
        };
        Ok(t)
    }
}

/// The text inside `name(...)` for one of `names` (`lower` is lower-case).
fn parenthesised<'a>(lower: &'a str, names: &[&str]) -> Option<&'a str> {
    let open = lower.find('(')?;
    let name = lower[..open].trim();
    names.contains(&name).then(|| lower[open + 1..].trim_end().strip_suffix(')')).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::Schema;

    #[test]
    fn every_type_parses_from_its_name_and_serialises_as_it() {
        for t in ColumnType::ALL {
            assert_eq!(t.sql_name().parse::<ColumnType>(), Ok(t.clone()));
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{}\"", t.sql_name()));
            assert_eq!(serde_json::from_str::<ColumnType>(&serde_json::to_string(&t).unwrap()).unwrap(), t);
            assert_eq!(ColumnType::from_arrow(&t.arrow_field("x", true)), Ok(t.clone()), "{t} maps back from its Arrow field");
        }
        let s = Schema::parse("amt decimal(10,2) not null, big NUMERIC(76, 38), v fixed( 4 ), at timestamptz").unwrap();
        let types: Vec<ColumnType> = s.fields.iter().map(|f| f.column_type.clone()).collect();
        assert_eq!(
            types,
            [
                ColumnType::Decimal { precision: 10, scale: 2 },
                ColumnType::Decimal { precision: 76, scale: 38 },
                ColumnType::Fixed(4),
                ColumnType::Timestamp
            ]
        );
        assert_eq!(s.definition(), "amt decimal(10, 2) not null, big decimal(76, 38), v fixed(4), at timestamp");
        assert_eq!(ColumnType::Decimal { precision: 38, scale: 0 }.arrow_type(), ArrowType::Decimal128(38, 0));
        assert_eq!(ColumnType::Decimal { precision: 39, scale: 0 }.arrow_type(), ArrowType::Decimal256(39, 0));
        for bad in ["decimal", "decimal(0, 0)", "decimal(77, 2)", "decimal(5, 6)", "decimal(x)", "fixed(0)", "fixed(70000)"] {
            assert!(matches!(bad.parse::<ColumnType>(), Err(SchemaParseError::BadTypeParameters { .. })), "{bad}");
        }
        let paris = ArrowField::new("t", ArrowType::Timestamp(TimeUnit::Millisecond, Some("Europe/Paris".into())), true);
        assert!(ColumnType::from_arrow(&paris).unwrap_err().contains("nearest type is timestamp"));
        let canonical = [
            (ArrowType::LargeUtf8, ColumnType::Varchar),
            (ArrowType::Utf8View, ColumnType::Varchar),
            (ArrowType::LargeBinary, ColumnType::Binary),
            (ArrowType::Dictionary(Box::new(ArrowType::Int32), Box::new(ArrowType::Utf8)), ColumnType::Varchar),
            (ArrowType::Date64, ColumnType::Date),
            (ArrowType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), ColumnType::Timestamp),
            (ArrowType::Timestamp(TimeUnit::Second, None), ColumnType::TimestampNtz),
            (ArrowType::Time32(arrow::datatypes::TimeUnit::Second), ColumnType::Time),
            (ArrowType::Decimal256(20, 4), ColumnType::Decimal { precision: 20, scale: 4 }),
        ];
        for (arrow, t) in canonical {
            assert_eq!(ColumnType::from_arrow(&ArrowField::new("x", arrow.clone(), true)), Ok(t), "{arrow}");
        }
        assert!(ColumnType::from_arrow(&ArrowField::new("x", ArrowType::Null, true)).is_err());
    }
}

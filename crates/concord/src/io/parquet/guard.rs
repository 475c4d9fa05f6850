//! Guards around the parquet crate for bytes we did not write: a corrupt file must be a
//! typed error, never a panic (the `data_file` fuzz target found three panics inside
//! the parquet and arrow-ipc crates; see FORMAT.md §15).
//!
//! - [`embedded_arrow_schema_is_safe`]: arrow-ipc panics on many malformed embedded
//!   Arrow schemas; it is only handed ones that pass a conservative check.
//! - [`catch_panic`] and [`Guarded`]: page decoding can still panic on corrupt pages
//!   (a bit width over 32 in a dictionary page trips an assert in `bit_util`); such a
//!   panic becomes a `ParquetError` and the reader is not polled again.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use arrow_ipc::{DateUnit, Endianness, Precision, TimeUnit, Type};
use base64::Engine;
use futures::Stream;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

/// True when the file has no embedded Arrow schema, or one that arrow-ipc decodes
/// without panicking: flat fields of plain types, every type parameter valid. Anything
/// else (nested or dictionary fields included) is read from the Parquet schema instead.
pub(crate) fn embedded_arrow_schema_is_safe(metadata: &ParquetMetaData) -> bool {
    let Some(entries) = metadata.file_metadata().key_value_metadata() else { return true };
    let Some(encoded) = entries.iter().find(|kv| kv.key == parquet::arrow::ARROW_SCHEMA_META_KEY) else { return true };
    let Some(encoded) = encoded.value.as_deref() else { return true };
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(encoded) else { return true };
    // The IPC continuation marker and length prefix, as parquet strips them.
    let slice = if bytes.len() > 8 && bytes[0..4] == [255u8; 4] { &bytes[8..] } else { &bytes[..] };
    let Ok(message) = arrow_ipc::root_as_message(slice) else { return true };
    let Some(schema) = message.header_as_schema() else { return true };
    let Some(fields) = schema.fields() else { return false };
    let little_endian = schema.endianness() == Endianness::Little;
    fields.iter().all(|f| plain_field_is_valid(&f, little_endian))
}

fn plain_field_is_valid(field: &arrow_ipc::Field<'_>, little_endian: bool) -> bool {
    if field.dictionary().is_some() || field.children().is_some_and(|c| !c.is_empty()) {
        return false;
    }
    match field.type_type() {
        Type::Null => field.type_as_null().is_some(),
        Type::Bool => field.type_as_bool().is_some(),
        Type::Binary => field.type_as_binary().is_some(),
        Type::LargeBinary => field.type_as_large_binary().is_some(),
        Type::BinaryView => field.type_as_binary_view().is_some(),
        Type::Utf8 => field.type_as_utf_8().is_some(),
        Type::LargeUtf8 => field.type_as_large_utf_8().is_some(),
        Type::Utf8View => field.type_as_utf_8_view().is_some(),
        Type::Int => field.type_as_int().is_some_and(|i| matches!(i.bitWidth(), 8 | 16 | 32 | 64)),
        Type::FloatingPoint => {
            field.type_as_floating_point().is_some_and(|f| matches!(f.precision(), Precision::HALF | Precision::SINGLE | Precision::DOUBLE))
        }
        Type::Date => field.type_as_date().is_some_and(|d| matches!(d.unit(), DateUnit::DAY | DateUnit::MILLISECOND)),
        Type::Time => field.type_as_time().is_some_and(|t| {
            matches!(
                (t.bitWidth(), t.unit()),
                (32, TimeUnit::SECOND | TimeUnit::MILLISECOND) | (64, TimeUnit::MICROSECOND | TimeUnit::NANOSECOND)
            )
        }),
        Type::Timestamp => field
            .type_as_timestamp()
            .is_some_and(|t| matches!(t.unit(), TimeUnit::SECOND | TimeUnit::MILLISECOND | TimeUnit::MICROSECOND | TimeUnit::NANOSECOND)),
        Type::Decimal => {
            little_endian
                && field.type_as_decimal().is_some_and(|d| {
                    matches!(d.bitWidth(), 32 | 64 | 128 | 256) && u8::try_from(d.precision()).is_ok() && i8::try_from(d.scale()).is_ok()
                })
        }
        _ => false,
    }
}

thread_local! {
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread runs a guarded decode, whose panic becomes an error: a
/// program's panic hook may stay quiet then (the error carries the message).
pub(crate) fn panic_is_caught() -> bool {
    CATCHING.with(Cell::get)
}

/// For programs (the CLI, the Python module): installs, once per process, a panic hook
/// that stays quiet for the panics the library turns into typed errors (a corrupt
/// Parquet file: the error carries the message) and passes every other panic to the
/// hook that was installed before.
pub fn quiet_caught_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !panic_is_caught() {
                previous(info)
            }
        }));
    });
}

/// Runs `decode`; a panic inside it becomes `Err` with a message naming it.
pub(crate) fn catch_panic<T>(decode: impl FnOnce() -> T) -> Result<T, String> {
    let outer = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(decode));
    CATCHING.with(|c| c.set(outer));
    result.map_err(panicked)
}

fn panicked(payload: Box<dyn Any + Send>) -> String {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!("the Parquet decoder failed on corrupt data ({message})")
}

/// A record-batch stream whose panics become one error item, after which it ends.
pub(crate) struct Guarded<S> {
    inner: Option<S>,
}

impl<S> Guarded<S> {
    pub(crate) fn new(inner: S) -> Self {
        Guarded { inner: Some(inner) }
    }
}

impl<T, S: Stream<Item = Result<T, ParquetError>> + Unpin> Stream for Guarded<S> {
    type Item = Result<T, ParquetError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        match catch_panic(|| Pin::new(inner).poll_next(cx)) {
            Ok(poll) => poll,
            Err(message) => {
                // A panicked reader's state is unknown: never poll it again.
                self.inner = None;
                Poll::Ready(Some(Err(ParquetError::General(message))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, ListArray, RecordBatch, TimestampSecondArray};
    use arrow::datatypes::Int64Type;
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::ParquetMetaDataReader;

    use super::*;

    fn footer_of(batch: &RecordBatch) -> ParquetMetaData {
        let mut bytes = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(bytes)).unwrap()
    }

    #[test]
    fn plain_embedded_schemas_are_used_others_are_not() {
        let ts = TimestampSecondArray::from(vec![1]).with_timezone("+01:00");
        let plain =
            RecordBatch::try_from_iter([("a", Arc::new(Int64Array::from(vec![1])) as ArrayRef), ("t", Arc::new(ts) as ArrayRef)]).unwrap();
        assert!(embedded_arrow_schema_is_safe(&footer_of(&plain)));
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![Some(1)])]);
        let nested = RecordBatch::try_from_iter([("l", Arc::new(list) as ArrayRef)]).unwrap();
        assert!(!embedded_arrow_schema_is_safe(&footer_of(&nested)));
        // The fuzz input whose embedded schema made arrow-ipc panic.
        let crash = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/data_file/crash-1")).unwrap();
        let footer = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(crash)).unwrap();
        assert!(!embedded_arrow_schema_is_safe(&footer));
    }

    #[test]
    fn a_panicking_decode_becomes_an_error_and_the_flag_is_reset() {
        let err = catch_panic(|| -> u32 { panic!("bad page") }).unwrap_err();
        assert!(err.contains("bad page"), "{err}");
        assert!(!panic_is_caught());
        assert_eq!(catch_panic(panic_is_caught), Ok(true));
    }
}

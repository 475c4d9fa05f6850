//! Arrow across the C data interface, through the PyCapsule protocol
//! (`__arrow_c_stream__`, `__arrow_c_array__`, `__arrow_c_schema__`): pyarrow, polars,
//! DuckDB, ... in and out without copying buffers, and without pyarrow at build time.

use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, RecordBatch, RecordBatchReader, StructArray};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use futures::stream::{BoxStream, StreamExt};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::errors::Error;
use crate::runtime::guard;

const STREAM_CAPSULE: &CStr = c"arrow_array_stream";
const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
const ARRAY_CAPSULE: &CStr = c"arrow_array";

/// Batches read from the caller's stream on a blocking thread, handed to the write
/// over a small channel: the write pulls as it goes (bounded memory), and the
/// producer (pyarrow, or a Python generator behind it, which takes the GIL) runs off
/// the runtime's threads.
const INPUT_CHANNEL_BATCHES: usize = 2;

/// Batches a scan reads ahead of its consumer.
const OUTPUT_CHANNEL_BATCHES: usize = 2;

/// Takes ownership of the Arrow C stream `obj` exports (`obj.__arrow_c_stream__()`).
pub(crate) fn import_stream(obj: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    let capsule = if obj.is_instance_of::<PyCapsule>() { obj.clone() } else { obj.call_method0("__arrow_c_stream__")? };
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| Error::Usage("__arrow_c_stream__() did not return a PyCapsule".into()))?;
    let pointer = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    // SAFETY: a capsule named "arrow_array_stream" holds an FFI_ArrowArrayStream
    // (the PyCapsule interface). from_raw moves it out and leaves a released stream in
    // its place, so the capsule's destructor has nothing left to release.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(pointer.as_ptr().cast()) };
    Ok(ArrowArrayStreamReader::try_new(stream).map_err(Error::BadData)?)
}

/// The schema `obj` exports (`obj.__arrow_c_schema__()`, e.g. a pyarrow.Schema).
pub(crate) fn import_schema(obj: &Bound<'_, PyAny>) -> PyResult<ArrowSchema> {
    let capsule = obj.call_method0("__arrow_c_schema__")?;
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| Error::Usage("__arrow_c_schema__() did not return a PyCapsule".into()))?;
    let pointer = capsule.pointer_checked(Some(SCHEMA_CAPSULE))?;
    // SAFETY: a capsule named "arrow_schema" holds an FFI_ArrowSchema, which stays
    // owned (and released) by the capsule; it is only read here.
    let ffi: &FFI_ArrowSchema = unsafe { &*pointer.as_ptr().cast::<FFI_ArrowSchema>() };
    Ok(ArrowSchema::try_from(ffi).map_err(Error::BadData)?)
}

/// The caller's stream as the library's `Input::Stream`. Its reader starts on a
/// blocking thread of the runtime when the stream is first polled (so this may be
/// called anywhere).
pub(crate) fn input_stream(reader: ArrowArrayStreamReader) -> BoxStream<'static, Result<RecordBatch, ArrowError>> {
    let start = async move {
        let (tx, rx) = tokio::sync::mpsc::channel(INPUT_CHANNEL_BATCHES);
        tokio::task::spawn_blocking(move || {
            for item in reader {
                // The write stopped (it failed, or refused a batch): stop reading.
                if tx.blocking_send(item).is_err() {
                    return;
                }
            }
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
    };
    futures::stream::once(start).flatten().boxed()
}

/// Batches of a scan, produced on the runtime ahead of their consumer.
pub(crate) struct BatchChannel {
    pub(crate) schema: SchemaRef,
    pub(crate) rx: tokio::sync::mpsc::Receiver<Result<RecordBatch, Error>>,
}

/// Drives `stream` on the runtime into a channel. Must be called on the runtime.
pub(crate) fn pump<E: Into<Error> + Send + 'static>(
    schema: SchemaRef,
    mut stream: BoxStream<'static, Result<RecordBatch, E>>,
) -> BatchChannel {
    let (tx, rx) = tokio::sync::mpsc::channel(OUTPUT_CHANNEL_BATCHES);
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            let failed = item.is_err();
            // The consumer went away: stop reading.
            if tx.send(item.map_err(Into::into)).await.is_err() || failed {
                return;
            }
        }
    });
    BatchChannel { schema, rx }
}

/// A `RecordBatchReader` over a channel, for the C stream interface: consumers
/// (pyarrow, DuckDB's threads) call it from any thread, with or without the GIL; it
/// never needs the GIL.
struct ChannelReader {
    schema: SchemaRef,
    rx: tokio::sync::mpsc::Receiver<Result<RecordBatch, Error>>,
}

impl Iterator for ChannelReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.blocking_recv().map(|item| item.map_err(|e| ArrowError::ExternalError(Box::new(ErrorMessage::of(e)))))
    }
}

impl RecordBatchReader for ChannelReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// A library error as the message a C stream consumer shows.
#[derive(Debug)]
struct ErrorMessage(String);

impl ErrorMessage {
    /// Without the GIL: consumers' threads may call while another thread holds it.
    fn of(e: Error) -> Self {
        ErrorMessage(crate::errors::plain_message(&e))
    }
}

impl std::fmt::Display for ErrorMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ErrorMessage {}

/// Batches already in memory, as a reader.
struct VecReader {
    schema: SchemaRef,
    batches: std::vec::IntoIter<RecordBatch>,
}

impl Iterator for VecReader {
    type Item = Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.batches.next().map(Ok)
    }
}

impl RecordBatchReader for VecReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// An Arrow C stream for Python: an object with `__arrow_c_stream__`, which
/// `pyarrow.RecordBatchReader.from_stream`, `pyarrow.table`, `polars.from_arrow`,
/// DuckDB, ... read. The stream can be taken once.
#[pyclass(module = "concord._concord", frozen)]
pub(crate) struct ArrowStreamExport {
    stream: Mutex<Option<FFI_ArrowArrayStream>>,
}

impl ArrowStreamExport {
    pub(crate) fn of_channel(channel: BatchChannel) -> Self {
        let reader = ChannelReader { schema: channel.schema, rx: channel.rx };
        ArrowStreamExport { stream: Mutex::new(Some(FFI_ArrowArrayStream::new(Box::new(reader)))) }
    }

    pub(crate) fn of_batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        let reader = VecReader { schema, batches: batches.into_iter() };
        ArrowStreamExport { stream: Mutex::new(Some(FFI_ArrowArrayStream::new(Box::new(reader)))) }
    }
}

#[pymethods]
impl ArrowStreamExport {
    /// The Arrow C stream (PyCapsule interface); `requested_schema` is ignored (allowed
    /// by the protocol): the stream has the table's schema.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(&self, py: Python<'py>, requested_schema: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        guard(|| {
            let stream = self.stream.lock().unwrap_or_else(|e| e.into_inner()).take();
            let stream = stream.ok_or_else(|| Error::Usage("this Arrow stream was already read; ask for a new one".into()))?;
            PyCapsule::new_with_value(py, stream, STREAM_CAPSULE)
        })
    }
}

/// One record batch for Python: an object with `__arrow_c_array__`
/// (`pyarrow.record_batch(obj)`).
#[pyclass(module = "concord._concord", frozen)]
pub(crate) struct ArrowArrayExport {
    batch: RecordBatch,
}

impl ArrowArrayExport {
    pub(crate) fn new(batch: RecordBatch) -> Self {
        ArrowArrayExport { batch }
    }
}

#[pymethods]
impl ArrowArrayExport {
    /// The batch as a struct array and its schema (PyCapsule interface).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(&self, py: Python<'py>, requested_schema: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        guard(|| {
            let data = StructArray::from(self.batch.clone()).into_data();
            let (array, schema) = arrow::ffi::to_ffi(&data).map_err(|e| Error::Internal(format!("exporting a batch failed: {e}")))?;
            // The batch's schema, with its metadata and the columns' nullability.
            let schema = FFI_ArrowSchema::try_from(self.batch.schema().as_ref()).unwrap_or(schema);
            let schema = PyCapsule::new_with_value(py, schema, SCHEMA_CAPSULE)?;
            let array: FFI_ArrowArray = array;
            let array = PyCapsule::new_with_value(py, array, ARRAY_CAPSULE)?;
            PyTuple::new(py, [schema.into_any(), array.into_any()])
        })
    }
}

/// A schema for Python: an object with `__arrow_c_schema__` (`pyarrow.schema(obj)`).
#[pyclass(module = "concord._concord", frozen)]
pub(crate) struct ArrowSchemaExport {
    schema: Arc<ArrowSchema>,
}

impl ArrowSchemaExport {
    pub(crate) fn new(schema: SchemaRef) -> Self {
        ArrowSchemaExport { schema }
    }
}

#[pymethods]
impl ArrowSchemaExport {
    /// The schema (PyCapsule interface).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        guard(|| {
            let ffi = FFI_ArrowSchema::try_from(self.schema.as_ref())
                .map_err(|e| Error::Internal(format!("exporting the schema failed: {e}")))?;
            PyCapsule::new_with_value(py, ffi, SCHEMA_CAPSULE)
        })
    }
}

/// A scan's batches for Python, one at a time (`for batch in it`): each an
/// `ArrowArrayExport`. Waiting for a batch releases the GIL; a failure raises the
/// package's exception for it.
#[pyclass(module = "concord._concord", frozen)]
pub(crate) struct BatchIterator {
    schema: SchemaRef,
    rx: Mutex<Option<tokio::sync::mpsc::Receiver<Result<RecordBatch, Error>>>>,
}

impl BatchIterator {
    pub(crate) fn new(channel: BatchChannel) -> Self {
        BatchIterator { schema: channel.schema, rx: Mutex::new(Some(channel.rx)) }
    }
}

#[pymethods]
impl BatchIterator {
    /// The batches' schema.
    fn schema(&self) -> ArrowSchemaExport {
        ArrowSchemaExport::new(self.schema.clone())
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<ArrowArrayExport>> {
        guard(|| {
            // One consumer at a time; the receiver is taken out while waiting so that
            // the lock is not held with the GIL released.
            let Some(mut rx) = self.rx.lock().unwrap_or_else(|e| e.into_inner()).take() else { return Ok(None) };
            let (item, rx) = py.detach(move || {
                let item = rx.blocking_recv();
                (item, rx)
            });
            match item {
                Some(Ok(batch)) => {
                    *self.rx.lock().unwrap_or_else(|e| e.into_inner()) = Some(rx);
                    Ok(Some(ArrowArrayExport::new(batch)))
                }
                Some(Err(e)) => Err(e.into()),
                None => Ok(None),
            }
        })
    }
}

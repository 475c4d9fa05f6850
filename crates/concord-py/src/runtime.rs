//! One tokio runtime per process, the GIL released while the library works, and no
//! panic ever crossing into Python.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::Error;

/// Stack of the runtime's threads, as the CLI's: planning and evaluating a SQL
/// expression recurse once per operator, and the library caps expressions at a depth
/// these stacks hold even in debug builds. Only the memory used is committed.
const STACK_BYTES: usize = 64 << 20;

/// The runtime and the process that created it. A child forked from that process
/// has none of its threads: it builds its own (and the parent's is leaked, never
/// dropped, since dropping it would wait for threads that do not exist there).
static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// This process's runtime, created on first use (multi-threaded).
pub(crate) fn runtime() -> Result<Arc<Runtime>, Error> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match slot.as_ref() {
        Some((owner, rt)) if *owner == pid => return Ok(rt.clone()),
        Some(_) => std::mem::forget(slot.take()),
        None => {}
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("concord")
        .thread_stack_size(STACK_BYTES)
        .build()
        .map_err(|e| Error::Internal(format!("could not start the runtime's threads: {e}")))?;
    let rt = Arc::new(rt);
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// Runs `future` on the runtime (its threads, with their large stacks) while this
/// thread waits with the GIL released, so that other Python threads run meanwhile.
/// A panic in the library becomes an error.
pub(crate) fn run<T, F>(py: Python<'_>, future: F) -> Result<T, Error>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    let rt = runtime()?;
    py.detach(move || {
        let handle = rt.spawn(future);
        match futures::executor::block_on(handle) {
            Ok(result) => result,
            Err(e) if e.is_panic() => Err(Error::Panic(panic_message(e.into_panic().as_ref()))),
            Err(e) => Err(Error::Internal(format!("the operation was cancelled: {e}"))),
        }
    })
}

/// Runs `body` (the synchronous part of a call: argument conversion, building
/// results), turning a panic into an error instead of pyo3's `PanicException`.
pub(crate) fn guard<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => Err(Error::Panic(panic_message(payload.as_ref())).into()),
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

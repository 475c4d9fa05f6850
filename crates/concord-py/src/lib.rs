//! `concord._concord`: the native half of the `concord` Python package (python/concord).
//!
//! Thin bindings: every behaviour comes from the `concord` library; this crate converts
//! arguments, moves Arrow data across the C data interface (PyCapsules), runs the
//! library's futures on one tokio runtime per process with the GIL released, and maps
//! the library's typed errors to the package's exception classes (`errors.rs`). The
//! Python-facing API (names, keyword arguments, docstrings) is python/concord/*.py.

mod arrow_ffi;
mod errors;
mod options;
mod refs;
mod runtime;
mod table;
mod together;

use pyo3::prelude::*;

/// The native module. Python code imports it as `concord._concord`.
#[pymodule]
fn _concord(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // As the CLI: a panic the library turns into a typed error (a corrupt Parquet file)
    // is reported by that error and prints nothing; any other prints as usual (and still
    // reaches Python as an exception, never as a crash).
    concord::quiet_caught_panics();
    m.add_class::<table::NativeTable>()?;
    m.add_class::<arrow_ffi::ArrowStreamExport>()?;
    m.add_class::<arrow_ffi::ArrowSchemaExport>()?;
    m.add_class::<arrow_ffi::ArrowArrayExport>()?;
    m.add_class::<arrow_ffi::BatchIterator>()?;
    m.add_function(wrap_pyfunction!(table::create, m)?)?;
    m.add_function(wrap_pyfunction!(table::open, m)?)?;
    m.add_function(wrap_pyfunction!(table::read_fragment, m)?)?;
    m.add_function(wrap_pyfunction!(table::parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(table::sql, m)?)?;
    m.add_function(wrap_pyfunction!(table::create_coordinator_table, m)?)?;
    m.add_function(wrap_pyfunction!(table::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_error_classes, m)?)?;
    for f in [
        wrap_pyfunction!(refs::version_of, m)?,
        wrap_pyfunction!(refs::create_tag, m)?,
        wrap_pyfunction!(refs::tag, m)?,
        wrap_pyfunction!(refs::tags, m)?,
        wrap_pyfunction!(refs::branch, m)?,
        wrap_pyfunction!(refs::create_branch, m)?,
        wrap_pyfunction!(refs::branches, m)?,
        wrap_pyfunction!(refs::delete_branch, m)?,
        wrap_pyfunction!(refs::merge_branch, m)?,
        wrap_pyfunction!(together::commit_together, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add("DEFAULT_COMPACT_TARGET_ROWS", concord::limits::DEFAULT_COMPACT_TARGET_ROWS)?;
    m.add("MIN_VACUUM_RETENTION_S", concord::limits::MIN_VACUUM_RETENTION.as_secs())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

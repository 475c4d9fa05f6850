//! The on-disk format (see FORMAT.md): names, schema, manifests, segment planning.
//! Pure data and pure functions; no I/O.

pub(crate) mod announcement;
pub(crate) mod manifest;
pub(crate) mod multi;
pub(crate) mod naming;
pub(crate) mod refs;
pub(crate) mod schema;
pub(crate) mod segments;
pub(crate) mod staged;

//! The on-disk format (see FORMAT.md): names, schema, manifests, segment planning.
//! Pure data and pure functions; no I/O.

pub mod manifest;
pub mod naming;
pub mod schema;
pub mod segments;

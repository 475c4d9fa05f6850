//! Parquet bytes Concord did not write (input files, and data files that may be
//! corrupt), checked before the parquet crate decodes them: a bounded walk of the Thrift
//! footer and page headers, guards around the crate's panics, and ranged reads of data
//! files through `object_store` (FORMAT.md §15).

pub(crate) mod file_reader;
pub(crate) mod footer_check;
pub(crate) mod guard;
pub(crate) mod page_check;
mod thrift;

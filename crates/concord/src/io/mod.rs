//! Data files: reading user input, writing Parquet fragments, scanning them.

pub(crate) mod adapt;
pub(crate) mod cast;
mod checked;
pub(crate) mod csv_fields;
pub(crate) mod deletion;
mod file_reader;
mod footer_check;
pub(crate) mod guard;
pub(crate) mod ingest;
mod json_values;
pub(crate) mod keys;
pub(crate) mod leaf_stats;
mod literals;
pub(crate) mod nested;
pub(crate) mod page_check;
mod parquet_input;
pub(crate) mod predicate;
pub(crate) mod scan;
pub(crate) mod splice;
pub(crate) mod stats;
mod thrift;
pub(crate) mod writer;

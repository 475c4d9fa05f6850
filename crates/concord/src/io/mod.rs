//! Data files: user input decoded into the table's types, Parquet data files written
//! and scanned, predicates compiled, deletion vectors. Layers, each using only those
//! before it: `values` (the one rule for putting a value into a column) and `parquet`
//! (untrusted Parquet checked before the parquet crate decodes it); `write` (data files
//! and their statistics); `input` (files and batches decoded into the table's schema),
//! `predicate` (SQL predicates compiled against a schema) and `deletion`; `scan`.

pub(crate) mod deletion;
pub(crate) mod input;
pub(crate) mod parquet;
pub(crate) mod predicate;
pub(crate) mod scan;
pub(crate) mod values;
pub(crate) mod write;

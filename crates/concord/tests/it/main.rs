//! The library's integration tests, one binary (one link on 2 cores), modules by
//! subject: the commit conformance suite on every store, concurrency with threads and
//! injected faults, the seeded simulation, random histories against the replay oracle,
//! the write matrix, requests per commit, the on-disk format. The CLI's own tests
//! (processes, exit codes, output) are in `crates/concord-cli/tests`.

mod common;
mod counting;
mod replay;
mod servers;
mod sim;

mod capacity;
mod changes;
mod concurrency;
mod conformance;
mod corpus;
mod delete;
mod fairness;
mod format;
mod histories;
mod matrix;
mod merge;
mod nested;
mod refs;
mod requests;
mod shared;
mod simulation;
mod splice;
mod sql;
mod together;
mod types;
mod update;

//! The CLI's integration tests, one binary (one link on 2 cores), modules by subject:
//! the command line's contract (arguments, exit codes, output), writers as OS
//! processes, object stores through the CLI. The library's tests (conformance,
//! simulation, histories, matrix) are in `crates/concord/tests`; the helpers shared
//! with them are included from there (`common`, `servers`, `replay`).

mod common;
#[path = "../../../concord/tests/it/replay.rs"]
mod replay;
mod servers;

mod alter;
mod bad_input;
mod changes;
mod cli;
mod compact;
mod corruption;
mod first_hour;
mod format1;
mod hostile;
mod jobs;
mod lost_responses;
mod object_stores;
mod processes;
mod refs;
mod second_look;
mod sql;
mod stress;
mod type_props;
mod types;
mod vacuum;
mod values;

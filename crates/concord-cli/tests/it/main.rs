//! The one integration-test binary (one link on 2 cores). Modules by subject.

mod common;
mod counting;
mod corruption;

mod alter;
mod bad_input;
mod cli;
mod concurrency;
mod compact;
mod conformance;
mod delete;
mod fairness;
mod first_hour;
mod format;
mod hostile;
mod lost_responses;
mod histories;
mod matrix;
mod object_stores;
mod requests;
mod merge;
mod servers;
mod shared;
mod simulation;
mod sql;
mod stress;
mod update;
mod vacuum;

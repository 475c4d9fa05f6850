//! The one integration-test binary (one link on 2 cores). Modules by subject.

mod common;
mod corruption;
mod counting;

mod alter;
mod bad_input;
mod cli;
mod compact;
mod concurrency;
mod conformance;
mod delete;
mod fairness;
mod first_hour;
mod format;
mod histories;
mod hostile;
mod jobs;
mod lost_responses;
mod matrix;
mod merge;
mod object_stores;
mod requests;
mod second_look;
mod servers;
mod shared;
mod simulation;
mod sql;
mod stress;
mod update;
mod vacuum;
mod values;

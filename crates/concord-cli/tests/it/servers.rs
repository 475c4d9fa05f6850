//! The local servers (from the library's tests) and running `concord` processes
//! against them.

#![allow(dead_code)]

#[path = "../../../concord/tests/it/servers.rs"]
mod stores;
pub use stores::*;

/// Runs `concord args...` with `env`; returns (exit code, stdout, stderr).
pub fn run_with(env: &[(String, String)], args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(crate::common::concord_bin())
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env_remove("CONCORD_COMMIT_COORDINATOR")
        .envs(env.iter().filter(|(k, _)| k == "CONCORD_COMMIT_COORDINATOR").map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("concord runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

pub fn ok_with(env: &[(String, String)], args: &[&str]) -> String {
    let (code, stdout, stderr) = run_with(env, args);
    assert_eq!(code, 0, "concord {args:?} failed with {code}: {stderr}");
    stdout
}

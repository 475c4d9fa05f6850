//! Shared test helpers: running the `concord` binary, temporary tables, and (from the
//! library's tests) tables, rows and the oracle.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

#[path = "../../../concord/tests/it/common.rs"]
mod library;
pub use library::*;

/// The `concord` binary under test: this build's, or `CONCORD_TEST_BIN` (to run the
/// CLI tests against another build, e.g. one from before a fix, to see them fail).
pub fn concord_bin() -> String {
    std::env::var("CONCORD_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_concord").to_string())
}

/// Runs `concord args...`; returns (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(concord_bin()).args(args).output().expect("concord runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Runs and asserts exit 0; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "concord {args:?} failed with {code}: {stderr}");
    stdout
}

/// A fresh temporary folder; the table path inside it is `dir/t`.
pub struct TempTable {
    pub dir: tempfile::TempDir,
    pub uri: String,
}

impl TempTable {
    /// Creates a table with [`SCHEMA`] through the CLI.
    pub fn create() -> Self {
        Self::create_with(SCHEMA)
    }

    pub fn create_with(schema: &str) -> Self {
        let t = Self::uncreated();
        ok(&["create", &t.uri, "--schema", schema]);
        t
    }

    pub fn uncreated() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let uri = dir.path().join("t").to_string_lossy().into_owned();
        TempTable { dir, uri }
    }

    /// Writes `contents` to `name` inside the temp folder and returns its path.
    pub fn file(&self, name: &str, contents: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).expect("write input");
        path.to_string_lossy().into_owned()
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(&self.uri)
    }

    pub fn count(&self) -> u64 {
        ok(&["count", &self.uri]).trim().parse().expect("count prints an integer")
    }

    pub fn history(&self) -> Vec<serde_json::Value> {
        serde_json::from_str(&ok(&["history", &self.uri, "--format", "json"])).expect("history is JSON")
    }

    pub fn latest_version(&self) -> u64 {
        self.history().last().expect("history not empty")["version"].as_u64().unwrap()
    }
}

/// What a failed command must leave exactly as it was.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub versions: Vec<String>,
    pub count: u64,
    pub rows: String,
}

pub fn snapshot(t: &TempTable) -> Snapshot {
    Snapshot { versions: committed_state(&t.path()), count: t.count(), rows: ok(&["scan", &t.uri, "--format", "json"]) }
}

/// Runs a command that must fail with `code`, print nothing on stdout and something on
/// stderr; returns stderr.
pub fn fails(args: &[&str], code: i32) -> String {
    let (got, stdout, stderr) = run(args);
    assert_eq!(got, code, "concord {args:?}: expected exit {code}, got {got}; stderr: {stderr}");
    assert!(stdout.is_empty(), "concord {args:?} failed but printed on stdout: {stdout}");
    assert!(!stderr.trim().is_empty(), "concord {args:?} failed silently");
    stderr
}

pub fn assert_mentions(stderr: &str, words: &[&str]) {
    for w in words {
        assert!(stderr.contains(w), "stderr should mention {w:?}: {stderr}");
    }
}

/// Checks a `history --format json` against the `--json` outcomes of `appends` CLI
/// appends: one chain without gaps, timestamps in UTC, the create and every append's
/// transaction in exactly one version (appends that lost a race may share one:
/// cooperative commits), each acknowledged one at the version its writer was told.
pub fn check_cli_history(history: &[serde_json::Value], outcomes: &[serde_json::Value], appends: u64, store: &str) {
    let versions: Vec<u64> = history.iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!(versions, (0..history.len() as u64).collect::<Vec<_>>(), "{store}: one chain, no gaps");
    assert!(history.iter().all(|v| v["timestamp"].as_str().unwrap().ends_with('Z')), "{store}: UTC");
    let mut at: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for v in history {
        for t in v["transactions"].as_array().unwrap() {
            let version = v["version"].as_u64().unwrap();
            assert!(at.insert(t["transaction_id"].as_str().unwrap(), version).is_none(), "{store}: a transaction in two versions");
        }
    }
    assert_eq!(at.len() as u64, appends + 1, "{store}: the create and every append");
    for o in outcomes {
        let told = o["version"].as_u64();
        assert_eq!(at.get(o["transaction_id"].as_str().unwrap()).copied(), told, "{store}: each acknowledged append at its version");
    }
}

/// Copies `dir` (recursively) to `to`.
pub fn copy_dir(dir: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

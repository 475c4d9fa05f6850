//! Lost responses through a real network path: `scripts/lossy_proxy.py` sits in front
//! of moto, lets commit writes (S3 conditional PUTs, DynamoDB PutItems) land, then
//! answers 503, closes the connection or resets it. Every write must report success, exactly once
//! in the history, with no duplicate version.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use crate::common::*;
use crate::servers::{self, ok_with, Server};

struct Proxy {
    child: Child,
    url: String,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn proxy(target: &str, mode: &str) -> Proxy {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/lossy_proxy.py");
    let mut child = Command::new("python3")
        .args([script, "--target", target, "--every", "2", "--mode", mode])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the proxy");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    Proxy { child, url: format!("http://127.0.0.1:{}", line.trim()) }
}

fn through(server: &Server, proxy: &Proxy) -> Vec<(String, String)> {
    let mut env = server.env();
    env.retain(|(k, _)| k != "AWS_ENDPOINT_URL");
    env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
    env
}

fn lost_responses_leave_one_copy(server: Server, mode: &str) {
    let p = proxy(&server.options["AWS_ENDPOINT_URL"], mode);
    let env = through(&server, &p);
    let uri = server.fresh_uri(&format!("lossy-{mode}"));
    ok_with(&env, &["create", &uri, "--schema", SCHEMA]);
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, start: u64| {
        let path = dir.path().join(name);
        std::fs::write(&path, csv_rows(start, 5)).unwrap();
        path.to_string_lossy().into_owned()
    };
    let (a, b, c) = (file("a.csv", 0), file("b.csv", 5), file("c.csv", 10));
    let commands: Vec<Vec<&str>> = vec![
        vec!["append", &uri, &a],
        vec!["append", &uri, &b],
        vec!["delete", &uri, "--where", "id % 2 = 0"],
        vec!["update", &uri, "--set", "score = score + 100", "--where", "id < 5"],
        vec!["append", &uri, &c],
        vec!["delete", &uri, "--where", "id = 11"],
    ];
    let mut reported = Vec::new();
    for cmd in &commands {
        let mut args = cmd.clone();
        args.push("--json");
        let out: serde_json::Value = serde_json::from_str(&ok_with(&env, &args)).unwrap();
        reported.push((out["version"].as_u64().unwrap(), out["transaction_id"].as_str().unwrap().to_string()));
    }
    let history: Vec<serde_json::Value> = serde_json::from_str(&ok_with(&server.env(), &["history", &uri, "--format", "json"])).unwrap();
    assert_eq!(history.len(), commands.len() + 1, "{} {mode}: one version per command, none duplicated: {history:?}", server.name);
    for (version, txn) in &reported {
        assert_eq!(history[*version as usize]["transaction_id"].as_str(), Some(txn.as_str()), "{} {mode}", server.name);
    }
    let ids: Vec<u64> =
        ok_with(&server.env(), &["scan", &uri, "--columns", "id", "--format", "csv"]).lines().skip(1).map(|l| l.parse().unwrap()).collect();
    let mut ids = ids;
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 3, 5, 7, 9, 10, 12, 13, 14], "{} {mode}: every write applied exactly once", server.name);
    let scores = ok_with(&server.env(), &["scan", &uri, "--where", "id < 5", "--columns", "score", "--format", "csv"]);
    assert_eq!(scores.lines().skip(1).collect::<Vec<_>>(), vec!["100.1", "100.3"], "{} {mode}: the update applied once", server.name);
    eprintln!(
        "{} through a proxy losing every 2nd commit response ({mode}): {} commands, {} versions, exact",
        server.name,
        commands.len(),
        history.len()
    );
}

#[test]
fn lost_commit_responses_on_s3() {
    for mode in ["503", "close", "reset"] {
        if let Some(s) = servers::moto_s3() {
            lost_responses_leave_one_copy(s, mode);
        }
    }
}

#[test]
fn lost_commit_responses_on_s3_with_dynamodb() {
    for mode in ["503", "close", "reset"] {
        if let Some(s) = servers::moto_s3_dynamodb() {
            tokio::runtime::Runtime::new().unwrap().block_on(s.prepare());
            lost_responses_leave_one_copy(s, mode);
        }
    }
}

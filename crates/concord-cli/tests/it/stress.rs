//! `concord stress`: writer processes killed at random, then every version verified.

use crate::common::*;
use crate::servers::{self, run_with};

fn report(env: &[(String, String)], args: &[&str]) -> serde_json::Value {
    let (code, out, err) = run_with(env, args);
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("no JSON report ({code}): {out} {err}"));
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["verified"], true, "{report}");
    eprintln!("{args:?}: {report}");
    report
}

#[test]
fn stress_with_killed_writers_verifies_on_local_disk() {
    let t = TempTable::uncreated();
    let r = report(&[], &["stress", &t.uri, "--writers", "4", "--ops", "15", "--rows", "5", "--kill-rate", "0.3", "--seed", "11"]);
    let ended = ["commits", "failed", "abandoned_compactions", "no_change"].iter().map(|k| r[*k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(ended, 60, "every operation ended once: {r}");
    assert!(r["killed"].as_u64().unwrap() > 0, "writers were killed: {r}");
    // Every commit is a transaction of its own; appends that lost a race may share a
    // version (cooperative commits).
    assert_eq!(r["transactions"], r["commits"], "{r}");
    assert!(r["versions_replayed"].as_u64() <= r["commits"].as_u64(), "{r}");
    assert_eq!(r["feed_versions_checked"], r["versions"], "the change feed replays every version: {r}");
}

#[test]
fn stress_bank_keeps_the_total_in_every_version() {
    let t = TempTable::uncreated();
    let r = report(&[], &["stress", &t.uri, "--writers", "3", "--ops", "10", "--workload", "bank", "--kill-rate", "0.2", "--seed", "4"]);
    assert_eq!(r["workload"], "bank");
    let (code, _, err) = run(&["stress", &t.uri, "--writers", "2", "--ops", "2"]);
    assert_eq!(code, 0, "a second run on the same table extends it: {err}");
}

#[test]
fn stress_on_object_stores() {
    for server in [servers::moto_s3(), servers::moto_s3_dynamodb()].into_iter().flatten() {
        tokio::runtime::Runtime::new().unwrap().block_on(server.prepare());
        let uri = server.fresh_uri("stress");
        let r =
            report(&server.env(), &["stress", &uri, "--writers", "3", "--ops", "8", "--rows", "5", "--kill-rate", "0.2", "--seed", "2"]);
        assert!(r["feed_versions_checked"].as_u64().unwrap() > 0, "the change feed replays the run: {r}");
    }
}

#[test]
fn stress_rejects_bad_arguments() {
    let t = TempTable::create();
    let (code, _, err) = run(&["stress", &t.uri, "--writers", "1", "--ops", "1"]);
    assert_eq!(code, 2, "the table's columns do not suit stress: {err}");
    let (code, _, err) = run(&["stress", &TempTable::uncreated().uri, "--mix", "drop=1"]);
    assert_eq!(code, 2, "{err}");
}

/// 64 tasks in each of 4 processes append to one table through one handle per process:
/// every transaction acknowledged once, row counts exact, versions shared.
#[test]
fn stress_with_many_tasks_per_process_shares_versions_and_loses_nothing() {
    let t = TempTable::uncreated();
    let r = report(
        &[],
        &["stress", &t.uri, "--writers", "4", "--tasks", "64", "--ops", "128", "--rows", "3", "--mix", "append=1", "--seed", "5"],
    );
    assert_eq!((r["tasks"].as_u64(), r["commits"].as_u64(), r["failed"].as_u64()), (Some(64), Some(512), Some(0)), "{r}");
    assert_eq!(r["transactions"].as_u64(), Some(512), "{r}");
    assert!(r["versions"].as_u64().unwrap() < 512 / 2, "tasks shared versions: {r}");
    assert_eq!(ok(&["count", &t.uri]).trim(), (512 * 3).to_string());
}

/// Cooperative commits across processes, with writers killed: 8 appending processes
/// on local disk and on moto S3. Appends that lost a race are carried by other
/// writers' commits (the report counts them), and every claim still verifies: each
/// acknowledged append in exactly one version, no failed or withdrawn one in any.
#[test]
fn stress_carries_announced_appends_across_processes() {
    let local = TempTable::uncreated();
    // Carrying is asserted on local disk (22-36 of 80 carried in the runs measured). On
    // S3 the count is a matter of timing (0-4 with kills, 1-20 without, measured): a
    // killed writer's successor starts with a handle that has lost nothing, and carries
    // nobody until it loses. There every claim must still verify.
    let mut runs = vec![(Vec::new(), local.uri.clone(), true)];
    if let Some(server) = servers::moto_s3() {
        tokio::runtime::Runtime::new().unwrap().block_on(server.prepare());
        runs.push((server.env(), server.fresh_uri("cooperative"), false));
    }
    for (env, uri, must_carry) in runs {
        let args =
            ["stress", &uri, "--writers", "8", "--ops", "10", "--rows", "5", "--mix", "append=1", "--kill-rate", "0.2", "--seed", "21"];
        let r = report(&env, &args);
        assert_eq!(r["failed"], 0, "{r}");
        assert_eq!(r["transactions"], r["commits"], "{r}");
        assert!(!must_carry || r["carried"].as_u64().unwrap() > 0, "appends were carried: {r}");
    }
    // What killed writers announced and nobody removed goes with vacuum's retention.
    let vacuum = |older_than: &str| ok(&["vacuum", &local.uri, "--older-than", older_than, "--allow-short-retention"]);
    let announced = || std::fs::read_dir(std::path::Path::new(&local.uri).join("_announced")).map(|d| d.count()).unwrap_or(0);
    vacuum("1h");
    let left = announced();
    vacuum("0s");
    assert_eq!(announced(), 0, "{left} announcements left before, none after");
}

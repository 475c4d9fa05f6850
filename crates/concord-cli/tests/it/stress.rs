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
    assert_eq!(r["versions_replayed"], r["commits"]);
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
        report(&server.env(), &["stress", &uri, "--writers", "3", "--ops", "8", "--rows", "5", "--kill-rate", "0.2", "--seed", "2"]);
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

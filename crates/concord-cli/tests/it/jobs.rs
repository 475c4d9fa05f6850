//! Staged commits and job commits (issue 19, items 0 and 8): every path that commits
//! checks idempotency keys the same way, in one place; a job's members apply in the
//! order given, each re-run on what the earlier ones changed where its rule needs it.

use serde_json::Value;

use crate::common::*;

fn staged(args: &[&str]) -> String {
    ok(args).trim().to_string()
}

fn history(t: &TempTable) -> Vec<Value> {
    t.history()
}

/// The versions whose transactions carry idempotency key `key`.
fn versions_with_key(t: &TempTable, key: &str) -> Vec<u64> {
    history(t)
        .iter()
        .filter(|v| v["transactions"].as_array().unwrap().iter().any(|x| x["idempotency_key"] == key))
        .map(|v| v["version"].as_u64().unwrap())
        .collect()
}

/// Item 0: A transaction staged under a key that already committed replays, whichever way
/// it is committed: plain, `--together` alone or with others. Two members of one job
/// with one key are refused.
#[test]
fn an_idempotency_key_holds_in_every_commit_path() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 2)), "--idempotency-key", "K1"]);
    let again = |name: &str| staged(&["append", &t.uri, &t.file(name, &csv_rows(0, 2)), "--idempotency-key", "K1", "--stage"]);
    let one = again("b.csv");
    let out = ok(&["commit", &t.uri, &one, "--together", "--json"]);
    let info: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((info["version"].as_u64(), info["idempotent_replay"].as_bool()), (Some(1), Some(true)), "{out}");
    let two = again("c.csv");
    let other = staged(&["append", &t.uri, &t.file("d.csv", &csv_rows(10, 3)), "--stage"]);
    let out = ok(&["commit", &t.uri, &two, &other, "--together", "--json"]);
    let infos: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(infos[0]["idempotent_replay"], true, "{out}");
    assert_eq!(infos[1]["idempotent_replay"], false, "{out}");
    ok(&["commit", &t.uri, &again("e.csv")]);
    assert_eq!(t.count(), 5, "K1's rows once, the other member's once");
    assert_eq!(versions_with_key(&t, "K1"), [1]);
    // Two members of one job with one key: refused before anything is read or written.
    let a = staged(&["append", &t.uri, &t.file("f.csv", &csv_rows(20, 1)), "--idempotency-key", "K2", "--stage"]);
    let b = staged(&["append", &t.uri, &t.file("g.csv", &csv_rows(30, 1)), "--idempotency-key", "K2", "--stage"]);
    let before = snapshot(&t);
    assert_mentions(&fails(&["commit", &t.uri, &a, &b, "--together"], 2), &["K2", &a, &b]);
    assert_eq!(snapshot(&t), before);
}

/// A job's own key (`commit ... --together --idempotency-key J`): every member carries
/// it, and a retry of the job, with the same staged ids or freshly staged ones, commits
/// nothing and reports the job's outcomes.
#[test]
fn a_job_key_makes_a_retried_job_replay() {
    let t = TempTable::create();
    let stage = |name: &str, first: u64| staged(&["append", &t.uri, &t.file(name, &csv_rows(first, 2)), "--stage"]);
    let (a, b) = (stage("a.csv", 0), stage("b.csv", 10));
    ok(&["commit", &t.uri, &a, &b, "--together", "--idempotency-key", "J"]);
    assert_eq!(t.count(), 4);
    let job = &history(&t)[1];
    assert!(job["transactions"].as_array().unwrap().iter().all(|x| x["job_idempotency_key"] == "J"), "{job}");
    // The driver lost the response and runs the whole job again: new staged ids.
    let (c, d) = (stage("c.csv", 0), stage("d.csv", 10));
    let out = ok(&["commit", &t.uri, &c, &d, "--together", "--idempotency-key", "J", "--json"]);
    let infos: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(infos.len(), 2);
    assert!(infos.iter().all(|i| i["version"] == 1 && i["idempotent_replay"] == true), "{out}");
    ok(&["commit", &t.uri, &a, &b, "--together", "--idempotency-key", "J"]);
    assert_eq!((t.count(), t.latest_version()), (4, 1), "nothing committed twice");
    // A job key is not a transaction's: a single write under it is refused.
    let e = staged(&["append", &t.uri, &t.file("e.csv", &csv_rows(40, 1)), "--stage"]);
    assert_mentions(&fails(&["commit", &t.uri, &e, "--idempotency-key", "J"], 2), &["'J'", "job commit"]);
    // Several separate commits under one key would make all but the first replays.
    assert_mentions(&fails(&["commit", &t.uri, &c, &d, "--idempotency-key", "K"], 2), &["idempotency key", "together"]);
}

/// Item 8: Members apply in the order given, each as if committed right after the earlier
/// ones: independent writes (a delete and an update of other rows, an append and a
/// delete) commit as one version; a delete after an append re-runs on its rows.
#[test]
fn job_members_apply_in_order_each_re_run_on_the_earlier_ones() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 4))]);
    let delete = staged(&["delete", &t.uri, "--where", "id = 1", "--stage"]);
    let update = staged(&["update", &t.uri, "--set", "name = 'z'", "--where", "id = 2", "--stage"]);
    ok(&["commit", &t.uri, &delete, &update, "--together"]);
    let rows: Vec<Value> = ok(&["scan", &t.uri, "--format", "json"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().any(|r| r["id"] == 2 && r["name"] == "z"));
    assert_eq!(history(&t).len(), 3, "one version for the job");

    let append = staged(&["append", &t.uri, &t.file("b.csv", &csv_rows(10, 4)), "--stage"]);
    let evens = staged(&["delete", &t.uri, "--where", "id % 2 = 0", "--stage"]);
    ok(&["commit", &t.uri, &append, &evens, "--together"]);
    assert_eq!(ids_of(&t), [3, 11, 13], "the delete re-ran on the rows appended before it in the job");
    let last = history(&t).pop().unwrap();
    let transactions = last["transactions"].as_array().unwrap().clone();
    assert_eq!((transactions.len(), transactions[1]["rerun"].as_bool()), (2, Some(true)), "{last}");

    // In the other order, the delete does not see the rows appended after it.
    let u = TempTable::create();
    ok(&["append", &u.uri, &u.file("a.csv", &csv_rows(0, 4))]);
    let evens = staged(&["delete", &u.uri, "--where", "id % 2 = 0", "--stage"]);
    let append = staged(&["append", &u.uri, &u.file("b.csv", &csv_rows(10, 4)), "--stage"]);
    ok(&["commit", &u.uri, &evens, &append, "--together"]);
    assert_eq!(ids_of(&u), [1, 3, 10, 11, 12, 13]);
}

/// Where no serial order exists (a member using a column an earlier member drops),
/// the job is refused with exit 2 naming both, and nothing commits.
#[test]
fn a_contradictory_job_is_refused_naming_the_pair() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 4))]);
    let update = staged(&["update", &t.uri, "--set", "score = 1", "--stage"]);
    let drop = staged(&["alter", &t.uri, "drop-column", "score", "--stage"]);
    let before = snapshot(&t);
    let err = fails(&["commit", &t.uri, &drop, &update, "--together"], 2);
    assert_mentions(&err, &[&drop, &update, "score"]);
    assert_eq!(snapshot(&t), before);
    // In the order that works, both commit in one version.
    ok(&["commit", &t.uri, &update, &drop, "--together"]);
    assert_eq!(t.latest_version(), 2);
}

fn ids_of(t: &TempTable) -> Vec<i64> {
    let mut ids: Vec<i64> = ok(&["scan", &t.uri, "--format", "json"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

fn staged_id(args: &[&str]) -> String {
    let out = ok(args);
    out.trim().to_string()
}

/// `concord commit --together`: staged appends from several workers become one version,
/// after a concurrent commit landed; the history lists each.
#[test]
fn a_job_commit_makes_staged_transactions_one_version() {
    let t = TempTable::create();
    let ids: Vec<String> =
        (0..3).map(|w| staged_id(&["append", &t.uri, &t.file(&format!("w{w}.csv"), &csv_rows(w * 10, 3)), "--stage"])).collect();
    ok(&["append", &t.uri, &t.file("meanwhile.csv", &csv_rows(100, 2))]);
    let mut args = vec!["commit", t.uri.as_str()];
    args.extend(ids.iter().map(String::as_str));
    args.extend(["--together", "--json"]);
    let out = ok(&args);
    let infos: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(infos.len(), 3);
    assert!(infos.iter().all(|i| i["version"] == 2), "one version: {out}");
    let history: serde_json::Value = serde_json::from_str(&ok(&["history", &t.uri, "--format", "json"])).unwrap();
    let v2 = &history[2];
    let listed: Vec<&str> = v2["transactions"].as_array().unwrap().iter().map(|t| t["transaction_id"].as_str().unwrap()).collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect::<Vec<_>>(), "in the order given");
    assert_eq!(v2["transaction_id"], v2["transactions"][0]["transaction_id"]);
    assert_eq!(v2["rows_written"], 9);
    assert_eq!(t.count(), 11);
    // Committing them again commits nothing (each finds itself in the history).
    let again: Vec<serde_json::Value> = ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(again.iter().all(|i| i["version"] == 2));
    assert_eq!(t.count(), 11);
}

/// A job commit is all or none: one member incompatible with what landed meanwhile
/// (exit 3, naming it and the winner) commits nothing of the others.
#[test]
fn a_job_commit_with_an_incompatible_member_commits_nothing() {
    let t = TempTable::create();
    let with_name = staged_id(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 3)), "--stage"]);
    let without = staged_id(&["append", &t.uri, &t.file("b.csv", "id,score\n50,1.5\n"), "--stage"]);
    ok(&["alter", &t.uri, "drop-column", "name"]);
    let before = snapshot(&t);
    let err = fails(&["commit", &t.uri, &without, &with_name, "--together"], 3);
    assert_mentions(&err, &[&with_name, "version 1", "drop_column", "nothing of the job was committed"]);
    assert_eq!(snapshot(&t), before, "nothing committed");
    // Without the incompatible one, the job commits.
    ok(&["commit", &t.uri, &without, "--together"]);
    assert_eq!(t.count(), 1);
}

/// `--together` checks its arguments: a staged id given twice is refused.
#[test]
fn commit_together_refuses_a_repeated_id() {
    let t = TempTable::create();
    let id = staged_id(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 1)), "--stage"]);
    let err = fails(&["commit", &t.uri, &id, &id, "--together"], 2);
    assert_mentions(&err, &["given twice"]);
}

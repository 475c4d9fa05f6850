//! Tags, branches and multi-table commits through the command line (issue 58): what
//! each command prints, reads and writes, and that bad input changes nothing, with the
//! contract's exit codes.

use crate::common::*;

fn count_at(t: &TempTable, extra: &[&str]) -> u64 {
    let mut args = vec!["count", t.uri.as_str()];
    args.extend_from_slice(extra);
    ok(&args).trim().parse().unwrap()
}

#[test]
fn a_tag_names_a_version_wherever_one_is_taken() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 3))]);
    assert_mentions(&ok(&["tag", "create", &t.uri, "first"]), &["first", "version 1"]);
    ok(&["append", &t.uri, &t.file("b.csv", &csv_rows(3, 2))]);
    assert_eq!(count_at(&t, &["--version", "first"]), 3);
    assert_eq!(ok(&["scan", &t.uri, "--version", "first", "--format", "csv"]).lines().count(), 4);
    assert_eq!(ok(&["changes", &t.uri, "--from", "first", "--format", "csv"]).lines().count(), 3, "two rows after it");
    assert_mentions(&ok(&["tag", "list", &t.uri]), &["first"]);
    // One name, once: the second creator is told it exists (exit 7, as `create` is).
    let before = snapshot(&t);
    assert_mentions(&fails(&["tag", "create", &t.uri, "first"], 7), &["first", "already"]);
    // Unknown names: usage errors, nothing changed.
    assert_mentions(&fails(&["count", &t.uri, "--version", "nope"], 2), &["nope"]);
    assert_mentions(&fails(&["tag", "delete", &t.uri, "nope"], 2), &["nope"]);
    assert_eq!(snapshot(&t), before);
    ok(&["tag", "delete", &t.uri, "first"]);
    fails(&["count", &t.uri, "--version", "first"], 2);
}

#[test]
fn a_branch_is_written_apart_and_merged_into_main() {
    let t = TempTable::create();
    ok(&["append", &t.uri, &t.file("a.csv", &csv_rows(0, 2))]);
    assert_mentions(&ok(&["branch", "create", &t.uri, "dev"]), &["dev", "version 1"]);
    ok(&["--branch", "dev", "append", &t.uri, &t.file("b.csv", &csv_rows(10, 3))]);
    ok(&["--branch", "dev", "update", &t.uri, "--set", "score = 0", "--where", "id = 0"]);
    assert_eq!((t.count(), count_at(&t, &["--branch", "dev"])), (2, 5), "main does not see the branch");
    assert_mentions(&ok(&["branch", "list", &t.uri]), &["main", "dev"]);
    // main moved: a fast-forward-only merge is refused (exit 5); a merge replays.
    ok(&["append", &t.uri, &t.file("c.csv", &csv_rows(20, 1))]);
    let before = snapshot(&t);
    fails(&["branch", "merge", &t.uri, "dev", "--fast-forward-only"], 5);
    assert_eq!(snapshot(&t), before);
    assert_mentions(&ok(&["branch", "merge", &t.uri, "dev"]), &["merged 2 transactions", "dev", "main"]);
    assert_eq!(t.count(), 6);
    assert_eq!(ok(&["scan", &t.uri, "--where", "id = 0", "--columns", "score", "--format", "csv"]).trim(), "score\n0.0");
    // Bad input: nothing changed.
    let before = snapshot(&t);
    assert_mentions(&fails(&["branch", "delete", &t.uri, "main"], 2), &["main"]);
    assert_mentions(&fails(&["branch", "merge", &t.uri, "main"], 2), &["main"]);
    assert_mentions(&fails(&["--branch", "nope", "count", &t.uri], 2), &["nope"]);
    assert_mentions(&fails(&["branch", "merge", &t.uri, "nope"], 2), &["nope"]);
    assert_eq!(snapshot(&t), before);
    ok(&["branch", "delete", &t.uri, "dev"]);
    fails(&["--branch", "dev", "count", &t.uri], 2);
    assert_eq!(t.count(), 6, "main keeps what it merged");
}

#[test]
fn staged_transactions_of_two_tables_commit_together() {
    let orders = TempTable::create();
    let items_uri = orders.dir.path().join("items").to_string_lossy().into_owned();
    ok(&["create", &items_uri, "--schema", SCHEMA]);
    let stage = |uri: &str, name: &str, start: u64, n: u64| {
        ok(&["append", uri, &orders.file(name, &csv_rows(start, n)), "--stage"]).trim().to_string()
    };
    let (o, i) = (stage(&orders.uri, "o.csv", 0, 1), stage(&items_uri, "i.csv", 0, 3));
    let pair = format!("{items_uri}={i}");
    let out = ok(&["commit", &orders.uri, &o, &pair, "--together", "--idempotency-key", "order-1"]);
    assert_mentions(&out, &[&orders.uri, &items_uri, "committed version 1"]);
    assert_eq!((orders.count(), ok(&["count", &items_uri]).trim()), (1, "3"));
    // The same key again: nothing written twice.
    let out = ok(&["commit", &orders.uri, &o, &pair, "--together", "--idempotency-key", "order-1"]);
    assert_mentions(&out, &["already committed as version 1"]);
    // Pairs need --together; one table twice, under two names, is refused.
    let before = snapshot(&orders);
    let o2 = stage(&orders.uri, "o2.csv", 5, 1);
    assert_mentions(&fails(&["commit", &orders.uri, &o2, &pair], 2), &["--together"]);
    let other_name = format!("file://{}={o2}", orders.uri);
    assert_mentions(&fails(&["commit", &orders.uri, &o2, &other_name, "--together"], 2), &["twice"]);
    assert_eq!(snapshot(&orders), before);
}

//! The replay oracle: every version is its predecessor with its transactions applied,
//! in order, over plain sorted lists of ids. Shared by the library's histories and the
//! CLI's process histories (which include this file).

#![allow(dead_code)]

use std::collections::HashMap;

use concord::manifest::Operation;
use concord::Table;

use crate::common::*;

/// The predicates writers delete with (all in the oracle's table).
pub const DELETES: [&str; 5] = ["id % 2 = 0", "id < 20", "id >= 80", "id % 3 = 1", "id % 7 = 0"];

/// `previous` (the ids of the version before) with transaction `t` applied.
pub fn replay(
    previous: Vec<i64>,
    t: &concord::manifest::TransactionRecord,
    written: &HashMap<uuid::Uuid, Vec<i64>>,
    states: &[Vec<i64>],
) -> Vec<i64> {
    match &t.operation {
        Operation::Create => Vec::new(),
        Operation::Append { .. } => previous.iter().chain(&written[&t.id]).copied().collect(),
        Operation::Overwrite { .. } => written[&t.id].clone(),
        Operation::Restore { version } => states[*version as usize].clone(),
        Operation::Delete { predicate, .. } => {
            let matches = oracle_predicate(predicate);
            previous.into_iter().filter(|id| !matches(*id)).collect()
        }
        // An update changes scores, a compaction moves rows, a schema change adds or
        // drops a column: never which rows exist (a lost or resurrected row shows here).
        Operation::Update { .. }
        | Operation::Compact { .. }
        | Operation::AddColumn { .. }
        | Operation::DropColumn { .. }
        | Operation::RenameColumn { .. }
        | Operation::WidenColumn { .. }
        | Operation::SetProperties { .. } => previous,
        // A source with every column replaces each of its keys' rows by its row; one
        // without some (a column another writer added) updates each matched row in
        // place, keeping the others' values; unmatched keys are inserted once.
        Operation::Merge { partial: None, .. } => {
            let source = &written[&t.id];
            previous.into_iter().filter(|id| !source.contains(id)).chain(source.iter().copied()).collect()
        }
        Operation::Merge { partial: Some(_), .. } => {
            let source = &written[&t.id];
            let inserted: Vec<i64> = source.iter().copied().filter(|id| !previous.contains(id)).collect();
            previous.into_iter().chain(inserted).collect()
        }
        Operation::ReplaceWhere { predicate, .. } => {
            let matches = oracle_predicate(predicate);
            previous.into_iter().filter(|id| !matches(*id)).chain(written[&t.id].iter().copied()).collect()
        }
        // A withdrawn transaction (cooperative commits) changes nothing.
        Operation::Withdraw { .. } | Operation::DeleteBranch => previous,
        other => panic!("no {} in these histories", other.name()),
    }
}

/// The reference: each version from its predecessor and its transactions, over plain
/// sorted lists of ids (duplicates allowed). Returns the transactions committed.
pub async fn check_replay(table: &Table, written: &HashMap<uuid::Uuid, Vec<i64>>, seed: u64) -> usize {
    let latest = table.latest().await.unwrap();
    let mut states: Vec<Vec<i64>> = Vec::new();
    let history = latest.history().await.unwrap();
    for info in &history {
        let version = latest.checkout(info.version).await.unwrap();
        let previous = states.last().cloned().unwrap_or_default();
        // A shared version is its transactions applied in order.
        let mut expected = previous;
        for t in &version.manifest().transactions {
            expected = replay(expected, t, written, &states);
        }
        expected.sort_unstable();
        let actual = ids(&version).await;
        if actual != expected {
            for v in history.iter().filter(|v| v.version + 6 >= info.version && v.version <= info.version) {
                let m = latest.checkout(v.version).await.unwrap();
                for t in &m.manifest().transactions {
                    let detail = match &t.operation {
                        Operation::Merge { partial, deletions, fragments, .. } => format!(
                            "merge partial={} deletions={:?} fragments={}",
                            partial.is_some(),
                            deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>(),
                            fragments.len()
                        ),
                        Operation::Update { deletions, fragments, .. } => format!(
                            "update deletions={:?} fragments={}",
                            deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>(),
                            fragments.len()
                        ),
                        Operation::Delete { deletions, .. } => {
                            format!("delete deletions={:?}", deletions.iter().map(|d| (d.fragment_id, d.rows)).collect::<Vec<_>>())
                        }
                        other => other.name().to_string(),
                    };
                    eprintln!(
                        "context: v{} txn {} read {:?} rebased {:?} rerun {} carried_by {:?}: {detail}",
                        v.version, t.id, t.read_version, t.rebased_over, t.rerun, t.carried_by
                    );
                }
                eprintln!(
                    "context: v{} next_fragment_id {} schema {:?} ids {:?}",
                    v.version,
                    m.manifest().next_fragment_id,
                    m.schema().names(),
                    ids(&m).await
                );
            }
        }
        assert_eq!(
            actual,
            expected,
            "seed {seed}: version {} is not version {} + its {} (replay with SEEDS = [{seed}])",
            info.version,
            info.version.saturating_sub(1),
            info.operation
        );
        states.push(actual);
    }
    // Transactions, not versions: a shared version holds several.
    // Withdrawals (cooperative commits) record that a transaction will never commit.
    history.iter().flat_map(|v| &v.transactions).filter(|t| t.operation != "withdraw").count()
}

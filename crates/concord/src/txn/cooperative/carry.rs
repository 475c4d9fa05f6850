//! Carrying: the announced transactions a writer adds to the version it builds, after
//! its own, each judged on its own as a group commit's member is (FORMAT.md §8,
//! "Carry"); and the record of a withdrawal.

use uuid::Uuid;

use super::announce::Announced;
use super::carriable;
use crate::env::Env;
use crate::error::CommitError;
use crate::format::manifest::{Manifest, Operation, TransactionRecord};
use crate::storage::TableStore;
use crate::txn::build::Building;
use crate::txn::member::{Follows, Member};
use crate::txn::ops::NextState;
use crate::txn::CommitOptions;

/// Adds to `building` the announced transactions (`announced`) that may follow what it
/// holds, in announcement order, each judged on its own (`carrier`: the including
/// writer's first transaction). An announcement whose owner marked it withdrawn, and
/// that no version settled yet, is recorded withdrawn instead. Anything the includer
/// cannot judge from the versions it holds, or cannot apply, is simply not carried: it
/// is its owner's to meet.
pub(crate) async fn carry(
    store: &TableStore,
    env: &Env,
    building: &mut Building,
    announced: &Announced,
    carrier: Uuid,
) -> Result<(), CommitError> {
    for announcement in &announced.live {
        let txn = &announcement.transaction;
        let Ok(opts) = txn.staged.apply_to(&CommitOptions::default()) else { continue };
        // Judged from versions this writer holds only: a read on another's behalf
        // would delay its own commit (the owner, or another includer, meets it).
        if !carriable(txn, &opts) || !store.holds_manifests(txn.read_version + 1..building.base().version) {
            continue;
        }
        // Judged against the committed versions (the base); then against what this
        // version holds before it, as any member is.
        let mut member = Member::new(txn, &opts, None);
        if !member.ready_to_carry(store, building.base()).await {
            continue;
        }
        if announced.withdrawn.contains(&txn.id) {
            let record = withdraw_record(env, building.base(), txn.id, Some(carrier));
            let state = building.state().clone();
            building.push(record, None, NextState::unchanged(&state));
            continue;
        }
        if !matches!(member.follows(building.state(), building.earlier()), Follows::Rebase) {
            continue;
        }
        let state = building.state().clone();
        let Ok(next) = member.apply(store, env, &state).await else { continue };
        let mut record = member.record(member.operation(), next.rows_deleted, false);
        record.carried_by = Some(carrier);
        building.push(record, opts.idempotency_key.clone(), next);
    }
    Ok(())
}

/// The record of the withdrawal of `withdrawn`, on `base` (`carried_by`: by an includer
/// that saw the owner's marker).
pub(crate) fn withdraw_record(env: &Env, base: &Manifest, withdrawn: Uuid, carried_by: Option<Uuid>) -> TransactionRecord {
    let operation = Operation::Withdraw { transaction_id: withdrawn };
    TransactionRecord { carried_by, ..TransactionRecord::own(env.new_uuid(), Some(base.version), operation) }
}

//! A version being built on a base: transactions applied in turn, each to the state the
//! previous produced (the state between them is never stored). The commit driver
//! builds its members into it, then the announced transactions it carries.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};

use super::member::Earlier;
use super::ops::NextState;
use crate::env::Env;
use crate::format::manifest::{format_for, Manifest, TransactionRecord};

/// Version `base + 1` as built so far.
pub(crate) struct Building {
    base: Arc<Manifest>,
    timestamp: DateTime<Utc>,
    state: Arc<Manifest>,
    records: Vec<TransactionRecord>,
    earlier: Vec<Earlier>,
}

impl Building {
    pub(crate) fn new(env: &Env, base: &Arc<Manifest>) -> Self {
        let timestamp = commit_timestamp(env.clock.now(), base.timestamp);
        Building { base: base.clone(), timestamp, state: base.clone(), records: Vec::new(), earlier: Vec::new() }
    }

    /// The version it builds on.
    pub(crate) fn base(&self) -> &Arc<Manifest> {
        &self.base
    }

    /// The state after the transactions so far.
    pub(crate) fn state(&self) -> &Arc<Manifest> {
        &self.state
    }

    /// The transactions so far, as winners for the next one.
    pub(crate) fn earlier(&self) -> &[Earlier] {
        &self.earlier
    }

    /// Adds a transaction (its `record`, with its idempotency `key`) that makes `next`.
    pub(crate) fn push(&mut self, record: TransactionRecord, key: Option<String>, next: NextState) {
        let added = self.state.next_fragment_id..next.next.fragment;
        self.earlier.push(Earlier { id: record.id, operation: record.operation.clone(), added, key });
        self.records.push(record);
        self.state = Arc::new(Manifest {
            format_version: format_for(&next.schema),
            version: self.base.version + 1,
            parent_version: Some(self.base.version),
            timestamp: self.timestamp,
            // Filled in by `finish`.
            transactions: self.base.transactions.clone(),
            schema: next.schema,
            segments: next.segments,
            next_fragment_id: next.next.fragment,
            next_row_id: next.next.row,
            properties: next.properties,
        });
    }

    /// The version, `None` if it holds no transaction.
    pub(crate) fn finish(self) -> Option<Manifest> {
        if self.records.is_empty() {
            return None;
        }
        let mut manifest = Arc::unwrap_or_clone(self.state);
        manifest.transactions = self.records;
        Some(manifest)
    }
}

/// Version timestamps strictly increase along the chain, so time travel can bisect
/// even when writers' clocks disagree.
pub(crate) fn commit_timestamp(now: DateTime<Utc>, parent: DateTime<Utc>) -> DateTime<Utc> {
    now.max(parent + TimeDelta::microseconds(1))
}

//! `concord doctor`: is a store safe for concurrent commits?
//!
//! Probes, under `<table>/_doctor/<uuid>/` (removed afterwards): concurrent conditional
//! creates of one object (exactly one must win), a conditional create of an existing
//! object (must be refused), listing order, and the conditional-create round trip.
//! A store that accepts every create (it ignores `If-None-Match`) loses commits.

use std::time::Instant;

use futures::future::join_all;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::uri::TableLocation;
use crate::error::StorageError;

/// Concurrent creators raced in the probe.
pub const PROBE_RACERS: usize = 8;

/// What the probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeReport {
    /// Of [`PROBE_RACERS`] concurrent conditional creates of one object, how many
    /// reported success (safe: exactly 1).
    pub race_winners: usize,
    /// A conditional create of an existing object was refused.
    pub existing_refused: bool,
    /// Why conditional creates fail outright, if they do (e.g. not implemented).
    pub create_unsupported: Option<String>,
    /// Listing returns keys in lexicographic order.
    pub listing_ordered: bool,
    /// Median round trip of a conditional create, milliseconds.
    pub create_p50_ms: f64,
    /// Probe objects left behind (cleanup failed).
    pub left_behind: usize,
}

impl ProbeReport {
    /// Commits by conditional create on this store are safe with concurrent writers.
    pub fn conditional_create_safe(&self) -> bool {
        self.create_unsupported.is_none() && self.race_winners == 1 && self.existing_refused
    }
}

/// Runs the probe on `location`'s store (see the module docs).
pub async fn probe_store(location: &TableLocation) -> Result<ProbeReport, StorageError> {
    let store = location.store.clone();
    let dir = location.root.clone().join("_doctor").join(uuid::Uuid::new_v4().to_string());
    let err = |action: &'static str, path: &Path, source: object_store::Error| StorageError { action, path: location.display(path), source };
    let create = |path: Path, body: String| {
        let store = store.clone();
        async move {
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            store.put_opts(&path, PutPayload::from(body), opts).await
        }
    };

    // 1. Race: exactly one creator of one object may win.
    let target = dir.clone().join("race");
    let results = join_all((0..PROBE_RACERS).map(|i| create(target.clone(), format!("racer {i}")))).await;
    let mut race_winners = 0;
    let mut create_unsupported = None;
    for r in results {
        match r {
            Ok(_) => race_winners += 1,
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
            Err(e @ object_store::Error::NotImplemented { .. }) => create_unsupported = Some(e.to_string()),
            Err(e) => return Err(err("racing conditional creates of", &target, e)),
        }
    }

    // 2. A create of an object that exists must be refused.
    let existing_refused = match create(target.clone(), "late".into()).await {
        Ok(_) => false,
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => true,
        Err(object_store::Error::NotImplemented { .. }) => false,
        Err(e) => return Err(err("creating an existing", &target, e)),
    };

    // 3. Listing order and 4. round trips.
    let mut samples = Vec::new();
    for name in ["list-b", "list-a", "list-c", "list-e", "list-d"] {
        let started = Instant::now();
        let path = dir.clone().join(name);
        match create(path.clone(), name.into()).await {
            Ok(_) | Err(object_store::Error::AlreadyExists { .. } | object_store::Error::NotImplemented { .. }) => {}
            Err(e) => return Err(err("writing", &path, e)),
        }
        if create_unsupported.is_some() {
            store.put(&path, PutPayload::from(name.to_string())).await.map_err(|e| err("writing", &path, e))?;
        }
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    let listed: Vec<Path> = store.list(Some(&dir)).map_ok(|m| m.location).try_collect().await.map_err(|e| err("listing", &dir, e))?;
    let names: Vec<String> = listed.iter().filter_map(|p| p.filename().map(str::to_string)).collect();
    let mut sorted = names.clone();
    sorted.sort();
    let listing_ordered = names == sorted;

    // Cleanup: every probe object.
    let mut left_behind = 0;
    for path in &listed {
        if store.delete(path).await.is_err() {
            left_behind += 1;
        }
    }
    Ok(ProbeReport {
        race_winners,
        existing_refused,
        create_unsupported,
        listing_ordered,
        create_p50_ms: samples[samples.len() / 2],
        left_behind,
    })
}

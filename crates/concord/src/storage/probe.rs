//! `concord doctor`: is a store safe for concurrent commits?
//!
//! Probes, under `<table>/_doctor/<start millis>-<uuid>/`: concurrent conditional
//! creates of one object (exactly one must win), a conditional create of an existing
//! object (must be refused), listing order, and the conditional-create round trip.
//! A store that accepts every create (it ignores `If-None-Match`) loses commits.
//!
//! Cleanup: every probe object is removed afterwards (and, on local disk, the folders
//! the probe made, the table folder too if the probe created it). A run killed between
//! steps leaves objects whose folder names their start time: the next probe, and
//! vacuum, remove those older than [`PROBE_STALE_AFTER`].

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::future::join_all;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::location::{StoreKind, TableLocation};
use crate::env::Env;
use crate::error::StorageError;

/// Where probes write, under the table folder.
pub(crate) const PROBE_DIR: &str = "_doctor";

/// A probe object this old belongs to no running probe (a probe takes seconds).
pub const PROBE_STALE_AFTER: Duration = Duration::from_secs(600);

/// Whether `meta`, an object under [`PROBE_DIR`], was left by a probe that ended: its
/// run folder names a start older than [`PROBE_STALE_AFTER`] (else its modification
/// time is that old).
pub(crate) fn is_stale_probe_object(root: &Path, meta: &ObjectMeta, now: DateTime<Utc>) -> bool {
    let cutoff = now - chrono::TimeDelta::from_std(PROBE_STALE_AFTER).expect("ten minutes");
    let dir = root.clone().join(PROBE_DIR);
    let run = meta.location.prefix_match(&dir).and_then(|mut parts| parts.next()).map(|p| p.as_ref().to_string());
    let started = run
        .as_deref()
        .and_then(|r| r.split('-').next())
        .and_then(|ms| ms.parse::<i64>().ok())
        .and_then(DateTime::<Utc>::from_timestamp_millis);
    started.unwrap_or(meta.last_modified) < cutoff
}

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

/// Runs the probe on `location`'s store (see the module docs); `env` gives the start
/// time and the run's id.
pub async fn probe_store(location: &TableLocation, env: &Env) -> Result<ProbeReport, StorageError> {
    let store = location.store.clone();
    let now = env.clock.now();
    let local_root = (location.kind == StoreKind::Local).then(|| std::path::PathBuf::from(format!("/{}", location.root)));
    // The folders the probe will create: the table folder and its missing parents.
    let created: Vec<std::path::PathBuf> =
        local_root.iter().flat_map(|r| r.ancestors().take_while(|a| !a.exists()).map(|a| a.to_path_buf())).collect();
    let probes = location.root.clone().join(PROBE_DIR);
    let dir = probes.clone().join(format!("{:013}-{}", now.timestamp_millis().max(0), env.new_uuid()));
    let err = |action: &'static str, path: &Path, source: object_store::Error| StorageError::new(action, location.display(path), source);
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

    // Cleanup: every probe object, and what earlier probes that were killed left.
    let mut left_behind = 0;
    for path in &listed {
        if store.delete(path).await.is_err() {
            left_behind += 1;
        }
    }
    let earlier: Vec<ObjectMeta> = store.list(Some(&probes)).try_collect().await.map_err(|e| err("listing", &probes, e))?;
    for meta in earlier.iter().filter(|m| is_stale_probe_object(&location.root, m, now)) {
        let _ = store.delete(&meta.location).await;
    }
    if let Some(root) = &local_root {
        // Folders go only when empty: a concurrent probe's stay.
        for run in
            earlier.iter().filter_map(|m| m.location.prefix_match(&probes).and_then(|mut p| p.next()).map(|p| p.as_ref().to_string()))
        {
            let _ = std::fs::remove_dir(root.join(PROBE_DIR).join(run));
        }
        let _ = std::fs::remove_dir(std::path::PathBuf::from(format!("/{dir}")));
        let _ = std::fs::remove_dir(root.join(PROBE_DIR));
        for folder in &created {
            let _ = std::fs::remove_dir(folder);
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

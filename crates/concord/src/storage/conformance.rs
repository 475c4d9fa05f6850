//! The commit-coordinator conformance suite (feature `testing`), in the manner of
//! object_store's integration module: any [`CommitCoordinator`] (the shipped ones, or
//! a caller's own) runs the same checks against a fresh, empty location. Checks that
//! need a capability run only where [`CoordinatorCapabilities`] claims it. Failures
//! panic with the location's name, as test assertions do.

use std::sync::Arc;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};

use super::{CommitCoordinator, CreateOutcome, TableLocation};
use crate::format::naming;

fn manifest_bytes(tag: &str) -> Bytes {
    Bytes::from(format!("{{\"tag\":\"{tag}\"}}"))
}

/// Runs every check on `location`, which must hold no table (`name` labels failures).
/// Creates versions 0 to 31 and removes some.
pub async fn run(name: &str, location: &TableLocation) {
    let c = location.coordinator().clone();
    empty_location(name, &c).await;
    create_is_once(name, &c).await;
    chain_and_latest(name, &c).await;
    if c.capabilities().atomic_create {
        racing_creators_one_wins(name, &c).await;
    }
    if c.capabilities().advisory_hint {
        hint_is_only_advisory(name, location).await;
    }
    removed_versions_are_gone(name, &c).await;
}

async fn create_versions(c: &Arc<dyn CommitCoordinator>, range: std::ops::RangeInclusive<u64>) {
    for v in range {
        assert_eq!(c.create_version(v, manifest_bytes(&v.to_string())).await.unwrap(), CreateOutcome::Created, "version {v}");
        c.after_commit(v).await;
    }
}

async fn empty_location(name: &str, c: &Arc<dyn CommitCoordinator>) {
    assert_eq!(c.latest_version(None).await.unwrap(), None, "{name}: an empty location has no latest version");
    assert_eq!(c.read_version(0).await.unwrap(), None, "{name}: an empty location has no version 0");
    assert!(c.list_versions().await.unwrap().is_empty(), "{name}: an empty location lists no versions");
}

async fn create_is_once(name: &str, c: &Arc<dyn CommitCoordinator>) {
    assert_eq!(c.create_version(0, manifest_bytes("first")).await.unwrap(), CreateOutcome::Created, "{name}");
    assert_eq!(
        c.create_version(0, manifest_bytes("second")).await.unwrap(),
        CreateOutcome::AlreadyExists,
        "{name}: a version is created once"
    );
    assert_eq!(c.read_version(0).await.unwrap(), Some(manifest_bytes("first")), "{name}: the first write stays");
}

async fn chain_and_latest(name: &str, c: &Arc<dyn CommitCoordinator>) {
    create_versions(c, 1..=30).await;
    assert_eq!(c.latest_version(None).await.unwrap(), Some(30), "{name}");
    assert_eq!(c.latest_version(Some(5)).await.unwrap(), Some(30), "{name}: from a known older version");
    assert_eq!(c.latest_version(Some(30)).await.unwrap(), Some(30), "{name}: from the latest");
    assert_eq!(c.list_versions().await.unwrap(), (0..=30).collect::<Vec<_>>(), "{name}: ascending, no gap");
}

/// Of 16 concurrent creators of version 31, exactly one wins, and its bytes are stored.
async fn racing_creators_one_wins(name: &str, c: &Arc<dyn CommitCoordinator>) {
    let racers = (0..16).map(|i| {
        let c = c.clone();
        async move { (i, c.create_version(31, manifest_bytes(&format!("racer-{i}"))).await.unwrap()) }
    });
    let winners: Vec<usize> =
        futures::future::join_all(racers).await.into_iter().filter(|(_, o)| *o == CreateOutcome::Created).map(|(i, _)| i).collect();
    assert_eq!(winners.len(), 1, "{name}: exactly one of 16 racers creates a version, got {winners:?}");
    let stored = c.read_version(31).await.unwrap().unwrap();
    assert_eq!(stored, manifest_bytes(&format!("racer-{}", winners[0])), "{name}: the stored version is the winner's");
}

/// A stale, wrong, garbled or missing hint never yields a wrong latest version.
async fn hint_is_only_advisory(name: &str, location: &TableLocation) {
    let c = location.coordinator();
    let latest = c.latest_version(None).await.unwrap();
    let hint = naming::latest_hint_path(location.root());
    for body in [r#"{"version":3}"#, r#"{"version":9999}"#, "not json", r#"{"version":31}"#] {
        location.store().put(&hint, PutPayload::from(body.as_bytes().to_vec())).await.unwrap();
        assert_eq!(c.latest_version(None).await.unwrap(), latest, "{name}: hint {body}");
    }
    location.store().delete(&hint).await.unwrap();
    assert_eq!(c.latest_version(None).await.unwrap(), latest, "{name}: no hint");
}

/// Vacuum's removal: a removed version reads as absent, is not listed, and the latest
/// is unchanged.
async fn removed_versions_are_gone(name: &str, c: &Arc<dyn CommitCoordinator>) {
    let latest = c.latest_version(None).await.unwrap();
    for v in 0..5 {
        c.remove_version(v).await.unwrap();
        c.remove_version(v).await.unwrap_or_else(|e| panic!("{name}: removing version {v} twice: {e}"));
    }
    for v in 0..5 {
        assert_eq!(c.read_version(v).await.unwrap(), None, "{name}: removed version {v} reads as absent");
    }
    assert_eq!(c.list_versions().await.unwrap().first().copied(), Some(5), "{name}: removed versions are not listed");
    assert_eq!(c.latest_version(None).await.unwrap(), latest, "{name}: the latest is unchanged");
}

//! The commit's reads of the chain beyond what it created: the first base, the latest
//! version, the versions after a base.

use std::sync::Arc;

use crate::error::CommitError;
use crate::format::manifest::Manifest;
use crate::txn::handle::Writer;
use crate::txn::member::read_existing;

/// The versions after `base` that are there already (the next `ahead`, read at once;
/// the chain has no gaps): the newest of them, or `None` (also when a read fails: the
/// writer then creates on `base`, and a lost create reads the winner).
pub(super) async fn read_on(w: Writer<'_>, base: &Manifest, ahead: u64) -> Option<Arc<Manifest>> {
    let newest = newest_in_order((1..=ahead).map(|k| w.store.read_manifest_now(base.version + k))).await?;
    w.memory.saw_newest(&newest, w.env.clock.monotonic());
    Some(newest)
}

/// The last of `reads` (of consecutive versions, all started at once, taken in order)
/// before the first that finds nothing or fails. The chain has no gaps: the reads after
/// that one can only find nothing, and are not waited for.
async fn newest_in_order<T, E>(reads: impl IntoIterator<Item = impl std::future::Future<Output = Result<Option<T>, E>>>) -> Option<T> {
    use futures::StreamExt;
    let mut reads: futures::stream::FuturesOrdered<_> = reads.into_iter().collect();
    let mut newest = None;
    while let Some(Ok(Some(read))) = reads.next().await {
        newest = Some(read);
    }
    newest
}

/// The latest version (at least `known`), looked up: one LIST or probe, one read.
pub(super) async fn look_up_latest(w: Writer<'_>, known: u64) -> Result<Arc<Manifest>, CommitError> {
    let latest = w.store.latest_version(Some(known)).await?.unwrap_or(known);
    let base = read_existing(w.store, latest).await?;
    w.memory.saw_newest(&base, w.env.clock.monotonic());
    Ok(base)
}

/// The version the first attempt builds on: the newest the handle knows, if it learned
/// of it recently (see `NEWEST_FRESH_FOR`), else the latest, looked up.
pub(super) async fn start_base(w: Writer<'_>, read_version: u64) -> Result<Arc<Manifest>, CommitError> {
    match w.memory.fresh_newest(w.env.clock.monotonic()).filter(|m| m.version >= read_version) {
        Some(newest) => Ok(newest),
        None => look_up_latest(w, read_version).await,
    }
}

#[cfg(test)]
mod tests {
    use futures::future::{BoxFuture, FutureExt};

    use super::*;

    type Read = BoxFuture<'static, Result<Option<u64>, ()>>;

    #[tokio::test]
    async fn reading_on_takes_the_versions_in_order_up_to_the_first_absent_and_waits_for_no_later_read() {
        let found = |v| async move { Ok(Some(v)) }.boxed();
        let absent = || async { Ok(None) }.boxed();
        let never = || std::future::pending().boxed();
        let reads: Vec<Read> = vec![found(1), found(2), absent(), never(), never()];
        assert_eq!(newest_in_order(reads).await, Some(2), "later reads would only find nothing");
        let failed: Vec<Read> = vec![found(1), async { Err(()) }.boxed(), never()];
        assert_eq!(newest_in_order(failed).await, Some(1), "a failed read ends what is known");
        let none: Vec<Read> = vec![absent(), never()];
        assert_eq!(newest_in_order(none).await, None);
    }
}

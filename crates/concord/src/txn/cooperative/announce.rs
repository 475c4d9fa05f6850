//! Announcements (`_announced/`): written by a writer that lost a race, listed and read
//! by the writers that carry them, marked withdrawn and retired by whoever settles
//! them. Announcement files are created once and never modified.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::StorageError;
use crate::format::announcement::Announcement;
use crate::format::manifest::{Manifest, Operation};
use crate::format::naming;
use crate::storage::TableStore;
use crate::txn::handle::Writer;
use crate::txn::{CommitOptions, PreparedTransaction, StagedOptions};

/// Announces `txn`, to be carried until `deadline`; returns the announcement's name.
/// A failed write may still have landed: the transaction counts as announced either way.
pub(crate) async fn announce(w: Writer<'_>, txn: &PreparedTransaction, opts: &CommitOptions, deadline: DateTime<Utc>) -> String {
    let micros = w.env.clock.now().timestamp_micros();
    let transaction = PreparedTransaction { staged: StagedOptions::of(opts), ..txn.clone() };
    let bytes = crate::encode::announcement(&Announcement { transaction, deadline });
    // Its content in its name too, where the key holds it: includers list it with no read
    // (not even encoded where names cannot carry it).
    let inline = w.store.long_names().then(|| crate::encode::announcement_inline(&bytes));
    let name = inline
        .map(|inline| naming::announcement_name(micros, txn.id, Some(&inline)))
        .filter(|name| w.store.name_fits(name))
        .unwrap_or_else(|| naming::announcement_name(micros, txn.id, None));
    let _ = w.store.put_new(&name, bytes).await;
    name
}

/// Marks the announcement `name` withdrawn: an includer that sees the marker records
/// the withdrawal instead of carrying the transaction.
pub(crate) async fn mark_withdrawn(store: &TableStore, name: &str) -> Result<(), StorageError> {
    store.put_new(&naming::withdrawal_name(name), bytes::Bytes::from_static(b"{}")).await
}

/// Removes settled announcements, `names`, and the withdrawal marker of the announcement
/// `marked`, in one request where the store deletes in bulk (best effort: vacuum removes
/// leftovers). The owner of an announcement retires it once it knows its outcome,
/// unless a version carried it: then the writer of that version retires it, with its
/// own.
pub(crate) async fn retire(store: &TableStore, names: &[String], marked: Option<&str>) {
    let withdrawal = marked.map(naming::withdrawal_name);
    store.delete_best_effort(names.iter().map(String::as_str).chain(withdrawal.as_deref())).await;
}

/// What the announcements folder holds for an includer, in announcement order.
#[derive(Debug, Default)]
pub(crate) struct Announced {
    /// Announcements within their deadline, but the includer's own.
    pub(crate) live: Vec<Arc<Announcement>>,
    /// Transactions whose owners marked them withdrawn.
    pub(crate) withdrawn: HashSet<Uuid>,
    /// The announcements' names, by transaction.
    pub(crate) names: HashMap<Uuid, String>,
}

impl Announced {
    /// The names of the announcements `version` carried (its writer retires them).
    pub(crate) fn carried_in(&self, version: &Manifest) -> Vec<String> {
        let carried = version.transactions.iter().filter(|t| t.carried_by.is_some() && !matches!(t.operation, Operation::Withdraw { .. }));
        carried.filter_map(|t| self.names.get(&t.id).cloned()).collect()
    }

    /// Whether it holds announcements to carry (its writer leads the line).
    pub(crate) fn leads(&self) -> bool {
        !self.live.is_empty()
    }
}

/// Announcements (and versions) an includer reads at once.
const READ_AT_ONCE: usize = 16;

/// The most versions an includer reads to judge announced transactions.
const HOLD_AT_MOST: usize = 256;

/// An announcement as a listing names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) name: String,
    pub(crate) id: Uuid,
    /// Its owner marked it withdrawn.
    pub(crate) withdrawn: bool,
}

/// The announcements, in announcement order: one listing, no read.
pub(crate) async fn list(store: &TableStore) -> Result<Vec<Listed>, StorageError> {
    let names = store.list_dir(naming::ANNOUNCED_DIR).await?;
    Ok(listed(names.into_iter().map(|(name, _)| name)))
}

/// The announcements' names only, in announcement order: one listing one level deep,
/// which names an announcement whose name carries its content by its folder (its
/// stem), without the content (on S3, a short entry in place of a long key: what a
/// waiting writer needs to find its place, at a fraction of a full listing's cost).
pub(crate) async fn list_names(store: &TableStore) -> Result<Vec<Listed>, StorageError> {
    let names = store.list_dir_names(naming::ANNOUNCED_DIR).await?;
    Ok(listed(names.into_iter()))
}

/// Announcements (names ending `.json`, or folders of a listing one level deep) and
/// withdrawal markers, by name, in announcement order; other names are skipped.
fn listed(names: impl Iterator<Item = String>) -> Vec<Listed> {
    let mut names: Vec<String> = names.filter(|n| n.ends_with(".json") || n.ends_with(".withdrawn") || n.ends_with('/')).collect();
    names.sort();
    let withdrawn: HashSet<Uuid> = names.iter().filter(|n| n.ends_with(".withdrawn")).filter_map(|n| naming::announced_id(n)).collect();
    names
        .into_iter()
        .filter(|n| !n.ends_with(".withdrawn"))
        .filter_map(|name| {
            let id = naming::announced_id(&name)?;
            Some(Listed { name, id, withdrawn: withdrawn.contains(&id) })
        })
        .collect()
}

/// How many announcements in `listed` were made before `own` (a name) and are still
/// pending: not withdrawn, and not `settled` (found in the chain, or passed over by
/// versions enough times to be presumed dead or settled before).
pub(crate) fn ahead(listed: &[Listed], own: &str, settled: impl Fn(Uuid) -> bool) -> usize {
    made_before(listed, own).filter(|l| !l.withdrawn && !settled(l.id)).count()
}

/// The announcements in `listed` made before `own` (a name), compared by stem: a
/// listing's folder entry and the full name of one announcement are one place.
pub(crate) fn made_before<'a>(listed: &'a [Listed], own: &'a str) -> impl Iterator<Item = &'a Listed> {
    let own = naming::announcement_stem(own);
    listed.iter().take_while(move |l| naming::announcement_stem(&l.name) < own)
}

/// The announcements an includer considers, of those `listed`: a read of each it has
/// not read before (`own`: ids of its own transactions, skipped).
pub(crate) async fn read(w: Writer<'_>, listed: &[Listed], own: &[Uuid]) -> Result<Announced, StorageError> {
    let mut out = Announced::default();
    let now = w.env.clock.now();
    out.withdrawn = listed.iter().filter(|l| l.withdrawn).map(|l| l.id).collect();
    let wanted: Vec<&Listed> = listed.iter().filter(|l| !own.contains(&l.id)).collect();
    // Read several at once (each is read once per handle), kept in name order.
    for chunk in wanted.chunks(READ_AT_ONCE) {
        let read = futures::future::join_all(chunk.iter().map(|l| w.store.read_announcement(&l.name))).await;
        for (listed, announcement) in chunk.iter().zip(read) {
            if let Some(announcement) = announcement? {
                if announcement.transaction.id == listed.id && announcement.deadline >= now {
                    out.names.insert(listed.id, listed.name.clone());
                    out.live.push(announcement);
                }
            }
        }
    }
    if !out.live.is_empty() {
        w.memory.saw_announcements(w.env.clock.monotonic());
        hold_versions_since(w, out.live.iter().map(|a| a.transaction.read_version).min().unwrap_or(0)).await;
    }
    Ok(out)
}

/// Reads, several at once, the versions after `read_version` this handle does not hold
/// (up to [`HOLD_AT_MOST`]), so that judging announced transactions against them costs
/// no request in the build (an includer judges from versions it holds only). Best
/// effort: a version not read only means not carrying what needs it.
async fn hold_versions_since(w: Writer<'_>, read_version: u64) {
    let Some(newest) = w.memory.newest_known() else { return };
    let missing: Vec<u64> = (read_version + 1..newest.version).filter(|v| !w.store.holds_manifests(*v..*v + 1)).collect();
    if missing.len() > HOLD_AT_MOST {
        return;
    }
    for chunk in missing.chunks(READ_AT_ONCE) {
        let _ = futures::future::join_all(chunk.iter().map(|v| w.store.read_manifest(*v))).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use arrow::array::{Int64Array, RecordBatch};
    use futures::future::BoxFuture;

    use super::*;
    use crate::env::{Clock, Env, SystemClock};
    use crate::table::{Input, Table, Write};
    use crate::txn::cooperative::line::{CarryFrom, Line};
    use crate::{Schema, StoreResolver};

    /// The system clock, its monotonic time an hour on: anything recorded at zero is
    /// long past.
    #[derive(Debug, Default)]
    struct HourOn(SystemClock);

    impl Clock for HourOn {
        fn now(&self) -> DateTime<Utc> {
            self.0.now()
        }
        fn monotonic(&self) -> Duration {
            self.0.monotonic() + Duration::from_secs(3600)
        }
        fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
            self.0.sleep(duration)
        }
    }

    /// Announces an append of one row, prepared by `table` (another writer's handle).
    async fn announce_one(table: &Table, env: &Env) -> Uuid {
        let batch = RecordBatch::try_new(table.schema().arrow_schema(), vec![Arc::new(Int64Array::from(vec![2]))]).unwrap();
        let txn = table.prepare(Write::Append { input: Input::Batches(vec![batch]) }).await.unwrap();
        let deadline = env.clock.now() + chrono::TimeDelta::minutes(10);
        announce(table.writer(), &txn, &CommitOptions::default(), deadline).await;
        txn.id
    }

    /// A handle that once found announcements carries the line at every commit, however
    /// long ago that was, until a listing finds none (a writer that stopped losing would
    /// otherwise take every version while the line waits); a handle that never found
    /// any carries nobody.
    #[tokio::test]
    async fn a_handle_that_found_a_line_carries_it_until_a_listing_finds_none() {
        let resolver = StoreResolver::default();
        let uri = "memory://line-remembered/t";
        let env = Env { clock: Arc::new(HourOn::default()), ..Env::system() };
        let schema = Schema::parse("id bigint not null").unwrap();
        let a = Table::create(resolver.resolve(uri).unwrap(), env.clone(), schema.clone()).await.unwrap();
        let others = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let batch = || RecordBatch::try_new(schema.arrow_schema(), vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        let carried_in_latest = |table: &Table| {
            let table = table.clone();
            async move {
                let latest = table.latest().await.unwrap();
                latest.manifest().transactions.iter().filter(|t| t.carried_by.is_some()).map(|t| t.id).collect::<Vec<_>>()
            }
        };

        // Found announcements an hour ago: no longer recent, but a line is remembered.
        a.writer().memory.saw_announcements(Duration::ZERO);
        assert!(!a.writer().memory.recent_announcements(env.clock.monotonic()) && a.writer().memory.line_waits());
        let waiting = announce_one(&others, &env).await;
        a.append(batch(), &CommitOptions::default()).await.unwrap();
        assert_eq!(carried_in_latest(&a).await, [waiting], "its commit carried the line");
        // Its next listing finds nobody: it forgets the line.
        a.append(batch(), &CommitOptions::default()).await.unwrap();
        assert!(!a.writer().memory.line_waits());
        // A handle that knows of no line carries nobody.
        let fresh = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let later = announce_one(&others.latest().await.unwrap(), &env).await;
        fresh.append(batch(), &CommitOptions::default()).await.unwrap();
        assert!(carried_in_latest(&fresh).await.is_empty() && !fresh.writer().memory.line_waits());
        assert!(list(a.store()).await.unwrap().iter().any(|l| l.id == later), "the announcement waits for its owner");
    }

    /// A waiting writer lists the names only (on S3 one short entry in place of each
    /// long key): it finds the same announcements, withdrawals and order as a full
    /// listing, and its own place by stem; a line holding such a listing lists in full
    /// before it carries (the content is in the full names).
    #[tokio::test]
    async fn a_names_only_listing_finds_the_same_line_and_carrying_lists_in_full() {
        let resolver = StoreResolver::default();
        let uri = "memory://names-only/t";
        let env = Env::system();
        let schema = Schema::parse("id bigint not null").unwrap();
        let a = Table::create(resolver.resolve(uri).unwrap(), env.clone(), schema).await.unwrap();
        let others = Table::open(resolver.resolve(uri).unwrap(), env.clone()).await.unwrap();
        let mut ids = vec![announce_one(&others, &env).await, announce_one(&others, &env).await, announce_one(&others, &env).await];
        let full = list(a.store()).await.unwrap();
        let names = list_names(a.store()).await.unwrap();
        assert!(full.iter().all(|l| l.name.ends_with(".json") && l.name.len() > 200), "the content is in the names: {full:?}");
        assert!(names.iter().all(|l| l.name.ends_with('/') && l.name.len() < 80), "one folder per announcement: {names:?}");
        let order = |listed: &[Listed]| listed.iter().map(|l| l.id).collect::<Vec<_>>();
        assert_eq!(order(&names), order(&full));
        ids.sort_by_key(|id| full.iter().position(|l| l.id == *id));
        for (place, own) in full.iter().enumerate() {
            assert_eq!(ahead(&names, &own.name, |_| false), place, "its own entry is not ahead of it");
        }

        mark_withdrawn(a.store(), &full[0].name).await.unwrap();
        let names = list_names(a.store()).await.unwrap();
        assert_eq!(order(&names), ids);
        assert_eq!(names.iter().map(|l| l.withdrawn).collect::<Vec<_>>(), [true, false, false]);
        assert_eq!(ahead(&names, &full[2].name, |_| false), 1, "a withdrawn announcement is not ahead");

        // A line holding a listing of names only lists in full before it carries.
        let mut line = Line::default();
        line.listed_before_build(Some(list_names(a.store()).await.unwrap()), true);
        let Some(CarryFrom::Listing { relist: true, .. }) = line.take_carry() else { panic!("lists again in full") };
        let carried = read(a.writer(), &line.to_read(list(a.store()).await.unwrap()), &[]).await.unwrap();
        let live: Vec<Uuid> = carried.live.iter().map(|l| l.transaction.id).collect();
        assert_eq!(live, ids, "carried with their content, from a full listing");
        assert_eq!(carried.withdrawn, HashSet::from([ids[0]]));
        assert!(carried.names.values().all(|n| n.ends_with(".json")), "retired by their full names");
    }
}

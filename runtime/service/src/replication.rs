//! A replica's view of what the other replicas write, on a store they share (etcd): one watch
//! of the whole store, from the revision the tenants were loaded at, whose changes a thread
//! of the service's (`replica-watch`) hands to the tenant they belong to; each tenant has a
//! thread of its own (`replica-apply`) that applies them in order (`Tenant::apply_change`):
//! uploads (loaded and checked here before they are served; a deleted one stops being
//! served), limits, group records and captures. Keys of tenants this replica does not serve
//! are ignored.
//!
//! Why a thread per tenant: loading an upload compiles it (up to the tenant's compile limit)
//! and runs its trial (up to its call deadline), so applying changes on the watch's thread
//! would let one tenant uploading repeatedly hold back every other tenant's changes. Each
//! tenant's changes still apply in the order they were made, so a later change of an upload
//! (replaced, deleted) is applied after an earlier one still loading, never before; at most
//! one load per tenant runs at a time. While a tenant's thread is busy, a change of a key that
//! already has one waiting replaces it (only the newest record of a key is applied; the
//! skipped one is superseded), and a reset replaces everything waiting, so what waits is
//! bounded by the tenant's distinct keys, and by [`MAX_PENDING`] changes, past which the
//! watch's thread waits for the tenant (and the store's bounded channel holds the watch back).
//!
//! Every change is hostile input: a record that does not decode, or an upload that fails its
//! checks here, is logged with its key and counted, and the changes after it are applied as
//! usual. The watch itself resumes when it breaks and reloads after a compaction (see the
//! store's `SharedStore::watch`); each is logged and counted.
//!
//! The threads end when the store closes or the service is dropped (they hold the tenants
//! weakly, and not while waiting, so the store, which the tenants hold, can close).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread;

use assignor_coordinator::store::{Revision, Store, StoreError, WatchEvent};

use super::metrics::WatchMetrics;
use super::tenant::Tenant;

/// Changes waiting for one tenant's thread, past which the watch's thread waits for it. A
/// change of a key already waiting takes its place, so only a tenant with this many distinct
/// keys changed while one change of it applies (an upload loading) reaches the bound.
pub(crate) const MAX_PENDING: usize = 1024;

/// What waits for a tenant's thread.
#[derive(Debug)]
enum Pending {
    /// A change of `key` (inside the tenant's namespace): its value (`None`: deleted; `Err`:
    /// the record cannot be read, and why) at `revision`.
    Change {
        key: String,
        value: Result<Option<Vec<u8>>, String>,
        revision: Revision,
    },
    /// Every key of the tenant as read again at `at`, after a compaction: those read, and
    /// those whose records cannot be read (with why).
    Reset {
        entries: Vec<(String, Vec<u8>, Revision)>,
        damaged: Vec<(String, String)>,
        at: Revision,
    },
}

/// A tenant's waiting changes, in the order they came.
#[derive(Debug, Default)]
struct Queue {
    /// By arrival number.
    items: BTreeMap<u64, Pending>,
    /// The arrival number of each key's waiting change.
    waiting: HashMap<String, u64>,
    arrivals: u64,
    /// No change will come any more: the thread ends once the queue is empty.
    closed: bool,
}

/// The hand-over between the watch's thread and one tenant's.
#[derive(Debug, Default)]
struct Lane {
    queue: Mutex<Queue>,
    /// Signalled when a change arrives or the lane closes: the tenant's thread waits for it.
    arrived: Condvar,
    /// Signalled when a change is taken: the watch's thread waits for it when the queue is
    /// full.
    taken: Condvar,
}

impl Lane {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The queue is consistent after every statement: a panic cannot leave it half-changed.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `item` after what waits: a change replaces the waiting change of its key, a
    /// reset everything. Waits while the queue is full and `item` adds to it.
    fn push(&self, item: Pending) {
        let mut queue = self.queue();
        match &item {
            Pending::Change { key, .. } => {
                while queue.items.len() >= MAX_PENDING && !queue.waiting.contains_key(key) {
                    queue = self
                        .taken
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                let arrival = queue.arrivals;
                if let Some(superseded) = queue.waiting.insert(key.clone(), arrival) {
                    queue.items.remove(&superseded);
                }
            }
            Pending::Reset { .. } => {
                queue.items.clear();
                queue.waiting.clear();
            }
        }
        let arrival = queue.arrivals;
        queue.items.insert(arrival, item);
        queue.arrivals += 1;
        self.arrived.notify_one();
    }

    /// The oldest waiting change, waiting for one; `None` once the lane is closed and empty.
    fn take(&self) -> Option<Pending> {
        let mut queue = self.queue();
        loop {
            if let Some((arrival, item)) = queue.items.pop_first() {
                if let Pending::Change { key, .. } = &item
                    && queue.waiting.get(key) == Some(&arrival)
                {
                    queue.waiting.remove(key);
                }
                self.taken.notify_one();
                return Some(item);
            }
            if queue.closed {
                return None;
            }
            queue = self
                .arrived
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// No more changes: the tenant's thread ends once it has applied what waits.
    fn close(&self) {
        self.queue().closed = true;
        self.arrived.notify_all();
    }
}

/// Where the watch's thread sends a tenant's changes.
struct Route {
    /// `tenant/<name>/`: the tenant's keys begin with it.
    prefix: String,
    tenant: Weak<Tenant>,
    /// What the tenant read at start: changes up to it are already applied.
    loaded_at: Revision,
    lane: Arc<Lane>,
}

/// Closes every lane when the watch's thread ends, however it ends.
struct CloseOnDrop(Vec<Route>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        for route in &self.0 {
            route.lane.close();
        }
    }
}

/// Starts applying the store's changes to `tenants`; nothing when the store is not shared.
pub(crate) fn start(
    store: &Arc<dyn Store>,
    tenants: &[Arc<Tenant>],
    metrics: WatchMetrics,
) -> Result<(), StoreError> {
    let Some(shared) = store.shared() else {
        return Ok(());
    };
    let cannot_start = |what: &str, e: std::io::Error| StoreError::Backend {
        backend: format!("{store:?}"),
        source: format!("cannot start the thread {what}: {e}").into(),
    };
    // Each tenant ignores what it loaded already; the earliest load bounds them all.
    let after = tenants
        .iter()
        .map(|t| t.loaded_at)
        .min()
        .unwrap_or(Revision::ABSENT);
    // Dropped on an early return: the threads already started then end.
    let mut routes = CloseOnDrop(Vec::with_capacity(tenants.len()));
    for tenant in tenants {
        let lane = Arc::new(Lane::default());
        let (weak, applier_lane, metrics) = (Arc::downgrade(tenant), lane.clone(), metrics.clone());
        thread::Builder::new()
            .name("replica-apply".into())
            .spawn(move || {
                while let Some(item) = applier_lane.take() {
                    let Some(tenant) = weak.upgrade() else {
                        return;
                    };
                    apply(&tenant, item, &metrics);
                }
            })
            .map_err(|e| cannot_start("applying a tenant's changes", e))?;
        routes.0.push(Route {
            prefix: format!("tenant/{}/", tenant.name),
            tenant: Arc::downgrade(tenant),
            loaded_at: tenant.loaded_at,
            lane,
        });
    }
    let mut watch = shared.watch(after)?;
    thread::Builder::new()
        .name("replica-watch".into())
        .spawn(move || {
            while let Some(event) = watch.next() {
                if !route(&routes.0, event, &metrics) {
                    return;
                }
            }
        })
        .map_err(|e| cannot_start("following the store's watch", e))?;
    Ok(())
}

/// Hands one event to the tenants it concerns; `false` once the service is gone.
fn route(routes: &[Route], event: WatchEvent, metrics: &WatchMetrics) -> bool {
    match event {
        WatchEvent::Changes(changes) => {
            for change in changes {
                let Some(to) = routes.iter().find(|r| change.key.starts_with(&r.prefix)) else {
                    continue;
                };
                if to.tenant.strong_count() == 0 {
                    return false;
                }
                if change.revision <= to.loaded_at {
                    continue;
                }
                to.lane.push(Pending::Change {
                    key: change.key[to.prefix.len()..].to_owned(),
                    value: change.value,
                    revision: change.revision,
                });
            }
        }
        WatchEvent::Reset(snapshot) => {
            metrics.count("reset");
            for to in routes {
                if to.tenant.strong_count() == 0 {
                    return false;
                }
                let entries = snapshot
                    .entries
                    .iter()
                    .filter_map(|(k, v, r)| {
                        Some((k.strip_prefix(&to.prefix)?.to_owned(), v.clone(), *r))
                    })
                    .collect();
                let damaged = snapshot
                    .damaged
                    .iter()
                    .filter_map(|(k, why)| {
                        Some((k.strip_prefix(&to.prefix)?.to_owned(), why.clone()))
                    })
                    .collect();
                to.lane.push(Pending::Reset {
                    entries,
                    damaged,
                    at: snapshot.at,
                });
            }
        }
        WatchEvent::Resumed(why) => {
            tracing::info!(error = %why, "the store's watch broke and resumed; no change was missed");
            metrics.count("resumed");
        }
        other => {
            tracing::warn!(event = ?other, "an event of the store's watch this service does not know; ignored");
        }
    }
    true
}

/// Applies one of `tenant`'s changes, on its thread.
fn apply(tenant: &Tenant, item: Pending, metrics: &WatchMetrics) {
    match item {
        Pending::Change {
            key,
            value,
            revision,
        } => {
            let applied =
                value.and_then(|value| tenant.apply_change(&key, value.as_deref(), revision));
            // Applied or refused, the change is behind this replica's view now.
            tenant.saw(revision);
            match applied {
                Ok(()) => metrics.count("applied"),
                Err(why) => {
                    tracing::warn!(tenant = %tenant.name, key, error = %why, "a change from the store's watch is not applied");
                    metrics.count("refused");
                }
            }
        }
        Pending::Reset {
            entries,
            damaged,
            at,
        } => {
            // A damaged record is skipped as the changes' path skips it: the key keeps what
            // this replica holds, and everything else is applied.
            let kept: Vec<&str> = damaged.iter().map(|(k, _)| k.as_str()).collect();
            for (key, why) in damaged
                .iter()
                .cloned()
                .chain(tenant.apply_reset(&entries, &kept, at))
            {
                tracing::warn!(tenant = %tenant.name, key, error = %why, "a record read again after a compaction is not applied");
                metrics.count("refused");
            }
            tenant.saw(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn change(key: &str, revision: u64) -> Pending {
        Pending::Change {
            key: key.to_owned(),
            value: Ok(Some(revision.to_le_bytes().to_vec())),
            revision: Revision::new(revision),
        }
    }

    fn revision_of(item: Option<Pending>) -> (String, u64) {
        match item {
            Some(Pending::Change { key, revision, .. }) => (key, revision.raw()),
            other => panic!("a change, not {other:?}"),
        }
    }

    /// A change of a key already waiting replaces it in the queue (the newest record is
    /// applied, once, after the keys that came before its first change); a reset replaces
    /// everything waiting; a closed lane hands out what waits, then nothing.
    #[test]
    fn a_lane_coalesces_each_key_and_a_reset_replaces_everything() {
        let lane = Lane::default();
        lane.push(change("assignor/x", 1));
        lane.push(change("group/g", 2));
        lane.push(change("assignor/x", 3));
        assert_eq!(revision_of(lane.take()), ("group/g".into(), 2));
        assert_eq!(revision_of(lane.take()), ("assignor/x".into(), 3));
        lane.push(change("group/g", 4));
        lane.push(Pending::Reset {
            entries: Vec::new(),
            damaged: Vec::new(),
            at: Revision::new(5),
        });
        lane.push(change("group/g", 6));
        assert!(matches!(lane.take(), Some(Pending::Reset { at, .. }) if at.raw() == 5));
        lane.close();
        assert_eq!(revision_of(lane.take()), ("group/g".into(), 6));
        assert!(lane.take().is_none());
    }

    /// The worst case, a tenant whose [`MAX_PENDING`] distinct keys all changed while its
    /// thread is busy: a change of another key waits for room (the watch is held back, memory
    /// is not spent), a change of a waiting key does not, and one taken change lets it in.
    #[test]
    fn a_full_lane_holds_the_watch_back_until_a_change_is_taken() {
        let lane = Arc::new(Lane::default());
        for i in 0..MAX_PENDING {
            lane.push(change(&format!("group/g{i}"), i as u64 + 1));
        }
        lane.push(change("group/g0", MAX_PENDING as u64 + 1));
        let (done, pushed) = mpsc::channel();
        let pusher = {
            let lane = lane.clone();
            thread::spawn(move || {
                lane.push(change("group/new", MAX_PENDING as u64 + 2));
                done.send(()).unwrap();
            })
        };
        assert!(
            pushed.recv_timeout(Duration::from_millis(200)).is_err(),
            "a new key waits while the lane is full"
        );
        assert_eq!(revision_of(lane.take()), ("group/g1".into(), 2));
        pushed
            .recv_timeout(Duration::from_secs(10))
            .expect("taken: room for it");
        pusher.join().unwrap();
        assert_eq!(lane.queue().items.len(), MAX_PENDING);
    }
}

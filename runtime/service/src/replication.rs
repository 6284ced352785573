//! A replica's view of what the other replicas write, on a store they share (etcd): one watch
//! of the whole store, from the revision the tenants were loaded at, whose changes a thread
//! of the service's applies to the tenant they belong to (`Tenant::apply_change`): uploads
//! (loaded and checked here before they are served; a deleted one stops being served),
//! limits, group records and captures. Keys of tenants this replica does not serve are
//! ignored.
//!
//! Every change is hostile input: a record that does not decode, or an upload that fails its
//! checks here, is logged with its key and counted, and the changes after it are applied as
//! usual. The watch itself resumes when it breaks and reloads after a compaction (see the
//! store's `SharedStore::watch`); each is logged and counted.
//!
//! The thread blocks on the watch (the store's changes come through a bounded channel, so a
//! slow apply holds the watch back, not memory); it ends when the store closes or the service
//! is dropped (it holds the tenants weakly, so the store, which they hold, can close).

use std::sync::{Arc, Weak};
use std::thread;

use assignor_coordinator::store::{Revision, Store, StoreError, WatchEvent};

use super::metrics::WatchMetrics;
use super::tenant::Tenant;

/// Starts applying the store's changes to `tenants`; nothing when the store is not shared.
pub(crate) fn start(
    store: &Arc<dyn Store>,
    tenants: &[Arc<Tenant>],
    metrics: WatchMetrics,
) -> Result<(), StoreError> {
    let Some(shared) = store.shared() else {
        return Ok(());
    };
    // Each tenant ignores what it loaded already; the earliest load bounds them all.
    let after = tenants
        .iter()
        .map(|t| t.loaded_at)
        .min()
        .unwrap_or(Revision::ABSENT);
    let mut watch = shared.watch(after)?;
    let tenants: Vec<(String, Weak<Tenant>)> = tenants
        .iter()
        .map(|t| (format!("tenant/{}/", t.name), Arc::downgrade(t)))
        .collect();
    thread::Builder::new()
        .name("replica-watch".into())
        .spawn(move || {
            while let Some(event) = watch.next() {
                if !apply(&tenants, event, &metrics) {
                    return;
                }
            }
        })
        .map_err(|e| StoreError::Backend {
            backend: format!("{store:?}"),
            source: format!("cannot start the thread applying its watch: {e}").into(),
        })?;
    Ok(())
}

/// Applies one event; `false` once the service is gone.
fn apply(tenants: &[(String, Weak<Tenant>)], event: WatchEvent, metrics: &WatchMetrics) -> bool {
    match event {
        WatchEvent::Changes(changes) => {
            for change in changes {
                let Some((prefix, tenant)) =
                    tenants.iter().find(|(p, _)| change.key.starts_with(p))
                else {
                    continue;
                };
                let Some(tenant) = tenant.upgrade() else {
                    return false;
                };
                if change.revision <= tenant.loaded_at {
                    continue;
                }
                let key = &change.key[prefix.len()..];
                let applied = change
                    .value
                    .and_then(|value| tenant.apply_change(key, value.as_deref(), change.revision));
                match applied {
                    Ok(()) => metrics.count("applied"),
                    Err(why) => {
                        tracing::warn!(tenant = %tenant.name, key, error = %why, "a change from the store's watch is not applied");
                        metrics.count("refused");
                    }
                }
            }
        }
        WatchEvent::Reset(snapshot) => {
            metrics.count("reset");
            for (prefix, tenant) in tenants {
                let Some(tenant) = tenant.upgrade() else {
                    return false;
                };
                let entries: Vec<_> = snapshot
                    .entries
                    .iter()
                    .filter_map(|(k, v, r)| {
                        Some((k.strip_prefix(prefix)?.to_owned(), v.clone(), *r))
                    })
                    .collect();
                for (key, why) in tenant.apply_reset(&entries, snapshot.at) {
                    tracing::warn!(tenant = %tenant.name, key, error = %why, "a record read again after a compaction is not applied");
                    metrics.count("refused");
                }
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

//! The watch of every key (`SharedStore::watch`): a task on the client thread follows one
//! etcd watch over the manifests and inline values (`<prefix>m/` to the end of `<prefix>v/`,
//! which leaves out the chunks, `c/`, sorted before them), turns its events into the store's
//! changes (a manifest's value read from its chunks as they were at the event), and hands them
//! to the caller through a bounded channel, which holds the watch back while the caller is
//! busy.
//!
//! A watch that breaks (its member killed, a leader lost, the stream ended) is opened again
//! from the revision after the last one delivered, on whichever member the client reaches, so
//! nothing is missed or delivered twice; when etcd no longer holds that revision (compacted),
//! every key is read again and delivered as a reset (a record that cannot be read is listed
//! as damaged there, with why, not a reason to fail the read: it would fail until repaired). Each try is bounded by the store's
//! request timeout, pauses between tries double from 50 ms up to 1 s, and every break is
//! logged and reported (`WatchEvent::Resumed`) once the watch runs again. The task ends when
//! the watch is dropped or the store closes.

use std::collections::HashMap;
use std::sync::Arc;

use etcd_client::{EventType, WatchOptions, WatchResponse};
use tokio::sync::mpsc;
use tokio::time::Instant;

use assignor_coordinator::store::{Change, Revision, Watch, WatchEvent};

use crate::value;
use crate::writer::{
    Damaged, MAX_OUTAGE_PAUSE, RETRY_PAUSE, Selection, Shared, ValueError, encode_revision,
    etcd_revision, prefix_end,
};

/// Events waiting for the caller: past this, the watch waits for it (and etcd holds the rest).
const BUFFERED_EVENTS: usize = 64;

/// A running watch: its events, and the task that makes them.
pub(crate) struct EtcdWatch {
    events: mpsc::Receiver<WatchEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch for EtcdWatch {
    /// Blocks the calling thread, which must not be an async runtime's.
    fn next(&mut self) -> Option<WatchEvent> {
        self.events.blocking_recv()
    }
}

impl Drop for EtcdWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts watching every change after the store's revision `after`.
pub(crate) fn start(shared: &Arc<Shared>, after: Revision) -> EtcdWatch {
    let (tx, events) = mpsc::channel(BUFFERED_EVENTS);
    let task = shared
        .runtime
        .spawn(follow(Arc::clone(shared), etcd_revision(after) + 1, tx));
    EtcdWatch { events, task }
}

/// Why one run of the watch ended.
enum Ended {
    /// The caller dropped the watch.
    Dropped,
    /// etcd compacted the history from the revision asked for.
    Compacted(i64),
    /// The stream broke, for this reason.
    Broke(String),
}

/// The watch task: runs the watch from `next` (an etcd revision), again after every break,
/// until the caller drops it or the store closes.
async fn follow(shared: Arc<Shared>, mut next: i64, tx: mpsc::Sender<WatchEvent>) {
    let mut pause = RETRY_PAUSE;
    // Why the watch last broke, reported once it runs again.
    let mut broke: Option<String> = None;
    while !shared.queue.is_stopping() && !tx.is_closed() {
        let ended = match run(&shared, &mut next, &tx, &mut broke).await {
            Ended::Dropped => return,
            Ended::Compacted(compacted) => {
                tracing::warn!(
                    backend = %shared.name,
                    from = next,
                    compacted,
                    "the watch's history is compacted: reading every key again"
                );
                // A damaged record is listed, not a reason to read everything again: it
                // would fail every time until repaired, and hold back every other change.
                match shared
                    .load(&Selection::Prefix(String::new()), Damaged::List)
                    .await
                {
                    Ok(snapshot) => {
                        next = etcd_revision(snapshot.at) + 1;
                        if tx.send(WatchEvent::Reset(snapshot)).await.is_err() {
                            return;
                        }
                        pause = RETRY_PAUSE;
                        continue;
                    }
                    Err(e) => format!("reading every key after a compaction failed: {e}"),
                }
            }
            Ended::Broke(why) => why,
        };
        tracing::warn!(backend = %shared.name, from = next, error = %ended, "the watch broke; resuming");
        broke = Some(ended);
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_OUTAGE_PAUSE);
    }
}

/// One run of the watch from `*next`, which it moves past each revision delivered.
async fn run(
    shared: &Shared,
    next: &mut i64,
    tx: &mpsc::Sender<WatchEvent>,
    broke: &mut Option<String>,
) -> Ended {
    let start = shared.key("m/");
    let options = WatchOptions::new()
        .with_range(prefix_end(shared.key("v/").as_bytes()))
        .with_start_revision(*next);
    let mut client = shared.watch_client.clone();
    let opened = tokio::time::timeout(
        shared.limits.try_for(),
        client.watch(start.as_str(), Some(options)),
    )
    .await;
    let mut stream = match opened {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Ended::Broke(format!("opening it failed: {e}")),
        Err(_) => return Ended::Broke("opening it timed out".into()),
    };
    loop {
        // No timeout here: a watch may rightly be quiet for hours. A dead connection is
        // found by the client's keep-alive (see `connect`), which ends the stream.
        let response = match stream.message().await {
            Ok(Some(response)) => response,
            Ok(None) => return Ended::Broke("the member ended the stream".into()),
            Err(e) => return Ended::Broke(e.to_string()),
        };
        if response.canceled() {
            if response.compact_revision() > 0 {
                return Ended::Compacted(response.compact_revision());
            }
            return Ended::Broke(format!("cancelled: {}", response.cancel_reason()));
        }
        if response.created()
            && let Some(why) = broke.take()
        {
            tracing::info!(backend = %shared.name, from = *next, "the watch runs again");
            if tx.send(WatchEvent::Resumed(why)).await.is_err() {
                return Ended::Dropped;
            }
        }
        let Some(last) = response.events().last().and_then(|e| e.kv()) else {
            continue;
        };
        let last = last.mod_revision();
        let changes = match changes(shared, &response).await {
            Ok(changes) => changes,
            Err(why) => return Ended::Broke(why),
        };
        if !changes.is_empty() && tx.send(WatchEvent::Changes(changes)).await.is_err() {
            return Ended::Dropped;
        }
        *next = last + 1;
    }
}

/// The store's changes in a watch response, in order: one per key and revision (a
/// transaction that writes a key's inline form deletes its manifest, and the other way round:
/// the write is the change, not the delete). `Err` when a manifest's chunks could not be read
/// for want of an answer (the watch then resumes from this response).
async fn changes(shared: &Shared, response: &WatchResponse) -> Result<Vec<Change>, String> {
    let (inline_prefix, manifest_prefix) = (shared.key("v/"), shared.key("m/"));
    let mut out: Vec<Change> = Vec::new();
    let mut at: HashMap<(String, i64), usize> = HashMap::new();
    for event in response.events() {
        let Some(kv) = event.kv() else { continue };
        let Ok(etcd_key) = kv.key_str() else {
            tracing::warn!(backend = %shared.name, key = ?kv.key(), "a watched key is not UTF-8; ignored");
            continue;
        };
        let (key, manifest) = if let Some(key) = etcd_key.strip_prefix(&inline_prefix) {
            (key, false)
        } else if let Some(key) = etcd_key.strip_prefix(&manifest_prefix) {
            (key, true)
        } else {
            // Between the two forms' prefixes, written by something else: not the store's.
            continue;
        };
        let revision = kv.mod_revision();
        let put = event.event_type() == EventType::Put;
        let value = match (put, manifest) {
            (false, _) => Ok(None),
            (true, false) => value::decode_inline(kv.value())
                .map(|v| Some(v.to_vec()))
                .map_err(|why| format!("{etcd_key:?} is corrupt: {why}")),
            (true, true) => {
                let deadline = Instant::now() + shared.limits.request_timeout;
                match shared.assemble(kv.value(), revision, deadline).await {
                    Ok(value) => Ok(Some(value)),
                    Err(ValueError::Corrupt(why)) => Err(format!("{etcd_key:?} is corrupt: {why}")),
                    Err(ValueError::Unavailable(why)) => {
                        return Err(format!("reading the chunks of {etcd_key:?} failed: {why}"));
                    }
                }
            }
        };
        let change = Change {
            key: key.to_owned(),
            value,
            revision: encode_revision(revision, put && manifest),
        };
        match at.get(&(key.to_owned(), revision)) {
            // The same transaction's other operation on the key: a write wins over the delete
            // of the other form.
            Some(&i) => {
                if put {
                    out[i] = change;
                }
            }
            None => {
                at.insert((key.to_owned(), revision), out.len());
                out.push(change);
            }
        }
    }
    Ok(out)
}

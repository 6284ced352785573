//! [`EtcdStore`]: the coordinator's [`Store`] on an etcd cluster (v3 API), so that state
//! survives the loss of a machine, and several service replicas can share it: besides the
//! [`Store`], it is a [`SharedStore`] (each key's revision, one-key reads, and puts
//! conditioned on the revision, for the coordinator's group records).
//!
//! The [`Store`] trait is synchronous and the service calls it from its tokio worker threads,
//! where blocking on another runtime would panic or starve them. So the etcd client lives on a
//! thread of the store's own, in a current-thread tokio runtime: writes are queued for it in
//! memory (bounded in bytes, like [`RedbStore`](assignor_coordinator::store::RedbStore)'s) and
//! reads are tasks spawned on it whose answer the caller waits for on a channel. The
//! coordinator stays free of tokio and of the network.
//!
//! # Writes, group commit and failure
//!
//! [`put_unsynced`](Store::put_unsynced) queues the write and returns; the writer task takes
//! every write queued into one etcd transaction (up to [`EtcdLimits::max_txn_ops`] operations
//! and [`EtcdLimits::max_txn_bytes`] bytes), so a burst of commits costs a few raft commits,
//! not one each; a write is durable once its transaction is acknowledged, which etcd does
//! after a quorum of members has it in its fsynced log. Transactions commit one after the
//! other in queue order, so the cluster always holds a prefix of the writes.
//!
//! A request that fails (a member gone, a leader election) is retried, each try bounded by a
//! quarter of [`EtcdLimits::request_timeout`] (a request stuck at a member whose leader died is
//! sent again, to reach the new one; every request retried is idempotent), until the timeout
//! has passed since the write's transaction was first tried;
//! past it, every write waiting is answered with an error naming the endpoints (never a false
//! acknowledgement), and the store *refuses* new writes at once, with the same error, while the
//! writer keeps retrying the failed transaction in the background. Once it commits (a quorum is
//! back), the store accepts writes again: the writes that were refused changed nothing (the
//! coordinator changes its memory only once a write is queued), and those that were queued
//! before the failure land in their order, so etcd again matches what the service holds.
//!
//! Conditional writes ([`SharedStore::put_if`]) are not queued behind the others' order: a
//! conditional writer task takes every one waiting (up to half [`EtcdLimits::max_txn_ops`],
//! of distinct keys, within [`EtcdLimits::max_txn_bytes`]; two transactions in flight) into
//! one transaction carrying all their compares. etcd applies such a transaction whole or not
//! at all and does not say which compare failed, so when one fails, its writes are made again
//! one by one, each answered written or in conflict. A large value's conditional write goes
//! alone (its chunks first), and so does a guarded one ([`SharedStore::write_if_guarded`]:
//! compares on other keys too, a key's revision or a prefix unchanged since a revision, one
//! range compare per record form), since a write of a key it guards in the same transaction
//! would land with it.
//!
//! The store's changes are watched ([`SharedStore::watch`]) by one etcd watch over the
//! manifests and inline values (see `watch`).
//!
//! # Layout
//!
//! Under a prefix (default [`DEFAULT_PREFIX`]), per key of the store:
//!
//! - `<prefix>v/<key>`: a value of at most [`EtcdLimits::chunk_bytes`], inline: one tag byte,
//!   its SHA-256, the value.
//! - `<prefix>m/<key>`: a larger value's manifest: a tag byte, its length, and the SHA-256 and
//!   length of each of its chunks, in order.
//! - `<prefix>c/<sha256 hex>`: a chunk, addressed by its content (so identical uploads share
//!   them).
//!
//! A key is in `v/` or in `m/`, never both: a transaction that writes one deletes the other.
//! Store keys begin `tenant/<name>/`, so each tenant's records are one prefix scan of `v/` and
//! one of `m/`. A large value's chunks are written first (in parallel), then its manifest in a
//! transaction that checks each chunk still exists: a writer that dies between the two leaves
//! only chunks, which no key shows, and a manifest never names a missing chunk. Chunks that no
//! manifest references are removed after a transaction replaced or deleted a manifest, and when
//! the store opens (for those a crash left): the sweep reads the manifests at one revision and
//! deletes in a transaction conditioned on no manifest having changed since, so a chunk that a
//! concurrent writer has just made referenced is never removed.
//!
//! Every value read back is checked: an inline value against its hash, a manifest's lengths,
//! each chunk against its address and length; a failed check is an error naming the key.
//!
//! # Modules
//!
//! - `value`: the inline record and manifest formats and their checks.
//! - `writer`: the client thread: the write queue, transactions, retries, the sweep, reads.
//! - `watch`: the watch of every key, on the client thread, resumed when it breaks.
//! - `testing` (feature `testing`): an etcd cluster of child processes for tests.

#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use assignor_coordinator::store::queue::{Done, Refusal, Write};
use assignor_coordinator::store::{
    Conditional, Guard, Revision, SharedStore, Snapshot, Store, StoreError, SyncToken, Watch,
};

use crate::writer::Selection;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod value;
mod watch;
mod writer;

/// The prefix of every key the store writes, unless [`EtcdStore::open_with`] is given another.
pub const DEFAULT_PREFIX: &str = "assignor/";

/// The largest chunk [`EtcdLimits::chunk_bytes`] accepts: 1 MiB, so a chunk's put (or an
/// inline value's) with its key and framing stays under etcd's default request limit of
/// 1.5 MiB (`--max-request-bytes`).
pub const MAX_CHUNK_BYTES: usize = 1 << 20;

/// The longest key the store accepts: 8 KiB (the service's are a tenant, a kind and an id of at
/// most 1 KiB).
pub const MAX_KEY_BYTES: usize = 8 << 10;

/// etcd's default of `--max-txn-ops`: the most operations (and compares) one transaction
/// may hold.
const ETCD_MAX_TXN_OPS: usize = 128;

/// Bounds on what an [`EtcdStore`] sends, holds and waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdLimits {
    request_timeout: Duration,
    connect_timeout: Duration,
    chunk_bytes: usize,
    max_value_bytes: usize,
    max_queued_bytes: usize,
    max_txn_bytes: usize,
    max_txn_ops: usize,
    parallel_chunks: usize,
}

impl Default for EtcdLimits {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            chunk_bytes: MAX_CHUNK_BYTES,
            max_value_bytes: 96 << 20,
            max_queued_bytes: 64 << 20,
            max_txn_bytes: 1 << 20,
            max_txn_ops: ETCD_MAX_TXN_OPS,
            parallel_chunks: 4,
        }
    }
}

impl EtcdLimits {
    /// The defaults: 5 s per write or read, 2 s to connect, 1 MiB chunks, values up to 96 MiB,
    /// 64 MiB queued, transactions of at most 1 MiB and 128 operations, 4 chunks in flight.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a write's transaction (retries included) or a read may take before it fails
    /// with an error naming the endpoints; default 5 s. A cluster that has lost its quorum
    /// answers nothing, so this is how long a write waits before it is refused.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long opening the store waits for the cluster to answer; default 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Values longer than this are chunked, in chunks of this size; default and at most
    /// [`MAX_CHUNK_BYTES`], at least 1 KiB.
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes.clamp(1 << 10, MAX_CHUNK_BYTES);
        self
    }

    /// The longest value a put accepts (and a manifest read back may announce); default
    /// 96 MiB, above the service's largest per-value limit (a group document, 64 MiB). At most
    /// 126 chunks ([`open_with`](EtcdStore::open_with) refuses more), since a manifest's
    /// transaction checks each of its chunks and etcd allows 128 compares.
    pub fn max_value_bytes(mut self, bytes: usize) -> Self {
        self.max_value_bytes = bytes;
        self
    }

    /// The most bytes of writes waiting for the writer; default 64 MiB. A write that would
    /// pass it waits until a transaction has made room (a single larger write goes alone).
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = bytes;
        self
    }

    /// The most bytes of inline values one transaction carries; default 1 MiB, at most
    /// [`MAX_CHUNK_BYTES`] (etcd refuses a request over 1.5 MiB).
    pub fn max_txn_bytes(mut self, bytes: usize) -> Self {
        self.max_txn_bytes = bytes.clamp(1, MAX_CHUNK_BYTES);
        self
    }

    /// The most operations one transaction holds; default 128 (etcd's default
    /// `--max-txn-ops`), at least 2 (a write is two: it clears the key's other form).
    pub fn max_txn_ops(mut self, ops: usize) -> Self {
        self.max_txn_ops = ops.max(2);
        self
    }

    /// How many chunks of a large value are written at once; default 4, at least 1.
    pub fn parallel_chunks(mut self, chunks: usize) -> Self {
        self.parallel_chunks = chunks.max(1);
        self
    }

    /// How long one try of a request may take within its deadline: a quarter of
    /// [`request_timeout`](Self::request_timeout), at least 250 ms.
    pub(crate) fn try_for(&self) -> Duration {
        (self.request_timeout / 4).max(Duration::from_millis(250))
    }

    /// The most chunks a value may have under these limits.
    fn max_chunks(&self) -> usize {
        self.max_value_bytes.div_ceil(self.chunk_bytes)
    }

    /// The most chunks a value may have: a manifest's transaction compares each chunk's
    /// existence, and etcd allows [`ETCD_MAX_TXN_OPS`] compares.
    const MAX_CHUNKS: usize = ETCD_MAX_TXN_OPS - 2;
}

/// Why an etcd URL (`etcd://host:port[,host:port…]`) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{url:?} is not an etcd URL: {reason}; write etcd://HOST:PORT[,HOST:PORT...], e.g. \
     etcd://127.0.0.1:2379,127.0.0.1:22379"
)]
pub struct UrlError {
    /// The URL as given.
    pub url: String,
    /// What is wrong with it.
    pub reason: String,
}

/// The client endpoints (`http://host:port`) of an `etcd://host:port[,host:port…]` URL.
pub fn parse_url(url: &str) -> Result<Vec<String>, UrlError> {
    let refuse = |reason: String| UrlError {
        url: url.to_owned(),
        reason,
    };
    let rest = url
        .strip_prefix("etcd://")
        .ok_or_else(|| refuse("it does not start with etcd://".into()))?;
    if rest.is_empty() {
        return Err(refuse("it names no member".into()));
    }
    let mut endpoints = Vec::new();
    for member in rest.split(',') {
        let (host, port) = member
            .rsplit_once(':')
            .ok_or_else(|| refuse(format!("member {member:?} has no :PORT")))?;
        let host_ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
        if !host_ok {
            return Err(refuse(format!(
                "member {member:?} has no valid host (a name, an IPv4 address or a bracketed \
                 IPv6 address)"
            )));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => {
                return Err(refuse(format!(
                    "member {member:?} has no valid port (1 to 65535)"
                )));
            }
        }
        endpoints.push(format!("http://{host}:{port}"));
    }
    if endpoints.len() > 64 {
        return Err(refuse(format!(
            "{} members listed; at most 64",
            endpoints.len()
        )));
    }
    Ok(endpoints)
}

/// The store on an etcd cluster. See the crate documentation for its layout and its behaviour
/// when the cluster fails.
pub struct EtcdStore {
    shared: Arc<writer::Shared>,
    /// The client thread, joined when the store is dropped.
    thread: Option<JoinHandle<()>>,
}

impl EtcdStore {
    /// Connects to the cluster at `endpoints` (`http://host:port`, e.g. from [`parse_url`])
    /// under [`DEFAULT_PREFIX`] with the default [`EtcdLimits`]. See
    /// [`open_with`](Self::open_with).
    pub fn open(endpoints: &[String]) -> Result<Self, StoreError> {
        Self::open_with(endpoints, DEFAULT_PREFIX, EtcdLimits::default())
    }

    /// Connects to the cluster at `endpoints`, checks that it answers within
    /// [`EtcdLimits::connect_timeout`], removes chunks no manifest references (a crash's
    /// leftovers), and starts the client thread. Keys are written under `prefix`.
    pub fn open_with(
        endpoints: &[String],
        prefix: &str,
        limits: EtcdLimits,
    ) -> Result<Self, StoreError> {
        let (shared, thread) = writer::start(endpoints, prefix, limits)?;
        tracing::info!(backend = %shared.name, "opened the etcd store");
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// The backend's name in errors and logs: `etcd` and the endpoints.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues `write` for the writer and returns its token, after waiting for room.
    fn enqueue(&self, write: Write) -> Result<SyncToken, StoreError> {
        self.check(&write.key, write.value.as_deref())?;
        self.shared.queue.enqueue(write)
    }

    /// Refuses a key or value over its limit, naming it, before anything is sent.
    fn check(&self, key: &str, value: Option<&[u8]>) -> Result<(), StoreError> {
        let limits = &self.shared.limits;
        if key.len() > MAX_KEY_BYTES {
            return Err(self.shared.refused(format!(
                "a key holds at most {MAX_KEY_BYTES} bytes, and {key:.64?}… is {} bytes",
                key.len()
            )));
        }
        if let Some(value) = value
            && value.len() > limits.max_value_bytes
        {
            return Err(self.shared.refused(format!(
                "a value holds at most {} bytes (EtcdLimits::max_value_bytes), and key {key:?}'s \
                 is {} bytes",
                limits.max_value_bytes,
                value.len()
            )));
        }
        Ok(())
    }
}

impl Store for EtcdStore {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        // Every write made before this call is committed (or has failed) once this returns.
        self.sync(self.shared.queue.last_written())?;
        Ok(self
            .shared
            .read(Selection::Prefix(String::new()))?
            .entries
            .into_iter()
            .map(|(key, value, _)| (key, value))
            .collect())
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.sync(self.enqueue(Write::put(key, value))?)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.sync(self.enqueue(Write::delete(key))?)
    }

    fn put_unsynced(&self, key: &str, value: &[u8]) -> Result<SyncToken, StoreError> {
        self.enqueue(Write::put(key, value))
    }

    fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        self.shared.queue.sync(token)
    }

    fn sync_then(&self, token: SyncToken, done: Done) {
        self.shared.queue.sync_then(token, done);
    }

    fn shared(&self) -> Option<&dyn SharedStore> {
        Some(self)
    }
}

/// Each call first waits for every write queued before it, so it is ordered after them.
impl SharedStore for EtcdStore {
    fn load_prefix(&self, prefix: &str) -> Result<Snapshot, StoreError> {
        self.sync(self.shared.queue.last_written())?;
        self.shared.read(Selection::Prefix(prefix.to_owned()))
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError> {
        self.sync(self.shared.queue.last_written())?;
        Ok(self
            .shared
            .read(Selection::Key(key.to_owned()))?
            .entries
            .pop()
            .map(|(_, value, revision)| (value, revision)))
    }

    fn put_if(
        &self,
        key: &str,
        value: &[u8],
        expected: Revision,
    ) -> Result<Conditional, StoreError> {
        self.check(key, Some(value))?;
        self.sync(self.shared.queue.last_written())?;
        self.shared.put_if(key, Some(value), expected)
    }

    fn delete_if(&self, key: &str, expected: Revision) -> Result<Conditional, StoreError> {
        self.check(key, None)?;
        self.sync(self.shared.queue.last_written())?;
        self.shared.put_if(key, None, expected)
    }

    fn write_if_guarded(
        &self,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
        guards: &[Guard],
    ) -> Result<Conditional, StoreError> {
        self.check(key, value)?;
        // Two compares per key (its two forms) and per guard, in one transaction.
        let compares = 2 * (1 + guards.len());
        if compares > self.shared.limits.max_txn_ops {
            return Err(self.shared.refused(format!(
                "a guarded write of {key:?} needs {compares} compares, over the transaction's \
                 {} (EtcdLimits::max_txn_ops)",
                self.shared.limits.max_txn_ops
            )));
        }
        self.sync(self.shared.queue.last_written())?;
        self.shared.write_if_guarded(key, value, expected, guards)
    }

    fn watch(&self, after: Revision) -> Result<Box<dyn Watch>, StoreError> {
        Ok(Box::new(watch::start(&self.shared, after)))
    }
}

/// The error of a write, or a sync, the write queue refuses (see
/// [`OnFailure::RefuseUntilCommitted`](assignor_coordinator::store::queue::OnFailure)), from the
/// store `backend` with `limits`.
fn refusal_error(backend: &str, limits: &EtcdLimits, refusal: Refusal<'_>) -> StoreError {
    let timeout = limits.request_timeout.as_millis();
    let why = match refusal {
        // A write whose transaction did not commit in time: it was not acknowledged, and it
        // stays queued, so it lands (in order) once the cluster commits.
        Refusal::Unacknowledged(why) | Refusal::Failed(why) => format!(
            "the cluster did not commit within {timeout} ms ({why}): the write is not \
             acknowledged, and is retried in order until a quorum of the etcd members answers \
             again; check that a majority of them are running and reachable"
        ),
        Refusal::Outage(why) => format!(
            "writes are refused (nothing was written) until the cluster commits again: it did \
             not commit within {timeout} ms ({why}); check that a majority of the etcd members \
             (a quorum) are running and reachable"
        ),
        _ => "the store is closing".to_owned(),
    };
    StoreError::Backend {
        backend: backend.to_owned(),
        source: why.into(),
    }
}

impl writer::Shared {
    /// The error of a write the store refuses for what it is.
    fn refused(&self, why: String) -> StoreError {
        StoreError::Backend {
            backend: self.name.clone(),
            source: why.into(),
        }
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        self.shared.queue.stop();
        if let Some(thread) = self.thread.take() {
            // A `sync_then` callback may drop the last handle on the client thread itself,
            // which cannot wait for itself: it exits on its own.
            if thread.thread().id() != thread::current().id() && thread.join().is_err() {
                tracing::error!(backend = %self.shared.name, "the etcd store's thread panicked");
            }
        }
    }
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("backend", &self.shared.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use std::collections::HashSet;

    use assignor_coordinator::store::{Change, WatchEvent};
    use etcd_client::GetOptions;

    use super::*;
    use crate::testing::Cluster;

    /// Runs `f` with the store's etcd client on a runtime of the test's own.
    fn with_kv<T>(store: &EtcdStore, f: impl AsyncFnOnce(etcd_client::KvClient) -> T) -> T {
        let kv = store.shared.kv.clone();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f(kv))
    }

    /// The chunk keys under the store's prefix.
    fn chunk_keys(store: &EtcdStore) -> Vec<String> {
        let prefix = store.shared.key("c/");
        with_kv(store, async move |mut kv| {
            let response = kv
                .get(
                    prefix,
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await
                .unwrap();
            response
                .kvs()
                .iter()
                .map(|kv| kv.key_str().unwrap().to_owned())
                .collect()
        })
    }

    /// A value of `len` bytes that differs from chunk to chunk.
    fn big(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i / 1000) as u8 ^ seed).collect()
    }

    /// Values of several MiB round-trip through chunks (1 MiB each), a replacement and a
    /// delete leave no chunk behind, and a missing or altered chunk makes `load_all` fail
    /// naming the key.
    #[test]
    fn large_values_are_chunked_and_checked() {
        let cluster = Cluster::start(1).unwrap();
        let store = EtcdStore::open(&cluster.endpoints()).unwrap();
        let (a, b) = (big(5 << 20, 1), big((3 << 20) + 17, 2));
        store.put("tenant/t/assignor/a", &a).unwrap();
        store.put("tenant/t/assignor/b", &b).unwrap();
        store.put("tenant/t/group/g", b"small").unwrap();
        assert_eq!(chunk_keys(&store).len(), 5 + 4);
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), 3);
        assert!(loaded[0].1 == a && loaded[1].1 == b && loaded[2].1 == b"small");

        store.put("tenant/t/assignor/a", b"now small").unwrap();
        store.delete("tenant/t/group/g").unwrap();
        assert_eq!(chunk_keys(&store).len(), 4, "a's chunks are swept");

        // One chunk of b altered, then removed.
        let victim = chunk_keys(&store).remove(2);
        with_kv(&store, {
            let victim = victim.clone();
            async move |mut kv| kv.put(victim, b"garbage".to_vec(), None).await.unwrap()
        });
        let message = store.load_all().unwrap_err().to_string();
        assert!(message.contains("tenant/t/assignor/b"), "{message}");
        assert!(message.contains("does not match"), "{message}");
        with_kv(&store, async move |mut kv| {
            kv.delete(victim, None).await.unwrap()
        });
        let message = store.load_all().unwrap_err().to_string();
        assert!(message.contains("tenant/t/assignor/b"), "{message}");
        assert!(message.contains("is missing"), "{message}");
    }

    /// A burst of unsynced writes at the limits (keys of [`MAX_KEY_BYTES`], values filling a
    /// transaction, many writes per key) commits in transactions within etcd's request and
    /// operation limits, each key holding its last value; a key or value over its limit is
    /// refused before it is queued, naming it.
    #[test]
    fn worst_case_writes_stay_within_etcds_limits() {
        let cluster = Cluster::start(1).unwrap();
        let store = EtcdStore::open(&cluster.endpoints()).unwrap();
        let mut last = SyncToken::DURABLE;
        let mut expected = std::collections::BTreeMap::new();
        for i in 0..600usize {
            let key = format!("{:0>width$}", i % 200, width = MAX_KEY_BYTES);
            let value = vec![i as u8; if i % 50 == 0 { MAX_CHUNK_BYTES } else { 300 }];
            last = store.put_unsynced(&key, &value).unwrap();
            expected.insert(key, value);
        }
        store.sync(last).unwrap();
        assert!(store.load_all().unwrap() == expected.into_iter().collect::<Vec<_>>());

        let long_key = "k".repeat(MAX_KEY_BYTES + 1);
        let message = store.put(&long_key, b"x").unwrap_err().to_string();
        assert!(message.contains("a key holds at most"), "{message}");
        let limits = EtcdLimits::new().max_value_bytes(2 << 20);
        let small = EtcdStore::open_with(&cluster.endpoints(), "small/", limits).unwrap();
        let message = small
            .put("tenant/t/group/huge", &vec![0; (2 << 20) + 1])
            .unwrap_err()
            .to_string();
        assert!(message.contains("tenant/t/group/huge"), "{message}");
        assert_eq!(
            small.shared.queue.last_written(),
            SyncToken::DURABLE,
            "nothing queued"
        );
    }

    /// A put stopped between its chunks and its manifest is not visible to another store on
    /// the cluster, whose open removes the orphan chunks; once resumed, its manifest's check
    /// finds them gone, writes them again, and the value is whole.
    #[test]
    fn put_interrupted_before_its_manifest_is_never_visible() {
        let cluster = Cluster::start(1).unwrap();
        let writer = Arc::new(EtcdStore::open(&cluster.endpoints()).unwrap());
        writer.put("tenant/t/group/g", b"before").unwrap();
        let (reached_tx, reached) = mpsc::channel();
        let (release, release_rx) = tokio::sync::oneshot::channel();
        *writer.shared.hold.lock().unwrap() = Some((reached_tx, release_rx));
        let value = big(3 << 20, 9);
        let put = thread::spawn({
            let (writer, value) = (Arc::clone(&writer), value.clone());
            move || writer.put("tenant/t/assignor/big", &value)
        });
        reached.recv_timeout(Duration::from_secs(20)).unwrap();
        assert_eq!(chunk_keys(&writer).len(), 3, "the chunks are written");

        let reader = EtcdStore::open(&cluster.endpoints()).unwrap();
        assert_eq!(
            reader.load_all().unwrap(),
            [("tenant/t/group/g".to_owned(), b"before".to_vec())]
        );
        assert!(
            chunk_keys(&reader).is_empty(),
            "the orphan chunks are swept"
        );

        release.send(()).unwrap();
        put.join().unwrap().unwrap();
        let loaded = reader.load_all().unwrap();
        assert_eq!(loaded.len(), 2);
        assert!(loaded[0].1 == value);
    }

    /// Two stores on one cluster: a conditional put from the revision both read lands for
    /// the first and is refused for the second, which is told the winner's revision and reads
    /// the winner's value; a put from that revision then lands. Inline and chunked values
    /// alike, and a put from "absent" is refused once the key exists.
    #[test]
    fn conditional_puts_let_one_writer_win() {
        let cluster = Cluster::start(1).unwrap();
        let a = EtcdStore::open(&cluster.endpoints()).unwrap();
        let b = EtcdStore::open(&cluster.endpoints()).unwrap();
        let (a, b) = (a.shared().unwrap(), b.shared().unwrap());
        for (key, small) in [
            ("tenant/t/group/small", true),
            ("tenant/t/group/big", false),
        ] {
            let value = |seed| {
                if small {
                    vec![seed; 100]
                } else {
                    big(3 << 20, seed)
                }
            };
            let Conditional::Written(first) = a.put_if(key, &value(1), Revision::ABSENT).unwrap()
            else {
                panic!("{key}: the first put from absent is refused");
            };
            assert_eq!(
                b.put_if(key, &value(2), Revision::ABSENT).unwrap(),
                Conditional::Conflict(first)
            );
            let Conditional::Written(won) = a.put_if(key, &value(3), first).unwrap() else {
                panic!("{key}: a put from the current revision is refused");
            };
            assert_ne!(won, first);
            assert_eq!(
                b.put_if(key, &value(4), first).unwrap(),
                Conditional::Conflict(won),
                "{key}: b's put from the older revision loses"
            );
            let (read, revision) = b.get(key).unwrap().unwrap();
            assert!(
                read == value(3) && revision == won,
                "{key}: b reads a's value"
            );
            assert!(matches!(
                b.put_if(key, &value(5), won).unwrap(),
                Conditional::Written(_)
            ));
        }
        assert_eq!(b.get("tenant/t/group/none").unwrap(), None);
        let all = a.load_prefix("").unwrap().entries;
        assert_eq!(all.len(), 2);
        assert!(
            all.iter()
                .all(|(k, _, r)| a.get(k).unwrap().unwrap().1 == *r)
        );
    }

    /// A write guarded by another key's revision, or by a prefix unchanged since a view,
    /// loses when that key (or a key under the prefix, created or written) moved: a group
    /// write selecting an upload against the upload's delete from a view older than the
    /// group's change, each way round. Nothing changes on a loss, and the answer is the
    /// written key's revision now. A guard with more compares than a transaction takes is
    /// refused before anything is sent.
    #[test]
    fn guarded_writes_lose_when_a_guarded_key_moved() {
        let cluster = Cluster::start(1).unwrap();
        let store = EtcdStore::open(&cluster.endpoints()).unwrap();
        let s = store.shared().unwrap();
        let (upload, group) = ("tenant/t/assignor/u", "tenant/t/group/g");
        let written = |c: Conditional| match c {
            Conditional::Written(r) => r,
            other => panic!("written, not {other:?}"),
        };
        let ru = written(s.put_if(upload, b"component", Revision::ABSENT).unwrap());
        let rg = written(s.put_if(group, b"default", Revision::ABSENT).unwrap());
        let view = s.load_prefix("tenant/t/").unwrap().at;
        let groups = || Guard::Unchanged {
            prefix: "tenant/t/group/".into(),
            since: view,
        };

        // The group selects the upload (guarded by it), then a delete from the older view.
        let rg = written(
            s.write_if_guarded(
                group,
                Some(b"selects u"),
                rg,
                &[Guard::Key(upload.into(), ru)],
            )
            .unwrap(),
        );
        assert_eq!(
            s.write_if_guarded(upload, None, ru, &[groups()]).unwrap(),
            Conditional::Conflict(ru),
            "the delete's view of the groups is older than the group's change"
        );
        assert!(s.get(upload).unwrap().is_some(), "the upload stays");

        // A group created since the view is a change too.
        let view = s.load_prefix("tenant/t/").unwrap().at;
        let groups = || Guard::Unchanged {
            prefix: "tenant/t/group/".into(),
            since: view,
        };
        written(
            s.put_if("tenant/t/group/new", b"n", Revision::ABSENT)
                .unwrap(),
        );
        assert_eq!(
            s.write_if_guarded(upload, None, ru, &[groups()]).unwrap(),
            Conditional::Conflict(ru)
        );

        // The other way round: the delete lands first (from a current view), and a group
        // write guarded by the upload's revision then loses.
        let view = s.load_prefix("tenant/t/").unwrap().at;
        let current = Guard::Unchanged {
            prefix: "tenant/t/group/".into(),
            since: view,
        };
        written(s.write_if_guarded(upload, None, ru, &[current]).unwrap());
        assert_eq!(
            s.write_if_guarded(
                group,
                Some(b"selects u, again"),
                rg,
                &[Guard::Key(upload.into(), ru)]
            )
            .unwrap(),
            Conditional::Conflict(rg)
        );
        assert_eq!(s.get(group).unwrap().unwrap().0, b"selects u", "unchanged");

        let too_many: Vec<Guard> = (0..ETCD_MAX_TXN_OPS)
            .map(|i| Guard::Key(format!("tenant/t/group/g{i}"), Revision::ABSENT))
            .collect();
        let error = s
            .write_if_guarded(upload, None, Revision::ABSENT, &too_many)
            .unwrap_err()
            .to_string();
        assert!(error.contains("EtcdLimits::max_txn_ops"), "{error}");
    }

    /// Queues `writes` (key, value or delete, expected revision, guards) for the conditional
    /// writer all at once, so its batches are known, and waits (20 s each at most) for each
    /// answer.
    fn queue_at_once(
        store: &EtcdStore,
        writes: impl IntoIterator<Item = (String, Option<Vec<u8>>, Revision, Vec<Guard>)>,
    ) -> Vec<Conditional> {
        let mut answers = Vec::new();
        {
            let mut waiting = store.shared.conditionals.lock().unwrap();
            for (key, value, expected, guards) in writes {
                let (answer, rx) = mpsc::sync_channel(1);
                waiting.push(writer::ConditionalWrite {
                    key,
                    value,
                    expected,
                    guards,
                    answer,
                });
                answers.push(rx);
            }
        }
        store.shared.conditional_work.notify_one();
        answers
            .iter()
            .map(|rx| rx.recv_timeout(Duration::from_secs(20)).unwrap().unwrap())
            .collect()
    }

    /// Guarded writes are not batched with writes of the keys they guard (a transaction
    /// checks every compare before any write, so both would land): a group write selecting
    /// an upload, guarded by the upload, and the upload's delete, guarded by the group,
    /// queued together from the same view: exactly one lands, whichever commits first.
    /// (Batched together, both were answered written.)
    #[test]
    fn a_guarded_write_is_not_batched_with_a_write_of_its_guard() {
        let cluster = Cluster::start(1).unwrap();
        let store = EtcdStore::open(&cluster.endpoints()).unwrap();
        let s = store.shared().unwrap();
        let (upload, group) = ("tenant/t/assignor/u", "tenant/t/group/g");
        let Conditional::Written(ru) = s.put_if(upload, b"component", Revision::ABSENT).unwrap()
        else {
            panic!("written")
        };
        let Conditional::Written(rg) = s.put_if(group, b"default", Revision::ABSENT).unwrap()
        else {
            panic!("written")
        };
        let queued = [
            (
                group,
                Some(b"selects u".to_vec()),
                rg,
                vec![Guard::Key(upload.into(), ru)],
            ),
            (upload, None, ru, vec![Guard::Key(group.into(), rg)]),
        ];
        let outcomes = queue_at_once(
            &store,
            queued
                .into_iter()
                .map(|(k, v, e, g)| (k.to_owned(), v, e, g)),
        );
        let landed = outcomes
            .iter()
            .filter(|o| matches!(o, Conditional::Written(_)))
            .count();
        assert_eq!(landed, 1, "exactly one lands: {outcomes:?}");
        let selects = s.get(group).unwrap().unwrap().0 == b"selects u";
        assert_ne!(
            selects,
            s.get(upload).unwrap().is_none(),
            "the group never selects a deleted upload"
        );
    }

    /// Conditional puts waiting together share a transaction and are each answered as if made
    /// alone: two puts from "absent" per key (queued at once, so the writer's batches are
    /// known: one put per key in each, as a transaction names a key once) give one winner per
    /// key, the loser told the winner's revision; fresh keys queued with the losers (a batch
    /// whose stale conditions make etcd apply none of it) are written one by one; and the
    /// winners of a batch share its revision. Made with `put_if`, from threads, the shape of
    /// the batches would depend on timing.
    #[test]
    fn queued_conditional_puts_share_transactions_and_answer_each() {
        const KEYS: usize = 12;
        const FRESH: usize = 4;
        let cluster = Cluster::start(1).unwrap();
        let store = EtcdStore::open(&cluster.endpoints()).unwrap();
        let writes: Vec<(String, String)> = (0..2 * KEYS)
            .map(|i| {
                (
                    format!("tenant/t/group/g{}", i % KEYS),
                    format!("writer {i}"),
                )
            })
            .chain((0..FRESH).map(|i| (format!("tenant/t/group/h{i}"), format!("fresh {i}"))))
            .collect();
        let outcomes = queue_at_once(
            &store,
            writes.iter().map(|(key, value)| {
                let value = Some(value.clone().into_bytes());
                (key.clone(), value, Revision::ABSENT, Vec::new())
            }),
        );
        let stored: std::collections::BTreeMap<String, (Vec<u8>, Revision)> = store
            .load_prefix("")
            .unwrap()
            .entries
            .into_iter()
            .map(|(k, v, r)| (k, (v, r)))
            .collect();
        assert_eq!(stored.len(), KEYS + FRESH);
        let mut winning_revisions = HashSet::new();
        let mut winners = 0;
        for ((key, value), outcome) in writes.iter().zip(&outcomes) {
            let (held, revision) = &stored[key];
            match outcome {
                Conditional::Written(written) => {
                    assert!(held == value.as_bytes() && written == revision, "{key}");
                    winning_revisions.insert(*written);
                    winners += 1;
                }
                Conditional::Conflict(now) => assert_eq!(now, revision, "{key}"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(winners, KEYS + FRESH, "one winner per key");
        // One batch's winners share a revision; the others were written one by one.
        assert!(
            winning_revisions.len() <= 1 + FRESH,
            "{winners} winners in {} transactions",
            winning_revisions.len()
        );
    }

    /// The events of `watch`, forwarded from a thread (`Watch::next` blocks), so that a test
    /// can wait for them with a deadline.
    fn forward(mut watch: Box<dyn Watch>) -> mpsc::Receiver<WatchEvent> {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            while let Some(event) = watch.next() {
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        rx
    }

    /// The next change from `events`, counting resumptions on the way; at most 20 s.
    fn next_change(
        events: &mpsc::Receiver<WatchEvent>,
        resumed: &std::cell::Cell<usize>,
    ) -> Change {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut pending = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match events.recv_timeout(left).expect("a change within 20 s") {
                WatchEvent::Changes(changes) => pending.extend(changes),
                WatchEvent::Resumed(_) => resumed.set(resumed.get() + 1),
                other => panic!("unexpected {other:?}"),
            }
            if !pending.is_empty() {
                assert_eq!(pending.len(), 1, "one change at a time: {pending:?}");
                return pending.remove(0);
            }
        }
    }

    /// A watch from a snapshot's revision reports each later change another store makes, in
    /// order and once: an inline put, a chunked one, a switch from chunked to inline (one
    /// change, the write), a delete; a damaged record is reported unreadable naming its key,
    /// and the changes after it still come; SIGKILL of each member in turn (the watch's among
    /// them) misses nothing; a watch from a compacted revision reads every key again.
    #[test]
    fn watch_reports_every_change_once_through_breaks_and_compaction() {
        let mut cluster = Cluster::start(3).unwrap();
        let a = EtcdStore::open(&cluster.endpoints()).unwrap();
        let b = EtcdStore::open(&cluster.endpoints()).unwrap();
        a.put("tenant/t/group/old", b"before").unwrap();
        let snapshot = b.shared().unwrap().load_prefix("tenant/").unwrap();
        assert_eq!(snapshot.entries.len(), 1);
        let events = forward(b.shared().unwrap().watch(snapshot.at).unwrap());
        let resumed = std::cell::Cell::new(0);
        let expect = |key: &str, value: Option<&[u8]>| {
            let change = next_change(&events, &resumed);
            assert_eq!(change.key, key);
            assert!(change.revision > snapshot.at);
            assert!(
                change.value.as_ref().unwrap().as_deref() == value,
                "{key}: {:?}",
                change.value.as_ref().map(|v| v.as_ref().map(Vec::len))
            );
        };
        let large = big(3 << 20, 5);
        a.put("tenant/t/group/g", b"one").unwrap();
        expect("tenant/t/group/g", Some(b"one"));
        a.put("tenant/t/assignor/big", &large).unwrap();
        expect("tenant/t/assignor/big", Some(&large));
        a.put("tenant/t/assignor/big", b"small now").unwrap();
        expect("tenant/t/assignor/big", Some(b"small now"));
        a.delete("tenant/t/group/old").unwrap();
        expect("tenant/t/group/old", None);

        cluster
            .put("assignor/v/tenant/t/group/bad", b"garbage")
            .unwrap();
        let bad = next_change(&events, &resumed);
        assert_eq!(bad.key, "tenant/t/group/bad");
        let why = bad.value.unwrap_err();
        assert!(why.contains("assignor/v/tenant/t/group/bad"), "{why}");
        a.delete("tenant/t/group/bad").unwrap();
        expect("tenant/t/group/bad", None);

        for i in 0..3 {
            cluster.kill(i);
            let key = format!("tenant/t/group/k{i}");
            a.put(&key, key.as_bytes()).unwrap();
            expect(&key, Some(key.as_bytes()));
            cluster.restart(i).unwrap();
            cluster.wait_member(i).unwrap();
        }
        assert!(
            resumed.get() >= 1,
            "the watch's own member was killed: it resumed"
        );

        cluster.compact().unwrap();
        let rx = forward(b.shared().unwrap().watch(snapshot.at).unwrap());
        // A resumption may come first: the client's connection to a member restarted above
        // is made again lazily. Resumptions that never end fail the test at the deadline.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let next = || loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left).expect("a watch event within 20 s") {
                WatchEvent::Resumed(_) => continue,
                event => return event,
            }
        };
        let event = next();
        let WatchEvent::Reset(reset) = event else {
            panic!("a watch from a compacted revision starts with a reset, not {event:?}");
        };
        let now = a.load_all().unwrap();
        assert_eq!(
            reset
                .entries
                .into_iter()
                .map(|(k, v, _)| (k, v))
                .collect::<Vec<_>>(),
            now
        );
        a.put("tenant/t/group/later", b"l").unwrap();
        let event = next();
        let WatchEvent::Changes(changes) = event else {
            panic!("changes follow the reset, not {event:?}");
        };
        assert_eq!(changes[0].key, "tenant/t/group/later");
    }

    /// A watch's reset after a compaction reads every record it can and lists the damaged
    /// ones, each naming its etcd key: a record that does not decode and a chunked value
    /// whose chunk was altered do not stop it, and changes follow. (When they failed the whole
    /// read, the reset was tried again and again until they were repaired: no event came.)
    #[test]
    fn a_reset_lists_damaged_records_and_reads_the_rest() {
        let cluster = Cluster::start(1).unwrap();
        let a = EtcdStore::open(&cluster.endpoints()).unwrap();
        let b = EtcdStore::open(&cluster.endpoints()).unwrap();
        let before = b.shared().unwrap().load_prefix("").unwrap().at;
        a.put("tenant/t/group/good", b"fine").unwrap();
        a.put("tenant/t/assignor/big", &big(3 << 20, 7)).unwrap();
        cluster
            .put("assignor/v/tenant/t/group/bad", b"garbage")
            .unwrap();
        let chunks = cluster.versions("assignor/c/").unwrap();
        assert!(chunks.len() > 1, "the value is chunked: {chunks:?}");
        cluster.put(&chunks[0].0, b"altered").unwrap();
        cluster.compact().unwrap();

        let rx = forward(b.shared().unwrap().watch(before).unwrap());
        // Resumptions are skipped, within one deadline: a reset that fails is tried again,
        // each try reported resumed.
        let next = || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                match rx.recv_timeout(left).expect("an event within 20 s") {
                    WatchEvent::Resumed(_) => continue,
                    event => return event,
                }
            }
        };
        let event = next();
        let WatchEvent::Reset(reset) = event else {
            panic!("a watch from a compacted revision starts with a reset, not {event:?}");
        };
        let read: Vec<_> = reset
            .entries
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_slice()))
            .collect();
        assert_eq!(read, [("tenant/t/group/good", &b"fine"[..])]);
        let damaged: Vec<_> = reset.damaged.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(damaged, ["tenant/t/assignor/big", "tenant/t/group/bad"]);
        assert!(
            reset.damaged[0]
                .1
                .contains("assignor/m/tenant/t/assignor/big")
                && reset.damaged[0].1.contains("chunk 0"),
            "{}",
            reset.damaged[0].1
        );
        assert!(
            reset.damaged[1].1.contains("assignor/v/tenant/t/group/bad"),
            "{}",
            reset.damaged[1].1
        );
        a.put("tenant/t/group/later", b"l").unwrap();
        let event = next();
        let WatchEvent::Changes(changes) = event else {
            panic!("changes follow the reset, not {event:?}");
        };
        assert_eq!(changes[0].key, "tenant/t/group/later");
        assert!(
            b.load_all().is_err(),
            "a reader that must see every key still refuses the damaged records"
        );
    }

    /// Good URLs give one http endpoint per member; each kind of bad URL is refused naming
    /// what is wrong and showing the right form.
    #[test]
    fn urls_are_parsed_or_refused_clearly() {
        assert_eq!(
            parse_url("etcd://127.0.0.1:2379,localhost:22379,[::1]:32379").unwrap(),
            [
                "http://127.0.0.1:2379",
                "http://localhost:22379",
                "http://[::1]:32379"
            ]
        );
        for (url, says) in [
            ("http://127.0.0.1:2379", "does not start with etcd://"),
            ("etcd://", "names no member"),
            ("etcd://127.0.0.1", "has no :PORT"),
            ("etcd://127.0.0.1:0", "no valid port"),
            ("etcd://127.0.0.1:99999", "no valid port"),
            ("etcd://:2379", "no valid host"),
            ("etcd://a:1,,b:2", "has no :PORT"),
            ("etcd://user@host:2379", "no valid host"),
            ("etcd://host:2379/path", "no valid port"),
        ] {
            let message = parse_url(url).unwrap_err().to_string();
            assert!(message.contains(says), "{url}: {message}");
            assert!(message.contains("etcd://HOST:PORT"), "{message}");
        }
    }
}

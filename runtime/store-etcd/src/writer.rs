//! The client thread: a current-thread tokio runtime holding the etcd client, running the
//! writer task (queue → transactions, retries, the chunk sweep) and the reads that callers
//! spawn on it.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KvClient, PutOptions, Txn, TxnOp,
    TxnOpResponse, WatchClient,
};
use futures_util::{StreamExt as _, TryStreamExt as _};
use tokio::sync::Notify;
use tokio::time::Instant;

use assignor_coordinator::store::queue::{GroupCommitQueue, OnFailure, Receipt, Write};
use assignor_coordinator::store::{Conditional, Guard, Revision, Snapshot, StoreError};

use crate::EtcdLimits;
use crate::value::{self, Manifest};

/// Keys per page when reading inline values (each at most a chunk, 1 MiB): bounds one
/// response.
const VALUE_PAGE: i64 = 16;
/// Keys per page when reading manifests or chunk keys (small).
const KEY_PAGE: i64 = 1024;
/// The largest response the client decodes: a page of inline values with room to spare.
pub(crate) const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// What one write adds to a transaction besides its key and value: two operations' framing,
/// the inline record's tag and hash (generous: protobuf's own framing is a few bytes).
const TXN_OP_OVERHEAD: usize = 64;
/// Tries of a large value's manifest whose chunks a concurrent sweep removed meanwhile.
const MANIFEST_TRIES: usize = 3;
/// Pause between two tries of a failed request within its deadline.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two tries of a transaction once the cluster is deemed down.
pub(crate) const MAX_OUTAGE_PAUSE: Duration = Duration::from_secs(1);

/// What the store's handle shares with its client thread.
pub(crate) struct Shared {
    /// `etcd` and the endpoints: the backend named in every error.
    pub(crate) name: String,
    pub(crate) limits: EtcdLimits,
    pub(crate) prefix: String,
    /// The writes waiting for the writer task; it refuses writes while the cluster does not
    /// commit, and recovers once it does.
    pub(crate) queue: GroupCommitQueue,
    /// Notified by the queue when a write is queued or the store is dropped.
    work: Arc<Notify>,
    /// The client thread's runtime, where reads are spawned.
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) kv: KvClient,
    /// For [`watch`](crate::watch): one stream per watch.
    pub(crate) watch_client: WatchClient,
    /// Conditional writes waiting for the conditional writer, which joins them into
    /// transactions. Each caller waits for its answer, so there are at most as many as
    /// threads calling `put_if` (the service's bounded blocking pool).
    pub(crate) conditionals: std::sync::Mutex<Vec<ConditionalWrite>>,
    /// Notified when a conditional write is added.
    pub(crate) conditional_work: Notify,
    /// Test hook: when set, the writer reports that a large value's chunks are written, then
    /// waits to be released before writing its manifest (a writer stopped between the two).
    #[cfg(test)]
    pub(crate) hold:
        std::sync::Mutex<Option<(mpsc::Sender<()>, tokio::sync::oneshot::Receiver<()>)>>,
}

/// A run of writes committed in one transaction: inline puts and deletes, or one large put.
enum Segment {
    /// The last write of each key among the run's (their transaction applies them at once,
    /// and etcd refuses a transaction naming one key twice).
    Small(BTreeMap<String, Option<Vec<u8>>>),
    /// A value over the chunk size.
    Large(String, Vec<u8>),
}

/// Starts the client thread, connects and sweeps; returns once the store can be used.
pub(crate) fn start(
    endpoints: &[String],
    prefix: &str,
    limits: EtcdLimits,
) -> Result<(Arc<Shared>, JoinHandle<()>), StoreError> {
    let name = format!("etcd {}", endpoints.join(","));
    let fail = |why: String| StoreError::Backend {
        backend: name.clone(),
        source: why.into(),
    };
    if endpoints.is_empty() {
        return Err(fail("no endpoint given".into()));
    }
    if limits.max_chunks() > EtcdLimits::MAX_CHUNKS {
        return Err(fail(format!(
            "max_value_bytes ({}) is {} chunks of {} bytes; at most {} fit the checks of one \
             transaction: lower it or raise chunk_bytes",
            limits.max_value_bytes,
            limits.max_chunks(),
            limits.chunk_bytes,
            EtcdLimits::MAX_CHUNKS
        )));
    }
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let (endpoints, prefix_owned, thread_name) =
        (endpoints.to_vec(), prefix.to_owned(), name.clone());
    let thread = thread::Builder::new()
        .name("etcd-store".to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("cannot start its runtime: {e}")));
                    return;
                }
            };
            let opened = runtime.block_on(connect(
                thread_name,
                endpoints,
                prefix_owned,
                limits,
                runtime.handle().clone(),
            ));
            match opened {
                Ok(shared) => {
                    let _ = ready_tx.send(Ok(Arc::clone(&shared)));
                    runtime.spawn(run_conditionals(Arc::clone(&shared)));
                    runtime.block_on(run(shared));
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        })
        .map_err(|e| fail(format!("cannot start its thread: {e}")))?;
    // `connect` bounds itself by the connect timeout, and the sweep each request by the
    // request timeout; this only guards against a thread that died without answering.
    match ready_rx.recv() {
        Ok(Ok(shared)) => Ok((shared, thread)),
        Ok(Err(why)) => {
            let _ = thread.join();
            Err(fail(why))
        }
        Err(_) => {
            let _ = thread.join();
            Err(fail("its thread stopped while connecting".into()))
        }
    }
}

/// Connects, checks that the cluster answers, and removes chunks no manifest references.
async fn connect(
    name: String,
    endpoints: Vec<String>,
    prefix: String,
    limits: EtcdLimits,
    runtime: tokio::runtime::Handle,
) -> Result<Arc<Shared>, String> {
    let options = ConnectOptions::new()
        .with_connect_timeout(limits.connect_timeout)
        .with_timeout(limits.request_timeout)
        // A member cut off from the leader answers at once rather than hang until the timeout.
        .with_require_leader(true)
        .with_keep_alive(Duration::from_secs(1), limits.request_timeout);
    let client = tokio::time::timeout(
        limits.connect_timeout,
        Client::connect(&endpoints, Some(options)),
    )
    .await
    .map_err(|_| unreachable_message(&limits, "connecting timed out"))?
    .map_err(|e| unreachable_message(&limits, &e.to_string()))?;
    let kv = client
        .kv_client()
        .max_decoding_message_size(MAX_RESPONSE_BYTES);
    let work = Arc::new(Notify::new());
    let backend = name.clone();
    let queue = GroupCommitQueue::new(
        limits.max_queued_bytes,
        OnFailure::RefuseUntilCommitted,
        move |refusal| crate::refusal_error(&backend, &limits, refusal),
    )
    .waking({
        let work = Arc::clone(&work);
        move || work.notify_one()
    });
    let shared = Arc::new(Shared {
        name,
        limits,
        prefix,
        queue,
        work,
        runtime,
        kv,
        watch_client: client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES),
        conditionals: std::sync::Mutex::new(Vec::new()),
        conditional_work: Notify::new(),
        #[cfg(test)]
        hold: std::sync::Mutex::new(None),
    });
    // The first request tells a cluster that answers from one that does not.
    let probe_key = shared.key("v/");
    retry_until(
        Instant::now() + limits.connect_timeout,
        limits.try_for(),
        || {
            let mut kv = shared.kv.clone();
            let key = probe_key.clone();
            async move {
                kv.get(key, Some(GetOptions::new().with_count_only()))
                    .await
                    .map(drop)
            }
        },
    )
    .await
    .map_err(|e| unreachable_message(&limits, &e))?;
    // A crash between a large value's chunks and its manifest leaves unreferenced chunks.
    if let Err(e) = shared.sweep().await {
        tracing::warn!(backend = %shared.name, error = %e, "could not remove unreferenced chunks");
    }
    Ok(shared)
}

fn unreachable_message(limits: &EtcdLimits, why: &str) -> String {
    format!(
        "the cluster did not answer within {} ms ({why}); check that its members are running \
         and that the endpoints are their client URLs",
        limits.connect_timeout.as_millis()
    )
}

/// Runs `attempt` until it succeeds or `deadline` passes, each try bounded by `try_for` (and
/// what is left): a request stuck at a member whose leader died would otherwise take the whole
/// deadline, where a new try reaches the new leader. Every request the store retries is
/// idempotent (puts of the same values, reads, deletes).
async fn retry_until<T, F, Fut>(
    deadline: Instant,
    try_for: Duration,
    mut attempt: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    loop {
        let until = deadline.min(Instant::now() + try_for);
        let last = match tokio::time::timeout_at(until, attempt()).await {
            Ok(Ok(done)) => return Ok(done),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "timed out".to_owned(),
        };
        if Instant::now() + RETRY_PAUSE >= deadline {
            return Err(last);
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// The writer task: takes the queue a transaction at a time, commits each (retrying), answers
/// its waiters, until the store is dropped.
async fn run(shared: Arc<Shared>) {
    loop {
        let Some((segment, receipt)) = shared.take_segment() else {
            if shared.queue.is_stopping() {
                return;
            }
            shared.work.notified().await;
            continue;
        };
        let deadline = Instant::now() + shared.limits.request_timeout;
        let mut committed = shared.commit(&segment, deadline).await;
        if let Err(why) = &committed {
            shared.fail_waiting(why);
            // Keep trying the same transaction: the writes after it depend on it, and the
            // coordinator already holds them.
            let mut pause = RETRY_PAUSE;
            while committed.is_err() {
                if shared.queue.is_stopping() {
                    tracing::warn!(
                        backend = %shared.name,
                        "closing while the cluster does not commit: the writes still queued \
                         were answered with an error and are dropped"
                    );
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_OUTAGE_PAUSE);
                let deadline = Instant::now() + shared.limits.request_timeout;
                committed = shared.commit(&segment, deadline).await;
            }
            tracing::info!(backend = %shared.name, "the cluster commits again: writes resume");
        }
        let swept = committed.unwrap_or(false);
        shared.queue.committed(receipt);
        if swept && let Err(e) = shared.sweep().await {
            tracing::warn!(backend = %shared.name, error = %e, "could not remove unreferenced chunks");
        }
    }
}

/// Conditional transactions in flight at once: while they are, new conditional writes gather
/// for the next.
const CONDITIONAL_BATCHES: usize = 2;

/// A `put_if` waiting for the conditional writer.
pub(crate) struct ConditionalWrite {
    pub(crate) key: String,
    /// `None` deletes the key.
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) expected: Revision,
    /// Conditions on other keys (`SharedStore::write_if_guarded`); a write with any is
    /// committed alone.
    pub(crate) guards: Vec<Guard>,
    pub(crate) answer: mpsc::SyncSender<Result<Conditional, StoreError>>,
}

/// The conditional writer: takes the conditional writes waiting, as many as one transaction
/// holds, and commits them together (at most [`CONDITIONAL_BATCHES`] transactions in flight),
/// until the client thread's runtime stops.
async fn run_conditionals(shared: Arc<Shared>) {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(CONDITIONAL_BATCHES));
    loop {
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            return;
        };
        let batch = shared.take_conditionals();
        if batch.is_empty() {
            drop(permit);
            shared.conditional_work.notified().await;
            continue;
        }
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            shared.commit_conditionals(batch).await;
            drop(permit);
        });
    }
}

impl Shared {
    /// `self.prefix` + `rest`.
    pub(crate) fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.prefix)
    }

    pub(crate) fn chunk_key(&self, hash: &value::Hash) -> String {
        self.key(&format!("c/{}", value::hex(hash)))
    }

    /// Takes the next transaction's writes off the queue (they stay counted in its bytes
    /// until committed): one large value alone, or a run of small ones within the
    /// transaction's operation and byte limits.
    fn take_segment(&self) -> Option<(Segment, Receipt)> {
        let limits = &self.limits;
        let large = |write: &Write| {
            write
                .value
                .as_ref()
                .is_some_and(|v| v.len() > limits.chunk_bytes)
        };
        let (mut first_large, mut first) = (false, true);
        let (mut keys, mut request) = (HashSet::new(), 0);
        let (writes, receipt) = self.queue.take_batch(|write| {
            if std::mem::take(&mut first) && large(write) {
                first_large = true;
                return true;
            }
            // Each key costs two operations (its form is written and its other form deleted),
            // so it is sent twice, with the prefix, the hash and some framing.
            let sent = write.value.as_ref().map_or(0, Vec::len)
                + 2 * (self.prefix.len() + write.key.len())
                + TXN_OP_OVERHEAD;
            let fits = (keys.len() + 1) * 2 <= limits.max_txn_ops
                && request + sent <= limits.max_txn_bytes;
            // The queue takes the first write whatever this says.
            if first_large || large(write) || (!keys.is_empty() && !fits) {
                return false;
            }
            keys.insert(write.key.clone());
            request += sent;
            true
        })?;
        if first_large {
            let write = writes.into_iter().next().expect("the first write");
            let value = write.value.expect("a large write is a put");
            return Some((Segment::Large(write.key, value), receipt));
        }
        let last = writes.into_iter().map(|w| (w.key, w.value)).collect();
        Some((Segment::Small(last), receipt))
    }

    /// Commits `segment`, retrying failed requests until `deadline`; `Ok(true)` when it
    /// replaced or deleted a manifest, so chunks may have lost their last reference.
    async fn commit(&self, segment: &Segment, deadline: Instant) -> Result<bool, String> {
        match segment {
            Segment::Small(writes) => {
                let mut ops = Vec::with_capacity(writes.len() * 2);
                for (key, value) in writes {
                    let (inline, manifest) =
                        (self.key(&format!("v/{key}")), self.key(&format!("m/{key}")));
                    ops.push(match value {
                        Some(value) => TxnOp::put(inline, value::encode_inline(value), None),
                        None => TxnOp::delete(inline, None),
                    });
                    ops.push(TxnOp::delete(manifest, None));
                }
                let response = retry_until(deadline, self.limits.try_for(), || {
                    let mut kv = self.kv.clone();
                    let txn = Txn::new().and_then(ops.clone());
                    async move { kv.txn(txn).await }
                })
                .await?;
                // Every second operation deletes a key's manifest.
                Ok(response
                    .op_responses()
                    .iter()
                    .skip(1)
                    .step_by(2)
                    .any(deleted_manifest))
            }
            Segment::Large(key, value) => self.commit_large(key, value, deadline).await,
        }
    }

    /// Writes a large value's chunks, then its manifest in a transaction that checks they
    /// exist (a sweep elsewhere may have removed one meanwhile: then they are written again).
    async fn commit_large(
        &self,
        key: &str,
        value: &[u8],
        deadline: Instant,
    ) -> Result<bool, String> {
        let manifest = Manifest::of(value, self.limits.chunk_bytes);
        let chunks: Vec<(String, &[u8])> = manifest
            .chunks
            .iter()
            .zip(value.chunks(self.limits.chunk_bytes))
            .map(|((hash, _), bytes)| (self.chunk_key(hash), bytes))
            .collect();
        let distinct: HashSet<&String> = chunks.iter().map(|(k, _)| k).collect();
        let compares: Vec<Compare> = distinct
            .iter()
            .map(|k| Compare::version(k.as_str(), CompareOp::Greater, 0))
            .collect();
        let ops = vec![
            TxnOp::put(
                self.key(&format!("m/{key}")),
                manifest.encode(),
                Some(PutOptions::new().with_prev_key()),
            ),
            TxnOp::delete(self.key(&format!("v/{key}")), None),
        ];
        for _ in 0..MANIFEST_TRIES {
            futures_util::stream::iter(chunks.iter())
                .map(|(chunk_key, bytes)| {
                    retry_until(deadline, self.limits.try_for(), move || {
                        let mut kv = self.kv.clone();
                        let (chunk_key, bytes) = (chunk_key.clone(), bytes.to_vec());
                        async move { kv.put(chunk_key, bytes, None).await.map(drop) }
                    })
                })
                .buffer_unordered(self.limits.parallel_chunks)
                .try_collect::<Vec<()>>()
                .await?;
            #[cfg(test)]
            self.wait_if_held().await;
            let response = retry_until(deadline, self.limits.try_for(), || {
                let mut kv = self.kv.clone();
                let txn = Txn::new().when(compares.clone()).and_then(ops.clone());
                async move { kv.txn(txn).await }
            })
            .await?;
            if response.succeeded() {
                let replaced = response
                    .op_responses()
                    .iter()
                    .any(|r| matches!(r, TxnOpResponse::Put(p) if p.prev_key().is_some()));
                return Ok(replaced);
            }
            tracing::debug!(backend = %self.name, key, "a chunk vanished before its manifest: writing them again");
        }
        Err(format!(
            "the chunks of {key:?} were removed {MANIFEST_TRIES} times before its manifest was \
             written"
        ))
    }

    #[cfg(test)]
    async fn wait_if_held(&self) {
        let held = self.hold.lock().unwrap().take();
        if let Some((reached, release)) = held {
            let _ = reached.send(());
            let _ = release.await;
        }
    }

    /// A transaction failed past its deadline: answers every waiting write with an error and
    /// refuses new writes until a commit succeeds.
    fn fail_waiting(&self, why: &str) {
        tracing::error!(
            backend = %self.name,
            error = %why,
            "the etcd cluster did not commit in time: waiting writes fail, new writes are refused \
             until it does"
        );
        self.queue.failed(why);
    }

    /// Removes chunks no manifest references, in transactions that hold only if no manifest
    /// changed since the manifests were read (one that did may reference a chunk the read did
    /// not see referenced; the next sweep takes those).
    async fn sweep(&self) -> Result<(), String> {
        let deadline = Instant::now() + self.limits.request_timeout;
        let manifests_prefix = self.key("m/");
        let (manifests, revision) = self
            .scan(&manifests_prefix, None, KEY_PAGE, false, deadline)
            .await?;
        let mut referenced = HashSet::new();
        for (key, record, _) in &manifests {
            let manifest = Manifest::decode(record, self.limits.max_value_bytes)
                .map_err(|e| format!("manifest {key:?}: {e}; nothing removed"))?;
            referenced.extend(manifest.chunks.iter().map(|(h, _)| self.chunk_key(h)));
        }
        let (chunks, _) = self
            .scan(&self.key("c/"), Some(revision), KEY_PAGE, true, deadline)
            .await?;
        let orphans: Vec<String> = chunks
            .into_iter()
            .map(|(k, _, _)| k)
            .filter(|k| !referenced.contains(k))
            .collect();
        let mut removed = 0;
        for batch in orphans.chunks(self.limits.max_txn_ops) {
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    manifests_prefix.as_str(),
                    CompareOp::Less,
                    revision + 1,
                )
                .with_prefix()])
                .and_then(
                    batch
                        .iter()
                        .map(|k| TxnOp::delete(k.as_str(), None))
                        .collect::<Vec<_>>(),
                );
            let response = retry_until(deadline, self.limits.try_for(), || {
                let (mut kv, txn) = (self.kv.clone(), txn.clone());
                async move { kv.txn(txn).await }
            })
            .await?;
            if !response.succeeded() {
                break;
            }
            removed += batch.len();
        }
        if removed > 0 {
            tracing::info!(backend = %self.name, chunks = removed, "removed unreferenced chunks");
        }
        Ok(())
    }

    /// Every key (as a string), value and `mod_revision` under `prefix` at `revision` (the
    /// latest when `None`), in pages of `page` keys; and the revision read.
    async fn scan(
        &self,
        prefix: &str,
        revision: Option<i64>,
        page: i64,
        keys_only: bool,
        deadline: Instant,
    ) -> Result<(Vec<(String, Vec<u8>, i64)>, i64), String> {
        let end = prefix_end(prefix.as_bytes());
        self.scan_range(prefix, end, revision, page, keys_only, deadline)
            .await
    }

    /// [`scan`](Self::scan) of the keys from `start` (included) to `end` (excluded).
    async fn scan_range(
        &self,
        start: &str,
        end: Vec<u8>,
        revision: Option<i64>,
        page: i64,
        keys_only: bool,
        deadline: Instant,
    ) -> Result<(Vec<(String, Vec<u8>, i64)>, i64), String> {
        let prefix = start;
        let mut start = start.as_bytes().to_vec();
        let mut revision = revision;
        let mut out = Vec::new();
        loop {
            let mut options = GetOptions::new().with_range(end.clone()).with_limit(page);
            if let Some(r) = revision {
                options = options.with_revision(r);
            }
            if keys_only {
                options = options.with_keys_only();
            }
            let mut response = retry_until(deadline, self.limits.try_for(), || {
                let (mut kv, start, options) = (self.kv.clone(), start.clone(), options.clone());
                async move { kv.get(start, Some(options)).await }
            })
            .await?;
            if revision.is_none() {
                revision = response.header().map(|h| h.revision());
            }
            let more = response.more();
            let kvs = response.take_kvs();
            let Some(last) = kvs.last() else { break };
            start = last.key().to_vec();
            start.push(0);
            for kv in kvs {
                let mod_revision = kv.mod_revision();
                let (key, value) = kv.into_key_value();
                let key = String::from_utf8(key).map_err(|e| {
                    format!("a key under {prefix:?} is not UTF-8: {:?}", e.as_bytes())
                })?;
                out.push((key, value, mod_revision));
            }
            if !more {
                break;
            }
        }
        Ok((out, revision.unwrap_or(0)))
    }

    /// The keys `selection` names with their values and revisions, checked, at one revision:
    /// the inline values and the manifests with their chunks. Runs on the client thread; the
    /// caller waits for its answer.
    pub(crate) fn read(self: &Arc<Self>, selection: Selection) -> Result<Snapshot, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let shared = Arc::clone(self);
        self.runtime.spawn(async move {
            let _ = tx.send(shared.load(&selection, Damaged::Refuse).await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(self.refused("the store closed during the read".into())))
    }

    /// [`SharedStore::put_if`](assignor_coordinator::store::SharedStore::put_if): queued for
    /// the conditional writer on the client thread; the caller waits for its answer.
    /// A `value` of `None` deletes the key (`SharedStore::delete_if`).
    pub(crate) fn put_if(
        self: &Arc<Self>,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
    ) -> Result<Conditional, StoreError> {
        self.write_if_guarded(key, value, expected, &[])
    }

    /// [`put_if`](Self::put_if), also conditional on `guards`
    /// (`SharedStore::write_if_guarded`).
    pub(crate) fn write_if_guarded(
        self: &Arc<Self>,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
        guards: &[Guard],
    ) -> Result<Conditional, StoreError> {
        let (answer, rx) = mpsc::sync_channel(1);
        self.conditionals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(ConditionalWrite {
                key: key.to_owned(),
                value: value.map(<[u8]>::to_vec),
                expected,
                guards: guards.to_vec(),
                answer,
            });
        self.conditional_work.notify_one();
        rx.recv()
            .unwrap_or_else(|_| Err(self.refused("the store closed during the write".into())))
    }

    /// The conditional writes for the next transaction, in the order they came: one large
    /// value alone, or small ones of distinct keys (etcd refuses a transaction naming a key
    /// twice) within the transaction's operation and byte limits; the others wait. A guarded
    /// write goes alone too: its guards would be checked before the batch's other writes, so
    /// one of them changing a guarded key could land with it, the pair the guard excludes.
    fn take_conditionals(&self) -> Vec<ConditionalWrite> {
        let limits = &self.limits;
        let mut waiting = self
            .conditionals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (mut taken, mut left) = (Vec::new(), Vec::new());
        let (mut keys, mut bytes, mut alone) = (HashSet::new(), 0, false);
        for write in waiting.drain(..) {
            let len = write.value.as_ref().map_or(0, Vec::len);
            let solo = len > limits.chunk_bytes || !write.guards.is_empty();
            // Two compares and two operations per write (its form, the other form).
            let sent = len + 4 * (self.prefix.len() + write.key.len()) + TXN_OP_OVERHEAD;
            let joins = taken.is_empty()
                || (!alone
                    && !solo
                    && (taken.len() + 1) * 2 <= limits.max_txn_ops
                    && bytes + sent <= limits.max_txn_bytes
                    && !keys.contains(&write.key));
            if joins {
                alone |= solo;
                keys.insert(write.key.clone());
                bytes += sent;
                taken.push(write);
            } else {
                left.push(write);
            }
        }
        *waiting = left;
        taken
    }

    /// Commits `batch` in one transaction whose compares are all its writes'; when one fails
    /// (etcd then applies none, and does not say which), each write is made alone, which
    /// answers it written or in conflict. A batch of one is made alone at once.
    async fn commit_conditionals(&self, batch: Vec<ConditionalWrite>) {
        if let [write] = batch.as_slice() {
            return self.commit_alone(write).await;
        }
        let deadline = Instant::now() + self.limits.request_timeout;
        let mut compares = Vec::with_capacity(batch.len() * 2);
        let mut ops = Vec::with_capacity(batch.len() * 2);
        for write in &batch {
            let (inline_key, manifest_key) = (
                self.key(&format!("v/{}", write.key)),
                self.key(&format!("m/{}", write.key)),
            );
            compares.extend(expected_compares(
                &inline_key,
                &manifest_key,
                write.expected,
            ));
            ops.push(match &write.value {
                Some(value) => TxnOp::put(inline_key, value::encode_inline(value), None),
                None => TxnOp::delete(inline_key, None),
            });
            ops.push(TxnOp::delete(manifest_key, None));
        }
        let committed = retry_until(deadline, self.limits.try_for(), || {
            let mut kv = self.kv.clone();
            let txn = Txn::new().when(compares.clone()).and_then(ops.clone());
            async move { kv.txn(txn).await }
        })
        .await;
        match committed {
            Ok(response) if response.succeeded() => {
                let revision = response.header().map_or(0, |h| h.revision());
                // Every second operation deletes a key's manifest.
                let swept = response
                    .op_responses()
                    .iter()
                    .skip(1)
                    .step_by(2)
                    .any(deleted_manifest);
                for (i, write) in batch.iter().enumerate() {
                    let written = Conditional::Written(encode_revision(revision, false));
                    // One sweep, after the last answer's transaction.
                    let swept = swept && i + 1 == batch.len();
                    self.answer_conditional(write, Ok((written, swept))).await;
                }
            }
            Ok(_) => {
                tracing::debug!(backend = %self.name, writes = batch.len(), "a conditional batch found a revision moved: writing each alone");
                for write in &batch {
                    self.commit_alone(write).await;
                }
            }
            Err(why) => {
                for write in &batch {
                    self.answer_conditional(write, Err(why.clone())).await;
                }
            }
        }
    }

    /// Commits one conditional write in a transaction of its own, within a request timeout
    /// from now, and answers it.
    async fn commit_alone(&self, write: &ConditionalWrite) {
        let deadline = Instant::now() + self.limits.request_timeout;
        let outcome = self
            .conditional(
                &write.key,
                write.value.as_deref(),
                write.expected,
                &write.guards,
                deadline,
            )
            .await;
        self.answer_conditional(write, outcome).await;
    }

    /// Answers a conditional write with what its transaction did, after sweeping chunks a
    /// replaced manifest may have left.
    async fn answer_conditional(
        &self,
        write: &ConditionalWrite,
        outcome: Result<(Conditional, bool), String>,
    ) {
        let answer = match outcome {
            Ok((conditional, swept)) => {
                if swept && let Err(e) = self.sweep().await {
                    tracing::warn!(backend = %self.name, error = %e, "could not remove unreferenced chunks");
                }
                Ok(conditional)
            }
            Err(why) => Err(StoreError::Backend {
                backend: self.name.clone(),
                source: format!(
                    "a conditional write of {:?} did not commit within {} ms ({why}); it may or \
                     may not have landed: read the key again; check that a majority of the etcd \
                     members (a quorum) are running and reachable",
                    write.key,
                    self.limits.request_timeout.as_millis()
                )
                .into(),
            }),
        };
        let _ = write.answer.send(answer);
    }

    /// Writes `value` under `key` if its revision is `expected` and `guards` hold: in one
    /// transaction whose compares check the key's form (inline or manifest) is still the one
    /// at `expected` (and a large value's chunks exist, and each guard holds), and whose
    /// else-branch reads both forms, so a refusal says the revision now. A transaction retried after a lost answer may find its
    /// own write: the key then holds exactly the record sent, which counts as written.
    /// Returns what happened, and whether a manifest was replaced or deleted (chunks to sweep).
    async fn conditional(
        &self,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
        guards: &[Guard],
        deadline: Instant,
    ) -> Result<(Conditional, bool), String> {
        let (inline_key, manifest_key) =
            (self.key(&format!("v/{key}")), self.key(&format!("m/{key}")));
        let mut compares = expected_compares(&inline_key, &manifest_key, expected).to_vec();
        for guard in guards {
            compares.extend(self.guard_compares(guard)?);
        }
        let reads = vec![
            TxnOp::get(inline_key.as_str(), None),
            TxnOp::get(manifest_key.as_str(), None),
        ];
        let large = value.is_some_and(|v| v.len() > self.limits.chunk_bytes);
        let (record, ops, chunks) = if let Some(value) = value.filter(|_| large) {
            let manifest = Manifest::of(value, self.limits.chunk_bytes);
            let chunks: Vec<(String, Vec<u8>)> = manifest
                .chunks
                .iter()
                .zip(value.chunks(self.limits.chunk_bytes))
                .map(|((hash, _), bytes)| (self.chunk_key(hash), bytes.to_vec()))
                .collect();
            let distinct: HashSet<&String> = chunks.iter().map(|(k, _)| k).collect();
            compares.extend(
                distinct
                    .iter()
                    .map(|k| Compare::version(k.as_str(), CompareOp::Greater, 0)),
            );
            let record = manifest.encode();
            let ops = vec![
                TxnOp::put(manifest_key.as_str(), record.clone(), None),
                TxnOp::delete(inline_key.as_str(), None),
            ];
            (Some(record), ops, chunks)
        } else if let Some(value) = value {
            let record = value::encode_inline(value);
            let ops = vec![
                TxnOp::put(inline_key.as_str(), record.clone(), None),
                TxnOp::delete(manifest_key.as_str(), None),
            ];
            (Some(record), ops, Vec::new())
        } else {
            let ops = vec![
                TxnOp::delete(inline_key.as_str(), None),
                TxnOp::delete(manifest_key.as_str(), None),
            ];
            (None, ops, Vec::new())
        };
        for _ in 0..MANIFEST_TRIES {
            // One after the other: a conditional write of a large value is rare (a group
            // record over a chunk), and this runs spawned, where the parallel stream's
            // borrowed futures are not `Send`.
            for (chunk_key, bytes) in &chunks {
                retry_until(deadline, self.limits.try_for(), || {
                    let mut kv = self.kv.clone();
                    let (chunk_key, bytes) = (chunk_key.clone(), bytes.clone());
                    async move { kv.put(chunk_key, bytes, None).await.map(drop) }
                })
                .await?;
            }
            let response = retry_until(deadline, self.limits.try_for(), || {
                let mut kv = self.kv.clone();
                let txn = Txn::new()
                    .when(compares.clone())
                    .and_then(ops.clone())
                    .or_else(reads.clone());
                async move { kv.txn(txn).await }
            })
            .await?;
            let revision = response.header().map_or(0, |h| h.revision());
            if response.succeeded() {
                // A manifest replaced (by a manifest, or deleted by the second operation for an
                // inline value) may leave chunks no manifest references.
                let swept = large || response.op_responses().get(1).is_some_and(deleted_manifest);
                return Ok((
                    Conditional::Written(encode_revision(revision, large)),
                    swept,
                ));
            }
            let mut found = Vec::new();
            for op in response.op_responses() {
                if let TxnOpResponse::Get(get) = op {
                    found.extend(
                        get.kvs()
                            .iter()
                            .map(|kv| (kv.key().to_vec(), kv.value().to_vec(), kv.mod_revision())),
                    );
                }
            }
            let now = match found.first() {
                None => Revision::ABSENT,
                Some((k, _, mod_revision)) => {
                    encode_revision(*mod_revision, k.as_slice() == manifest_key.as_bytes())
                }
            };
            let landed = match &record {
                Some(record) => found.len() == 1 && found[0].1 == *record,
                None => found.is_empty(),
            };
            if landed {
                // A try whose answer was lost committed it: the key holds what was sent (or,
                // for a delete, nothing).
                return Ok((Conditional::Written(now), false));
            }
            // A guard that failed leaves the key as expected: nothing to write again.
            if now != expected || !guards.is_empty() {
                return Ok((Conditional::Conflict(now), false));
            }
            tracing::debug!(backend = %self.name, key, "a chunk vanished before its manifest: writing them again");
        }
        Err(format!(
            "the chunks of {key:?} were removed {MANIFEST_TRIES} times before its manifest was \
             written"
        ))
    }

    /// The compares that hold while `guard` does, over both forms of the keys it names.
    fn guard_compares(&self, guard: &Guard) -> Result<[Compare; 2], String> {
        match guard {
            Guard::Key(key, revision) => Ok(expected_compares(
                &self.key(&format!("v/{key}")),
                &self.key(&format!("m/{key}")),
                *revision,
            )),
            Guard::Unchanged { prefix, since } => {
                // Every key in the range written at or before `since` (an empty range holds).
                let unchanged = |form: &str| {
                    let start = self.key(&format!("{form}{prefix}"));
                    let end = prefix_end(start.as_bytes());
                    Compare::mod_revision(start, CompareOp::Less, etcd_revision(*since) + 1)
                        .with_range(end)
                };
                Ok([unchanged("v/"), unchanged("m/")])
            }
            other => Err(format!("a guard this store does not know: {other:?}")),
        }
    }

    /// [`read`](Self::read), on the client thread; a record that cannot be read fails the
    /// read or is listed, as `damaged` says.
    pub(crate) async fn load(
        &self,
        selection: &Selection,
        damaged: Damaged,
    ) -> Result<Snapshot, StoreError> {
        let deadline = Instant::now() + self.limits.request_timeout;
        let fail = |why: String| StoreError::Backend {
            backend: self.name.clone(),
            source: why.into(),
        };
        let unavailable = |why: String| {
            fail(format!(
                "the cluster did not answer a read within {} ms ({why}); check that a majority \
                 of the etcd members (a quorum) are running and reachable",
                self.limits.request_timeout.as_millis()
            ))
        };
        let (inline_prefix, manifest_prefix) = (self.key("v/"), self.key("m/"));
        // The keys beginning with a prefix, or the range holding exactly one key (it, then a
        // zero byte).
        let range = |form: &str| match selection {
            Selection::Prefix(prefix) => {
                let start = format!("{form}{prefix}");
                let end = prefix_end(start.as_bytes());
                (start, end)
            }
            Selection::Key(key) => {
                let start = format!("{form}{key}");
                let mut end = start.clone().into_bytes();
                end.push(0);
                (start, end)
            }
        };
        let (start, end) = range(&inline_prefix);
        let (inline, revision) = self
            .scan_range(&start, end, None, VALUE_PAGE, false, deadline)
            .await
            .map_err(unavailable)?;
        let (start, end) = range(&manifest_prefix);
        let (manifests, _) = self
            .scan_range(&start, end, Some(revision), KEY_PAGE, false, deadline)
            .await
            .map_err(unavailable)?;
        let corrupt = |etcd_key: &str, why: String| {
            fail(format!(
                "{etcd_key:?} is corrupt: {why}; restore it from a backup, or delete it (with \
                 its value, the state it holds) from etcd"
            ))
        };
        let mut entries = BTreeMap::new();
        let mut listed = BTreeMap::new();
        // A damaged record: an error, or listed (the key's value, if read, dropped with it).
        let mut refuse = |key: String, etcd_key: &str, why: String| match damaged {
            Damaged::Refuse => Err(corrupt(etcd_key, why)),
            Damaged::List => {
                listed.insert(key, format!("{etcd_key:?} is corrupt: {why}"));
                Ok(())
            }
        };
        for (etcd_key, record, mod_revision) in inline {
            let key = etcd_key[inline_prefix.len()..].to_owned();
            match value::decode_inline(&record) {
                Ok(value) => {
                    entries.insert(key, (value.to_vec(), encode_revision(mod_revision, false)));
                }
                Err(why) => refuse(key, &etcd_key, why)?,
            }
        }
        for (etcd_key, record, mod_revision) in manifests {
            let key = etcd_key[manifest_prefix.len()..].to_owned();
            if entries.remove(&key).is_some() {
                refuse(key, &etcd_key, "the key also has an inline value".into())?;
                continue;
            }
            match self.assemble(&record, revision, deadline).await {
                Ok(value) => {
                    entries.insert(key, (value, encode_revision(mod_revision, true)));
                }
                Err(ValueError::Corrupt(why)) => refuse(key, &etcd_key, why)?,
                Err(ValueError::Unavailable(why)) => return Err(unavailable(why)),
            }
        }
        Ok(Snapshot {
            entries: entries
                .into_iter()
                .map(|(key, (value, revision))| (key, value, revision))
                .collect(),
            at: store_revision(revision),
            damaged: listed.into_iter().collect(),
        })
    }

    /// The value a manifest `record` describes, from its chunks as they were at the store's
    /// `revision`, each checked against its address and length.
    pub(crate) async fn assemble(
        &self,
        record: &[u8],
        revision: i64,
        deadline: Instant,
    ) -> Result<Vec<u8>, ValueError> {
        let manifest =
            Manifest::decode(record, self.limits.max_value_bytes).map_err(ValueError::Corrupt)?;
        let mut value = Vec::with_capacity(manifest.total as usize);
        for (i, (hash, len)) in manifest.chunks.iter().enumerate() {
            let chunk_key = self.chunk_key(hash);
            let mut response = retry_until(deadline, self.limits.try_for(), || {
                let (mut kv, chunk_key) = (self.kv.clone(), chunk_key.clone());
                async move {
                    kv.get(chunk_key, Some(GetOptions::new().with_revision(revision)))
                        .await
                }
            })
            .await
            .map_err(ValueError::Unavailable)?;
            let Some(chunk) = response.take_kvs().pop() else {
                return Err(ValueError::Corrupt(format!(
                    "its chunk {i} ({chunk_key:?}) is missing"
                )));
            };
            let bytes = chunk.value();
            if bytes.len() != *len as usize || value::hash(bytes) != *hash {
                return Err(ValueError::Corrupt(format!(
                    "its chunk {i} ({chunk_key:?}, {} bytes) does not match its address and \
                     length ({len} bytes)",
                    bytes.len()
                )));
            }
            value.extend_from_slice(bytes);
        }
        Ok(value)
    }
}

/// What a [`Shared::load`] does with a record that cannot be read (damaged, or a chunk of
/// its value missing or altered).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Damaged {
    /// Fails the read naming it: a reader that must see every key (a replica's start) does
    /// not carry on as if the key were absent.
    Refuse,
    /// Lists it in the snapshot's `damaged` and reads the rest: a watch's reset, which one
    /// record must not stop (the watch's changes skip such a record the same way).
    List,
}

/// Which keys a [`Shared::read`] reads.
pub(crate) enum Selection {
    /// Every key beginning with this (every key: the empty prefix).
    Prefix(String),
    /// Exactly this key.
    Key(String),
}

/// Why a stored value could not be read.
pub(crate) enum ValueError {
    /// Its records are damaged or incomplete: reading again will not help.
    Corrupt(String),
    /// The cluster did not answer in time.
    Unavailable(String),
}

/// The [`Revision`] of the store as a whole at etcd's `revision`: at or above every key's
/// revision written up to it (whatever its form), below every key's written after it.
pub(crate) fn store_revision(revision: i64) -> Revision {
    encode_revision(revision, true)
}

/// The etcd revision a [`store_revision`] stands for.
pub(crate) fn etcd_revision(store: Revision) -> i64 {
    (store.raw() >> 1) as i64
}

/// A key's [`Revision`]: its record's `mod_revision`, and which form the record is (the
/// low bit: set for a manifest), so a conditional write can check the form too.
pub(crate) fn encode_revision(mod_revision: i64, manifest: bool) -> Revision {
    Revision::new(((mod_revision.max(0) as u64) << 1) | u64::from(manifest))
}

/// The compares of a conditional write of the key whose forms are `inline_key` and
/// `manifest_key`: its form is still the one at `expected` (both absent for
/// [`Revision::ABSENT`]), and the other form absent.
fn expected_compares(inline_key: &str, manifest_key: &str, expected: Revision) -> [Compare; 2] {
    match decode_revision(expected) {
        None => [
            Compare::version(inline_key, CompareOp::Equal, 0),
            Compare::version(manifest_key, CompareOp::Equal, 0),
        ],
        Some((revision, manifest)) => {
            let (present, other) = if manifest {
                (manifest_key, inline_key)
            } else {
                (inline_key, manifest_key)
            };
            [
                Compare::mod_revision(present, CompareOp::Equal, revision),
                Compare::version(other, CompareOp::Equal, 0),
            ]
        }
    }
}

/// What [`encode_revision`] made: `None` for [`Revision::ABSENT`].
fn decode_revision(revision: Revision) -> Option<(i64, bool)> {
    let raw = revision.raw();
    (raw != 0).then_some(((raw >> 1) as i64, raw & 1 == 1))
}

/// Whether a transaction's response is a delete that removed a manifest.
fn deleted_manifest(response: &TxnOpResponse) -> bool {
    matches!(response, TxnOpResponse::Delete(d) if d.deleted() > 0)
}

/// The end of the range of keys starting with `prefix`: `prefix` with its last byte below
/// 0xff incremented (etcd's convention).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff: to the end of the keyspace.
    vec![0]
}

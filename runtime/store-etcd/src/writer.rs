//! The client thread: a current-thread tokio runtime holding the etcd client, running the
//! writer task (queue → transactions, retries, the chunk sweep) and the reads that callers
//! spawn on it.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KvClient, PutOptions, Txn, TxnOp,
    TxnOpResponse,
};
use futures_util::{StreamExt as _, TryStreamExt as _};
use tokio::sync::Notify;
use tokio::time::Instant;

use assignor_coordinator::store::StoreError;

use crate::value::{self, Manifest};
use crate::{Done, EtcdLimits, Queue};

/// Keys per page when reading inline values (each at most a chunk, 1 MiB): bounds one
/// response.
const VALUE_PAGE: i64 = 16;
/// Keys per page when reading manifests or chunk keys (small).
const KEY_PAGE: i64 = 1024;
/// The largest response the client decodes: a page of inline values with room to spare.
const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// What one write adds to a transaction besides its key and value: two operations' framing,
/// the inline record's tag and hash (generous: protobuf's own framing is a few bytes).
const TXN_OP_OVERHEAD: usize = 64;
/// Tries of a large value's manifest whose chunks a concurrent sweep removed meanwhile.
const MANIFEST_TRIES: usize = 3;
/// Pause between two tries of a failed request within its deadline.
const RETRY_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two tries of a transaction once the cluster is deemed down.
const MAX_OUTAGE_PAUSE: Duration = Duration::from_secs(1);

/// What the store's handle shares with its client thread.
pub(crate) struct Shared {
    /// `etcd` and the endpoints: the backend named in every error.
    pub(crate) name: String,
    pub(crate) limits: EtcdLimits,
    prefix: String,
    pub(crate) queue: Mutex<Queue>,
    /// Signalled when a transaction has committed or failed: room in the queue, and answers
    /// for `sync` callers.
    pub(crate) committed: Condvar,
    /// Signalled when a write is queued or the store is dropped.
    pub(crate) work: Notify,
    /// The client thread's runtime, where reads are spawned.
    runtime: tokio::runtime::Handle,
    pub(crate) kv: KvClient,
    /// Test hook: when set, the writer reports that a large value's chunks are written, then
    /// waits to be released before writing its manifest (a writer stopped between the two).
    #[cfg(test)]
    pub(crate) hold: Mutex<Option<(mpsc::Sender<()>, tokio::sync::oneshot::Receiver<()>)>>,
}

/// A run of writes committed in one transaction: inline puts and deletes, or one large put.
enum Segment {
    /// The last write of each key among the run's (their transaction applies them at once,
    /// and etcd refuses a transaction naming one key twice), and how many writes the run took.
    Small(BTreeMap<String, Option<Vec<u8>>>, usize),
    /// A value over the chunk size.
    Large(String, Vec<u8>),
}

impl Segment {
    fn writes(&self) -> usize {
        match self {
            Segment::Small(_, n) => *n,
            Segment::Large(..) => 1,
        }
    }
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
    let shared = Arc::new(Shared {
        name,
        limits,
        prefix,
        queue: Mutex::default(),
        committed: Condvar::new(),
        work: Notify::new(),
        runtime,
        kv,
        #[cfg(test)]
        hold: Mutex::new(None),
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
        let next = {
            let mut queue = shared.queue();
            if queue.writes.is_empty() {
                if queue.stop {
                    return;
                }
                None
            } else {
                Some(shared.take_segment(&mut queue))
            }
        };
        let Some((segment, bytes)) = next else {
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
                if shared.queue().stop {
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
        shared.committed_segment(segment.writes(), bytes);
        if swept && let Err(e) = shared.sweep().await {
            tracing::warn!(backend = %shared.name, error = %e, "could not remove unreferenced chunks");
        }
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
    /// until committed).
    fn take_segment(&self, queue: &mut Queue) -> (Segment, usize) {
        let limits = &self.limits;
        let first = queue.writes.front().expect("a write is queued");
        if first
            .value
            .as_ref()
            .is_some_and(|v| v.len() > limits.chunk_bytes)
        {
            let write = queue.writes.pop_front().expect("a write is queued");
            let bytes = write.bytes();
            let value = write.value.expect("a put");
            return (Segment::Large(write.key, value), bytes);
        }
        let (mut last, mut taken, mut bytes, mut request) = (BTreeMap::new(), 0, 0, 0);
        while let Some(write) = queue.writes.front() {
            let large = write
                .value
                .as_ref()
                .is_some_and(|v| v.len() > limits.chunk_bytes);
            // Each key costs two operations (its form is written and its other form deleted),
            // so it is sent twice, with the prefix, the hash and some framing.
            let sent = write.value.as_ref().map_or(0, Vec::len)
                + 2 * (self.prefix.len() + write.key.len())
                + TXN_OP_OVERHEAD;
            let fits = (last.len() + 1) * 2 <= limits.max_txn_ops
                && request + sent <= limits.max_txn_bytes;
            if large || (taken > 0 && !fits) {
                break;
            }
            let write = queue.writes.pop_front().expect("a write is queued");
            bytes += write.bytes();
            request += sent;
            last.insert(write.key, write.value);
            taken += 1;
        }
        (Segment::Small(last, taken), bytes)
    }

    /// Commits `segment`, retrying failed requests until `deadline`; `Ok(true)` when it
    /// replaced or deleted a manifest, so chunks may have lost their last reference.
    async fn commit(&self, segment: &Segment, deadline: Instant) -> Result<bool, String> {
        match segment {
            Segment::Small(writes, _) => {
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
        let mut queue = self.queue();
        queue.outage = Some(why.to_owned());
        queue.failed = queue.written;
        let waiters = std::mem::take(&mut queue.waiters);
        drop(queue);
        self.committed.notify_all();
        for (_, done) in waiters {
            done(Err(self.unavailable(why)));
        }
    }

    /// Records a committed transaction of `writes` writes and `bytes` bytes and answers the
    /// waiters it covers.
    fn committed_segment(&self, writes: usize, bytes: usize) {
        let mut queue = self.queue();
        queue.outage = None;
        queue.durable += writes as u64;
        queue.bytes -= bytes;
        let durable = queue.durable;
        let (ready, waiting): (Vec<(u64, Done)>, _) = std::mem::take(&mut queue.waiters)
            .into_iter()
            .partition(|(t, _)| *t <= durable);
        queue.waiters = waiting;
        drop(queue);
        self.committed.notify_all();
        for (_, done) in ready {
            done(Ok(()));
        }
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
        for (key, record) in &manifests {
            let manifest = Manifest::decode(record, self.limits.max_value_bytes)
                .map_err(|e| format!("manifest {key:?}: {e}; nothing removed"))?;
            referenced.extend(manifest.chunks.iter().map(|(h, _)| self.chunk_key(h)));
        }
        let (chunks, _) = self
            .scan(&self.key("c/"), Some(revision), KEY_PAGE, true, deadline)
            .await?;
        let orphans: Vec<String> = chunks
            .into_iter()
            .map(|(k, _)| k)
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

    /// Every key (as a string) and value under `prefix` at `revision` (the latest when
    /// `None`), in pages of `page` keys; and the revision read.
    async fn scan(
        &self,
        prefix: &str,
        revision: Option<i64>,
        page: i64,
        keys_only: bool,
        deadline: Instant,
    ) -> Result<(Vec<(String, Vec<u8>)>, i64), String> {
        let end = prefix_end(prefix.as_bytes());
        let mut start = prefix.as_bytes().to_vec();
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
                let (key, value) = kv.into_key_value();
                let key = String::from_utf8(key).map_err(|e| {
                    format!("a key under {prefix:?} is not UTF-8: {:?}", e.as_bytes())
                })?;
                out.push((key, value));
            }
            if !more {
                break;
            }
        }
        Ok((out, revision.unwrap_or(0)))
    }

    /// Every key and value, checked, at one revision: the inline values and the manifests
    /// with their chunks. Runs on the client thread; the caller waits for its answer.
    pub(crate) fn read_all(self: &Arc<Self>) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let shared = Arc::clone(self);
        self.runtime.spawn(async move {
            let _ = tx.send(shared.load().await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(self.refused("the store closed during the read".into())))
    }

    async fn load(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
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
        let (inline, revision) = self
            .scan(&inline_prefix, None, VALUE_PAGE, false, deadline)
            .await
            .map_err(unavailable)?;
        let (manifests, _) = self
            .scan(&manifest_prefix, Some(revision), KEY_PAGE, false, deadline)
            .await
            .map_err(unavailable)?;
        let corrupt = |etcd_key: &str, why: String| {
            fail(format!(
                "{etcd_key:?} is corrupt: {why}; restore it from a backup, or delete it (with \
                 its value, the state it holds) from etcd"
            ))
        };
        let mut entries = BTreeMap::new();
        for (etcd_key, record) in inline {
            let key = etcd_key[inline_prefix.len()..].to_owned();
            let value = value::decode_inline(&record).map_err(|e| corrupt(&etcd_key, e))?;
            entries.insert(key, value.to_vec());
        }
        for (etcd_key, record) in manifests {
            let key = etcd_key[manifest_prefix.len()..].to_owned();
            if entries.contains_key(&key) {
                return Err(corrupt(
                    &etcd_key,
                    "the key also has an inline value".into(),
                ));
            }
            let manifest = Manifest::decode(&record, self.limits.max_value_bytes)
                .map_err(|e| corrupt(&etcd_key, e))?;
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
                .map_err(unavailable)?;
                let Some(chunk) = response.take_kvs().pop() else {
                    return Err(corrupt(
                        &etcd_key,
                        format!("its chunk {i} ({chunk_key:?}) is missing"),
                    ));
                };
                let bytes = chunk.value();
                if bytes.len() != *len as usize || value::hash(bytes) != *hash {
                    return Err(corrupt(
                        &etcd_key,
                        format!(
                            "its chunk {i} ({chunk_key:?}, {} bytes) does not match its address \
                             and length ({len} bytes)",
                            bytes.len()
                        ),
                    ));
                }
                value.extend_from_slice(bytes);
            }
            entries.insert(key, value);
        }
        Ok(entries.into_iter().collect())
    }
}

/// Whether a transaction's response is a delete that removed a manifest.
fn deleted_manifest(response: &TxnOpResponse) -> bool {
    matches!(response, TxnOpResponse::Delete(d) if d.deleted() > 0)
}

/// The end of the range of keys starting with `prefix`: `prefix` with its last byte below
/// 0xff incremented (etcd's convention).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
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

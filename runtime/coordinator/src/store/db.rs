//! [`RedbStore`]: the embedded store on [redb], with group commit by one writer thread.
//!
//! Its design, the figures behind the choice of redb and its layout on disk are documented on
//! [`RedbStore`], where rustdoc shows them: this module is private.

use std::fmt;
use std::fs;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};

use redb::{Database, Durability, ReadableDatabase as _, ReadableTable as _, TableDefinition};

use super::queue::{Done, GroupCommitQueue, OnFailure, Refusal, Write};
use super::{Store, StoreError, SyncToken, io_err, sync_dir};

/// The one table: every key and its value.
const ENTRIES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("entries");

/// The most a key and its value may hold together: redb stores a value of at most 3 GiB.
pub const MAX_ENTRY_BYTES: usize = 3 << 30;

/// How much a [`RedbStore`] may hold in memory and write at once. Every write waits in the
/// writer thread's queue until a batch takes it, so these bound the memory of writes not yet
/// committed and the size of one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedbLimits {
    max_queued_bytes: usize,
    max_batch_bytes: usize,
    max_batch_writes: usize,
    cache_bytes: usize,
}

impl Default for RedbLimits {
    fn default() -> Self {
        Self {
            max_queued_bytes: 64 << 20,
            max_batch_bytes: 16 << 20,
            max_batch_writes: 4096,
            cache_bytes: 64 << 20,
        }
    }
}

impl RedbLimits {
    /// The defaults: 64 MiB queued, batches of at most 16 MiB and 4096 writes, a 64 MiB cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The most bytes (keys and values) of writes waiting for the writer thread; default
    /// 64 MiB. A write that would pass it waits until a commit has made room, so writers that
    /// outrun the disk are slowed to its pace instead of filling memory. A single write larger
    /// than this is taken alone, once the queue is empty.
    pub fn max_queued_bytes(mut self, bytes: usize) -> Self {
        self.max_queued_bytes = bytes;
        self
    }

    /// The most bytes one transaction writes; default 16 MiB. A larger write is a batch of its
    /// own.
    pub fn max_batch_bytes(mut self, bytes: usize) -> Self {
        self.max_batch_bytes = bytes;
        self
    }

    /// The most writes (puts and deletes) one transaction holds; default 4096, at least 1.
    pub fn max_batch_writes(mut self, writes: usize) -> Self {
        self.max_batch_writes = writes.max(1);
        self
    }

    /// The memory redb may use to cache the file's pages; default 64 MiB.
    pub fn cache_bytes(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }
}

/// The embedded store: one [redb] database file, written by one thread that commits every
/// write waiting for it in one durable transaction, so concurrent writers share one `fsync`.
///
/// # Writes and group commit
///
/// [`put_unsynced`](Store::put_unsynced) and the writes inside [`put`](Store::put) and
/// [`delete`](Store::delete) only queue the change, in memory, and return its token: they take
/// microseconds (unless the queue is full, see [`RedbLimits::max_queued_bytes`]), which is what
/// lets the service call them on its async threads under a lock every tenant's commits share.
/// The writer thread takes everything queued (up to [`RedbLimits::max_batch_bytes`] and
/// [`RedbLimits::max_batch_writes`]) into one write transaction, commits it with
/// [`Durability::Immediate`] (redb's two `fsync`s), then answers every [`sync`](Store::sync)
/// and [`sync_then`](Store::sync_then) waiting for a write of that batch; the writes queued
/// meanwhile make the next batch. So a burst of N concurrent commits costs a few transactions,
/// not N. Because writes reach the database only through that thread, in queue order, batches
/// commit in the order the writes were made, and a crash keeps a prefix of them: never a write
/// without every earlier one.
///
/// What holds after a crash (of the process or the machine): every write whose `sync` (or
/// `put`, `delete`) returned `Ok`, and possibly later ones, whole, in order. A write still in
/// the queue is lost with the process: that is the promise [`Store::put_unsynced`] makes, and
/// callers acknowledge a change only once its `sync` has returned. [`load_all`](Store::load_all)
/// first waits for everything queued before it, so it sees every earlier write.
///
/// Once a commit fails the store's durable state is unknown (a failed `fsync` may have dropped
/// pages that a retry would report written): the writes of that batch and every write queued
/// after it fail, and so does every later call, until the process restarts and reopens the
/// file. Dropping the store commits what is queued, answers every waiter, stops the writer
/// thread and closes the database.
///
/// # Why redb
///
/// One pure-Rust crate with no C, a copy-on-write B-tree whose commit is atomic and whose pages
/// are checksummed, a file lock of its own, and recovery after a crash by itself. It replaced a
/// storage engine written here (an append-only checksummed log with preallocation, torn-tail
/// recovery, background compaction and group commit, 2,489 lines) that did the same work.
/// Measured before choosing, on a 2-core machine: durable commits per second with 1, 16 and 64
/// writers, each putting 8 KiB under its own key and waiting for durability, each running its
/// own transaction: the log 3,703–5,939 / 23,176–24,610 / 34,726–37,668; fjall 3,630 / 5,949 /
/// 6,182; SQLite in WAL mode 4,091 / 5,525–6,822 / 8,453; redb 4,624 / 5,069 / 5,000. Each
/// engine's own transactions serialise on one writer, so their throughput stops near one commit
/// per `fsync`; committing everything waiting in one transaction, as this store does, puts many
/// writes in each. This store's own figures are in the README's storage paragraph.
///
/// # On disk
///
/// One file (the service's `<data>/store.redb`), redb's format: its header with two commit
/// slots, then the pages of its B-trees. The one table, `entries`, maps each key (`&str`) to
/// its value (`&[u8]`). redb takes an exclusive lock on the file while it is open, so two
/// processes never write it; a second open fails with [`StoreError::Locked`].
pub struct RedbStore {
    shared: Arc<Shared>,
    /// The writer thread, joined when the store is dropped.
    writer: Option<JoinHandle<()>>,
}

/// What a [`RedbStore`] shares with its writer thread.
struct Shared {
    /// The database file, for messages.
    path: PathBuf,
    db: Database,
    limits: RedbLimits,
    /// The writes waiting for the writer thread; a failed commit fails it for good.
    queue: GroupCommitQueue,
    /// Commits made, so tests can see that writers share them.
    #[cfg(test)]
    commits: AtomicU64,
    /// Makes the next commit fail, so tests can see the store refuse writes afterwards.
    #[cfg(test)]
    fail_next_commit: AtomicBool,
}

impl RedbStore {
    /// Opens (creating it and its directory if missing) the database file at `path` with the
    /// default [`RedbLimits`]. See [`open_with`](Self::open_with).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, RedbLimits::default())
    }

    /// Opens (creating it and its directory if missing) the database file at `path`, checks
    /// every page's checksum, and starts the writer thread.
    ///
    /// Fails with [`StoreError::Locked`] if another process (or another open store in this
    /// one) has the file open, and with [`StoreError::Corrupt`] if the file is damaged.
    pub fn open_with(path: impl AsRef<Path>, limits: RedbLimits) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.is_dir()
        {
            fs::create_dir_all(dir).map_err(io_err("create", dir))?;
            // The directory's entry must be durable too, or a crash could lose it with the
            // database in it.
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        let db = Database::builder()
            .set_cache_size(limits.cache_bytes)
            // A file altered outside redb fails to open rather than panicking later; the store
            // is small (its tenants' limits bound it), so reading it whole on open is cheap.
            .set_check_integrity_on_open(true)
            .create(&path)
            .map_err(redb_error("open", &path))?;
        let refusal_path = path.clone();
        let queue = GroupCommitQueue::new(
            limits.max_queued_bytes,
            OnFailure::FailForGood,
            move |refusal| refusal_error(&refusal_path, refusal),
        );
        let shared = Arc::new(Shared {
            path: path.clone(),
            db,
            limits,
            queue,
            #[cfg(test)]
            commits: AtomicU64::new(0),
            #[cfg(test)]
            fail_next_commit: AtomicBool::new(false),
        });
        // Create the table, so `load_all` on a new store finds it.
        shared.commit(Vec::new())?;
        let writer = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("store-writer".to_owned())
                .spawn(move || shared.run_writer())
                .map_err(io_err("start the writer thread of", &path))?
        };
        tracing::info!(path = %path.display(), "opened the store's database");
        Ok(Self {
            shared,
            writer: Some(writer),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues `write` for the writer thread and returns its token, after waiting for room in
    /// the queue.
    fn enqueue(&self, write: Write) -> Result<SyncToken, StoreError> {
        let size = write.bytes();
        if size > MAX_ENTRY_BYTES {
            return Err(StoreError::Io {
                action: "write to",
                path: self.shared.path.clone(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "an entry holds at most {MAX_ENTRY_BYTES} bytes, and key {:?} with its \
                         value is {size} bytes",
                        write.key
                    ),
                ),
            });
        }
        self.shared.queue.enqueue(write)
    }
}

/// The error of a write, sync or read the store refuses.
fn refusal_error(path: &Path, refusal: Refusal<'_>) -> StoreError {
    let why = match refusal {
        Refusal::Failed(what) | Refusal::Unacknowledged(what) | Refusal::Outage(what) => {
            format!(
                "the store refuses writes because a commit failed earlier ({what}): which of \
                 its writes reached the disk is unknown; restart the service to reload its \
                 state from the database"
            )
        }
        _ => "the store is closing".to_owned(),
    };
    StoreError::Io {
        action: "write to",
        path: path.to_path_buf(),
        source: io::Error::other(why),
    }
}

impl Shared {
    /// The writer thread: takes the queued writes in batches, commits each durably, and
    /// reports it to the queue (which answers its waiters), until the store is dropped and
    /// the queue is empty.
    fn run_writer(&self) {
        loop {
            let (mut bytes, mut writes) = (0, 0);
            let taken = self.queue.wait_batch(|write| {
                bytes += write.bytes();
                writes += 1;
                writes <= self.limits.max_batch_writes && bytes <= self.limits.max_batch_bytes
            });
            let Some((batch, receipt)) = taken else {
                return;
            };
            // A panic inside redb must not leave the waiters of this batch waiting forever: it
            // fails the store like a failed commit.
            let committed = panic::catch_unwind(AssertUnwindSafe(|| self.commit(batch)))
                .unwrap_or_else(|_| {
                    Err(io_err("commit to", &self.path)(io::Error::other(
                        "the commit panicked",
                    )))
                });
            match committed {
                Ok(()) => self.queue.committed(receipt),
                Err(e) => {
                    tracing::error!(
                        path = %self.path.display(),
                        error = %e,
                        "a commit failed: the store's durable state is unknown, so it refuses \
                         writes until the service restarts"
                    );
                    self.queue.failed(&e.to_string());
                }
            }
        }
    }

    /// Writes `batch` in one transaction and commits it durably.
    fn commit(&self, batch: Vec<Write>) -> Result<(), StoreError> {
        let path = &self.path;
        let mut txn = self
            .db
            .begin_write()
            .map_err(redb_error("begin a transaction on", path))?;
        txn.set_durability(Durability::Immediate)
            .map_err(redb_error("set the durability of", path))?;
        {
            let mut table = txn
                .open_table(ENTRIES)
                .map_err(redb_error("open the table of", path))?;
            for write in batch {
                match &write.value {
                    Some(value) => table.insert(write.key.as_str(), value.as_slice()).map(drop),
                    None => table.remove(write.key.as_str()).map(drop),
                }
                .map_err(redb_error("write to", path))?;
            }
        }
        #[cfg(test)]
        if self.fail_next_commit.swap(false, Ordering::Relaxed) {
            txn.abort()
                .map_err(redb_error("abort a transaction on", path))?;
            return Err(io_err("commit to", path)(io::Error::other(
                "injected commit failure",
            )));
        }
        txn.commit().map_err(redb_error("commit to", path))?;
        #[cfg(test)]
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A redb error → [`StoreError`] adapter naming the action and the database file.
fn redb_error<E: Into<redb::Error>>(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(E) -> StoreError {
    let path = path.to_path_buf();
    move |e| match e.into() {
        redb::Error::DatabaseAlreadyOpen => StoreError::Locked { path, holder: None },
        redb::Error::Io(source) => StoreError::Io {
            action,
            path,
            source,
        },
        redb::Error::Corrupted(reason) => StoreError::Corrupt { path, reason },
        other => StoreError::Backend {
            backend: format!("redb database {} (cannot {action} it)", path.display()),
            source: Box::new(other),
        },
    }
}

impl Store for RedbStore {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        // Every write made before this call is in a committed batch once this returns.
        self.sync(self.shared.queue.last_written())?;
        let path = &self.shared.path;
        let txn = self
            .shared
            .db
            .begin_read()
            .map_err(redb_error("read", path))?;
        let table = txn.open_table(ENTRIES).map_err(redb_error("read", path))?;
        let mut entries = Vec::new();
        for entry in table.iter().map_err(redb_error("read", path))? {
            let (key, value) = entry.map_err(redb_error("read", path))?;
            entries.push((key.value().to_owned(), value.value().to_vec()));
        }
        Ok(entries)
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
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        self.shared.queue.stop();
        if let Some(writer) = self.writer.take() {
            // A `sync_then` callback may drop the last handle on the writer thread itself, which
            // cannot wait for itself: it exits on its own once the queue is empty.
            if writer.thread().id() != thread::current().id() && writer.join().is_err() {
                tracing::error!(
                    path = %self.shared.path.display(),
                    "the store's writer thread panicked"
                );
            }
        }
    }
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.shared.path)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    fn open(dir: &Path) -> RedbStore {
        RedbStore::open(dir.join("store.redb")).expect("open store")
    }

    fn commits(store: &RedbStore) -> u64 {
        store.shared.commits.load(Ordering::Relaxed)
    }

    fn entry(key: &str, value: &[u8]) -> (String, Vec<u8>) {
        (key.to_owned(), value.to_vec())
    }

    /// A write made with `put_unsynced` is seen by `load_all` at once, in order with the writes
    /// around it, and `sync` on its token returns once it is committed.
    #[test]
    fn unsynced_writes_are_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put_unsynced("a", b"1").unwrap();
        let token = store.put_unsynced("a", b"2").unwrap();
        store.put_unsynced("b", b"3").unwrap();
        assert_eq!(
            store.load_all().unwrap(),
            [entry("a", b"2"), entry("b", b"3")]
        );
        store.sync(token).unwrap();
        store.sync(SyncToken::DURABLE).unwrap();
        drop(store);
        assert_eq!(
            open(dir.path()).load_all().unwrap(),
            [entry("a", b"2"), entry("b", b"3")]
        );
    }

    /// Concurrent durable puts share commits: 64 writers' puts take far fewer transactions
    /// than puts.
    #[test]
    fn concurrent_puts_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let before = commits(&store);
        let writers = 64;
        let rounds = 20;
        let barrier = Barrier::new(writers);
        thread::scope(|s| {
            for w in 0..writers {
                let (store, barrier) = (&store, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for r in 0..rounds {
                        store.put(&format!("w{w}"), &[r; 512]).unwrap();
                    }
                });
            }
        });
        let made = commits(&store) - before;
        let puts = (writers * rounds as usize) as u64;
        assert!(made * 4 <= puts, "{made} commits for {puts} puts");
        let stored = store.load_all().unwrap();
        assert_eq!(stored.len(), writers);
        assert!(stored.iter().all(|(_, v)| *v == [rounds - 1; 512]));
    }

    /// `sync_then` answers from the writer thread once the write is durable, and at once (on
    /// the caller's thread) for a write already durable.
    #[test]
    fn sync_then_answers_from_the_writer_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let token = store.put_unsynced("a", b"1").unwrap();
        let (tx, rx) = mpsc::channel();
        let sent = tx.clone();
        store.sync_then(
            token,
            Box::new(move |result| {
                let _ = sent.send((result, thread::current().id()));
            }),
        );
        let (result, on) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        result.unwrap();
        assert_ne!(on, thread::current().id(), "answered by the writer thread");
        store.sync_then(
            token,
            Box::new(move |result| {
                let _ = tx.send((result, thread::current().id()));
            }),
        );
        let (result, on) = rx.try_recv().expect("answered before sync_then returned");
        result.unwrap();
        assert_eq!(on, thread::current().id());
    }

    /// Dropping the store commits what is queued and answers its waiters first.
    #[test]
    fn drop_commits_the_queue_and_answers_waiters() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let (tx, rx) = mpsc::channel();
        for i in 0..100u32 {
            let token = store
                .put_unsynced(&format!("k{i:03}"), &i.to_le_bytes())
                .unwrap();
            let tx = tx.clone();
            store.sync_then(token, Box::new(move |result| tx.send(result).unwrap()));
        }
        drop(store);
        drop(tx);
        let answers: Vec<_> = rx.iter().collect();
        assert_eq!(answers.len(), 100);
        assert!(answers.iter().all(Result::is_ok), "{answers:?}");
        assert_eq!(open(dir.path()).load_all().unwrap().len(), 100);
    }

    /// A `sync_then` callback that drops the last handle on the store, on the writer thread,
    /// neither deadlocks nor loses the write.
    #[test]
    fn callback_may_drop_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(open(dir.path()));
        let token = store.put_unsynced("a", b"1").unwrap();
        let (tx, rx) = mpsc::channel();
        let held = Arc::clone(&store);
        store.sync_then(
            token,
            Box::new(move |result| {
                drop(held);
                tx.send(result).unwrap();
            }),
        );
        drop(store);
        rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
        // The writer thread closes the database as it exits; the file opens again after that.
        let reopened = loop {
            match RedbStore::open(dir.path().join("store.redb")) {
                Ok(store) => break store,
                Err(StoreError::Locked { .. }) => thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(reopened.load_all().unwrap(), [entry("a", b"1")]);
    }

    /// After a failed commit every write of the batch, every later write and sync, and every
    /// waiter fails, naming the file; a reopen finds what was committed before.
    #[test]
    fn failed_commit_fails_everything_after() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("kept", b"1").unwrap();
        store.shared.fail_next_commit.store(true, Ordering::Relaxed);
        let error = store.put("lost", b"2").expect_err("injected failure");
        assert!(
            error.to_string().contains("injected commit failure"),
            "{error}"
        );
        for error in [
            store.put("later", b"3").expect_err("refused"),
            store.delete("kept").expect_err("refused"),
            store.sync(SyncToken::new(1)).expect_err("refused"),
            store.load_all().expect_err("refused"),
        ] {
            let message = error.to_string();
            assert!(message.contains("refuses writes"), "{message}");
            assert!(message.contains("store.redb"), "{message}");
        }
        let (tx, rx) = mpsc::channel();
        store.sync_then(SyncToken::new(1), Box::new(move |r| tx.send(r).unwrap()));
        rx.try_recv().unwrap().expect_err("refused at once");
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap(), [entry("kept", b"1")]);
    }

    /// The queue's byte bound holds: writers that outrun the disk wait for room, and a write
    /// larger than the bound still goes through alone.
    #[test]
    fn queue_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let limits = RedbLimits::new()
            .max_queued_bytes(4096)
            .max_batch_bytes(2048)
            .max_batch_writes(3);
        let store = RedbStore::open_with(dir.path().join("store.redb"), limits).unwrap();
        let before = commits(&store);
        let mut last = SyncToken::DURABLE;
        for i in 0..40u8 {
            last = store.put_unsynced(&format!("k{i:02}"), &[i; 1000]).unwrap();
            assert!(store.shared.queue.queued_bytes() <= 4096);
        }
        store.sync(last).unwrap();
        // Batches of at most two 1 KB writes.
        assert!(
            commits(&store) - before >= 20,
            "{}",
            commits(&store) - before
        );
        store.put("big", &vec![1; 10_000]).unwrap();
        assert_eq!(store.load_all().unwrap().len(), 41);
    }

    /// An entry over [`MAX_ENTRY_BYTES`] is refused before it is queued, naming its key.
    #[test]
    fn oversized_entry_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let value = vec![0; MAX_ENTRY_BYTES];
        let error = store.put("k", &value).expect_err("too large");
        assert!(error.to_string().contains("\"k\""), "{error}");
        assert_eq!(store.shared.queue.last_written(), SyncToken::DURABLE);
    }

    /// A second open of a database in use fails with `Locked` naming the file, until the first
    /// is dropped.
    #[test]
    fn second_open_is_refused_while_locked() {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path());
        let error = RedbStore::open(dir.path().join("store.redb")).expect_err("locked");
        assert!(matches!(error, StoreError::Locked { .. }), "{error:?}");
        let message = error.to_string();
        assert!(message.contains("store.redb"), "{message}");
        assert!(message.contains("--data-dir"), "{message}");
        drop(first);
        open(dir.path());
    }

    /// A damaged file fails to open with an error naming it, rather than panicking.
    #[test]
    fn damaged_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        for i in 0..200u32 {
            store.put(&format!("k{i}"), &[7; 300]).unwrap();
        }
        drop(store);
        let path = dir.path().join("store.redb");
        let mut bytes = fs::read(&path).unwrap();
        let len = bytes.len();
        for b in &mut bytes[len / 2..len / 2 + 4096] {
            *b ^= 0x5a;
        }
        fs::write(&path, &bytes).unwrap();
        match RedbStore::open(&path).and_then(|s| s.load_all()) {
            Err(e) => assert!(e.to_string().contains("store.redb"), "{e}"),
            Ok(entries) => panic!("a damaged file opened with {} entries", entries.len()),
        }
    }
}

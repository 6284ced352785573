//! Durable named blobs for the group coordinator's state (group configs, target assignments):
//! the [`Store`] trait, so a distributed backend can replace the embedded one; [`RedbStore`],
//! the service's, one [redb](https://www.redb.org) database file with group commit (why redb,
//! and what was measured, is on its page); [`MemoryStore`] for tests and embedders that need no
//! durability; and [`import`], readers of the two formats the service wrote before (a log and a
//! directory of record files), so a data directory from then is imported on its first start;
//! and [`queue`], the group-commit write queue the redb and etcd stores share.
//!
//! The coordinator encodes its values (with postcard) itself; a store only sees bytes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

mod db;
pub mod import;
pub mod queue;
pub use db::{MAX_ENTRY_BYTES, RedbLimits, RedbStore};
pub use queue::GroupCommitQueue;

/// Named blobs that survive restarts and crashes.
///
/// Implementations must make each [`put`](Store::put) and [`delete`](Store::delete) atomic and
/// durable: once the call returns `Ok` the change survives a crash of the process (and, for
/// persistent stores, of the machine); if the process dies during the call, the key afterwards
/// holds either its old value or its new one, complete — never a mix, never nothing when it had
/// something. Calls may come from several threads at once.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Every committed key and its value, sorted by key.
    ///
    /// A damaged entry is an error naming it, never skipped: silently losing a group's target
    /// assignment would look like a successful restart.
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError>;

    /// Stores `value` under `key` (any UTF-8 string), replacing any previous value; durable
    /// when it returns.
    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;

    /// Removes `key`; durable when it returns. Removing a key that is not there is `Ok`.
    fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Stores `value` under `key` like [`put`](Store::put), but may return before the change
    /// is durable: [`sync`](Store::sync) with the returned token waits for that. Group commit
    /// is built on this: callers write in their own order (under their own lock) and wait for
    /// durability after releasing it, so concurrent writers share one flush.
    ///
    /// When it returns `Ok` the change is ordered after every earlier write, `put` and
    /// `delete` of this store, and a later [`load_all`](Store::load_all) sees it. It is durable
    /// only once `sync` returns: until then a crash, of the process or of the machine, may lose
    /// it (the key then holds its old value, never a mix), and then loses every write made after
    /// it too, so a crash always keeps a prefix of the writes in their order. Callers acknowledge
    /// a change only after its `sync`. The default writes durably at once.
    fn put_unsynced(&self, key: &str, value: &[u8]) -> Result<SyncToken, StoreError> {
        self.put(key, value).map(|()| SyncToken::DURABLE)
    }

    /// Blocks until the write behind `token`, and every write before it, is durable.
    /// Concurrent callers share one flush. Once a flush has failed, the store's durable state
    /// is unknown and every later `sync` fails too (retrying `fsync` after an error can report
    /// success for data that was dropped); the process must be restarted to reload it.
    fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        let _ = token;
        Ok(())
    }

    /// Calls `done` once the write behind `token` (and every write before it) is durable, or
    /// with the error if the flush failed, without making the caller wait for a flush: what
    /// [`sync`](Store::sync) does, for async callers, which cannot block a thread per waiter.
    ///
    /// `done` may be called on the caller's thread before this returns, when nothing needs
    /// flushing (or the store has failed); otherwise it is called later on a thread of the
    /// store's, which may answer many waiters in turn, so `done` must be quick and must not
    /// block (sending on a channel is the intended use). It is always called, exactly once.
    ///
    /// The default calls `done` with [`sync`](Store::sync)'s result at once, which suits stores
    /// whose `sync` costs nothing because their writes are durable when made; a store whose
    /// `sync` waits for a flush overrides it.
    fn sync_then(&self, token: SyncToken, done: Box<dyn FnOnce(Result<(), StoreError>) + Send>) {
        done(self.sync(token))
    }

    /// The store's conditional operations, when several processes share it (service replicas
    /// over one etcd cluster); `None`, the default, for a store only this process writes,
    /// where the caller's memory is the truth and writes need no condition.
    fn shared(&self) -> Option<&dyn SharedStore> {
        None
    }
}

/// What a store several processes write at once adds to [`Store`]: each key has a
/// [`Revision`], and a conditional put writes only if the key's revision is still the one the
/// writer last saw, so that two processes changing one key from the same state never
/// overwrite each other: one wins, the other learns it lost and reads the winner's value. A
/// [`watch`](SharedStore::watch) tells a process what the others wrote.
///
/// Every call here is durable when it returns `Ok`, and ordered after every write the same
/// store made before it (the group-commit queue is flushed first).
pub trait SharedStore: Send + Sync {
    /// Every key beginning with `prefix`, with its value and revision, sorted by key, read at
    /// one revision of the store, which the snapshot says (a watch from it misses nothing).
    fn load_prefix(&self, prefix: &str) -> Result<Snapshot, StoreError>;

    /// One key's value and revision; `None` when it is absent.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError>;

    /// Stores `value` under `key` if the key's revision is still `expected`
    /// ([`Revision::ABSENT`]: if it does not exist), durably; else changes nothing and says
    /// the key's revision now.
    fn put_if(
        &self,
        key: &str,
        value: &[u8],
        expected: Revision,
    ) -> Result<Conditional, StoreError>;

    /// Removes `key` if its revision is still `expected`, durably; else changes nothing and
    /// says the key's revision now. A delete conditioned so is fenced: retried after a later
    /// write of the key (by any process), it changes nothing. Written answers
    /// [`Revision::ABSENT`] when the key was already gone, else the delete's revision.
    fn delete_if(&self, key: &str, expected: Revision) -> Result<Conditional, StoreError>;

    /// [`put_if`](Self::put_if) (`value` `Some`) or [`delete_if`](Self::delete_if) (`None`)
    /// whose condition also covers other keys: written only if `key`'s revision is still
    /// `expected` and every one of `guards` holds, all checked and written at once, so that
    /// of two writes of different keys each made from a view of the other's key, one loses.
    /// When any condition fails nothing changes and the answer is
    /// [`Conflict`](Conditional::Conflict) with `key`'s revision now (which is `expected`
    /// when only a guard failed).
    fn write_if_guarded(
        &self,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
        guards: &[Guard],
    ) -> Result<Conditional, StoreError>;

    /// The changes of every key after the store's revision `after` (a [`Snapshot::at`]), by
    /// any process (this one included), in the order they were made. The watch keeps going
    /// until it is dropped or the store closes: when it breaks (a member gone) it resumes
    /// where it was, and when the store no longer holds the history it needs (compacted), it
    /// reads every key again and says so ([`WatchEvent::Reset`]).
    fn watch(&self, after: Revision) -> Result<Box<dyn Watch>, StoreError>;
}

/// A condition on keys other than the one a [`SharedStore::write_if_guarded`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Guard {
    /// The key's revision is still this one ([`Revision::ABSENT`]: it does not exist).
    Key(String, Revision),
    /// No key beginning with `prefix` was created or written after the store's revision
    /// `since` (a [`Snapshot::at`], or a change's revision): every record under it is one
    /// the writer could have seen. A delete is not seen (the key holds nothing any more).
    Unchanged {
        /// The keys' common beginning.
        prefix: String,
        /// The store's revision the writer's view of them is current at.
        since: Revision,
    },
}

/// Keys read at one revision of a [`SharedStore`] (see [`SharedStore::load_prefix`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Each key, its value and revision, sorted by key.
    pub entries: Vec<(String, Vec<u8>, Revision)>,
    /// The store's revision the keys were read at: every write made after the read has a
    /// higher revision.
    pub at: Revision,
    /// Keys that exist but whose records cannot be read (damaged, or a chunk of the value
    /// gone), each with why, sorted by key: listed only by a watch's reset
    /// ([`WatchEvent::Reset`]), which must not stop for one record; a reader that must see
    /// every key ([`SharedStore::load_prefix`]) fails naming the record instead.
    pub damaged: Vec<(String, String)>,
}

/// A [`SharedStore::watch`]: the changes other processes (and this one) make, in order.
pub trait Watch: Send {
    /// The next event, waiting for it; `None` once the store has closed.
    fn next(&mut self) -> Option<WatchEvent>;
}

/// What a [`Watch`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// Keys written or deleted, in the order they were, by one or more transactions.
    Changes(Vec<Change>),
    /// The watch could not resume from where it was (the store compacted that history): every
    /// key as it is now, read at `at`; a key listed in neither `entries` nor `damaged` is
    /// gone (a damaged one exists, but is not to be applied). Later changes follow.
    Reset(Snapshot),
    /// The watch broke (why) and resumed: no change was missed. For logs and metrics.
    Resumed(String),
}

/// One key's change in a [`WatchEvent::Changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The store's key.
    pub key: String,
    /// Its new value, `None` when it was deleted; `Err` says why the record that was written
    /// cannot be read (damaged, or its chunks gone): the change is then not to be applied.
    pub value: Result<Option<Vec<u8>>, String>,
    /// The revision of the change: the key's revision from then on.
    pub revision: Revision,
}

/// A key's version in a [`SharedStore`]: changes with every write of the key by any process,
/// and only grows: of two writes of the store (of any keys), the later has the higher revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision(u64);

impl Revision {
    /// The revision of a key that does not exist.
    pub const ABSENT: Revision = Revision(0);

    /// The revision a store calls `raw` (never 0 for a key that exists).
    pub fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// What the store called it.
    pub fn raw(self) -> u64 {
        self.0
    }
}

/// What a [`SharedStore::put_if`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conditional {
    /// The value is stored, durably; the key's new revision.
    Written(Revision),
    /// Another writer changed the key first: nothing was written; the key's revision now.
    Conflict(Revision),
}

/// The place of a [`Store::put_unsynced`] write in its store's order, to wait for with
/// [`Store::sync`]. Only meaningful to the store that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SyncToken(u64);

impl SyncToken {
    /// The token of a write that was durable when it returned: `sync` has nothing to wait for.
    pub const DURABLE: SyncToken = SyncToken(0);

    /// The token of a store's `sequence`-th write (counting from 1).
    pub fn new(sequence: u64) -> Self {
        Self(sequence)
    }

    /// The sequence number this token stands for (0 for [`SyncToken::DURABLE`]).
    pub fn sequence(self) -> u64 {
        self.0
    }
}

/// Why a store operation failed. Each variant names the directory, file or backend, and the
/// message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another process (or another open store in this one) holds the store's lock.
    #[error(
        "{} is in use by another process{}: its lock is held; stop that process or pick \
         another --data-dir",
        path.display(),
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    Locked {
        /// The locked file or directory.
        path: PathBuf,
        /// The pid recorded by the lock's holder, when it could be read.
        holder: Option<u32>,
    },
    /// A filesystem operation failed.
    #[error(
        "cannot {action} {}: {source}; check that the data directory exists, is writable by \
         this user and its filesystem has space",
        path.display()
    )]
    Io {
        /// What was being done, e.g. `write` or `rename into place`.
        action: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// A record file is damaged: truncated, torn or altered outside the store.
    #[error(
        "{} is corrupt: {reason}; restore it from a backup, or delete it to drop the state it \
         holds",
        path.display()
    )]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A replacement backend failed (for [`Store`] implementations outside this crate).
    #[error("store backend {backend} failed: {source}")]
    Backend {
        /// Which backend or endpoint.
        backend: String,
        /// The backend's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// An [`io::Error`] → [`StoreError::Io`] adapter naming the action and path.
pub fn io_err(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::Io {
        action,
        path,
        source,
    }
}

/// Makes the directory's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

/// A store in memory: nothing survives the process. For tests, and embedders that rebuild
/// their state on start.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        // The map is consistent after every statement, so a panic elsewhere cannot leave it
        // half-updated.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for MemoryStore {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        Ok(self
            .entries()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.entries().insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.entries().remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The provided `sync_then` calls `done` with `sync`'s result before it returns, on the
    /// caller's thread.
    #[test]
    fn default_sync_then_answers_at_once() {
        let store = MemoryStore::new();
        let token = store.put_unsynced("group/a", b"1").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        store.sync_then(
            token,
            Box::new(move |result| {
                let _ = tx.send((result, std::thread::current().id()));
            }),
        );
        let (result, on) = rx.try_recv().expect("answered before sync_then returned");
        result.unwrap();
        assert_eq!(on, std::thread::current().id());
    }
}

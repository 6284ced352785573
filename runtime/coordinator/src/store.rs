//! Durable named blobs for the group coordinator's state (group configs, target assignments):
//! the [`Store`] trait, so a distributed backend can replace the embedded ones; [`LogStore`],
//! the service's, one append-only compacted log with group commit for thousands of durable
//! writes per second (its format is on its page); [`DirStore`], one checksummed file per key
//! in a locked local directory (the service's store before the log, still read to import an
//! old data directory); and [`MemoryStore`] for tests and embedders that need no durability.
//!
//! The coordinator encodes its values (with postcard) itself; a store only sees bytes.
//!
//! # `DirStore` on disk
//!
//! - `LOCK`: held with an exclusive `flock` for as long as the store is open, so two processes
//!   never write one directory. It holds the owner's pid, for the error message only.
//! - One record file per key, named by a deterministic, injective, filesystem-safe encoding of
//!   the key: `k-<escaped key>.rec` while that stays short, else
//!   `h-<SHA-256 of the key, hex>.rec`. The name is only an address: the key itself is inside the
//!   file, and loading checks that the file is at the name its key maps to.
//! - `<record name>.<n>.tmp`: a write in progress. Removed on open; ignored by loads.
//!
//! A record file is, integers little-endian:
//!
//! ```text
//! magic      8 bytes  "ASTORE\0" then the format version, 1
//! key_len    u32
//! value_len  u64
//! key        key_len bytes, UTF-8
//! value      value_len bytes
//! checksum   32 bytes, SHA-256 of everything above
//! ```
//!
//! Its length must be exactly what the header says, so a truncated or torn file is caught by
//! the length check and anything else damaged by the checksum.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use sha2::{Digest, Sha256};

mod log;
pub use log::LogStore;

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
    /// `delete` of this store and survives a crash of the *process*; until `sync` returns, a
    /// crash of the *machine* may lose it (the key then holds its old value, never a mix).
    /// The default writes durably at once.
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
    /// Another process (or another open store in this one) holds the directory's lock.
    #[error(
        "data directory {} is in use by another process{}: its lock {} is held; stop that \
         process or pick another --data-dir",
        dir.display(),
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
        dir.join(LOCK_FILE).display()
    )]
    Locked {
        /// The data directory.
        dir: PathBuf,
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

const LOCK_FILE: &str = "LOCK";
const RECORD_SUFFIX: &str = ".rec";
const TEMP_SUFFIX: &str = ".tmp";
/// `"ASTORE\0"` and the format version. A new version gets a new byte, so an old binary
/// reports a newer file as corrupt instead of misreading it.
const MAGIC: [u8; 8] = *b"ASTORE\0\x01";
const HEADER_LEN: usize = MAGIC.len() + 4 + 8;
const CHECKSUM_LEN: usize = 32;
/// Longest record name that uses the readable escaped form. Filesystems cap a name at 255
/// bytes; this leaves room for the temp suffix (`.<u64>.tmp`, at most 25 bytes).
const MAX_READABLE_NAME: usize = 200;

/// The record file name for `key`.
///
/// The readable form keeps `a-z`, `0-9` and `-` and writes every other byte as `_xx` (lowercase
/// hex), so `group/My.App` is `k-group_2f_4dy_2e_41pp.rec`: no `/`, no `.` or `..`, no NUL,
/// and no upper-case letters, which keeps distinct keys distinct on case-insensitive filesystems.
/// Keys whose escaped form would be too long are named by their SHA-256 instead; the prefixes
/// keep the two forms apart.
fn file_name(key: &str) -> String {
    let mut name = String::with_capacity(2 + key.len() + RECORD_SUFFIX.len());
    name.push_str("k-");
    for &b in key.as_bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' {
            name.push(char::from(b));
        } else {
            let _ = write!(name, "_{b:02x}");
        }
        if name.len() + RECORD_SUFFIX.len() > MAX_READABLE_NAME {
            return format!("h-{:x}{RECORD_SUFFIX}", Sha256::digest(key.as_bytes()));
        }
    }
    name.push_str(RECORD_SUFFIX);
    name
}

fn encode_record(key: &str, value: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(HEADER_LEN + key.len() + value.len() + CHECKSUM_LEN);
    record.extend_from_slice(&MAGIC);
    let key_len = u32::try_from(key.len()).expect("a group key is far below 4 GiB");
    record.extend_from_slice(&key_len.to_le_bytes());
    record.extend_from_slice(&(value.len() as u64).to_le_bytes());
    record.extend_from_slice(key.as_bytes());
    record.extend_from_slice(value);
    let checksum = Sha256::digest(&record);
    record.extend_from_slice(&checksum);
    record
}

/// Parses a record file, or says what is wrong with it.
fn decode_record(mut record: Vec<u8>) -> Result<(String, Vec<u8>), String> {
    if record.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(format!(
            "{} bytes, shorter than any record (truncated)",
            record.len()
        ));
    }
    if record[..MAGIC.len()] != MAGIC {
        return Err(if record[..MAGIC.len() - 1] == MAGIC[..MAGIC.len() - 1] {
            format!(
                "record format version {}, this build reads {}",
                record[MAGIC.len() - 1],
                MAGIC[MAGIC.len() - 1]
            )
        } else {
            "not a store record (bad magic)".to_owned()
        });
    }
    let key_len = u32::from_le_bytes(record[8..12].try_into().expect("4 bytes"));
    let value_len = u64::from_le_bytes(record[12..20].try_into().expect("8 bytes"));
    // Computed in u128 so a garbage header cannot overflow the sum.
    let expected = HEADER_LEN as u128 + u128::from(key_len) + u128::from(value_len) + 32;
    if record.len() as u128 != expected {
        return Err(format!(
            "{} bytes where the header says {expected} (truncated or torn)",
            record.len()
        ));
    }
    let body_len = record.len() - CHECKSUM_LEN;
    if Sha256::digest(&record[..body_len])[..] != record[body_len..] {
        return Err("checksum mismatch".to_owned());
    }
    // Both lengths fit in usize: their sum is the file's length.
    let key_end = HEADER_LEN + key_len as usize;
    record.truncate(body_len);
    let value = record.split_off(key_end);
    record.drain(..HEADER_LEN);
    let key = String::from_utf8(record).map_err(|_| "key is not UTF-8".to_owned())?;
    Ok((key, value))
}

/// The embedded store: one checksummed file per key in a local data directory, written
/// atomically (temp file, `fsync`, rename, directory `fsync`), locked against other processes.
///
/// The format is described in the [module docs](self).
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    /// Held only for its lock, released when the store is dropped (or the process dies, which
    /// is what lets a restarted process reopen the directory after a crash).
    _lock: File,
    /// Makes temp file names unique among concurrent `put`s to one key.
    next_temp: AtomicU64,
}

impl DirStore {
    /// Opens the data directory `dir`, creating it if missing: takes its lock, then removes
    /// temp files left by writes that were interrupted.
    ///
    /// Fails with [`StoreError::Locked`] if another process (or another open `DirStore`) holds
    /// the directory.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let lock = open_locked_dir(&dir)?;
        let store = Self {
            dir,
            _lock: lock,
            next_temp: AtomicU64::new(0),
        };
        store.remove_temp_files()?;
        Ok(store)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Deletes the leftovers of interrupted writes. They are never read: the rename that
    /// would have committed them did not happen, so the key still holds its old value.
    fn remove_temp_files(&self) -> Result<(), StoreError> {
        let mut removed = false;
        for name in self.file_names()? {
            if name.ends_with(TEMP_SUFFIX) {
                let path = self.dir.join(&name);
                fs::remove_file(&path).map_err(io_err("remove leftover temp file", &path))?;
                tracing::info!(path = %path.display(), "removed temp file of an interrupted write");
                removed = true;
            }
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The names of the directory's entries; non-UTF-8 names are not ours and are skipped.
    fn file_names(&self) -> Result<Vec<String>, StoreError> {
        let read_err = io_err("list", &self.dir);
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(read_err)? {
            let entry = entry.map_err(io_err("list", &self.dir))?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }
}

impl Store for DirStore {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let mut entries = Vec::new();
        for name in self.file_names()? {
            if !name.ends_with(RECORD_SUFFIX) {
                // `LOCK`, temp files of concurrent writes, an operator's notes: not records.
                continue;
            }
            let path = self.dir.join(&name);
            let bytes = fs::read(&path).map_err(io_err("read", &path))?;
            let (key, value) = decode_record(bytes).map_err(|reason| StoreError::Corrupt {
                path: path.clone(),
                reason,
            })?;
            // A valid record under another key's name (copied or renamed by hand) would make
            // two files claim one key, or make `put` and `delete` miss it.
            if file_name(&key) != name {
                return Err(StoreError::Corrupt {
                    path,
                    reason: format!("holds key {key:?}, which belongs in {}", file_name(&key)),
                });
            }
            entries.push((key, value));
        }
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(entries)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let name = file_name(key);
        let path = self.dir.join(&name);
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.dir.join(format!("{name}.{n}{TEMP_SUFFIX}"));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map_err(io_err("create", &temp))?;
            file.write_all(&encode_record(key, value))
                .map_err(io_err("write", &temp))?;
            // The data must be on disk before the rename can be: otherwise a power cut could
            // leave the new name pointing at an empty or partial file.
            file.sync_all().map_err(io_err("fsync", &temp))
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        // rename(2) replaces the target atomically: readers and crashes see old or new.
        if let Err(e) = fs::rename(&temp, &path) {
            let _ = fs::remove_file(&temp);
            return Err(io_err("rename into place", &path)(e));
        }
        // The rename is only durable once the directory is.
        sync_dir(&self.dir)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.dir.join(file_name(key));
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("delete", &path)(e)),
        }
    }
}

/// Opens the data directory `dir` for a store, creating it if missing, and takes its lock: the
/// returned `LOCK` file holds an exclusive `flock` until it is dropped (or the process dies, which
/// is what lets a restarted process reopen the directory after a crash).
///
/// Fails with [`StoreError::Locked`] if another process (or another open store in this one)
/// holds the directory.
fn open_locked_dir(dir: &Path) -> Result<File, StoreError> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        // The new directory's entry in its parent must be durable too, or a crash could
        // lose the directory with everything later written into it.
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    let lock_path = dir.join(LOCK_FILE);
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io_err("open lock file", &lock_path))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let holder = lock
                .read_to_string(&mut pid)
                .ok()
                .and_then(|_| pid.trim().parse().ok());
            return Err(StoreError::Locked {
                dir: dir.to_path_buf(),
                holder,
            });
        }
        Err(TryLockError::Error(e)) => return Err(io_err("lock", &lock_path)(e)),
    }
    // Diagnostics only: the pid is not synced and nothing depends on it.
    lock.set_len(0)
        .and_then(|()| lock.write_all(std::process::id().to_string().as_bytes()))
        .map_err(io_err("write lock file", &lock_path))?;
    Ok(lock)
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

    /// What every [`Store`] promises, checked on each implementation by its own tests.
    pub(super) mod contract {
        use std::path::Path;

        use super::super::Store;

        fn entry(key: &str, value: &[u8]) -> (String, Vec<u8>) {
            (key.to_owned(), value.to_vec())
        }

        /// On an empty `store`: puts come back from `load_all` sorted by key (empty values and
        /// non-ASCII keys too), a second put replaces the value, and a delete removes the key,
        /// where deleting a missing key is fine.
        pub(in crate::store) fn put_overwrite_delete(store: &dyn Store) {
            store.put("group/b", b"").unwrap();
            store.put("group/a", b"hello").unwrap();
            store.put("gröup/名前/🦀", b"x").unwrap();
            assert_eq!(
                store.load_all().unwrap(),
                [
                    entry("group/a", b"hello"),
                    entry("group/b", b""),
                    entry("gröup/名前/🦀", b"x")
                ]
            );
            store.put("group/a", b"second, longer").unwrap();
            assert_eq!(
                store.load_all().unwrap()[0],
                entry("group/a", b"second, longer")
            );
            store.delete("group/a").unwrap();
            store.delete("group/a").unwrap();
            store.delete("never existed").unwrap();
            store.delete("gröup/名前/🦀").unwrap();
            assert_eq!(store.load_all().unwrap(), [entry("group/b", b"")]);
            store.delete("group/b").unwrap();
            assert_eq!(store.load_all().unwrap(), []);
        }

        /// `open` creates a missing (nested) directory, and a store it opens again on that
        /// directory sees every put, overwrite and delete the dropped one made.
        pub(in crate::store) fn reopen_sees_everything<S: Store>(open: impl Fn(&Path) -> S) {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().join("data").join("nested");
            let store = open(&dir);
            store.put("group/a", b"1").unwrap();
            store.put("group/b", &vec![7; 100_000]).unwrap();
            store.put("group/a", b"one").unwrap();
            store.put("group/c", b"3").unwrap();
            store.delete("group/c").unwrap();
            let before = store.load_all().unwrap();
            assert_eq!(before.len(), 2);
            drop(store);
            assert_eq!(open(&dir).load_all().unwrap(), before);
        }
    }

    fn open(dir: &Path) -> DirStore {
        DirStore::open(dir).expect("open store")
    }

    /// The one record file in `dir`.
    fn only_record(dir: &Path) -> PathBuf {
        let records: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rec"))
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        records.into_iter().next().unwrap()
    }

    fn corrupt_error(store: &DirStore) -> (PathBuf, String) {
        match store.load_all() {
            Err(e @ StoreError::Corrupt { .. }) => {
                let message = e.to_string();
                let StoreError::Corrupt { path, .. } = e else {
                    unreachable!()
                };
                (path, message)
            }
            other => panic!("expected a corrupt-record error, got {other:?}"),
        }
    }

    /// [`contract`] holds for the directory store, which keeps one file per key.
    #[test]
    fn directory_store_keeps_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        contract::put_overwrite_delete(&store);
        store.put("group/a", b"first").unwrap();
        store.put("group/a", b"second").unwrap();
        only_record(dir.path());
        contract::reopen_sees_everything(open);
    }

    /// Awkward keys all round-trip as distinct keys, each as one file directly inside the
    /// data directory, with a name short enough for any filesystem.
    #[test]
    fn awkward_keys_stay_inside_the_directory() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let store = open(&data);
        let long = "x/".repeat(500);
        let keys = [
            "",
            "/",
            ".",
            "..",
            "../../etc/passwd",
            "group/../../escape",
            "group/a/b",
            "Group/A",
            "group/a",
            "group/_2f",
            "gröup/名前/🦀",
            "LOCK",
            "x.tmp",
            "x.rec",
            "tab\tnewline\n\\back",
            &long,
            &format!("{long}!"),
        ];
        for (i, key) in keys.iter().enumerate() {
            store.put(key, &i.to_le_bytes()).unwrap();
        }
        let mut expected: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.to_string(), i.to_le_bytes().to_vec()))
            .collect();
        expected.sort();
        assert_eq!(store.load_all().unwrap(), expected);

        let root_entries: Vec<_> = fs::read_dir(root.path()).unwrap().collect();
        assert_eq!(
            root_entries.len(),
            1,
            "only the data directory: {root_entries:?}"
        );
        let names: Vec<String> = fs::read_dir(&data)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                assert!(e.file_type().unwrap().is_file(), "{e:?}");
                e.file_name().into_string().unwrap()
            })
            .collect();
        assert_eq!(
            names.len(),
            keys.len() + 1,
            "one file per key and LOCK: {names:?}"
        );
        for name in &names {
            assert!(name.len() <= MAX_READABLE_NAME, "{name}");
            assert!(
                name == LOCK_FILE
                    || name.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b"-_.".contains(&b)),
                "{name}"
            );
        }
        for key in keys {
            store.delete(key).unwrap();
        }
        assert_eq!(store.load_all().unwrap(), []);
    }

    /// Temp files of interrupted writes are removed on open and never read as values.
    #[test]
    fn leftover_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"committed").unwrap();
        drop(store);
        let record = only_record(dir.path());
        let name = record.file_name().unwrap().to_str().unwrap();
        let torn = dir.path().join(format!("{name}.3.tmp"));
        fs::write(&torn, b"ASTORE\0\x01 half a rec").unwrap();

        let store = open(dir.path());
        assert!(!torn.exists(), "leftover temp file removed");
        assert_eq!(
            store.load_all().unwrap(),
            [("group/a".to_owned(), b"committed".to_vec())]
        );
    }

    /// A flipped byte anywhere in a record is reported naming the file.
    #[test]
    fn flipped_byte_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"some value").unwrap();
        let record = only_record(dir.path());
        let clean = fs::read(&record).unwrap();
        for i in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x10;
            fs::write(&record, &bytes).unwrap();
            let (path, message) = corrupt_error(&store);
            assert_eq!(path, record, "byte {i}");
            assert!(message.contains(&record.display().to_string()), "{message}");
        }
        fs::write(&record, &clean).unwrap();
        assert_eq!(store.load_all().unwrap().len(), 1);
    }

    /// A truncated record, at any length, is reported naming the file.
    #[test]
    fn truncated_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"some value").unwrap();
        let record = only_record(dir.path());
        let clean = fs::read(&record).unwrap();
        for len in 0..clean.len() {
            fs::write(&record, &clean[..len]).unwrap();
            let (path, message) = corrupt_error(&store);
            assert_eq!(path, record, "length {len}");
            assert!(message.contains("truncated"), "{message}");
        }
    }

    /// A valid record under another key's file name is reported, not loaded twice.
    #[test]
    fn misplaced_record_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"a").unwrap();
        let record = only_record(dir.path());
        let copy = dir.path().join(file_name("group/b"));
        fs::copy(&record, &copy).unwrap();
        let (path, message) = corrupt_error(&store);
        assert_eq!(path, copy);
        assert!(message.contains("belongs in"), "{message}");
    }

    /// A second open of a directory in use fails with a clear error until the first closes.
    #[test]
    fn second_open_is_refused_while_locked() {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path());
        let error = DirStore::open(dir.path()).expect_err("locked");
        let message = error.to_string();
        let me = std::process::id();
        assert!(
            matches!(error, StoreError::Locked { holder: Some(pid), .. } if pid == me),
            "{error:?}"
        );
        assert!(message.contains("in use by another process"), "{message}");
        assert!(message.contains("--data-dir"), "{message}");
        assert!(
            message.contains(&dir.path().display().to_string()),
            "{message}"
        );
        drop(first);
        open(dir.path());
    }

    /// Distinct keys get distinct file names, even when they differ only in case or in
    /// characters the encoding escapes.
    #[test]
    fn file_names_are_injective() {
        let long = "k".repeat(300);
        let keys = [
            "a",
            "A",
            "_61",
            "a_",
            "a.",
            "a/",
            "a-",
            "",
            &long,
            &format!("{long}k"),
        ];
        let names: std::collections::BTreeSet<_> = keys.iter().map(|k| file_name(k)).collect();
        assert_eq!(names.len(), keys.len(), "{names:?}");
    }

    /// [`contract`] holds for the memory store, but for durability.
    #[test]
    fn memory_store_keeps_the_contract() {
        contract::put_overwrite_delete(&MemoryStore::new());
    }

    /// The provided `sync_then` calls `done` with `sync`'s result before it returns, on the
    /// caller's thread.
    #[test]
    fn default_sync_then_answers_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let stores: [Box<dyn Store>; 2] =
            [Box::new(MemoryStore::new()), Box::new(open(dir.path()))];
        for store in stores {
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
            assert_eq!(on, std::thread::current().id(), "{store:?}");
        }
    }
}

//! [`LogStore`]: the embedded store as one append-only log of records, compacted, with group
//! commit. [`DirStore`](super::DirStore) pays two `fsync`s for every write; here a write is one
//! `write` into space allocated ahead at the end of a file, and writers that
//! [`sync`](Store::sync) at the same time share one `fdatasync`. The state is the last record
//! of each key, as in Kafka's `__consumer_offsets`, and a compaction now and then rewrites the
//! log with only those.
//!
//! Its format, recovery and compaction are documented on [`LogStore`], where rustdoc shows
//! them: this module is private.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read as _, Seek as _, SeekFrom, Write as _};
use std::mem;
use std::os::unix::fs::FileExt as _;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};

use super::{Store, StoreError, SyncToken, io_err, open_locked_dir, sync_dir};

const LOG_FILE: &str = "log";
const COMPACT_FILE: &str = "log.compact";
/// `"ASTLOG\0"` and the format version. A new version gets a new byte, so an old binary
/// reports a newer log as corrupt instead of misreading it.
const MAGIC: [u8; 8] = *b"ASTLOG\0\x01";
const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
/// `len`, `kind` and `key_len`: what precedes a record's key.
const HEAD_LEN: usize = 4 + 1 + 4;
const CRC_LEN: usize = 4;
/// The smallest record: a delete of the empty key.
const MIN_RECORD: usize = HEAD_LEN + CRC_LEN;
/// Below this size the log is never compacted: rewriting a small file on every few writes
/// would cost more than the space it saves.
const COMPACT_MIN_BYTES: u64 = 4 << 20;
/// Buffer size for reading the log on open, scanning it and writing a compacted one; also how
/// much a compaction copies between answering the flusher thread's queued waiters.
const IO_BUFFER: usize = 1 << 20;
/// The least and the most the log grows by at once: an eighth of its length, between these.
const PREALLOCATE_MIN_BYTES: u64 = 1 << 20;
const PREALLOCATE_MAX_BYTES: u64 = 16 << 20;
/// The log's length is a multiple of this, a file system block.
const PREALLOCATE_ALIGN: u64 = 4096;
/// Written to preallocate the log, [`IO_BUFFER`] bytes at a time.
static ZEROS: [u8; IO_BUFFER] = [0; IO_BUFFER];

/// The embedded store as an append-only log with group commit: from concurrent writers,
/// thousands of durable writes per second where [`DirStore`](super::DirStore) manages hundreds.
///
/// [`put_unsynced`](Store::put_unsynced) appends a record with one `write` (no flush) and
/// returns a token; [`sync`](Store::sync) with the token flushes, and callers that sync at the
/// same time share one `fdatasync`. [`put`](Store::put) and [`delete`](Store::delete) do both.
/// [`sync_then`](Store::sync_then) waits without blocking a thread: a flusher thread, started
/// by the first call that has to wait, flushes once for all the waiters queued since its last
/// flush (sharing it with `sync` callers too) and answers them; dropping the store flushes for
/// those still queued, answers them, and stops it. The same thread grows and compacts the log
/// (see [Maintenance](LogStore#maintenance)).
/// Once a flush (or anything else that leaves the file's durable state unknown) fails, every
/// later write and sync fails too, until the process restarts and reloads the log.
///
/// # On disk
///
/// - `LOCK`: as for `DirStore`, held with an exclusive `flock` while the store is open (and
///   until its flusher thread, which may be compacting, has exited).
/// - `log`: the records, in the order they were written.
/// - `log.compact`: a new `log` being written, by a compaction or when the store is created.
///   It replaces `log` by an atomic rename only once complete and durable, so a leftover one is
///   from an interrupted compaction: removed on open, never read.
///
/// `log` is a header, then records, then zeros to the end of the file; integers
/// little-endian:
///
/// ```text
/// header       8 bytes  "ASTLOG\0" then the format version, 1
/// each record:
///   len        u32      bytes from kind to the end of value: at least 5, never 0
///   kind       u8       1 = put, 2 = delete
///   key_len    u32
///   key        key_len bytes, UTF-8
///   value      len - 5 - key_len bytes; none for a delete
///   crc        u32      CRC-32 (IEEE) of everything from len to the end of value
/// then         zeros    space allocated for the next records, possibly none
/// ```
///
/// A key's value is its last record if that is a put; a key whose last record is a delete, or
/// that has none, is absent.
///
/// The log ends where zeros run to the end of the file: no record starts with a zero `len`,
/// which counts its own kind and key length. So the file's length is not the log's: the file
/// is grown ahead of the records, by an eighth of its length (at least 1 MiB, at most 16 MiB,
/// rounded up to 4 KiB), writing zeros and flushing them, once the space left after the log is
/// less than half of that (see [Maintenance](LogStore#maintenance) for where).
/// Records then overwrite blocks already allocated and written without changing the file's
/// size, so their `fdatasync` writes only data, not also the file's metadata (the inode, on
/// ext4). Zeros rather than a hole (`set_len`) or `fallocate`: the first write into either
/// still changes the metadata that maps the file's blocks. A build from before this writes no
/// zeros and reads them as a torn end, which it truncates with a warning: the format, and its
/// version, are unchanged.
///
/// # Durability and recovery
///
/// A record reaches the file with one `write`, so once [`put_unsynced`](Store::put_unsynced)
/// returns it is in the page cache and survives the process being killed; `sync` makes it
/// survive the machine losing power too. After a power cut, the records written since the last
/// flush may be missing, cut short, or zeros (their blocks' preallocated zeros, or a file
/// extended before its new blocks were written). So on open, zeros from a record's start to
/// the end of the file are where the log ends, silently, and they stay as preallocated space.
/// Other damage with no valid record anywhere after it (a record cut short or failing its
/// checksum, followed by anything) is the torn end of writes that were never flushed: the file
/// is truncated back to the last good record, with a warning. Damage that a valid record
/// follows cannot be that, and is [`StoreError::Corrupt`] naming the offset: a store never skips
/// a record silently.
///
/// An append that fails truncates the file back to the log's end, so no part of that record
/// remains before the next one; the next append allocates space again.
///
/// # Compaction
///
/// Once the log is larger than 4 MiB and more than twice the size of its live records (each
/// present key's last put), it is rewritten: the live records are copied to `log.compact`,
/// then the records appended meanwhile, with space allocated after them as for a growth; the
/// new file is made durable and renamed over `log`. The log thus stays under about twice its
/// live size, and a compaction copies fewer bytes than it discards. These sizes are the log's,
/// its records', not the file's: the preallocated zeros count for nothing.
///
/// A compaction that fails before the rename leaves the log as it was, in use, with a warning,
/// and is tried again only once the log has doubled, rather than on every write. After the
/// rename only the directory's fsync can fail, and the store then refuses writes: a crash could
/// bring back the old log without what is appended to the new one.
///
/// # Maintenance
///
/// Appends run on the service's async threads, under a lock every tenant's writes share, so
/// they must take microseconds: one `write`. Growing the file (up to 16 MiB of zeros and a
/// flush) and compacting it (reading and rewriting every live record, then three syncs) take
/// milliseconds to seconds, so an append only asks for them, and the flusher thread (started
/// then if it is not running) does them while appends go on:
///
/// - It grows the file while there is still room: it claims the next chunk, writes and flushes
///   its zeros without the lock, then hands the chunk to the appends. An append that needs room
///   before that waits for the chunk rather than write where zeros are being written. One that
///   needs room when no grow is under way grows the file itself, as the only way to go on: the
///   first append to a new log, a record larger than the room left, appends outrunning the
///   thread, or a background grow that failed.
/// - It compacts from a snapshot of the index: it copies the live records, which are never
///   overwritten, without the lock, answering queued waiters between chunks. Only the copy of
///   the records appended since the snapshot, the syncs and the swap to the new file hold it.
///
/// The two are done one at a time, so a waiter queued during a grow waits for its flush.
pub struct LogStore {
    /// The log and its durability, shared with the flusher thread.
    log: Arc<Log>,
    /// The thread that answers [`sync_then`](Store::sync_then) and grows and compacts the log,
    /// started by the first call that needs it rather than at open: most stores (tests, the
    /// import of an old data directory, an embedder that only calls `sync` and writes little)
    /// never need it. Stopped and joined when the store is dropped.
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// Makes the next append write half its record and fail, so tests can see what it leaves.
    #[cfg(test)]
    fail_next_append: AtomicBool,
}

/// What a [`LogStore`] shares with its flusher thread: everything a flush, a grow or a
/// compaction needs. The thread holds this rather than the store, so it does not keep the
/// store alive: dropping the store stops it.
struct Log {
    /// The data directory.
    dir: PathBuf,
    /// Held only for its lock. Here rather than on the store: a `sync_then` callback that drops
    /// the store on the flusher thread cannot wait for the thread, which may be compacting, so
    /// the directory stays locked until the thread is done with it too.
    _lock: File,
    /// `dir/log`.
    path: PathBuf,
    writer: Mutex<Writer>,
    /// Signalled, with `writer`, when a background grow ends, whether it succeeded or failed.
    grown: Condvar,
    /// Writes up to this sequence number are durable. Raised by a flush before it clears
    /// `flushing`, so a caller woken by `flushed` sees what that flush covered.
    synced: AtomicU64,
    /// Whether a caller is flushing. At most one is, and callers whose write came too late
    /// for its flush wait for it to end, then one of them flushes for all. Separate from
    /// `writer`, and not held during the flush, so appends continue meanwhile and callers whose
    /// write a flush covered return at once instead of queueing behind the next one.
    flushing: Mutex<bool>,
    /// Signalled when a flush ends, whether it succeeded or failed.
    flushed: Condvar,
    /// What failed, once something left the log's durable state unknown: from then on the
    /// store refuses writes.
    failure: OnceLock<String>,
    /// What the flusher thread has yet to do.
    work: Mutex<Work>,
    /// Signalled when work is queued, or the flusher thread is told to stop.
    queued: Condvar,
    /// [`COMPACT_MIN_BYTES`], lowered by tests to compact small logs.
    compact_min_bytes: u64,
    /// [`PREALLOCATE_MIN_BYTES`], lowered by tests to grow the log in small steps.
    preallocate_min_bytes: u64,
    /// Flushes made, so tests can see that writers share them.
    #[cfg(test)]
    flushes: AtomicU64,
    /// Makes the next flush fail, so tests can see the store refuse writes afterwards.
    #[cfg(test)]
    fail_next_flush: AtomicBool,
    /// Grows made by appends rather than the flusher thread, so tests can see they are rare.
    #[cfg(test)]
    inline_grows: AtomicU64,
    /// Compactions completed, so tests can see they happened.
    #[cfg(test)]
    compactions: AtomicU64,
    /// Makes the next compaction fail while writing `log.compact`.
    #[cfg(test)]
    fail_next_compaction: AtomicBool,
    /// Run by the next background grow once it has claimed its chunk, before writing it, so
    /// tests can hold it there.
    #[cfg(test)]
    grow_hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Run by the next compaction once it has taken its snapshot, before copying it, so tests
    /// can append meanwhile.
    #[cfg(test)]
    compaction_hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

/// A [`Store::sync_then`] callback.
type Done = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// The flusher thread's work, behind [`Log::work`].
#[derive(Default)]
struct Work {
    /// The [`sync_then`](Store::sync_then) callers to answer: each waiter's write's sequence
    /// number, and its callback.
    queue: Vec<(u64, Done)>,
    /// How many times appends asked for the log to be grown or compacted, and how many of those
    /// asks the thread has acted on: it has maintenance to do while they differ. Counts rather
    /// than a flag, so that an ask made during maintenance is not lost when that ends.
    asked: u64,
    maintained: u64,
    /// Set when the store is dropped: answer what is queued, then exit.
    stop: bool,
}

/// What appends change, behind the writer lock.
struct Writer {
    /// The log. Flushes and loads take their own handle to it: after a compaction they may keep
    /// using the replaced file, which is never written again.
    file: Arc<File>,
    /// The log's length, that of its records: where the next record goes.
    end: u64,
    /// The file's length, at least `end`: zeros from `end` on.
    allocated: u64,
    keys: Keys,
    /// How many writes (puts and deletes) this store has made: the last one's sequence number.
    written: u64,
    /// Whether the flusher thread is writing zeros after `allocated`, to grow the file: no
    /// append writes there until it raises `allocated`.
    growing: bool,
    /// `allocated` when an append last asked for a grow. Asked once per length, so a background
    /// grow that failed is not asked for again until an append grew the file itself.
    grow_asked_at: u64,
    /// Whether a compaction is asked for or under way: appends meanwhile do not ask again.
    compacting: bool,
    /// A compaction is due only once the log is longer than this: raised after one failed.
    compact_after: u64,
}

/// Where each present key's last record is.
#[derive(Debug, Default, Clone)]
struct Keys {
    slots: BTreeMap<String, Slot>,
    /// The total size of the records in `slots`: what a compaction keeps.
    live_bytes: u64,
}

/// A whole record's place in the log.
#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: u64,
    len: u64,
}

/// A compaction's new log, written and durable but not yet in use.
struct Compacted {
    file: File,
    /// The length of its records.
    end: u64,
    /// The file's length.
    allocated: u64,
    keys: Keys,
}

impl Keys {
    fn put(&mut self, key: &str, slot: Slot) {
        match self.slots.get_mut(key) {
            Some(old) => {
                self.live_bytes -= old.len;
                *old = slot;
            }
            None => {
                self.slots.insert(key.to_owned(), slot);
            }
        }
        self.live_bytes += slot.len;
    }

    fn delete(&mut self, key: &str) {
        if let Some(old) = self.slots.remove(key) {
            self.live_bytes -= old.len;
        }
    }
}

impl LogStore {
    /// Opens the store in the data directory `dir`, creating both if missing: takes the
    /// directory's lock, removes an interrupted compaction's temp file, and reads the log,
    /// dropping a torn end left by a crash (see
    /// [Durability and recovery](LogStore#durability-and-recovery)).
    ///
    /// Fails with [`StoreError::Locked`] if another process (or another open store) holds the
    /// directory, and with [`StoreError::Corrupt`] if the log is damaged other than at its end.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let lock = open_locked_dir(&dir)?;
        remove_leftover_compaction(&dir)?;
        let path = dir.join(LOG_FILE);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Written whole and renamed into place, so a log never lacks its header.
                // With no space allocated: the first append allocates it.
                let (file, _, ()) = write_temp(&dir, |_, _| Ok(()))?;
                commit_temp(&dir, &file)?;
                sync_dir(&dir)?;
                file
            }
            Err(e) => return Err(io_err("open", &path)(e)),
        };
        let (keys, end, allocated) = replay(&file, &path)?;
        tracing::info!(
            path = %path.display(),
            keys = keys.slots.len(),
            bytes = end,
            allocated_bytes = allocated,
            "opened the store's log"
        );
        Ok(Self {
            log: Arc::new(Log {
                dir,
                _lock: lock,
                path,
                writer: Mutex::new(Writer {
                    file: Arc::new(file),
                    end,
                    allocated,
                    keys,
                    written: 0,
                    growing: false,
                    grow_asked_at: 0,
                    compacting: false,
                    compact_after: 0,
                }),
                grown: Condvar::new(),
                synced: AtomicU64::new(0),
                flushing: Mutex::new(false),
                flushed: Condvar::new(),
                failure: OnceLock::new(),
                work: Mutex::default(),
                queued: Condvar::new(),
                compact_min_bytes: COMPACT_MIN_BYTES,
                preallocate_min_bytes: PREALLOCATE_MIN_BYTES,
                #[cfg(test)]
                flushes: AtomicU64::new(0),
                #[cfg(test)]
                fail_next_flush: AtomicBool::new(false),
                #[cfg(test)]
                inline_grows: AtomicU64::new(0),
                #[cfg(test)]
                compactions: AtomicU64::new(0),
                #[cfg(test)]
                fail_next_compaction: AtomicBool::new(false),
                #[cfg(test)]
                grow_hook: Mutex::new(None),
                #[cfg(test)]
                compaction_hook: Mutex::new(None),
            }),
            flusher: Mutex::new(None),
            #[cfg(test)]
            fail_next_append: AtomicBool::new(false),
        })
    }

    /// Appends `record` at the end of the log, growing the file first if the record does not
    /// fit, then lets `apply` record its place in the index, asks the flusher thread for the
    /// maintenance the log now needs, and returns the record's token. Takes the writer lock
    /// held since the caller's checks, and releases it.
    fn append(
        &self,
        mut writer: MutexGuard<'_, Writer>,
        record: &[u8],
        apply: impl FnOnce(&mut Keys, Slot),
    ) -> Result<SyncToken, StoreError> {
        let len = record.len() as u64;
        // Zeros are being written after `allocated`: a record written there now could be
        // overwritten by them.
        while writer.growing && writer.end + len > writer.allocated {
            writer = self
                .log
                .grown
                .wait(writer)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // The grow waited for may have failed its flush.
        self.log.check_usable("append to")?;
        let offset = writer.end;
        let needed = offset + len;
        if needed > writer.allocated {
            self.grow(&mut writer, needed)?;
        }
        if let Err(e) = self.write_record(&writer.file, record, offset) {
            // A partial record left in place would end up before the next one, or before the
            // zeros that end the log: damage the next open would refuse or warn about.
            if let Err(truncate) = writer.file.set_len(offset) {
                return Err(self
                    .log
                    .fail("truncate a failed append to", &self.log.path, truncate));
            }
            writer.allocated = offset;
            return Err(io_err("append to", &self.log.path)(e));
        }
        writer.end += len;
        apply(&mut writer.keys, Slot { offset, len });
        writer.written += 1;
        let token = SyncToken::new(writer.written);
        let ask = self.log.wants_maintenance(&mut writer);
        drop(writer);
        if ask {
            self.ask_maintenance();
        }
        Ok(token)
    }

    /// Grows the file to hold at least `needed` bytes, by writing zeros after its end, and
    /// flushes it, which makes every write so far durable too: the fallback for a record that
    /// does not fit when the flusher thread is not growing the file (see
    /// [Maintenance](LogStore#maintenance)). A failure to write them leaves zeros after the
    /// log's end, which a reopen reads as preallocated space; a failure to flush them makes the
    /// store refuse writes, as for any flush.
    fn grow(&self, writer: &mut Writer, needed: u64) -> Result<(), StoreError> {
        #[cfg(test)]
        self.log.inline_grows.fetch_add(1, Ordering::Relaxed);
        let allocated = allocation(needed, self.log.preallocate_min_bytes);
        write_zeros(&writer.file, writer.allocated, allocated)
            .map_err(io_err("preallocate", &self.log.path))?;
        if let Err(e) = self.log.flush(&writer.file) {
            return Err(self.log.fail("fdatasync", &self.log.path, e));
        }
        writer.allocated = allocated;
        self.log.synced.fetch_max(writer.written, Ordering::AcqRel);
        Ok(())
    }

    /// Writes `record` at `offset` of the log `file`; in tests, writes only half of it and
    /// fails on demand.
    fn write_record(&self, file: &File, record: &[u8], offset: u64) -> io::Result<()> {
        #[cfg(test)]
        if self.fail_next_append.swap(false, Ordering::Relaxed) {
            file.write_all_at(&record[..record.len() / 2], offset)?;
            return Err(io::Error::other("injected append failure"));
        }
        file.write_all_at(record, offset)
    }

    /// Has the flusher thread grow or compact the log, as [`Log::wants_maintenance`] asked,
    /// starting it if it is not running.
    fn ask_maintenance(&self) {
        if let Err(e) = self.start_flusher() {
            // Appends still grow the file themselves when they need room; a compaction is asked
            // for again once the log has doubled, as after a failed one.
            let mut writer = self.log.writer();
            if writer.compacting {
                writer.compacting = false;
                writer.compact_after = 2 * writer.end;
            }
            tracing::warn!(
                path = %self.log.path.display(),
                error = %e,
                retry_after_bytes = writer.compact_after,
                "could not start the store's flusher thread to grow and compact the log"
            );
            return;
        }
        self.log.work().asked += 1;
        self.log.queued.notify_one();
    }

    /// Starts the flusher thread, unless it runs already.
    fn start_flusher(&self) -> Result<(), StoreError> {
        let mut flusher = self.flusher.lock().unwrap_or_else(PoisonError::into_inner);
        if flusher.is_none() {
            let log = Arc::clone(&self.log);
            let thread = thread::Builder::new()
                .name("log-flusher".to_owned())
                .spawn(move || log.run_flusher())
                .map_err(io_err("start the flusher thread of", &self.log.path))?;
            *flusher = Some(thread);
        }
        Ok(())
    }
}

impl Log {
    fn writer(&self) -> MutexGuard<'_, Writer> {
        // Appends, grows and compactions change the writer only once their I/O has succeeded,
        // in statements that do not panic, so a panic elsewhere cannot leave it half-updated.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn work(&self) -> MutexGuard<'_, Work> {
        // Only counted, pushed to and taken whole, so a panic cannot leave it half-updated.
        self.work.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails if an earlier failure made the store refuse writes.
    fn check_usable(&self, action: &'static str) -> Result<(), StoreError> {
        match self.failure.get() {
            None => Ok(()),
            Some(what) => Err(StoreError::Io {
                action,
                path: self.path.clone(),
                source: io::Error::other(format!(
                    "the store refuses writes because a flush or write failed earlier ({what}): \
                     which of its writes reached the disk is unknown; restart the service to \
                     reload its state from the log"
                )),
            }),
        }
    }

    /// Makes the store refuse writes from now on, after `action` on `path` failed in a way that
    /// leaves the log's durable state unknown, and returns that failure's error.
    fn fail(&self, action: &'static str, path: &Path, source: io::Error) -> StoreError {
        tracing::error!(
            action,
            path = %path.display(),
            error = %source,
            "the store's durable state is unknown, so it refuses writes until the service restarts"
        );
        // The first failure is the one to report; later ones follow from it.
        let _ = self
            .failure
            .set(format!("{action} {} failed: {source}", path.display()));
        StoreError::Io {
            action,
            path: path.to_path_buf(),
            source: io::Error::new(
                source.kind(),
                format!(
                    "{source}; which writes reached the disk is now unknown, and retrying can \
                     report success for data the kernel dropped, so the store refuses writes: \
                     restart the service to reload its state from the log"
                ),
            ),
        }
    }

    /// `fdatasync` of the log, counted (and made to fail on demand) in tests.
    fn flush(&self, file: &File) -> io::Result<()> {
        #[cfg(test)]
        {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            if self.fail_next_flush.swap(false, Ordering::Relaxed) {
                return Err(io::Error::other("injected flush failure"));
            }
        }
        file.sync_data()
    }

    /// [`Store::sync`]: the group commit that synchronous callers and the flusher thread share.
    fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        self.check_usable("fdatasync")?;
        let target = token.sequence();
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        let mut flushing = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        // The flush under way may cover this write: wait for it rather than flush behind it.
        while *flushing && self.synced.load(Ordering::Acquire) < target {
            flushing = self
                .flushed
                .wait(flushing)
                .unwrap_or_else(PoisonError::into_inner);
        }
        // The flush waited for may have failed.
        self.check_usable("fdatasync")?;
        if self.synced.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        *flushing = true;
        drop(flushing);

        // The flush covers everything written until now, not only this caller's write.
        let (file, written) = {
            let writer = self.writer();
            (Arc::clone(&writer.file), writer.written)
        };
        let result = match self.flush(&file) {
            Ok(()) => {
                self.synced.fetch_max(written, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => Err(self.fail("fdatasync", &self.path, e)),
        };
        *self.flushing.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.flushed.notify_all();
        result
    }

    /// The flusher thread: takes every queued waiter at once, syncs once up to the latest of
    /// their writes, answers them all, then grows or compacts the log if appends asked for it,
    /// and repeats, so waiters queued meanwhile share the next flush. Exits once told to stop,
    /// after answering everything queued by then.
    fn run_flusher(&self) {
        loop {
            let (batch, asked, stop) = {
                let mut work = self.work();
                while work.queue.is_empty() && work.asked == work.maintained && !work.stop {
                    work = self
                        .queued
                        .wait(work)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                let asked = (work.asked != work.maintained).then_some(work.asked);
                (mem::take(&mut work.queue), asked, work.stop)
            };
            self.answer(batch);
            if stop {
                return;
            }
            // A callback may have dropped the store: then the next round answers and exits.
            if let Some(asked) = asked
                && !self.work().stop
            {
                self.maintain();
                self.work().maintained = asked;
            }
        }
    }

    /// Syncs once up to the latest write of the waiters in `batch` and answers them all.
    fn answer(&self, batch: Vec<(u64, Done)>) {
        let Some(target) = batch.iter().map(|&(sequence, _)| sequence).max() else {
            return;
        };
        let result = self.sync(SyncToken::new(target));
        let failed = result.is_err();
        let mut first = Some(result);
        for (_, done) in batch {
            let result = match first.take() {
                Some(result) => result,
                // `StoreError` is not `Clone`: the other waiters get the refusal the failure
                // left behind, which names it (every error `sync` returns leaves `failure` set).
                None if failed => self.check_usable("fdatasync"),
                None => Ok(()),
            };
            // Caught, because unwinding would end this thread and leave every later waiter
            // unanswered.
            if panic::catch_unwind(AssertUnwindSafe(|| done(result))).is_err() {
                tracing::error!(
                    path = %self.path.display(),
                    "a sync_then callback panicked; the store's flusher thread goes on"
                );
            }
        }
    }

    /// Answers the waiters queued now, from the middle of a compaction, so that they do not
    /// wait for all of it.
    fn answer_queued(&self) {
        let batch = mem::take(&mut self.work().queue);
        self.answer(batch);
    }

    /// Whether the log in `writer`, just appended to, should be grown or compacted by the
    /// flusher thread. Records the ask, so that the appends after it do not repeat it.
    fn wants_maintenance(&self, writer: &mut Writer) -> bool {
        let grow = !writer.growing
            && writer.grow_asked_at != writer.allocated
            && self.short_of_room(writer);
        if grow {
            writer.grow_asked_at = writer.allocated;
        }
        let compact = !writer.compacting && self.compaction_due(writer);
        if compact {
            writer.compacting = true;
        }
        grow || compact
    }

    /// Whether the space left after the log is less than half of what the next grow adds:
    /// grown then, it is ready before appends at the usual pace run out of it.
    fn short_of_room(&self, writer: &Writer) -> bool {
        let chunk = allocation(writer.allocated, self.preallocate_min_bytes) - writer.allocated;
        writer.allocated - writer.end < chunk / 2
    }

    fn compaction_due(&self, writer: &Writer) -> bool {
        writer.end > self.compact_min_bytes.max(writer.compact_after)
            && writer.end > 2 * writer.keys.live_bytes
    }

    /// The flusher thread's maintenance: grows the log if it is short of room, first, since
    /// appends may soon wait for that, then compacts it if that was asked for.
    fn maintain(&self) {
        self.grow_ahead();
        self.compact();
    }

    /// Grows the file by a chunk ahead of the appends, if they are short of room: claims the
    /// chunk under the writer lock, writes its zeros and flushes them without it, then hands it
    /// to the appends and wakes those waiting for it. The failures are an inline grow's: a
    /// failed flush makes the store refuse writes; zeros not all written stay after the log's
    /// end, preallocated space to a reopen, and appends grow the file themselves when they run
    /// out of room. Waiters are not answered meanwhile: a callback that appends would wait for
    /// this very grow.
    fn grow_ahead(&self) {
        let (file, from, to) = {
            let mut writer = self.writer();
            if writer.growing || !self.short_of_room(&writer) {
                return;
            }
            let to = allocation(writer.allocated, self.preallocate_min_bytes);
            writer.growing = true;
            (Arc::clone(&writer.file), writer.allocated, to)
        };
        #[cfg(test)]
        {
            let hook = self.grow_hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        let grown = match write_zeros(&file, from, to) {
            Ok(()) => {
                // Everything written by now is in the file flushed, since only this thread
                // replaces it.
                let written = self.writer().written;
                match self.flush(&file) {
                    Ok(()) => {
                        self.synced.fetch_max(written, Ordering::AcqRel);
                        true
                    }
                    Err(e) => {
                        self.fail("fdatasync", &self.path, e);
                        false
                    }
                }
            }
            Err(e) => {
                tracing::warn!(
                    path = %self.path.display(),
                    from,
                    to,
                    error = %e,
                    "could not grow the store's log ahead of its appends; they grow it when \
                     they need room"
                );
                false
            }
        };
        let mut writer = self.writer();
        writer.growing = false;
        // A failed append truncates the file to the log's end, and lowers `allocated` with it:
        // the zeros may then not all be there.
        if grown && Arc::ptr_eq(&writer.file, &file) && writer.allocated == from {
            writer.allocated = to;
        }
        drop(writer);
        self.grown.notify_all();
    }

    /// Rewrites the log with only its live records, if an append asked for it, keeping the
    /// appends made meanwhile (see [Compaction](LogStore#compaction)): copies the live records
    /// of a snapshot of the index without the writer lock, then under it swaps in the new log.
    fn compact(&self) {
        let (old, mut live, from) = {
            let writer = self.writer();
            if !writer.compacting {
                return;
            }
            let live: Vec<Slot> = writer.keys.slots.values().copied().collect();
            (Arc::clone(&writer.file), live, writer.end)
        };
        #[cfg(test)]
        {
            let hook = self.compaction_hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        // In file order, so the old log is read sequentially.
        live.sort_unstable_by_key(|slot| slot.offset);
        let compacted = self.write_compacted(&old, &live);
        let mut writer = self.writer();
        writer.compacting = false;
        let before = writer.end;
        match compacted.and_then(|new| self.swap_in(&mut writer, &old, from, new)) {
            Ok(()) => {
                #[cfg(test)]
                self.compactions.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    path = %self.path.display(),
                    before_bytes = before,
                    after_bytes = writer.end,
                    appended_meanwhile_bytes = before - from,
                    keys = writer.keys.slots.len(),
                    "compacted the store's log"
                );
            }
            Err(e) => {
                let _ = fs::remove_file(self.dir.join(COMPACT_FILE));
                writer.compact_after = 2 * writer.end;
                tracing::warn!(
                    path = %self.path.display(),
                    error = %e,
                    bytes = writer.end,
                    live_bytes = writer.keys.live_bytes,
                    retry_after_bytes = writer.compact_after,
                    "could not compact the store's log; it stays in use as it was"
                );
            }
        }
    }

    /// Writes the records at `live` (in file order) of the log `old` to the temp file, each
    /// checked, then zeros after them as for a growth, and makes it durable: the part of a
    /// compaction that needs no lock, since records are never overwritten. Answers the queued
    /// waiters now and then, so they do not wait for all of it.
    fn write_compacted(&self, old: &File, live: &[Slot]) -> Result<Compacted, StoreError> {
        let (file, end, keys) = write_temp(&self.dir, |out, temp| {
            #[cfg(test)]
            if self.fail_next_compaction.swap(false, Ordering::Relaxed) {
                return Err(io_err("write", temp)(io::Error::other(
                    "injected compaction failure",
                )));
            }
            let mut keys = Keys::default();
            let mut offset = MAGIC.len() as u64;
            let mut record = Vec::new();
            let mut unanswered = 0;
            for &slot in live {
                // Checked on the way: copying a damaged record would hide where it came from.
                let (key, _) = read_live(old, &self.path, None, slot, &mut record)?;
                keys.put(key, Slot { offset, ..slot });
                out.write_all(&record).map_err(io_err("write", temp))?;
                offset += slot.len;
                unanswered += slot.len;
                if unanswered >= IO_BUFFER as u64 {
                    unanswered = 0;
                    self.answer_queued();
                }
            }
            Ok(keys)
        })?;
        let temp = self.dir.join(COMPACT_FILE);
        let allocated = allocation(end, self.preallocate_min_bytes);
        write_zeros(&file, end, allocated).map_err(io_err("preallocate", &temp))?;
        // Here, without the lock, so that the sync under it writes only what was appended since.
        file.sync_data().map_err(io_err("fdatasync", &temp))?;
        Ok(Compacted {
            file,
            end,
            allocated,
            keys,
        })
    }

    /// Completes a compaction under the writer lock: copies the records appended to `old`
    /// since `from`, in order, to the end of the new log, applying them to its index, makes it
    /// durable, renames it over `log` and puts it in use. Fails, leaving the old log in use, only
    /// before the rename; after it, a failed fsync of the directory makes the store refuse
    /// writes, since a crash could bring back the old log without what is appended to the new.
    fn swap_in(
        &self,
        writer: &mut Writer,
        old: &File,
        from: u64,
        mut new: Compacted,
    ) -> Result<(), StoreError> {
        let temp = self.dir.join(COMPACT_FILE);
        // Held in memory: what was appended during the compaction, usually little.
        let mut tail = vec![0; (writer.end - from) as usize];
        old.read_exact_at(&mut tail, from)
            .map_err(io_err("read", &self.path))?;
        let mut offset = new.end;
        let mut rest = &tail[..];
        while !rest.is_empty() {
            let at = from + (tail.len() - rest.len()) as u64;
            let size = rest
                .get(..4)
                .map(|len| {
                    (4 + CRC_LEN) as u64
                        + u64::from(u32::from_le_bytes(len.try_into().expect("4 bytes")))
                })
                .filter(|&size| size >= MIN_RECORD as u64);
            let Some(record) = size.and_then(|size| rest.get(..size as usize)) else {
                return Err(self.appended_corrupt(at));
            };
            let slot = Slot {
                offset,
                len: record.len() as u64,
            };
            match decode(record) {
                Ok(Record::Put { key, .. }) => new.keys.put(key, slot),
                Ok(Record::Delete { key }) => new.keys.delete(key),
                Err(_) => return Err(self.appended_corrupt(at)),
            }
            offset += slot.len;
            rest = &rest[record.len()..];
        }
        // The snapshot and the records after it must make up the index exactly: a compaction
        // that lost a key would lose it for good.
        if new.keys.slots.len() != writer.keys.slots.len()
            || new.keys.live_bytes != writer.keys.live_bytes
        {
            return Err(StoreError::Corrupt {
                path: temp,
                reason: format!(
                    "the compacted log indexes {} keys in {} bytes where the log has {} in {}",
                    new.keys.slots.len(),
                    new.keys.live_bytes,
                    writer.keys.slots.len(),
                    writer.keys.live_bytes
                ),
            });
        }
        if offset > new.allocated {
            // More was appended meanwhile than the space allocated after the live records.
            let allocated = allocation(offset, self.preallocate_min_bytes);
            write_zeros(&new.file, new.allocated, allocated)
                .map_err(io_err("preallocate", &temp))?;
            new.allocated = allocated;
        }
        new.file
            .write_all_at(&tail, new.end)
            .map_err(io_err("write", &temp))?;
        commit_temp(&self.dir, &new.file)?;
        writer.file = Arc::new(new.file);
        writer.end = offset;
        writer.allocated = new.allocated;
        writer.keys = new.keys;
        // The rename is only durable once the directory is. The new log is in use either way:
        // a failure is logged, and the store refuses writes from now on.
        match File::open(&self.dir).and_then(|dir| dir.sync_all()) {
            Ok(()) => {
                self.synced.fetch_max(writer.written, Ordering::AcqRel);
            }
            Err(e) => {
                self.fail("fsync directory", &self.dir, e);
            }
        }
        Ok(())
    }

    /// The error for a record appended during a compaction, at `offset` of the log, that does
    /// not read back as a record.
    fn appended_corrupt(&self, offset: u64) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            reason: format!(
                "the record at offset {offset}, appended during a compaction, does not read back"
            ),
        }
    }
}
impl Store for LogStore {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        // A snapshot: the records it points to are never overwritten, so writes can continue
        // while it is read.
        let (file, keys) = {
            let writer = self.log.writer();
            (Arc::clone(&writer.file), writer.keys.clone())
        };
        let mut entries = Vec::with_capacity(keys.slots.len());
        let mut record = Vec::new();
        for (key, slot) in keys.slots {
            let (_, value) = read_live(&file, &self.log.path, Some(&key), slot, &mut record)?;
            let value = value.to_vec();
            entries.push((key, value));
        }
        Ok(entries)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        let token = self.put_unsynced(key, value)?;
        self.sync(token)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.log.check_usable("append to")?;
        let record = encode(KIND_DELETE, key, &[], &self.log.path)?;
        let token = {
            let writer = self.log.writer();
            if writer.keys.slots.contains_key(key) {
                self.append(writer, &record, |keys, _| keys.delete(key))?
            } else {
                // Already absent, but possibly by a delete that another caller is still
                // flushing: wait for everything written so far, as for a delete of our own.
                SyncToken::new(writer.written)
            }
        };
        self.sync(token)
    }

    fn put_unsynced(&self, key: &str, value: &[u8]) -> Result<SyncToken, StoreError> {
        self.log.check_usable("append to")?;
        // Encoded before taking the lock, which is held only for the write.
        let record = encode(KIND_PUT, key, value, &self.log.path)?;
        let writer = self.log.writer();
        self.append(writer, &record, |keys, slot| keys.put(key, slot))
    }

    fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        self.log.sync(token)
    }

    /// Answers at once on the caller's thread if the store has failed or the write is durable
    /// already; otherwise queues `done` for the store's flusher thread, which flushes for all
    /// its queued waiters at once, sharing the flush with concurrent [`sync`](Store::sync)
    /// callers too.
    fn sync_then(&self, token: SyncToken, done: Box<dyn FnOnce(Result<(), StoreError>) + Send>) {
        // As in `sync`: after a failed flush the durable state is unknown, whatever `synced`
        // says.
        if let Err(e) = self.log.check_usable("fdatasync") {
            return done(Err(e));
        }
        if self.log.synced.load(Ordering::Acquire) >= token.sequence() {
            return done(Ok(()));
        }
        if let Err(e) = self.start_flusher() {
            return done(Err(e));
        }
        self.log.work().queue.push((token.sequence(), done));
        self.log.queued.notify_one();
    }
}

/// Stops the flusher thread, which first finishes the grow or compaction under way (it starts
/// no other), then flushes for the waiters still queued and answers them with the result: a
/// `put_unsynced` write that succeeded is not failed for the store's drop.
impl Drop for LogStore {
    fn drop(&mut self) {
        let flusher = self
            .flusher
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(flusher) = flusher else {
            return;
        };
        self.log.work().stop = true;
        self.log.queued.notify_one();
        // A callback holding the last handle to the store drops it on the flusher thread, which
        // cannot join itself: it exits on its own once it has finished the compaction it may be
        // in and answered its batch, and releases the directory's lock then. Otherwise the
        // join returns once every queued waiter is answered; the thread catches the callbacks'
        // panics, so there is none to pass on.
        if flusher.thread().id() != thread::current().id() {
            let _ = flusher.join();
        }
    }
}

impl fmt::Debug for LogStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.log.path)
            .field("synced", &self.log.synced.load(Ordering::Relaxed))
            .field("failure", &self.log.failure.get())
            .finish_non_exhaustive()
    }
}

/// `key` and `value` as a record of `kind`.
fn encode(kind: u8, key: &str, value: &[u8], path: &Path) -> Result<Vec<u8>, StoreError> {
    let Some(len) = (1 + 4 + key.len())
        .checked_add(value.len())
        .and_then(|len| u32::try_from(len).ok())
    else {
        return Err(StoreError::Io {
            action: "append to",
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a record holds at most 4 GiB, and key {key:?} with its value is {} bytes",
                    key.len().saturating_add(value.len())
                ),
            ),
        });
    };
    // At most `len`, so it fits in a u32 too.
    let key_len = key.len() as u32;
    let mut record = Vec::with_capacity(HEAD_LEN + key.len() + value.len() + CRC_LEN);
    record.extend_from_slice(&len.to_le_bytes());
    record.push(kind);
    record.extend_from_slice(&key_len.to_le_bytes());
    record.extend_from_slice(key.as_bytes());
    record.extend_from_slice(value);
    let crc = crc32fast::hash(&record);
    record.extend_from_slice(&crc.to_le_bytes());
    Ok(record)
}

/// A record read back.
enum Record<'a> {
    Put { key: &'a str, value: &'a [u8] },
    Delete { key: &'a str },
}

/// Why bytes are not a record.
enum Damage {
    /// The checksum does not match: the record was torn, or altered since.
    Checksum,
    /// The checksum matches, so the record was written like this, but this build cannot read
    /// it.
    Invalid(String),
}

/// Parses one whole record, `len` to `crc`; the caller has cut it to the size its `len` says,
/// at least [`MIN_RECORD`].
fn decode(record: &[u8]) -> Result<Record<'_>, Damage> {
    let (body, crc) = record.split_at(record.len() - CRC_LEN);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(Damage::Checksum);
    }
    let kind = body[4];
    let key_len = u32::from_le_bytes(body[5..HEAD_LEN].try_into().expect("4 bytes")) as usize;
    let rest = &body[HEAD_LEN..];
    let Some(key) = rest.get(..key_len) else {
        return Err(Damage::Invalid(format!(
            "key length {key_len} runs past the record's end"
        )));
    };
    let key =
        std::str::from_utf8(key).map_err(|_| Damage::Invalid("key is not UTF-8".to_owned()))?;
    let value = &rest[key_len..];
    match kind {
        KIND_PUT => Ok(Record::Put { key, value }),
        KIND_DELETE if value.is_empty() => Ok(Record::Delete { key }),
        KIND_DELETE => Err(Damage::Invalid("a delete that carries a value".to_owned())),
        other => Err(Damage::Invalid(format!("unknown record kind {other}"))),
    }
}

/// The whole size of the record whose first [`HEAD_LEN`] bytes are `head`, if they could start
/// one: a length that covers kind and key length, a known kind, a key that fits.
fn plausible_size(head: &[u8]) -> Option<u64> {
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
    let key_len = u32::from_le_bytes(head[5..HEAD_LEN].try_into().expect("4 bytes"));
    let holds_key = len.checked_sub(5).is_some_and(|rest| key_len <= rest);
    let known_kind = matches!(head[4], KIND_PUT | KIND_DELETE);
    (holds_key && known_kind).then(|| (4 + CRC_LEN) as u64 + u64::from(len))
}

/// Checks a log's header.
fn check_magic(header: &[u8]) -> Result<(), String> {
    if header == MAGIC {
        Ok(())
    } else if header[..MAGIC.len() - 1] == MAGIC[..MAGIC.len() - 1] {
        Err(format!(
            "log format version {}, this build reads {}",
            header[MAGIC.len() - 1],
            MAGIC[MAGIC.len() - 1]
        ))
    } else {
        Err("not a store log (bad header)".to_owned())
    }
}

/// Reads the log `file` at `path` into an index of its live records and returns it with the
/// log's length and the file's, after dropping a torn end (see [`LogStore`]).
fn replay(file: &File, path: &Path) -> Result<(Keys, u64, u64), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file_len = file.metadata().map_err(io_err("stat", path))?.len();
    if file_len < MAGIC.len() as u64 {
        return Err(corrupt(format!(
            "{file_len} bytes, shorter than the log's header"
        )));
    }
    let mut reader = BufReader::with_capacity(IO_BUFFER, file);
    // A log just created has its cursor at the end.
    reader
        .seek(SeekFrom::Start(0))
        .map_err(io_err("read", path))?;
    let mut header = [0; MAGIC.len()];
    reader
        .read_exact(&mut header)
        .map_err(io_err("read", path))?;
    check_magic(&header).map_err(corrupt)?;

    let mut keys = Keys::default();
    let mut offset = MAGIC.len() as u64;
    let mut record = Vec::new();
    while offset < file_len {
        let damage = match read_next(&mut reader, file_len - offset, &mut record)
            .map_err(io_err("read", path))?
        {
            Err(damage) => damage,
            Ok(()) => match decode(&record) {
                Ok(found) => {
                    let slot = Slot {
                        offset,
                        len: record.len() as u64,
                    };
                    match found {
                        Record::Put { key, .. } => keys.put(key, slot),
                        Record::Delete { key } => keys.delete(key),
                    }
                    offset += slot.len;
                    continue;
                }
                Err(Damage::Checksum) => "its checksum does not match".to_owned(),
                Err(Damage::Invalid(why)) => {
                    return Err(corrupt(format!("record at offset {offset}: {why}")));
                }
            },
        };
        let data_end = data_end(file, offset, file_len).map_err(io_err("read", path))?;
        if data_end == offset {
            // No record starts with a zero length, so these are the log's preallocated space.
            return Ok((keys, offset, file_len));
        }
        // A record's kind is not zero, so none starts in the zeros after `data_end`.
        if let Some(next) =
            find_record(file, offset + 1, data_end, file_len).map_err(io_err("read", path))?
        {
            return Err(corrupt(format!(
                "the record at offset {offset} is damaged ({damage}), but a valid record follows \
                 at offset {next}, so this is not the torn end of an interrupted write"
            )));
        }
        file.set_len(offset)
            .map_err(io_err("truncate the torn end of", path))?;
        file.sync_all().map_err(io_err("fsync", path))?;
        tracing::warn!(
            path = %path.display(),
            offset,
            dropped_bytes = file_len - offset,
            damage,
            "dropped the torn end of the store's log: writes that a crash interrupted before \
             they were flushed"
        );
        return Ok((keys, offset, offset));
    }
    Ok((keys, offset, file_len))
}

/// Reads the next record from `reader`, with `remaining` bytes left in the file, into `record`,
/// or says why the bytes there cannot be one. Only its length is checked here.
fn read_next(
    reader: &mut impl io::Read,
    remaining: u64,
    record: &mut Vec<u8>,
) -> io::Result<Result<(), String>> {
    if remaining < MIN_RECORD as u64 {
        return Ok(Err(format!("{remaining} bytes, too few for a record")));
    }
    let mut len = [0; 4];
    reader.read_exact(&mut len)?;
    let size = (4 + CRC_LEN) as u64 + u64::from(u32::from_le_bytes(len));
    if size < MIN_RECORD as u64 {
        return Ok(Err(format!("its length, {size} bytes, is too short")));
    }
    if size > remaining {
        return Ok(Err(format!(
            "its length, {size} bytes, runs past the end of the file, {remaining} bytes on"
        )));
    }
    record.clear();
    record.extend_from_slice(&len);
    // At most the file's remaining length, checked above.
    record.resize(size as usize, 0);
    reader.read_exact(&mut record[4..])?;
    Ok(Ok(()))
}

/// The offset of the first valid record starting anywhere in `from..starts_before` of `file`
/// and ending by `end`, if any, found by trying every byte. Damage with none after it is a torn
/// end.
fn find_record(file: &File, from: u64, starts_before: u64, end: u64) -> io::Result<Option<u64>> {
    // Each window overlaps the next by a record head, so a head is never split between them.
    let mut window = vec![0; IO_BUFFER + HEAD_LEN - 1];
    let mut start = from;
    let mut record = Vec::new();
    while start < starts_before && end.saturating_sub(start) >= MIN_RECORD as u64 {
        let len = usize::try_from(end - start).map_or(window.len(), |n| n.min(window.len()));
        let bytes = &mut window[..len];
        file.read_exact_at(bytes, start)?;
        for i in 0..=(len - HEAD_LEN).min(IO_BUFFER - 1) {
            let at = start + i as u64;
            if at >= starts_before {
                break;
            }
            // Random bytes almost never pass this, so the checksum is rarely computed.
            let Some(size) = plausible_size(&bytes[i..i + HEAD_LEN]) else {
                continue;
            };
            if size > end - at {
                continue;
            }
            // Fits in memory: it is within the file's length, checked above.
            let size = size as usize;
            let candidate = match bytes.get(i..i + size) {
                Some(candidate) => candidate,
                None => {
                    record.resize(size, 0);
                    file.read_exact_at(&mut record, at)?;
                    &record[..]
                }
            };
            if !matches!(decode(candidate), Err(Damage::Checksum)) {
                return Ok(Some(at));
            }
        }
        start += IO_BUFFER as u64;
    }
    Ok(None)
}

/// Reads the record at `slot` of the log `file` at `path` into `record`, checks that it is a
/// put, of `key` if the index says which, and returns its key and value.
fn read_live<'r>(
    file: &File,
    path: &Path,
    key: Option<&str>,
    slot: Slot,
    record: &'r mut Vec<u8>,
) -> Result<(&'r str, &'r [u8]), StoreError> {
    // The record was in memory when it was written or replayed, so its size fits.
    record.resize(slot.len as usize, 0);
    file.read_exact_at(record, slot.offset)
        .map_err(io_err("read", path))?;
    let record: &'r [u8] = record;
    let of_key = key.map_or_else(String::new, |key| format!(" of {key:?}"));
    let reason = match decode(record) {
        Ok(Record::Put { key: found, value }) if key.is_none_or(|key| key == found) => {
            return Ok((found, value));
        }
        Ok(_) => format!("it is not the put{of_key} the index expects"),
        Err(Damage::Checksum) => format!("the checksum of the put{of_key} no longer matches"),
        Err(Damage::Invalid(why)) => why,
    };
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        reason: format!(
            "the record at offset {} changed since this store wrote or loaded it: {reason}",
            slot.offset
        ),
    })
}

/// Writes a new log into the temp file: its header, then what `fill` writes; returns the open
/// file, its length and `fill`'s result. A failure removes the temp file.
fn write_temp<T>(
    dir: &Path,
    fill: impl FnOnce(&mut BufWriter<&File>, &Path) -> Result<T, StoreError>,
) -> Result<(File, u64, T), StoreError> {
    let temp = dir.join(COMPACT_FILE);
    let written = (|| {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)
            .map_err(io_err("create", &temp))?;
        let mut out = BufWriter::with_capacity(IO_BUFFER, &file);
        out.write_all(&MAGIC).map_err(io_err("write", &temp))?;
        let filled = fill(&mut out, &temp)?;
        out.flush().map_err(io_err("write", &temp))?;
        let end = out.stream_position().map_err(io_err("write", &temp))?;
        drop(out);
        Ok((file, end, filled))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Makes the temp file, open as `file`, durable and renames it over `log`. The caller makes the
/// rename durable. A failure removes the temp file and leaves the log as it was.
fn commit_temp(dir: &Path, file: &File) -> Result<(), StoreError> {
    let temp = dir.join(COMPACT_FILE);
    // The data must be on disk before the rename can be: otherwise a power cut could leave
    // `log` naming an empty or partial file.
    let committed = file
        .sync_all()
        .map_err(io_err("fsync", &temp))
        .and_then(|()| {
            let log = dir.join(LOG_FILE);
            fs::rename(&temp, &log).map_err(io_err("rename into place", &log))
        });
    if committed.is_err() {
        let _ = fs::remove_file(&temp);
    }
    committed
}

/// The file length to allocate for a log of `needed` bytes: an eighth more, at least
/// `min_bytes` and at most [`PREALLOCATE_MAX_BYTES`] (unless `min_bytes` is more), rounded up to
/// [`PREALLOCATE_ALIGN`].
fn allocation(needed: u64, min_bytes: u64) -> u64 {
    let chunk = (needed / 8).clamp(min_bytes, PREALLOCATE_MAX_BYTES.max(min_bytes));
    (needed + chunk).next_multiple_of(PREALLOCATE_ALIGN)
}

/// Writes zeros to `from..to` of `file`, [`IO_BUFFER`] bytes at a time.
fn write_zeros(file: &File, from: u64, to: u64) -> io::Result<()> {
    let mut at = from;
    while at < to {
        // At most the buffer's length.
        let len = (to - at).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..len], at)?;
        at += len as u64;
    }
    Ok(())
}

/// Where the zeros that run to `to` in `from..to` of `file` start: just after its last byte
/// that is not zero, or `from` if all are zeros. Read backwards, [`IO_BUFFER`] bytes at a time.
fn data_end(file: &File, from: u64, to: u64) -> io::Result<u64> {
    let mut buffer = vec![0; IO_BUFFER.min(usize::try_from(to - from).unwrap_or(IO_BUFFER))];
    let mut end = to;
    while end > from {
        // At most the buffer's length.
        let len = (end - from).min(buffer.len() as u64) as usize;
        let bytes = &mut buffer[..len];
        let start = end - len as u64;
        file.read_exact_at(bytes, start)?;
        // Compared whole first: most of what is read is zeros.
        if *bytes != ZEROS[..len] {
            let last = bytes.iter().rposition(|&b| b != 0).expect("not all zeros");
            return Ok(start + last as u64 + 1);
        }
        end = start;
    }
    Ok(from)
}

/// Deletes the temp file of a compaction that a crash interrupted. It is never read: the
/// rename that would have committed it did not happen, so `log` is still whole.
fn remove_leftover_compaction(dir: &Path) -> Result<(), StoreError> {
    let temp = dir.join(COMPACT_FILE);
    match fs::remove_file(&temp) {
        Ok(()) => {
            tracing::info!(
                path = %temp.display(),
                "removed the temp file of an interrupted compaction"
            );
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("remove leftover temp file", &temp)(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::mpsc::{self, Receiver, Sender};
    use std::time::Duration;

    use super::*;
    use crate::store::tests::contract;

    fn open(dir: &Path) -> LogStore {
        LogStore::open(dir).expect("open store")
    }

    fn log_path(dir: &Path) -> PathBuf {
        dir.join(LOG_FILE)
    }

    /// The file's length, preallocated space included.
    fn log_len(dir: &Path) -> u64 {
        fs::metadata(log_path(dir)).unwrap().len()
    }

    /// The log's length, that of its records: where the next one goes.
    fn log_end(store: &LogStore) -> u64 {
        store.log.writer().end
    }

    fn entry(key: &str, value: &[u8]) -> (String, Vec<u8>) {
        (key.to_owned(), value.to_vec())
    }

    fn flushes(store: &LogStore) -> u64 {
        store.log.flushes.load(Ordering::Relaxed)
    }

    fn inline_grows(store: &LogStore) -> u64 {
        store.log.inline_grows.load(Ordering::Relaxed)
    }

    fn compactions(store: &LogStore) -> u64 {
        store.log.compactions.load(Ordering::Relaxed)
    }

    /// The store's sizes and test hooks, which can change until its flusher thread starts.
    fn tune(store: &mut LogStore) -> &mut Log {
        Arc::get_mut(&mut store.log).expect("the flusher thread has not started")
    }

    /// Waits until the flusher thread has done the maintenance asked of it so far.
    fn settle(store: &LogStore) {
        loop {
            {
                let work = store.log.work();
                if work.asked == work.maintained {
                    return;
                }
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Installs a hook that holds the flusher thread where `hook` runs: the returned receiver
    /// hears when it got there, and a send on the returned sender lets it go on.
    fn hold(hook: &mut Mutex<Option<Box<dyn FnOnce() + Send>>>) -> (Receiver<()>, Sender<()>) {
        let (reached_tx, reached) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        *hook.get_mut().unwrap() = Some(Box::new(move || {
            reached_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }));
        (reached, release)
    }

    /// The error of opening `dir`, which must be a corrupt log; its message.
    fn corrupt_error(dir: &Path) -> String {
        match LogStore::open(dir) {
            Err(e @ StoreError::Corrupt { .. }) => {
                let message = e.to_string();
                let StoreError::Corrupt { path, .. } = e else {
                    unreachable!()
                };
                assert_eq!(path, log_path(dir));
                assert!(
                    message.contains(&log_path(dir).display().to_string()),
                    "{message}"
                );
                message
            }
            other => panic!("expected a corrupt-log error, got {other:?}"),
        }
    }

    /// A store holding `a`, `b` and `c` (in that order, 100-byte values), closed; returns the
    /// offset of each record and the log's end, before its preallocated zeros.
    fn three_records(dir: &Path) -> [u64; 4] {
        let store = open(dir);
        store.put("a", &[b'a'; 100]).unwrap();
        store.put("b", &[b'b'; 100]).unwrap();
        store.put("c", &[b'c'; 100]).unwrap();
        let size = (MIN_RECORD + 1 + 100) as u64;
        let first = MAGIC.len() as u64;
        let offsets = [first, first + size, first + 2 * size, first + 3 * size];
        assert!(log_len(dir) > offsets[3], "no space preallocated");
        offsets
    }

    /// [`contract`](crate::store::tests::contract) holds for the log store, and deleting a
    /// missing key writes nothing.
    #[test]
    fn log_store_keeps_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        contract::put_overwrite_delete(&store);
        let len = log_end(&store);
        store.delete("never existed").unwrap();
        assert_eq!(log_end(&store), len);
        contract::reopen_sees_everything(open);
    }

    /// Compaction shrinks the log to its live records, keeps each key's latest value, makes
    /// earlier writes durable, and a reopened store reads the compacted log.
    #[test]
    fn compaction_shrinks_the_log_and_keeps_the_latest_values() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        tune(&mut store).compact_min_bytes = 64 << 10;
        let value = |key: usize, round: usize| vec![(key * 31 + round) as u8; 1000];
        let mut token = SyncToken::DURABLE;
        for round in 0..100 {
            for key in 0..10 {
                token = store
                    .put_unsynced(&format!("group/{key}"), &value(key, round))
                    .unwrap();
                // Each compaction as soon as it is due, so the log's size below is exact.
                settle(&store);
            }
        }
        // The early puts were made durable by a compaction: syncing one flushes nothing.
        let before = flushes(&store);
        store.sync(SyncToken::new(1)).unwrap();
        assert_eq!(flushes(&store), before);
        store.sync(token).unwrap();
        store.delete("group/9").unwrap();
        settle(&store);
        assert!(compactions(&store) > 1);

        // The last compaction rewrote at most 64 KiB (plus its trigger's slack) of 10 keys.
        let len = log_end(&store);
        assert!(
            len < 2 * (64 << 10),
            "log of {len} bytes after 1 MB of puts"
        );
        assert!(!dir.path().join(COMPACT_FILE).exists());
        let expected: Vec<_> = (0..9)
            .map(|key| (format!("group/{key}"), value(key, 99)))
            .collect();
        assert_eq!(store.load_all().unwrap(), expected);

        drop(store);
        let store = open(dir.path());
        assert_eq!(store.load_all().unwrap(), expected);
        store.put("group/0", b"after reopen").unwrap();
        drop(store);
        assert_eq!(
            open(dir.path()).load_all().unwrap()[0],
            entry("group/0", b"after reopen")
        );
    }

    /// Compaction compares the log's records, not the file with its preallocated space, to the
    /// live ones: it waits until they are twice the live ones, then shrinks the log into a file
    /// with space allocated after it.
    #[test]
    fn compaction_counts_the_records_not_the_preallocated_space() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        tune(&mut store).compact_min_bytes = 64 << 10;
        let key = |key: usize| format!("group/{:02}", key % 100);
        // 100 keys: a log of 100 kB, all live, in a file of over 1 MiB.
        for k in 0..100 {
            store.put_unsynced(&key(k), &[1; 1000]).unwrap();
        }
        let live = log_end(&store);
        assert!(live > store.log.compact_min_bytes, "{live}");
        assert!(log_len(dir.path()) > 2 * live, "{}", log_len(dir.path()));

        // Overwrites of the same size, each followed by the compaction it may have asked for,
        // until one was.
        let mut end = live;
        for k in 0.. {
            store.put_unsynced(&key(k), &[2; 1000]).unwrap();
            settle(&store);
            if log_end(&store) < end {
                break;
            }
            end = log_end(&store);
        }
        let live_records = live - MAGIC.len() as u64;
        let record = live_records / 100;
        // The append that asked took the records past twice the live ones, and none before.
        assert!(
            end <= 2 * live_records && end + record > 2 * live_records,
            "compacted after {end} bytes, {live} live"
        );
        // The live records, the last overwrite's among them.
        assert_eq!(log_end(&store), live);
        assert_eq!(
            log_len(dir.path()),
            allocation(live, store.log.preallocate_min_bytes)
        );
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), 100);
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap(), loaded);
    }

    /// A reopened log keeps its preallocated space, sees exactly its records, and appends
    /// continue at their end.
    #[test]
    fn reopen_keeps_preallocated_space_and_appends_at_the_log_end() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"1").unwrap();
        store.put("group/b", &[7; 1000]).unwrap();
        let end = log_end(&store);
        let len = log_len(dir.path());
        assert!(
            len >= end + PREALLOCATE_MIN_BYTES,
            "{len} bytes for a log of {end}"
        );
        drop(store);

        let store = open(dir.path());
        assert_eq!(log_end(&store), end);
        assert_eq!(log_len(dir.path()), len);
        let expected = [entry("group/a", b"1"), entry("group/b", &[7; 1000])];
        assert_eq!(store.load_all().unwrap(), expected);
        store.put("group/c", b"3").unwrap();
        let record = encode(KIND_PUT, "group/c", b"3", Path::new("log")).unwrap();
        assert_eq!(log_end(&store), end + record.len() as u64);
        assert_eq!(log_len(dir.path()), len);
        let bytes = fs::read(log_path(dir.path())).unwrap();
        assert_eq!(bytes[end as usize..][..record.len()], record);
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap().len(), 3);
    }

    /// With small chunks the file grows ahead of the log many times, each time to whole blocks
    /// of zeros and with one flush, and a reopen sees every record.
    #[test]
    fn log_grows_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        tune(&mut store).preallocate_min_bytes = PREALLOCATE_ALIGN;
        let mut lengths = vec![log_len(dir.path())];
        for i in 0..100 {
            let flushed = flushes(&store);
            store
                .put_unsynced(&format!("group/{i:03}"), &[i as u8; 1000])
                .unwrap();
            // Including the grow it may have asked of the flusher thread.
            settle(&store);
            let len = log_len(dir.path());
            assert!(log_end(&store) < len, "record {i}");
            assert_eq!(len % PREALLOCATE_ALIGN, 0, "record {i}");
            let grown = len != *lengths.last().unwrap();
            assert_eq!(flushes(&store), flushed + u64::from(grown), "record {i}");
            if grown {
                lengths.push(len);
            }
        }
        assert!(lengths.len() > 10, "{lengths:?}");
        let end = log_end(&store);
        let bytes = fs::read(log_path(dir.path())).unwrap();
        assert!(bytes[end as usize..].iter().all(|&b| b == 0));
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), 100);
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.load_all().unwrap(), loaded);
        assert_eq!(log_end(&store), end);
        assert_eq!(log_len(dir.path()), bytes.len() as u64);
    }

    /// Durable appends past many chunks find the room grown ahead by the flusher thread, never
    /// growing the log themselves after the first append to the new log, and a reopen sees
    /// every value. Each append gives the thread time for the grow it asked for, as appends at
    /// a usual pace do: without that, on a loaded machine the appends can use up the room left
    /// before the thread runs, and then grow the log themselves, as they should.
    #[test]
    fn log_grows_ahead_on_the_flusher_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        tune(&mut store).preallocate_min_bytes = 32 << 10;
        // Nothing is allocated ahead of the first append.
        store.put("first", b"").unwrap();
        assert_eq!(inline_grows(&store), 1);
        let first_len = log_len(dir.path());
        let value = |i: usize| vec![i as u8; 1000];
        for i in 0..600 {
            store.put(&format!("group/{i:03}"), &value(i)).unwrap();
            settle(&store);
        }
        assert_eq!(inline_grows(&store), 1);
        let len = log_len(dir.path());
        assert!(len > 10 * first_len, "{len} bytes from {first_len}");
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), 601);
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.load_all().unwrap(), loaded);
        let written: Vec<_> = (0..600)
            .map(|i| entry(&format!("group/{i:03}"), &value(i)))
            .collect();
        assert_eq!(loaded[1..], written);
    }

    /// An append that needs room while the flusher thread is writing the next chunk's zeros
    /// waits for them, rather than write there or grow the log itself, then lands right after
    /// the log's last record.
    #[test]
    fn append_waits_for_a_background_grow() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let log = tune(&mut store);
        log.preallocate_min_bytes = 64 << 10;
        let (claimed, release) = hold(&mut log.grow_hook);
        let mut count = 0;
        while claimed.try_recv().is_err() {
            store.put(&format!("group/{count:03}"), &[1; 1000]).unwrap();
            count += 1;
        }
        let (end, allocated) = {
            let writer = store.log.writer();
            assert!(writer.growing);
            (writer.end, writer.allocated)
        };
        // One byte more than the room left.
        let value = vec![7; (allocated - end) as usize - HEAD_LEN - "big".len() - CRC_LEN + 1];
        let record = encode(KIND_PUT, "big", &value, Path::new("log")).unwrap();
        assert_eq!(end + record.len() as u64, allocated + 1);
        let (appended_tx, appended) = mpsc::channel();
        thread::scope(|scope| {
            let store = &store;
            let value = &value;
            scope.spawn(move || {
                store.put_unsynced("big", value).unwrap();
                appended_tx.send(()).unwrap();
            });
            let waited = appended.recv_timeout(Duration::from_millis(100));
            assert!(waited.is_err(), "the append did not wait for the grow");
            assert_eq!(log_end(store), end);
            release.send(()).unwrap();
            appended.recv().unwrap();
        });
        assert_eq!(inline_grows(&store), 1);
        assert_eq!(log_end(&store), end + record.len() as u64);
        let bytes = fs::read(log_path(dir.path())).unwrap();
        assert_eq!(bytes[end as usize..][..record.len()], record);
        assert!(
            bytes[(end as usize + record.len())..]
                .iter()
                .all(|&b| b == 0)
        );
        settle(&store);
        let loaded = store.load_all().unwrap();
        assert_eq!(loaded.len(), count + 1);
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap(), loaded);
    }

    /// Puts, overwrites and deletes made while a compaction copies its snapshot (held there by a
    /// hook) are carried, in order, into the compacted log: the store and a reopen see each
    /// key's last value, and the log shrank.
    #[test]
    fn appends_during_a_compaction_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let log = tune(&mut store);
        log.compact_min_bytes = 16 << 10;
        let (entered, release) = hold(&mut log.compaction_hook);
        let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut put = |key: &str, value: Vec<u8>| {
            store.put(key, &value).unwrap();
            expected.insert(key.to_owned(), value);
        };
        let mut round = 0;
        while entered.try_recv().is_err() {
            for key in 0..10 {
                put(&format!("group/{key}"), vec![round; 1000]);
            }
            round += 1;
        }
        let before = log_end(&store);
        put("group/0", b"overwritten during".to_vec());
        put("group/2", b"first".to_vec());
        put("group/2", b"second".to_vec());
        put("group/3", b"re-put".to_vec());
        put("new", b"added during".to_vec());
        store.delete("group/1").unwrap();
        store.delete("group/3").unwrap();
        store.put("group/3", b"after its delete").unwrap();
        store.delete("new").unwrap();
        expected.remove("group/1");
        expected.insert("group/3".to_owned(), b"after its delete".to_vec());
        expected.remove("new");
        release.send(()).unwrap();
        settle(&store);
        assert_eq!(compactions(&store), 1);
        assert!(log_end(&store) < before, "{} of {before}", log_end(&store));
        assert_eq!(store.load_all().unwrap(), Vec::from_iter(expected.clone()));
        store.put("group/4", b"after").unwrap();
        expected.insert("group/4".to_owned(), b"after".to_vec());
        drop(store);
        let loaded = open(dir.path()).load_all().unwrap();
        assert_eq!(loaded, Vec::from_iter(expected));
    }

    /// Threads putting, overwriting and deleting while compactions (and grows) run on the
    /// flusher thread leave every key with exactly its last value, in the store and after a
    /// reopen, in a log that compactions kept small.
    #[test]
    fn writes_concurrent_with_compactions_keep_their_last_values() {
        const WRITERS: usize = 4;
        const OPS: usize = 500;
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let log = tune(&mut store);
        log.compact_min_bytes = 16 << 10;
        log.preallocate_min_bytes = PREALLOCATE_ALIGN;
        // The first compaction is slowed, so that writes certainly land during one.
        *log.compaction_hook.get_mut().unwrap() =
            Some(Box::new(|| thread::sleep(Duration::from_millis(20))));
        let start = Barrier::new(WRITERS);
        let written = AtomicU64::new(0);
        let expected: BTreeMap<String, Vec<u8>> = thread::scope(|scope| {
            let writers: Vec<_> = (0..WRITERS)
                .map(|t| {
                    let (store, start, written) = (&store, &start, &written);
                    scope.spawn(move || {
                        let mut last = BTreeMap::new();
                        start.wait();
                        for i in 0..OPS {
                            let key = format!("t{t}/{}", i % 10);
                            if i % 7 == 6 {
                                store.delete(&key).unwrap();
                                last.remove(&key);
                            } else {
                                let value = format!("{t}/{i};").repeat(40).into_bytes();
                                store.put(&key, &value).unwrap();
                                let len = HEAD_LEN + key.len() + value.len() + CRC_LEN;
                                written.fetch_add(len as u64, Ordering::Relaxed);
                                last.insert(key, value);
                            }
                        }
                        last
                    })
                })
                .collect();
            writers
                .into_iter()
                .flat_map(|writer| writer.join().unwrap())
                .collect()
        });
        settle(&store);
        assert!(compactions(&store) > 1, "{}", compactions(&store));
        let written = written.into_inner();
        assert!(
            log_end(&store) < written / 4,
            "a log of {} bytes after {written} bytes of puts",
            log_end(&store)
        );
        let expected: Vec<_> = expected.into_iter().collect();
        assert_eq!(store.load_all().unwrap(), expected);
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap(), expected);
    }

    /// A compaction that fails before its rename (writing `log.compact`) leaves the log in use,
    /// every value intact and no temp file; the store takes writes, and compacts again only
    /// once the log has doubled.
    #[test]
    fn failed_compaction_leaves_the_log_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let log = tune(&mut store);
        log.compact_min_bytes = 16 << 10;
        log.fail_next_compaction.store(true, Ordering::Relaxed);
        let key = |i: usize| format!("group/{}", i % 10);
        let value = |i: usize| vec![(i % 251) as u8; 1000];
        let overwrite = |i: usize| {
            store.put(&key(i), &value(i)).unwrap();
            settle(&store);
        };
        let mut i = 0;
        let mut failed_at = 0;
        while failed_at == 0 {
            overwrite(i);
            i += 1;
            failed_at = store.log.writer().compact_after / 2;
        }
        assert_eq!(compactions(&store), 0);
        assert!(!dir.path().join(COMPACT_FILE).exists());
        let expected = |written: usize| -> Vec<_> {
            (written - 10..written)
                .map(|i| (key(i), value(i)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect()
        };
        assert_eq!(store.load_all().unwrap(), expected(i));

        // Each overwrite adds a record of this size.
        let record = (HEAD_LEN + key(0).len() + value(0).len() + CRC_LEN) as u64;
        let mut end = log_end(&store);
        while compactions(&store) == 0 {
            assert!(end <= 2 * failed_at, "not compacted at {end} bytes");
            end = log_end(&store);
            overwrite(i);
            i += 1;
        }
        // The overwrite that asked took the log past twice its length at the failure.
        assert!(
            end + record > 2 * failed_at,
            "compacted after {end} bytes, failed at {failed_at}"
        );
        assert_eq!(store.load_all().unwrap(), expected(i));
        drop(store);
        assert_eq!(open(dir.path()).load_all().unwrap(), expected(i));
    }

    /// The temp file of an interrupted compaction is removed on open and never read.
    #[test]
    fn leftover_compaction_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        open(dir.path()).put("group/a", b"committed").unwrap();
        let temp = dir.path().join(COMPACT_FILE);
        fs::write(&temp, b"ASTLOG\0\x01 half a compaction").unwrap();
        let store = open(dir.path());
        assert!(!temp.exists());
        assert_eq!(store.load_all().unwrap(), [entry("group/a", b"committed")]);
    }

    /// A log cut short anywhere in its last record loses only that record on open, and the
    /// store appends after the earlier ones.
    #[test]
    fn torn_tail_cut_short_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let [_, _, last, end] = three_records(dir.path());
        let full = fs::read(log_path(dir.path())).unwrap();
        for len in last + 1..end {
            fs::write(log_path(dir.path()), &full[..len as usize]).unwrap();
            let store = open(dir.path());
            assert_eq!(log_len(dir.path()), last, "cut at {len}");
            assert_eq!(
                store.load_all().unwrap(),
                [entry("a", &[b'a'; 100]), entry("b", &[b'b'; 100])]
            );
        }
        open(dir.path()).put("d", b"after the torn end").unwrap();
        assert_eq!(
            open(dir.path()).load_all().unwrap(),
            [
                entry("a", &[b'a'; 100]),
                entry("b", &[b'b'; 100]),
                entry("d", b"after the torn end")
            ]
        );
    }

    /// A last record failing its checksum, anywhere, is a torn end: dropped on open.
    #[test]
    fn torn_tail_failing_its_checksum_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let [_, _, last, end] = three_records(dir.path());
        let clean = fs::read(log_path(dir.path())).unwrap();
        for i in last as usize..end as usize {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x10;
            fs::write(log_path(dir.path()), &bytes).unwrap();
            let store = open(dir.path());
            assert_eq!(log_len(dir.path()), last, "byte {i}");
            assert_eq!(store.load_all().unwrap().len(), 2, "byte {i}");
        }
        let store = open(dir.path());
        store.put("c", b"again").unwrap();
        assert_eq!(store.load_all().unwrap()[2], entry("c", b"again"));
    }

    /// Zeros from a record's start to the end of the file, however many (preallocated, or a
    /// record a power cut left as zeros), end the log and are kept.
    #[test]
    fn zeros_to_the_end_of_the_file_end_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let [_, _, last, end] = three_records(dir.path());
        let clean = fs::read(log_path(dir.path())).unwrap();
        for (zeros_from, zeros, records) in [
            (end, 0, 3),
            (end, 1, 3),
            (end, MIN_RECORD, 3),
            (end, 10_000, 3),
            (last, 10_000, 2),
            (last, clean.len() - last as usize, 2),
        ] {
            let mut bytes = clean[..zeros_from as usize].to_vec();
            bytes.resize(bytes.len() + zeros, 0);
            fs::write(log_path(dir.path()), &bytes).unwrap();
            let store = open(dir.path());
            assert_eq!(
                store.load_all().unwrap().len(),
                records,
                "{zeros} at {zeros_from}"
            );
            assert_eq!(log_end(&store), zeros_from, "{zeros} at {zeros_from}");
            assert_eq!(
                log_len(dir.path()),
                bytes.len() as u64,
                "{zeros} at {zeros_from}"
            );
        }
    }

    /// A torn record inside preallocated space (parts of it written, zeros in place of the
    /// rest) is dropped on open, the earlier records intact, and the store appends after them.
    #[test]
    fn torn_record_in_preallocated_space_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let [_, _, last, end] = three_records(dir.path());
        let clean = fs::read(log_path(dir.path())).unwrap();
        let [last, end] = [last as usize, end as usize];
        let kept = [entry("a", &[b'a'; 100]), entry("b", &[b'b'; 100])];
        for (written, what) in [
            (last..last + HEAD_LEN, "its head"),
            (last..end - CRC_LEN, "all but its checksum"),
            (last + 4..end, "all but its length"),
            (last + 50..last + 60, "part of its value"),
        ] {
            let mut bytes = clean.clone();
            bytes[last..end].fill(0);
            bytes[written.clone()].copy_from_slice(&clean[written]);
            fs::write(log_path(dir.path()), &bytes).unwrap();
            let store = open(dir.path());
            assert_eq!(store.load_all().unwrap(), kept, "{what}");
            assert_eq!(log_end(&store), last as u64, "{what}");
            store.put("d", b"after the torn record").unwrap();
            drop(store);
            let mut expected = kept.to_vec();
            expected.push(entry("d", b"after the torn record"));
            assert_eq!(open(dir.path()).load_all().unwrap(), expected, "{what}");
        }
    }

    /// Damage to a record that a valid record follows, in its value or its length, is
    /// reported naming the log and the offset, and nothing is truncated.
    #[test]
    fn damage_in_the_middle_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let [first, second, ..] = three_records(dir.path());
        let clean = fs::read(log_path(dir.path())).unwrap();
        // A flipped value byte in the second record; in the first, a shorter length, a longer
        // one, and one that runs past the end of the file.
        for (i, flip, offset) in [
            (second as usize + 50, 0x10, second),
            (first as usize, 0x40, first),
            (first as usize, 0x01, first),
            (first as usize + 3, 0x01, first),
        ] {
            let mut bytes = clean.clone();
            bytes[i] ^= flip;
            fs::write(log_path(dir.path()), &bytes).unwrap();
            let message = corrupt_error(dir.path());
            assert!(
                message.contains(&format!("record at offset {offset} is damaged")),
                "{message}"
            );
            assert!(message.contains("a valid record follows"), "{message}");
            assert_eq!(fs::read(log_path(dir.path())).unwrap(), bytes);
        }
    }

    /// A record whose checksum matches but that this build cannot read is corrupt even at the
    /// end: it was written like that, not torn.
    #[test]
    fn unreadable_record_with_a_valid_checksum_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let [.., end] = three_records(dir.path());
        let mut bytes = fs::read(log_path(dir.path())).unwrap();
        let record = encode(7, "k", b"v", Path::new("log")).unwrap();
        bytes[end as usize..][..record.len()].copy_from_slice(&record);
        fs::write(log_path(dir.path()), &bytes).unwrap();
        let message = corrupt_error(dir.path());
        assert!(message.contains("unknown record kind 7"), "{message}");
    }

    /// A log with a bad or short header, or a newer format version, is refused.
    #[test]
    fn bad_header_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        three_records(dir.path());
        let clean = fs::read(log_path(dir.path())).unwrap();
        let mut newer = clean.clone();
        newer[7] = 2;
        let mut foreign = clean.clone();
        foreign[0] = b'X';
        for (bytes, says) in [
            (newer, "log format version 2, this build reads 1"),
            (foreign, "not a store log"),
            (b"ASTLOG".to_vec(), "shorter than the log's header"),
            (Vec::new(), "shorter than the log's header"),
        ] {
            fs::write(log_path(dir.path()), &bytes).unwrap();
            let message = corrupt_error(dir.path());
            assert!(message.contains(says), "{message}");
        }
    }

    /// A second open of a directory in use fails with `Locked`, from this store or a
    /// `DirStore`, until the first closes.
    #[test]
    fn second_open_is_refused_while_locked() {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path());
        let me = std::process::id();
        let error = LogStore::open(dir.path()).expect_err("locked");
        assert!(
            matches!(error, StoreError::Locked { holder: Some(pid), .. } if pid == me),
            "{error:?}"
        );
        let error = crate::store::DirStore::open(dir.path()).expect_err("locked");
        assert!(matches!(error, StoreError::Locked { .. }), "{error:?}");
        drop(first);
        open(dir.path());
    }

    const THREADS: usize = 8;
    const WRITES: usize = 200;

    /// Writes `t{t}/{i}`, `WRITES` values of `value_len` bytes `t`, from each of `THREADS`
    /// threads started together, each thread passing each write's token to `wait`.
    fn write_from_threads(store: &LogStore, value_len: usize, wait: impl Fn(SyncToken) + Sync) {
        let start = Barrier::new(THREADS);
        thread::scope(|scope| {
            for t in 0..THREADS {
                let (start, wait) = (&start, &wait);
                scope.spawn(move || {
                    start.wait();
                    for i in 0..WRITES {
                        let token = store
                            .put_unsynced(&format!("t{t}/{i:03}"), &vec![t as u8; value_len])
                            .unwrap();
                        wait(token);
                    }
                });
            }
        });
    }

    /// Writes from 8 threads, each synced after the write, all survive a reopen, and the
    /// threads shared flushes.
    #[test]
    fn concurrent_writers_share_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        write_from_threads(&store, 2000, |token| store.sync(token).unwrap());
        let flushes = flushes(&store);
        assert!(
            flushes < (THREADS * WRITES) as u64,
            "{flushes} flushes for {} writes",
            THREADS * WRITES
        );
        drop(store);
        let loaded = open(dir.path()).load_all().unwrap();
        assert_eq!(loaded.len(), THREADS * WRITES);
        for (key, value) in loaded {
            let t: u8 = key[1..key.find('/').unwrap()].parse().unwrap();
            assert_eq!(value, [t; 2000], "{key}");
        }
    }

    /// Syncing a token that an earlier flush covered, or the durable token, flushes nothing.
    #[test]
    fn sync_of_a_flushed_token_does_not_flush() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let first = store.put_unsynced("group/a", b"1").unwrap();
        let second = store.put_unsynced("group/b", b"2").unwrap();
        // The first append allocated space, flushing it, before its record.
        assert_eq!(flushes(&store), 1);
        store.sync(second).unwrap();
        assert_eq!(flushes(&store), 2);
        store.sync(first).unwrap();
        store.sync(second).unwrap();
        store.sync(SyncToken::DURABLE).unwrap();
        assert_eq!(flushes(&store), 2);
    }

    /// An append that fails part way leaves nothing of its record: the store appends after the
    /// acknowledged records, and a reopen sees exactly those, without dropping a torn end.
    #[test]
    fn failed_append_leaves_only_acknowledged_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"1").unwrap();
        store.put("group/b", b"2").unwrap();
        let end = log_end(&store);
        store.fail_next_append.store(true, Ordering::Relaxed);
        let error = store.put("group/c", &[3; 1000]).expect_err("append fails");
        assert!(
            error.to_string().contains("injected append failure"),
            "{error}"
        );
        assert_eq!(log_end(&store), end);
        assert_eq!(log_len(dir.path()), end);

        // The store still takes writes: the failure left nothing unknown.
        store.put("group/d", b"4").unwrap();
        let expected = [
            entry("group/a", b"1"),
            entry("group/b", b"2"),
            entry("group/d", b"4"),
        ];
        assert_eq!(store.load_all().unwrap(), expected);
        let len = log_len(dir.path());
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.load_all().unwrap(), expected);
        assert_eq!(log_len(dir.path()), len, "a torn end was dropped");
    }

    /// After a failed flush, that sync and every later write and sync fail saying to restart;
    /// a restarted store loads the log.
    #[test]
    fn failed_flush_makes_the_store_refuse_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store.put("group/a", b"durable").unwrap();
        let durable = store.put_unsynced("group/b", b"flushed").unwrap();
        store.sync(durable).unwrap();
        store.log.fail_next_flush.store(true, Ordering::Relaxed);
        let error = store.put("group/a", b"unknown").expect_err("flush fails");
        let message = error.to_string();
        assert!(matches!(error, StoreError::Io { .. }), "{error:?}");
        assert!(message.contains("injected flush failure"), "{message}");
        assert!(message.contains("restart the service"), "{message}");

        let refusals = [
            store.put("group/c", b"x").expect_err("put refused"),
            store
                .put_unsynced("group/c", b"x")
                .expect_err("append refused"),
            store.delete("group/a").expect_err("delete refused"),
            store.sync(durable).expect_err("sync refused"),
        ];
        for error in refusals {
            let message = error.to_string();
            assert!(matches!(error, StoreError::Io { .. }), "{error:?}");
            assert!(
                message.contains("a flush or write failed earlier"),
                "{message}"
            );
            assert!(message.contains("injected flush failure"), "{message}");
            assert!(message.contains("restart the service"), "{message}");
        }
        assert!(format!("{store:?}").contains("injected flush failure"));

        drop(store);
        let store = open(dir.path());
        assert_eq!(store.load_all().unwrap()[1], entry("group/b", b"flushed"));
        store.put("group/c", b"after restart").unwrap();
    }

    /// The result of a `sync_then` and the thread `done` ran on, sent to `tx`.
    type Answer = (Result<(), StoreError>, thread::ThreadId);

    /// A `sync_then` callback that sends its result and its thread to `tx`.
    fn send_to(tx: &Sender<Answer>) -> Done {
        let tx = tx.clone();
        Box::new(move |result| {
            let _ = tx.send((result, thread::current().id()));
        })
    }

    /// Waiters registered from 8 threads, each after its own unsynced write, are all answered
    /// `Ok`, with at most a quarter as many flushes as waiters, and the writes survive a reopen.
    #[test]
    fn sync_then_waiters_share_flushes() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        // The first append allocates space, flushing: it is not one of the waiters' flushes.
        store.put("start", b"").unwrap();
        let before = flushes(&store);
        let (tx, rx) = mpsc::channel();
        write_from_threads(&store, 100, |token| store.sync_then(token, send_to(&tx)));
        for _ in 0..THREADS * WRITES {
            let (result, _) = rx.recv().unwrap();
            result.unwrap();
        }
        let flushes = flushes(&store) - before;
        assert!(
            flushes * 4 <= (THREADS * WRITES) as u64,
            "{flushes} flushes for {} waiters",
            THREADS * WRITES
        );
        drop(store);
        assert_eq!(
            open(dir.path()).load_all().unwrap().len(),
            THREADS * WRITES + 1
        );
    }

    /// A `sync_then` for a write already durable, or for the durable token, calls `done` before
    /// it returns, on the caller's thread, without flushing or starting the flusher thread.
    #[test]
    fn sync_then_of_a_durable_token_answers_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let token = store.put_unsynced("group/a", b"1").unwrap();
        store.sync(token).unwrap();
        let before = flushes(&store);
        let (tx, rx) = mpsc::channel();
        for token in [token, SyncToken::DURABLE] {
            store.sync_then(token, send_to(&tx));
            let (result, on) = rx.try_recv().expect("answered before sync_then returned");
            result.unwrap();
            assert_eq!(on, thread::current().id());
        }
        assert_eq!(flushes(&store), before);
        assert!(store.flusher.lock().unwrap().is_none());
    }

    /// When a flush fails, every queued waiter is answered with an error naming it, and so is
    /// every later `sync_then`, at once, even for a token an earlier flush covered.
    #[test]
    fn sync_then_after_a_failed_flush_reports_it() {
        const WAITERS: usize = 50;
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let durable = store.put_unsynced("group/a", b"durable").unwrap();
        store.sync(durable).unwrap();
        let tokens: Vec<_> = (0..WAITERS)
            .map(|i| store.put_unsynced(&format!("group/{i}"), b"x").unwrap())
            .collect();
        store.log.fail_next_flush.store(true, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        for token in tokens {
            store.sync_then(token, send_to(&tx));
        }
        for _ in 0..WAITERS {
            let (result, _) = rx.recv().unwrap();
            let message = result.expect_err("the flush failed").to_string();
            assert!(message.contains("injected flush failure"), "{message}");
        }
        for token in [durable, SyncToken::DURABLE] {
            store.sync_then(token, send_to(&tx));
            let (result, on) = rx.try_recv().expect("answered before sync_then returned");
            let message = result.expect_err("the store failed").to_string();
            assert!(
                message.contains("a flush or write failed earlier"),
                "{message}"
            );
            assert_eq!(on, thread::current().id());
        }
    }

    /// Dropping the store while waiters are queued behind a busy flusher thread answers every
    /// one of them `Ok` (the drop flushes for them), stops the thread, and releases the
    /// directory, which reopens with their writes.
    #[test]
    fn drop_answers_queued_waiters() {
        const QUEUED: usize = 20;
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let (tx, rx) = mpsc::channel();
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        // The first waiter's `done` holds the flusher thread until released, so the others
        // stay queued.
        let token = store.put_unsynced("group/first", b"1").unwrap();
        let first = send_to(&tx);
        store.sync_then(
            token,
            Box::new(move |result| {
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                first(result);
            }),
        );
        entered.recv().unwrap();
        for i in 0..QUEUED {
            let token = store.put_unsynced(&format!("group/{i}"), b"x").unwrap();
            store.sync_then(token, send_to(&tx));
        }
        let log = Arc::clone(&store.log);
        thread::scope(|scope| {
            scope.spawn(move || drop(store));
            // Released only once the drop has told the thread to stop, so the waiters are
            // still queued when it does.
            while !log.work().stop {
                thread::yield_now();
            }
            release.send(()).unwrap();
        });
        assert_eq!(Arc::strong_count(&log), 1, "the flusher thread has exited");
        assert_eq!(log.work().queue.len(), 0);
        let answers: Vec<_> = rx.try_iter().collect();
        assert_eq!(answers.len(), QUEUED + 1);
        for (result, _) in answers {
            result.unwrap();
        }
        // It holds the directory's lock.
        drop(log);
        assert_eq!(open(dir.path()).load_all().unwrap().len(), QUEUED + 1);
    }
}

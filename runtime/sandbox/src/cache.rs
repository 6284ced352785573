//! Compiled-component cache keyed by content hash and engine, in memory and optionally on
//! disk, so that loading a known component costs a read, a checksum and a deserialize
//! instead of a Cranelift compile: 0.1 + 0.5 + 0.6 ms for the balanced sample's 680 KB
//! artifact (compiled in 0.8 s, debug build), 60 + 60 + 70 ms for a 43 MB one (60 s).
//!
//! A cache file is not trusted: it is native code that wasmtime maps executable without
//! checking it, so a file is used only if it carries this cache's header, the content hash it
//! is filed under and a SHA-256 of its payload that matches; anything else (truncated, bit
//! rot, a file renamed to another entry, a foreign file) is ignored and recompiled over. The
//! checksum guards against accidents, not against someone who can write the directory: they
//! could as well replace the runtime itself.
//!
//! A [`SharedDir`] collects the directory against the components in use, for a process whose
//! runtimes come and go over one directory (the service's tenants).

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A component's identity: SHA-256 of its bytes.
pub(crate) type ContentHash = [u8; 32];

pub(crate) fn content_hash(bytes: &[u8]) -> ContentHash {
    Sha256::digest(bytes).into()
}

pub(crate) fn hex(hash: &ContentHash) -> String {
    hash.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// What every cache file starts with (the format's version is its last byte); then the
/// content hash it was compiled from, the SHA-256 of the payload, and the payload, wasmtime's
/// `Component::serialize`.
const MAGIC: &[u8; 8] = b"asgcwas1";
const HEADER_BYTES: usize = MAGIC.len() + 32 + 32;

/// A cache file larger than this is not read: no component within the runtime's code limits
/// compiles to anything near it, so it is not one of ours.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// The file extension of cache entries; anything else in the directory is a stray.
const EXTENSION: &str = "cwasm";

/// Tells artifacts of differently configured or versioned engines apart on disk.
fn engine_tag(engine: &Engine) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

fn file_name(sha256: &str, tag: &str) -> String {
    format!("{sha256}-{tag}.{EXTENSION}")
}

/// The (content hash, engine tag) a cache file name stands for, if it is an entry's name.
fn parse_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(EXTENSION)?.strip_suffix('.')?;
    let (sha256, tag) = stem.split_once('-')?;
    let hex_of = |s: &str, len| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex_of(sha256, 64) && hex_of(tag, 16)).then_some((sha256, tag))
}

#[derive(Debug)]
pub(crate) struct ArtifactCache {
    memory: Mutex<HashMap<ContentHash, Component>>,
    dir: Option<PathBuf>,
    /// The most the directory's entries may take (see `prune`).
    max_bytes: Option<u64>,
    engine_tag: String,
}

impl ArtifactCache {
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>, max_bytes: Option<u64>) -> Self {
        Self {
            memory: Mutex::new(HashMap::new()),
            dir,
            max_bytes,
            engine_tag: engine_tag(engine),
        }
    }

    fn path(&self, dir: &Path, hash: &ContentHash) -> PathBuf {
        dir.join(file_name(&hex(hash), &self.engine_tag))
    }

    /// The compiled component for `bytes`: from memory, else from disk, else `compile`d and
    /// stored in both. A component from disk or from `compile` is kept only if `accept` takes
    /// it: a file on disk is input like any other, and may have been compiled under a higher
    /// limit (another runtime sharing the directory), so what this cache's runtime refuses
    /// never stays in its memory. Remembered components were accepted when they came in.
    ///
    /// With a directory, memory keeps only components whose file is still there: a file
    /// collected by a [`SharedDir`] (its last user gone) takes its compiled code out of memory
    /// at this cache's next load, and a component remembered without its file (collected,
    /// then loaded again) has its file written again rather than recompiled.
    pub(crate) fn get_or_compile(
        &self,
        engine: &Engine,
        hash: &ContentHash,
        accept: impl Fn(&Component) -> wasmtime::Result<()>,
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<Component> {
        let compile = || compile().and_then(|c| accept(&c).map(|()| c));
        let remembered = self.lock().get(hash).cloned();
        let Some(dir) = self.dir.as_deref() else {
            if let Some(c) = remembered {
                return Ok(c);
            }
            let component = compile()?;
            self.lock().insert(*hash, component.clone());
            return Ok(component);
        };
        let path = self.path(dir, hash);
        let component = match remembered {
            Some(c) if path.exists() => return Ok(c),
            Some(c) => c,
            None => match read(engine, hash, &path) {
                Some(c) => {
                    accept(&c)?;
                    if self.max_bytes.is_some() {
                        touch(&path);
                    }
                    self.remember(dir, hash, &c);
                    return Ok(c);
                }
                None => compile()?,
            },
        };
        match store(&component, hash, &path) {
            Ok(()) => {
                if let Some(max) = self.max_bytes {
                    prune(dir, max, &path);
                }
            }
            Err(e) => tracing::warn!(
                path = %path.display(),
                sha256 = %hex(hash),
                error = %e,
                "could not cache compiled artifact"
            ),
        }
        self.remember(dir, hash, &component);
        Ok(component)
    }

    /// Keeps `component` in memory, forgetting those whose files were collected.
    fn remember(&self, dir: &Path, hash: &ContentHash, component: &Component) {
        let mut memory = self.lock();
        memory.retain(|h, _| self.path(dir, h).exists());
        memory.insert(*hash, component.clone());
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ContentHash, Component>> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The component in the cache file at `path`, if there is one and it passes the checks of the
/// module docs; a file that does not is reported and left to be overwritten.
fn read(engine: &Engine, hash: &ContentHash, path: &Path) -> Option<Component> {
    let unusable = |why: &dyn std::fmt::Display| {
        tracing::warn!(
            path = %path.display(),
            sha256 = %hex(hash),
            reason = %why,
            "ignoring unusable cached artifact; recompiling"
        );
    };
    let bytes = match read_bounded(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            unusable(&e);
            return None;
        }
    };
    let payload = match checked_payload(hash, &bytes) {
        Ok(payload) => payload,
        Err(why) => {
            unusable(&why);
            return None;
        }
    };
    // SAFETY: `payload` is exactly what `store` wrote from `Component::serialize` for this
    // content hash (its checksum matches, so it is neither truncated nor corrupt nor another
    // entry's), and wasmtime checks that it was compiled by a compatible engine. The bytes
    // are in memory, so the file cannot change between the check and the use.
    #[allow(unsafe_code)]
    match unsafe { Component::deserialize(engine, payload) } {
        Ok(c) => Some(c),
        Err(e) => {
            unusable(&format!("{e:#}"));
            None
        }
    }
}

fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > MAX_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "{len} bytes, over the {MAX_FILE_BYTES}-byte bound of a cache file"
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The payload of a cache file for `hash`, or why the file is not one.
fn checked_payload<'a>(hash: &ContentHash, file: &'a [u8]) -> Result<&'a [u8], &'static str> {
    if file.len() < HEADER_BYTES || &file[..MAGIC.len()] != MAGIC {
        return Err("not a cache file of this runtime (no header)");
    }
    let (filed_as, rest) = file[MAGIC.len()..].split_at(32);
    let (checksum, payload) = rest.split_at(32);
    if filed_as != hash {
        return Err("compiled from another component than its name says");
    }
    if Sha256::digest(payload).as_slice() != checksum {
        return Err("checksum mismatch (truncated or corrupt)");
    }
    Ok(payload)
}

/// Marks the entry at `path` as just used, for [`prune`]'s order (its modification time:
/// access times are not kept reliably, e.g. under `relatime`).
fn touch(path: &Path) {
    let now = std::time::SystemTime::now();
    if let Err(e) = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(now))
    {
        tracing::debug!(path = %path.display(), error = %e, "cannot mark a cache entry used");
    }
}

/// Removes the least recently used entries of `dir` (by modification time, see [`touch`])
/// until those left take at most `max_bytes`, never `keep` (the entry just written, which
/// alone may exceed the bound). Only entries are counted and removed: temporary files of
/// writes in flight, in this process or another, are left alone. A file another process
/// removed first is simply gone.
fn prune(dir: &Path, max_bytes: u64, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().and_then(parse_file_name).is_some())
        .filter_map(|e| {
            let meta = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
            Some((meta.modified().ok()?, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
    if total <= max_bytes {
        return;
    }
    files.sort();
    let (mut removed, mut freed) = (0, 0);
    for (_, len, path) in &files {
        if total <= max_bytes {
            break;
        }
        if path == keep {
            continue;
        }
        let gone = remove(path);
        total = total.saturating_sub(*len);
        removed += 1;
        freed += gone;
    }
    tracing::debug!(path = %dir.display(), removed, bytes = freed, "compiled-component cache pruned");
}

/// Distinguishes the temporary files of concurrent writes of the same entry in one process
/// (two tenants compiling the same upload), which would otherwise interleave in one file.
static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes the artifact atomically: a crash leaves either no file or a whole one (and one cut
/// short by a crash before its data reached the disk fails its checksum).
fn store(component: &Component, hash: &ContentHash, path: &Path) -> wasmtime::Result<()> {
    let payload = component.serialize()?;
    let mut file = Vec::with_capacity(HEADER_BYTES + payload.len());
    file.extend_from_slice(MAGIC);
    file.extend_from_slice(hash);
    file.extend_from_slice(&Sha256::digest(&payload));
    file.extend_from_slice(&payload);
    let dir = path.parent().expect("cache paths are inside the cache dir");
    std::fs::create_dir_all(dir)?;
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    std::fs::write(&tmp, file)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// A cache directory shared by several runtimes and collected against the components they
/// use: each use is a [`CacheRef`], taken before the load that may write the entry and held
/// as long as the component is live. [`SharedDir::sweep`] removes what no reference holds
/// (entries of components no longer used, of engines no longer run, and stray files) and
/// starts collecting: from then until [`SharedDir::stop_collecting`], when a hash's last
/// reference goes, its files go with it. Before and after (a start that failed half way, a
/// stop, which drops every reference) entries stay for the next start.
///
/// The lock orders every removal against every new reference: a load that took its reference
/// after a removal writes its file afresh, and none can lose its file while it holds one.
#[derive(Debug)]
pub struct SharedDir {
    dir: PathBuf,
    state: Mutex<DirState>,
}

#[derive(Debug, Default)]
struct DirState {
    /// References per content hash (hex); a hash without any is not a key.
    refs: HashMap<String, usize>,
    /// The tags of the engines of every runtime registered: their entries are this process's.
    tags: BTreeSet<String>,
    /// Whether a hash's last reference going removes its files.
    collecting: bool,
}

/// One use of a cached component (see [`SharedDir`]); releases it when dropped.
#[derive(Debug)]
pub struct CacheRef {
    dir: Arc<SharedDir>,
    sha256: String,
}

impl Drop for CacheRef {
    fn drop(&mut self) {
        self.dir.release(&self.sha256);
    }
}

impl SharedDir {
    /// A cache directory at `dir` (created when first written), shared by the runtimes given
    /// it with [`RuntimeBuilder::cache_dir`](crate::RuntimeBuilder::cache_dir).
    pub fn new(dir: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            dir,
            state: Mutex::default(),
        })
    }

    /// The directory, for the runtimes that cache in it.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Records that `runtime` caches here, so that its entries survive a sweep.
    pub fn register(&self, runtime: &crate::Runtime) {
        self.lock().tags.insert(engine_tag(&runtime.inner.engine));
    }

    /// A reference to the entry of the component whose content hash is `sha256` (hex).
    pub fn hold(self: &Arc<Self>, sha256: String) -> CacheRef {
        *self.lock().refs.entry(sha256.clone()).or_default() += 1;
        CacheRef {
            dir: self.clone(),
            sha256,
        }
    }

    /// A reference to the entry of the component `bytes`, see [`SharedDir::hold`].
    pub fn hold_bytes(self: &Arc<Self>, bytes: &[u8]) -> CacheRef {
        self.hold(hex(&content_hash(bytes)))
    }

    fn release(&self, sha256: &str) {
        let mut state = self.lock();
        let Some(count) = state.refs.get_mut(sha256) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        state.refs.remove(sha256);
        if !state.collecting {
            return;
        }
        let mut freed = 0;
        for tag in &state.tags {
            freed += remove(&self.dir.join(file_name(sha256, tag)));
        }
        if freed > 0 {
            tracing::debug!(sha256, bytes = freed, "compiled component collected");
        }
    }

    /// Removes every file that no reference holds: entries of unreferenced components or of
    /// unregistered engines, temporary files and anything foreign; then starts collecting.
    /// Only for when no load is writing (the service's start): a write in flight has a
    /// temporary file that this removes.
    pub fn sweep(&self) {
        let mut state = self.lock();
        state.collecting = true;
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => {
                tracing::warn!(path = %self.dir.display(), error = %e, "cannot sweep the cache");
                return;
            }
        };
        let (mut files, mut freed) = (0, 0);
        for entry in entries.flatten() {
            let name = entry.file_name();
            let live = name
                .to_str()
                .and_then(parse_file_name)
                .is_some_and(|(h, t)| state.refs.contains_key(h) && state.tags.contains(t));
            if !live && entry.file_type().is_ok_and(|t| !t.is_dir()) {
                files += 1;
                freed += remove(&entry.path());
            }
        }
        tracing::info!(
            path = %self.dir.display(),
            kept = state.refs.len(),
            removed = files,
            bytes = freed,
            "compiled-component cache swept"
        );
    }

    /// Stops removing entries when their last reference goes: the process is stopping, and
    /// what it used is for the next start.
    pub fn stop_collecting(&self) {
        self.lock().collecting = false;
    }

    fn lock(&self) -> MutexGuard<'_, DirState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a cache file, answering its size (0 if it was not there or could not be removed).
fn remove(path: &Path) -> u64 {
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    match std::fs::remove_file(path) {
        Ok(()) => len,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a cache file");
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pruning removes the least recently used entries until the rest fit the bound, keeps
    /// the entry just written even when it alone is over it, and never touches temporary or
    /// foreign files.
    #[test]
    fn prune_keeps_the_recently_used_within_the_bound() {
        let dir = tempfile::tempdir().expect("temp dir");
        let tag = "0123456789abcdef";
        let entry = |i: u8, age_s: u64| {
            let path = dir.path().join(file_name(&hex(&[i; 32]), tag));
            std::fs::write(&path, [0u8; 100]).expect("write");
            let at = std::time::SystemTime::now() - std::time::Duration::from_secs(age_s);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(at))
                .expect("set mtime");
            path
        };
        let (oldest, old, used, new) = (entry(1, 400), entry(2, 300), entry(3, 200), entry(4, 0));
        touch(&used);
        let tmp = dir.path().join("in-flight.tmp7-0");
        std::fs::write(&tmp, [0u8; 1000]).expect("write");
        prune(dir.path(), 250, &new);
        assert!(
            !oldest.exists() && !old.exists(),
            "the least recently used go first"
        );
        assert!(
            used.exists() && new.exists(),
            "the recently used and the new one stay"
        );
        assert!(tmp.exists(), "a write in flight is not an entry");
        prune(dir.path(), 10, &new);
        assert!(
            !used.exists() && new.exists(),
            "the new entry stays even over the bound"
        );
    }

    /// A compiled component read from disk that the runtime refuses (compiled under another
    /// runtime's higher limit) is an error and is not kept in memory; once accepted, it is.
    #[test]
    fn refused_artifacts_from_disk_are_not_kept() {
        // The smallest component: the preamble (magic, version 0x0d, layer 1) and no sections.
        const EMPTY: &[u8] = b"\0asm\x0d\0\x01\0";
        let engine = Engine::default();
        let dir = tempfile::tempdir().expect("temp dir");
        let hash = content_hash(EMPTY);
        let on_disk = || Some(dir.path().to_path_buf());
        ArtifactCache::new(&engine, on_disk(), None)
            .get_or_compile(
                &engine,
                &hash,
                |_| Ok(()),
                || Component::new(&engine, EMPTY),
            )
            .expect("compiled and stored");
        let cache = ArtifactCache::new(&engine, on_disk(), None);
        let not_compiled = || -> wasmtime::Result<Component> { panic!("read from disk") };
        let refused = cache.get_or_compile(
            &engine,
            &hash,
            |_| Err(wasmtime::Error::msg("over the limit")),
            not_compiled,
        );
        assert!(refused.is_err());
        assert!(
            cache.lock().is_empty(),
            "a refused component stayed in memory"
        );
        cache
            .get_or_compile(&engine, &hash, |_| Ok(()), not_compiled)
            .expect("accepted");
        assert!(cache.lock().contains_key(&hash));
    }

    /// Entry names parse back to their parts; temporary and foreign names do not.
    #[test]
    fn file_names_round_trip() {
        let (sha, tag) = ("ab".repeat(32), "0123456789abcdef");
        let name = file_name(&sha, tag);
        assert_eq!(parse_file_name(&name), Some((sha.as_str(), tag)));
        for stray in [
            format!("{sha}-{tag}.tmp42-0"),
            format!("{sha}.cwasm"),
            "notes.txt".to_owned(),
            format!("{}-{tag}.cwasm", "zz".repeat(32)),
        ] {
            assert_eq!(parse_file_name(&stray), None, "{stray}");
        }
    }

    /// A file is accepted only whole, for the hash it is filed under.
    #[test]
    fn checked_payload_refuses_what_store_did_not_write() {
        let hash = content_hash(b"component");
        let payload = b"compiled code".as_slice();
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&hash);
        file.extend_from_slice(&Sha256::digest(payload));
        file.extend_from_slice(payload);
        assert_eq!(checked_payload(&hash, &file), Ok(payload));
        assert!(checked_payload(&content_hash(b"other"), &file).is_err());
        assert!(checked_payload(&hash, &file[..file.len() - 1]).is_err());
        assert!(checked_payload(&hash, &file[..10]).is_err());
        let mut flipped = file.clone();
        *flipped.last_mut().expect("non-empty") ^= 1;
        assert!(checked_payload(&hash, &flipped).is_err());
        assert!(checked_payload(&hash, payload).is_err());
    }
}

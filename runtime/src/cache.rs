//! Compiled-component cache keyed by content hash and engine, in memory and optionally on
//! disk, so that loading a known component costs a deserialize (~0.15 ms) instead of a
//! Cranelift compile (~60–90 ms for a small component).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

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

#[derive(Debug)]
pub(crate) struct ArtifactCache {
    memory: Mutex<HashMap<ContentHash, Component>>,
    dir: Option<PathBuf>,
    /// Distinguishes artifacts of differently configured or versioned engines on disk.
    engine_tag: String,
}

impl ArtifactCache {
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            memory: Mutex::new(HashMap::new()),
            dir,
            engine_tag: format!("{:016x}", hasher.finish()),
        }
    }

    fn path(&self, dir: &Path, hash: &ContentHash) -> PathBuf {
        dir.join(format!("{}-{}.cwasm", hex(hash), self.engine_tag))
    }

    /// The compiled component for `bytes`: from memory, else from disk, else `compile`d and
    /// stored in both.
    pub(crate) fn get_or_compile(
        &self,
        engine: &Engine,
        hash: &ContentHash,
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<Component> {
        if let Some(c) = self.lock().get(hash) {
            return Ok(c.clone());
        }
        let on_disk = self.dir.as_deref().map(|dir| self.path(dir, hash));
        if let Some(path) = on_disk.as_deref().filter(|p| p.exists()) {
            // SAFETY: the cache directory is the runtime's own (documented on
            // `Runtime::with_cache_dir`); its files are written only by `store` below from
            // `Component::serialize` of this engine configuration, and wasmtime checks the
            // engine compatibility header before using them.
            #[allow(unsafe_code)]
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(c) => {
                    self.lock().insert(*hash, c.clone());
                    return Ok(c);
                }
                Err(e) => tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    "ignoring unusable cached artifact; recompiling"
                ),
            }
        }
        let component = compile()?;
        if let Some(path) = on_disk
            && let Err(e) = store(&component, &path)
        {
            tracing::warn!(path = %path.display(), error = %e, "could not cache compiled artifact");
        }
        self.lock().insert(*hash, component.clone());
        Ok(component)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ContentHash, Component>> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the artifact atomically: a crash leaves either no file or a whole one.
fn store(component: &Component, path: &Path) -> wasmtime::Result<()> {
    let bytes = component.serialize()?;
    let dir = path.parent().expect("cache paths are inside the cache dir");
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

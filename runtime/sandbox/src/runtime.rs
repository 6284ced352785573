//! The [`Runtime`]: one wasmtime `Engine` configured for sandboxed assignors, the WASI linker,
//! and the compiled-component cache.
//!
//! Loading bounds compilation three ways:
//!
//! - Before compiling, the component's size and its code (each function body, all of them
//!   together) are checked against `max.component.bytes`, `max.function.bytes` and
//!   `max.code.bytes`. These bound a compile's input, not its time: within them, 4 MiB of
//!   `call_indirect` still takes 390 s.
//! - In time, when the runtime compiles out of process ([`RuntimeBuilder::compiler`], which
//!   the `assignor` command always does): the compile runs in a child process that is killed
//!   at `compile.timeout.ms`, so its cores are free at once (see `compiler`). A runtime
//!   without a compiler program compiles on the calling thread, which nothing can stop: only
//!   the size checks bound it there.
//! - After compiling, and for an artifact read back from the on-disk cache, the compiled code
//!   is checked against `max.compiled.bytes` before it is cached or used (a child's answer is
//!   read only up to it), since wasmtime offers no limit on what a compilation produces.
//!
//! A component in the cache (in memory, or on disk for [`RuntimeBuilder::cache_dir`]) is
//! never compiled again, in process or out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::boundary::AssignorPre;
use crate::cache::{self, ArtifactCache};
use crate::compiler;
use crate::component::ComponentAssignor;
use crate::error::{ErrorKind, TaskAssignorError};
use crate::limits::{self, Limits};
use crate::wasi::{self, CallState};

/// Core instances one call may create, and tables it may hold: what the instance pool budgets
/// per call slot. A Rust `wasm32-wasip2` component instantiates its module and a few adapter
/// shims (2–8), componentize-py's Python 38. A component that instantiates more is refused at
/// load, naming the count: the pool could never run it, and every call would fail as
/// `capacity` instead.
pub const MAX_CORE_INSTANCES: u32 = 64;

/// Bytes of each pooled memory and table kept resident between calls.
const KEEP_RESIDENT_BYTES: usize = 4 << 20;

/// Stack a call's fiber has beyond the wasm stack limit, for host code running on it (WASI
/// host functions, lifting and lowering). Reserved address space; only touched pages cost.
const HOST_STACK_BYTES: usize = 1 << 20;

/// The export every assignor component must have: the `task-assignor` interface of the WIT
/// package version this runtime speaks.
pub const EXPORT_NAME: &str = "kafka:streams-assignor/task-assignor@0.1.0";

/// Loads assignor components and runs their calls in fresh sandboxes.
///
/// Cheap to clone; clones share the engine and the compiled-component cache.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) engine: Engine,
    linker: Linker<CallState>,
    pub(crate) limits: Limits,
    cache: ArtifactCache,
    /// The program that compiles components in a child process; `None` compiles in process.
    compiler: Option<PathBuf>,
}

impl Runtime {
    /// A runtime whose calls run under `limits` (the wasm stack limit is fixed here, for the
    /// engine's lifetime). Fails only if wasmtime rejects the engine configuration.
    pub fn new(limits: Limits) -> wasmtime::Result<Self> {
        Self::builder(limits).build()
    }

    /// Like [`Runtime::new`], but compiled components are also cached in `dir`; see
    /// [`RuntimeBuilder::cache_dir`].
    pub fn with_cache_dir(limits: Limits, dir: impl Into<PathBuf>) -> wasmtime::Result<Self> {
        Self::builder(limits).cache_dir(dir).build()
    }

    /// A builder of a runtime under `limits`, for the options beyond them: an on-disk cache,
    /// compiling out of process.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use assignor_sandbox::{Limits, Runtime};
    ///
    /// # fn main() -> anyhow::Result<()> {
    /// // Compiles in a child process running the `assignor` binary, killed after 5 s.
    /// let runtime = Runtime::builder(Limits::default().compile_timeout(Duration::from_secs(5)))
    ///     .compiler("/usr/local/bin/assignor")
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn builder(limits: Limits) -> RuntimeBuilder {
        RuntimeBuilder {
            limits,
            cache_dir: None,
            cache_max_bytes: None,
            compiler: None,
            signals_based_traps: true,
        }
    }
}

/// Builds a [`Runtime`]: see [`Runtime::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RuntimeBuilder {
    limits: Limits,
    cache_dir: Option<PathBuf>,
    cache_max_bytes: Option<u64>,
    compiler: Option<PathBuf>,
    signals_based_traps: bool,
}

impl RuntimeBuilder {
    /// Whether wasm traps (an out-of-bounds access, a stack overflow) are caught by signal
    /// handlers (wasmtime's default), or compiled as explicit checks that need no handler.
    ///
    /// Turn it off when the runtime lives in a process whose own runtime owns those signals:
    /// a JVM uses `SIGSEGV` for null checks and safepoints, and wasmtime's handlers would
    /// otherwise sit in front of (and chain to) HotSpot's. The price is a bounds check on
    /// every memory access of the guest; the Kafka plugin's README section gives the
    /// measured cost. Not combinable with [`compiler`](Self::compiler) (the child would
    /// compile for the other setting): [`build`](Self::build) refuses both together.
    /// Default: on.
    pub fn signals_based_traps(mut self, enabled: bool) -> Self {
        self.signals_based_traps = enabled;
        self
    }

    /// Also caches compiled components in `dir`, so a restart loads them without compiling.
    /// The directory must be private to the runtime: its files are loaded as trusted native
    /// code. Default: memory only.
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Keeps the [`cache_dir`](Self::cache_dir)'s entries within `bytes`: each time this
    /// runtime writes one, the least recently used others (a load from the directory counts
    /// as a use) are removed until the directory's entries fit, the new one always kept. For
    /// a directory shared by processes that come and go (the `assignor` command's per-user
    /// cache); several processes may prune one directory at once, and a load that finds its
    /// entry gone compiles again. Default: no bound.
    pub fn cache_max_bytes(mut self, bytes: u64) -> Self {
        self.cache_max_bytes = Some(bytes);
        self
    }

    /// Compiles components in a child process running `program`, killed (and reaped) when
    /// it takes longer than [`Limits::compile_timeout`], so that a component that would
    /// compile for minutes costs no more than that limit of CPU: Cranelift cannot be
    /// interrupted, and a compile on a thread of this process cannot be stopped.
    ///
    /// `program` must be the `assignor` binary of this very version (it answers with
    /// `assignor compile-component`); the `assignor` command names itself
    /// ([`std::env::current_exe`]). It is trusted as the runtime itself is: what it answers is
    /// loaded as native code, after wasmtime's check that it was compiled for this engine.
    /// Starting it and handing the compiled code back adds ~16 ms to a compile (measured for
    /// a tiny component; for the sample assignors, whose compiles take 0.4–1.4 s, it is within
    /// the noise); a cached component is never compiled again.
    ///
    /// Default: none, compiling in process on the loading thread, where only the code limits
    /// ([`Limits::max_function_bytes`], [`Limits::max_code_bytes`]) bound a compilation and
    /// the compile time limit does not apply: for an embedder without the `assignor` binary.
    pub fn compiler(mut self, program: impl Into<PathBuf>) -> Self {
        self.compiler = Some(program.into());
        self
    }

    /// The runtime. Fails if wasmtime rejects the engine configuration, or for a runtime
    /// without signals-based traps that would compile out of process.
    pub fn build(self) -> wasmtime::Result<Runtime> {
        let Self {
            limits,
            cache_dir,
            cache_max_bytes,
            compiler,
            signals_based_traps,
        } = self;
        if compiler.is_some() && !signals_based_traps {
            return Err(wasmtime::format_err!(
                "a runtime without signals-based traps cannot compile out of process: the \
                 compiler child configures its engine with signals-based traps"
            ));
        }
        let mut config = engine_config(&limits);
        if !signals_based_traps {
            // Explicit checks instead of guard pages; and an engine without signals-based
            // traps installs no signal handlers (wasmtime installs them, process-wide, when
            // the first engine that wants them is created).
            config.signals_based_traps(false);
        }
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker)?;
        let cache = ArtifactCache::new(&engine, cache_dir, cache_max_bytes);
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                linker,
                limits,
                cache,
                compiler,
            }),
        })
    }
}

/// The engine configuration `limits` make: the parent's and the compiler child's alike, so an
/// artifact compiled by one is loadable by the other.
pub(crate) fn engine_config(limits: &Limits) -> Config {
    let mut config = Config::new();
    // A pool of pre-reserved instance slots: a fresh instance per call then costs no
    // mmap/munmap, and keeping the first pages of each slot's memory resident (zeroed
    // instead of released) saves re-faulting them on the next call. Where the kernel has
    // PAGEMAP_SCAN (Linux 6.7+), only the pages a call dirtied are zeroed; otherwise the
    // whole resident prefix is, which was a third of a tiny call's cost.
    let calls = limits.get_max_concurrent_calls();
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(calls)
        .total_memories(calls)
        .total_stacks(calls)
        .total_core_instances(calls.saturating_mul(MAX_CORE_INSTANCES))
        .total_tables(calls.saturating_mul(MAX_CORE_INSTANCES))
        .max_memory_size(limits.get_memory_bytes())
        .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        .pagemap_scan(Enabled::Auto);
    config
        .wasm_component_model(true)
        // Fuel is the CPU limit and, through the yields it makes every `YIELD_FUEL`, the
        // wall-clock deadline's check in wasm code too (see `component`). No epoch
        // interruption: it would check a second counter at every loop header and function
        // entry the fuel check already guards, 12–14 % of a sandboxed 1000-member call's
        // instructions.
        .consume_fuel(true)
        .max_wasm_stack(limits.get_wasm_stack_bytes())
        // Calls run on fibers (see `ComponentAssignor::assign_async`): the wasm stack plus
        // room for the host functions and the lifting and lowering that run on it.
        .async_stack_size(
            limits
                .get_wasm_stack_bytes()
                .saturating_add(HOST_STACK_BYTES),
        )
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

impl Runtime {
    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Loads an assignor component from a file; see [`Runtime::load`].
    pub fn load_file(
        &self,
        path: impl AsRef<Path>,
        config: &BTreeMap<String, String>,
    ) -> Result<ComponentAssignor, TaskAssignorError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let max = self.inner.limits.get_max_component_bytes();
        let bytes = read_bounded(path, max)
            .map_err(|message| TaskAssignorError::new(&origin, ErrorKind::Load, message))?;
        self.load(&bytes, &origin, config)
    }

    /// Loads an assignor component: checks that `bytes` is a component of this runtime's
    /// world and version importing only the WASI it links, compiles it (or takes it from the
    /// cache), then, in a sandbox under the call limits, reads its `name()` and runs
    /// `configure(config)`.
    ///
    /// `origin` (a file name, an upload name) names the assignor in errors until its own
    /// name is known. Every failure is a [`TaskAssignorError`] of kind `load`, or the kind of
    /// the limit a load-time call hit.
    pub fn load(
        &self,
        bytes: &[u8],
        origin: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<ComponentAssignor, TaskAssignorError> {
        let fail = |message: String| TaskAssignorError::new(origin, ErrorKind::Load, message);
        let inner = &self.inner;
        let max = inner.limits.get_max_component_bytes();
        if bytes.len() > max {
            return Err(fail(too_big(bytes.len() as u64, max)));
        }
        check_header(bytes).map_err(fail)?;
        check_code(bytes, &inner.limits).map_err(fail)?;
        let hash = cache::content_hash(bytes);
        let max_compiled = inner.limits.get_max_compiled_bytes();
        let component = inner
            .cache
            .get_or_compile(
                &inner.engine,
                &hash,
                // Compiled code over the limit is neither cached nor kept, wherever it came
                // from.
                |component| Ok(check_compiled(component, max_compiled)?),
                || match &inner.compiler {
                    Some(program) => {
                        compiler::compile(program, &inner.limits, &inner.engine, bytes)
                    }
                    None => Component::new(&inner.engine, bytes),
                },
            )
            .map_err(|e| match e.downcast::<Refusal>() {
                Ok(refusal) => fail(refusal.0),
                Err(e) => fail(format!("not a valid component: {e:#}")).with_source(e),
            })?;
        check_imports_and_exports(&inner.engine, &component).map_err(fail)?;
        let pre = inner
            .linker
            .instantiate_pre(&component)
            .map_err(|e| fail(format!("cannot link its imports: {e:#}")).with_source(e))?;
        let pre = AssignorPre::new(pre).map_err(|e| {
            fail(format!(
                "its `{EXPORT_NAME}` export does not match this runtime's WIT: {e:#}"
            ))
            .with_source(e)
        })?;
        ComponentAssignor::load(self.clone(), pre, hash, origin, config)
    }
}

/// The refusal of a component over the size limit.
fn too_big(len: u64, max: usize) -> String {
    format!(
        "the component is {}, over the {} limit (max.component.bytes); build it in release \
         mode, or raise the limit",
        limits::bytes(len),
        limits::bytes(max as u64)
    )
}

/// Reads a component file of at most `max` bytes, refusing a larger one from its metadata
/// (or, for a file that grows or lies about its size, after reading `max + 1` bytes) rather
/// than reading it whole.
fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read the component file: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read the component file: {e}"))?
        .len();
    if len > max as u64 {
        return Err(too_big(len, max));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the component file: {e}"))?;
    if bytes.len() > max {
        return Err(too_big(bytes.len() as u64, max));
    }
    Ok(bytes)
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("limits", &self.limits)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

/// Tells a core module, a component and anything else apart by the preamble, so the error
/// says what to do instead of a parser message.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    const CORE_VERSION: &[u8] = &[1, 0, 0, 0];
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(
            "not a WebAssembly file (no `\\0asm` header); expected a component built with \
             `cargo build --release --target wasm32-wasip2`"
                .into(),
        );
    }
    if &bytes[4..8] == CORE_VERSION {
        return Err(
            "this is a core WebAssembly module, not a component; build the assignor with \
             `--target wasm32-wasip2` (or wrap the module with `wasm-tools component new`)"
                .into(),
        );
    }
    Ok(())
}

/// Refuses, before compiling, a component whose code would take long to compile (one function
/// body over the function limit, or all bodies together over the code limit) or that
/// instantiates more than [`MAX_CORE_INSTANCES`] core modules. Reading the sections is linear
/// in the component and allocates nothing per function; a component that does not parse is
/// left to the compiler's own (better) message.
fn check_code(bytes: &[u8], limits: &Limits) -> Result<(), String> {
    let (max_function, max_code) = (limits.get_max_function_bytes(), limits.get_max_code_bytes());
    let mut code = 0usize;
    let mut instances = 0u64;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else {
            return Ok(());
        };
        if let wasmparser::Payload::InstanceSection(section) = &payload {
            // Only instantiations take a pool slot; an instance made of exports is a name.
            instances += section
                .clone()
                .into_iter()
                .filter(|i| matches!(i, Ok(wasmparser::Instance::Instantiate { .. })))
                .count() as u64;
            if instances > u64::from(MAX_CORE_INSTANCES) {
                return Err(format!(
                    "it instantiates more than {MAX_CORE_INSTANCES} core modules, the most \
                     one call may (the instance pool's budget per call); link fewer modules \
                     into the component"
                ));
            }
        }
        if let wasmparser::Payload::CodeSectionEntry(body) = payload {
            let len = body.range().len();
            if len > max_function {
                return Err(format!(
                    "a function body is {}, over the {} limit (max.function.bytes): compiling \
                     it would take too long; split the function",
                    limits::bytes(len as u64),
                    limits::bytes(max_function as u64)
                ));
            }
            code += len;
            if code > max_code {
                return Err(format!(
                    "its code is over the {} limit (max.code.bytes): compiling it would take \
                     too long; make the assignor smaller",
                    limits::bytes(max_code as u64)
                ));
            }
        }
    }
    Ok(())
}

/// A compile refused for a limit (compiled code over [`Limits::max_compiled_bytes`], a compile
/// over [`Limits::compile_timeout`]) or a compiler that failed: the whole message of the
/// `load` error, where any other compile error is the component's own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Refusal(pub(crate) String);

/// Refuses a compiled component whose native image (what is kept in memory and written to
/// the on-disk cache) is over `max` bytes. The image is already mapped, so measuring it is
/// free; wasmtime offers no way to stop a compilation at a size, so this is checked after it.
fn check_compiled(component: &Component, max: usize) -> Result<(), Refusal> {
    let image = component.image_range();
    let len = image.end.addr() - image.start.addr();
    if len > max {
        return Err(Refusal(format!(
            "its compiled code is {}, over the {} limit (max.compiled.bytes); make the \
             assignor smaller (a release build, less generic or inlined code), or raise the \
             limit",
            limits::bytes(len as u64),
            limits::bytes(max as u64)
        )));
    }
    Ok(())
}

fn check_imports_and_exports(engine: &Engine, component: &Component) -> Result<(), String> {
    let ty = component.component_type();
    let forbidden: Vec<&str> = ty
        .imports(engine)
        .map(|(name, _)| name)
        .filter(|name| !wasi::import_allowed(name))
        .collect();
    if !forbidden.is_empty() {
        return Err(format!(
            "forbidden import(s): {}; an assignor may import only the WASI a Rust \
             `wasm32-wasip2` library links (cli, io, clocks, random, filesystem), and gets \
             nothing through them",
            forbidden.join(", ")
        ));
    }
    let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
    if exports.contains(&EXPORT_NAME) {
        return Ok(());
    }
    let (package, _) = EXPORT_NAME
        .split_once('@')
        .expect("the export name is versioned");
    if let Some(other) = exports
        .iter()
        .find(|e| e.starts_with(&format!("{package}@")))
    {
        return Err(format!(
            "it exports `{other}`, but this runtime speaks `{EXPORT_NAME}`; rebuild it against \
             the matching assignor-sdk"
        ));
    }
    Err(format!(
        "not an assignor: it does not export `{EXPORT_NAME}` (its exports: {}); build it with \
         assignor-sdk's `export!` macro",
        if exports.is_empty() {
            "none".to_owned()
        } else {
            exports.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A runtime without signals-based traps builds (and configures its engine so), but not
    /// together with an out-of-process compiler, whose engine would differ.
    #[test]
    fn signals_based_traps_option() {
        let runtime = Runtime::builder(Limits::default())
            .signals_based_traps(false)
            .build()
            .expect("builds");
        assert!(!runtime.inner.engine.get_signals_based_traps());
        let default = Runtime::new(Limits::default()).expect("builds");
        assert!(default.inner.engine.get_signals_based_traps());
        let e = Runtime::builder(Limits::default())
            .signals_based_traps(false)
            .compiler("/bin/true")
            .build()
            .unwrap_err();
        assert!(
            e.to_string().contains("cannot compile out of process"),
            "{e}"
        );
    }
}

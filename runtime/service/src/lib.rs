//! `assignor serve`: the multi-tenant assignor service, an HTTP API over per-tenant
//! registries and coordinators sharing one durable store.
//!
//! Each tenant gets its own [`Runtime`](assignor_sandbox::Runtime) (its fuel, memory and deadline per
//! call), its own [`Coordinator`](assignor_coordinator::Coordinator) whose registry is the
//! broker's configured assignors plus the tenant's uploads, and its own namespace
//! (`tenant/<name>/…`) of the one [`RedbStore`]. A tenant sees and selects only the built-ins
//! and its own assignors and reaches only its own groups; another tenant's resources answer
//! exactly like missing ones (404), so nothing reveals that they exist.
//!
//! Nothing that can block runs on the async runtime's threads: coordinator changes that
//! flush, loads (which compile) and built-in assignors go to `spawn_blocking`. A component's
//! call, its input and output conversion included, runs on the runtime's call threads, never
//! this runtime's, yielding every [`YIELD_FUEL`](assignor_sandbox::YIELD_FUEL) units of fuel so that
//! calls share them (and moving to lowest-priority threads after
//! [`FOREGROUND_TIME`](assignor_sandbox::FOREGROUND_TIME) of work), and is awaited without a thread; a commit's flush is awaited without a thread. A tenant's state is
//! behind an async lock: the trigger's in-memory steps (plan, commit: one write queued for the
//! store's writer thread, which commits it with the others waiting) and reads run on the async
//! thread, and a request that finds the lock taken waits without a thread. Assignments and
//! uploads (load and trial) hold one of the tenant's `max.concurrent.assignments` permits, so
//! a hostile tenant runs at most that many calls, each for at most its deadline (its
//! `compile.timeout.ms` for a load), and never takes another tenant's slots. The default is
//! half the cores, so one tenant spinning in every slot still leaves the other half to
//! everyone else.
//!
//! # Stopping
//!
//! On SIGTERM or Ctrl-C the service stops accepting connections and lets the requests in
//! flight finish: each is bounded by its tenant's limits (a call by its deadline, which covers
//! the guest's host calls too; an upload by its compile time limit and its trial's deadline),
//! and requests still waiting for an assignment slot are answered 503 at once rather than
//! start a call. What nothing bounds (a client that never finishes sending its request, a
//! compile still running on the blocking pool) is not waited for: the service stops at the
//! latest [`STOP_MARGIN`] after the longest such bound of any tenant.
//!
//! An admin changes a tenant's limits at run time (see `admin`): a new runtime is built for
//! the new limits, the tenant's uploads are reloaded on it, and new calls use it; calls
//! already running finish under the old one.
//!
//! # Data directory
//!
//! - `store.redb`: the [`RedbStore`], one redb database file: per tenant, `assignor/<name>`
//!   (the uploaded component's bytes), the admin's limits, and the coordinator's `group/<id>`
//!   and `capture/<id>` records. Concurrent commits share one durable transaction (group
//!   commit). What a tenant keeps there is bounded by its limits: `max.assignors` uploads of at
//!   most `max.component.bytes`, `max.groups` groups (documents of at most `max.input.bytes`,
//!   each with at most one failure record, its message cut), `max.captures` captures of at most
//!   `max.capture.bytes` in all (the oldest dropped first).
//!
//!   With `service.store=etcd://…` the same keys live in an etcd cluster instead
//!   ([`EtcdStore`]), and `store.redb` is not used. Several replicas may then share the
//!   cluster: each follows the store's watch (see `replication`), which brings what the
//!   others write (uploads, loaded and checked here before they serve; limits; groups;
//!   each tenant's applied in order on a thread of its own, so one tenant's slow load holds
//!   back no other tenant),
//!   writes a group conditionally on the revision it holds (`SharedStore::put_if`; a replica
//!   whose target commit loses plans again from the stored group, or answers with the
//!   winner's target), writes uploads, the limits record and captures conditionally on the
//!   revision it last saw of each (a lost upload or limits change answers 503
//!   `COORDINATOR_NOT_AVAILABLE` and takes the stored record; a lost capture keeps the
//!   stored one), guards an upload's delete and a group's selection of it against each
//!   other (`SharedStore::write_if_guarded`), and reads a group from etcd only when it does
//!   not hold it yet (a document PUT from a view that was behind loses its condition, reads
//!   the group again and is applied to the stored group).
//! - `log.imported/`, `store.imported/`: where a data directory written before redb (the log
//!   in `log/`; before that, one record file per key in `store/`) keeps its old records once
//!   they have been imported (see [`import`](assignor_coordinator::store::import)).
//! - `cache/`: compiled components by content hash (and engine), so a restart deserializes
//!   uploads instead of recompiling them. It holds only what is live: an entry goes when no
//!   tenant's upload (nor the broker's configuration) has its content hash any more, at once
//!   when an upload is replaced or deleted or fails its checks, and at start for everything
//!   else (tenants removed from the config, entries of an older runtime, temporary files of
//!   a crash, strays). An upload holds its entry from before it compiles until it is gone,
//!   and tenants sharing a hash share its entry, which stays while any of them has it. So
//!   the cache is at most one entry per live upload (`max.assignors` per tenant) and broker
//!   component. A file is used only if its header, content hash and SHA-256 checksum match
//!   (wasmtime maps it as native code without checking it); a truncated, corrupt or foreign
//!   file is ignored, logged and compiled over.
//!
//! # Observability
//!
//! Requests and computations run in `tracing` spans (`request`: method, route, tenant;
//! `assignment`: tenant, group, assignor, fuel, duration, outcome), each closed by an event
//! carrying its fields. Tokens never reach a span or an event: only the tenant's name does.
//! `GET /metrics` (admin token) serves Prometheus metrics: see `metrics`.
//!
//! # Layout
//!
//! - [`config`]: the `service.*` keys, tenants and their limits, the embedded demo.
//! - `auth`: bearer token → tenant, by hash, in constant time.
//! - `namespace`: a tenant's prefixed view of the shared store.
//! - `tenant`: one tenant's runtime, coordinator, uploads (checks, commit, delete) and
//!   assignment permits.
//! - `api`: the routes and the tenants' handlers.
//! - `admin`: the admin's handlers: tenants' limits at run time, metrics.
//! - `metrics`: the Prometheus metrics.
//! - `records`: the service's own stored record, a tenant's limit overrides.
//! - `replication`: on a store replicas share, the watch that brings the others' changes,
//!   and the tenants' threads that apply them.
//! - `error`: the error answer and its status/code table.

#![deny(missing_docs)]

pub mod config;

mod admin;
mod api;
mod auth;
mod error;
mod metrics;
mod namespace;
mod records;
mod replication;
mod tenant;

pub use api::TENANT_HEADER;

use std::future::{Future, IntoFuture as _};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use assignor_coordinator::ConfigOp;
use assignor_coordinator::RegistryError;
use assignor_coordinator::store::{
    RedbStore, Store, StoreError, SyncToken, import, io_err, sync_dir,
};
use assignor_protocol::LimitOverrides;
use assignor_sandbox::SharedDir;
use assignor_store_etcd::EtcdStore;

use self::config::{ServiceConfig, StoreConfig};
use self::metrics::Metrics;
use self::tenant::Tenant;

/// Why the service could not start; names the tenant (and assignor) concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The data directory's store could not be opened (e.g. another process holds it).
    #[error("{0}")]
    DataDir(#[from] StoreError),
    /// The engine for a tenant's limits could not be created.
    #[error("tenant `{tenant}`: cannot create its engine: {source}")]
    Engine {
        /// The tenant.
        tenant: String,
        /// Wasmtime's reason.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The broker's `group.streams.assignors` could not be loaded under a tenant's limits.
    #[error("tenant `{tenant}`: {source}")]
    Registry {
        /// The tenant.
        tenant: String,
        /// The registry's error (boxed: it is large, and a start fails once).
        source: Box<RegistryError>,
    },
    /// A tenant's stored state could not be read.
    #[error("tenant `{tenant}`: {what}: {source}")]
    Store {
        /// The tenant.
        tenant: String,
        /// Which part of its state, e.g. "its stored limits cannot be read".
        what: &'static str,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored upload no longer loads.
    #[error(
        "tenant `{tenant}`: stored assignor `{assignor}` no longer loads ({message}); restore \
         the previous runtime or limits, or delete its record from the data directory"
    )]
    Upload {
        /// The tenant.
        tenant: String,
        /// The upload's name.
        assignor: String,
        /// Why.
        message: String,
    },
}

/// The service's store: the [`RedbStore`] in `store.redb`, with the records of the data
/// directory's earlier stores imported on the first start that finds them: the directory of
/// record files in `store/`, then the log in `log/` (newer: its records win). The import is
/// durable before each old directory is renamed to `<name>.imported/`, so a crash midway
/// simply imports again: the old records are read, never changed, and put again.
fn open_store(data_dir: &Path) -> Result<Arc<dyn Store>, StoreError> {
    let store = RedbStore::open(data_dir.join(STORE_FILE))?;
    let mut imported = Vec::new();
    for (name, read) in [
        ("store", import::read_dir as fn(&Path) -> _),
        ("log", import::read_log),
    ] {
        let old = data_dir.join(name);
        if old.is_dir() {
            let entries = read(&old)?;
            let mut last = SyncToken::DURABLE;
            for (key, value) in &entries {
                last = store.put_unsynced(key, value)?;
            }
            store.sync(last)?;
            tracing::info!(
                records = entries.len(),
                from = %old.display(),
                "imported an earlier store's records"
            );
            imported.push(old);
        }
    }
    for old in imported {
        let kept = old.with_extension("imported");
        std::fs::rename(&old, &kept).map_err(io_err("rename imported store", &old))?;
        sync_dir(data_dir)?;
        tracing::info!(from = %old.display(), kept_in = %kept.display(), "kept the imported store aside");
    }
    Ok(Arc::new(store))
}

/// The store's file in the data directory.
pub const STORE_FILE: &str = "store.redb";

/// How long a stopping service waits beyond the longest bound of its in-flight work (see
/// "Stopping" above) before it stops anyway, and how long it then gives the blocking pool's
/// threads: 1 s.
pub const STOP_MARGIN: Duration = Duration::from_secs(1);

/// The service: every tenant, opened from one data directory.
#[derive(Debug)]
pub struct Service {
    tenants: Vec<Arc<Tenant>>,
    tenant_hashes: Vec<[u8; 32]>,
    admin_hash: Option<[u8; 32]>,
    metrics: Metrics,
    /// Set once the service is stopping: requests waiting for a slot give up.
    stopping: watch::Sender<bool>,
    /// The compiled-component cache every tenant's runtime shares.
    cache: Arc<SharedDir>,
}

impl Drop for Service {
    /// Keeps the cache's entries as the tenants (and their uploads) go: they are the next
    /// start's.
    fn drop(&mut self) {
        self.cache.stop_collecting();
    }
}

impl Service {
    /// Opens the data directory (locking it) and every tenant in it: the broker's assignors,
    /// the tenant's stored uploads and groups; then sweeps the compiled cache of whatever
    /// none of them uses.
    pub fn open(config: &ServiceConfig) -> Result<Self, StartError> {
        let store = match &config.store {
            StoreConfig::Embedded => open_store(&config.data_dir)?,
            StoreConfig::Etcd { endpoints } => Arc::new(EtcdStore::open(endpoints)?),
        };
        let cache = SharedDir::new(config.data_dir.join("cache"));
        let metrics = Metrics::new();
        let tenants = config
            .tenants
            .iter()
            .map(|t| {
                let captures = metrics.capture_writes(&t.name);
                Tenant::open(t, &config.broker, store.clone(), &cache, captures).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Every tenant now holds what it uses; nothing is loading yet.
        cache.sweep();
        replication::start(&store, &tenants, metrics.watch())?;
        Ok(Self {
            tenant_hashes: config.tenants.iter().map(|t| t.token_sha256).collect(),
            admin_hash: config.admin_token_sha256,
            metrics,
            stopping: watch::Sender::new(false),
            tenants,
            cache,
        })
    }

    /// The longest a request started before the stop can legitimately still take: an
    /// upload's compile time limit plus its trial's deadline (an assignment's deadline is
    /// shorter), over every tenant, as their limits are now, plus [`STOP_MARGIN`].
    fn stop_grace(&self) -> Duration {
        let longest = self
            .tenants
            .iter()
            .map(|t| {
                let settings = t.settings();
                settings.limits.compile_timeout + settings.limits.timeout
            })
            .max()
            .unwrap_or_default();
        longest + STOP_MARGIN
    }

    /// Serves the API on `listener` on a new multi-threaded async runtime until the process
    /// gets SIGINT (Ctrl-C) or SIGTERM, then finishes the requests in flight, within bounds
    /// (see [`serve`](Self::serve)): the whole of `assignor serve` once the config is read
    /// and the listener bound.
    pub fn run(self, listener: std::net::TcpListener) -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let served = runtime.block_on(async {
            listener.set_nonblocking(true)?;
            let listener = TcpListener::from_std(listener)?;
            self.serve(listener, stop_signal()).await
        });
        // Dropping a runtime waits for every blocking task (a load waits for its compile
        // child, which its time limit kills): give them the margin, then let the process end
        // without them.
        runtime.shutdown_timeout(STOP_MARGIN);
        served
    }

    /// Serves the API on `listener` until `shutdown` completes, then finishes the requests
    /// in flight (graceful shutdown): requests waiting for a slot are answered 503 at once,
    /// running ones end within their limits, and whatever is still open when the longest of
    /// those limits and [`STOP_MARGIN`] have passed after the stop is dropped unanswered.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let service = Arc::new(self);
        let router = api::router(service.clone());
        let signalled = service.clone();
        let server = axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                signalled.stopping.send_replace(true);
            })
            .into_future();
        let mut stopping = service.stopping.subscribe();
        let deadline = async {
            // The sender lives in `service`, held here: this only returns once stopping.
            let _ = stopping.wait_for(|s| *s).await;
            let grace = service.stop_grace();
            tokio::time::sleep(grace).await;
            grace
        };
        tokio::select! {
            served = server => served,
            grace = deadline => {
                tracing::warn!(
                    grace_ms = assignor_sandbox::wire::millis(grace),
                    "stopping without the requests still open {} ms after the stop signal \
                     (clients that never finished a request, or work past its limits)",
                    grace.as_millis()
                );
                Ok(())
            }
        }
    }
}

/// Not public API: what `PUT /v1/groups/{g}/config` makes of its body before touching any
/// state (the changes in order, or the 400 answer's message), for the fuzz targets in
/// `tests/fuzz`, which cannot reach the handlers without a running service.
#[doc(hidden)]
pub fn fuzz_config_change(body: &[u8]) -> Result<Vec<(String, ConfigOp)>, String> {
    api::config_changes(body).map_err(|e| e.message)
}

/// Not public API: what `PUT /v1/admin/tenants/{t}/limits` makes of its body before touching
/// any state, for the fuzz targets in `tests/fuzz` (see [`fuzz_config_change`]).
#[doc(hidden)]
pub fn fuzz_limits_body(body: &[u8]) -> Result<LimitOverrides, String> {
    api::parse_json(body).map_err(|e| e.message)
}

/// Completes on SIGINT or (on Unix) SIGTERM, what service managers send to stop a service.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch for SIGTERM; only Ctrl-C stops the service");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("stopping: finishing the requests in flight");
}

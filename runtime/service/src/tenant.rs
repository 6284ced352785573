//! One tenant's world: its runtime (its call limits), its coordinator (its groups) over its
//! namespace of the store, its uploaded assignors, and the semaphore bounding its concurrent
//! assignments.
//!
//! Everything here is synchronous and may block (store writes fsync, loads compile, trials run
//! guests): the API calls it from `spawn_blocking`, never on the async runtime's threads.
//! The exceptions are [`Tenant::settings`], a read lock held only to clone an `Arc`, and
//! [`Tenant::lock`], the async side of the state's lock, for the trigger's brief steps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::StatusCode;
use tokio::sync::{Mutex, MutexGuard, Semaphore};

use assignor_coordinator::Assignor;
use assignor_coordinator::BUILTIN_NAMES;
use assignor_coordinator::CaptureWrite;
use assignor_coordinator::Coordinator;
use assignor_coordinator::Registry;
use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::json::parse_input;
use assignor_coordinator::store::{Conditional, Guard, Revision, Snapshot, Store};
use assignor_coordinator::{ASSIGNOR_NAME, ConfigOp};
use assignor_protocol::{LimitOverrides, UploadReport, UsageReport};
use assignor_sandbox::ComponentAssignor;
use assignor_sandbox::Runtime;
use assignor_sandbox::{CacheRef, SharedDir};

use super::StartError;
use super::config::{TenantConfig, TenantLimits};
use super::error::ApiError;
use super::namespace::Namespaced;
use super::records::LimitsRecord;

/// Store keys of uploaded components (inside the tenant's namespace) start with this.
const ASSIGNOR_KEY_PREFIX: &str = "assignor/";
/// Store key (inside the tenant's namespace) of the admin's [`LimitOverrides`], as a
/// [`LimitsRecord`].
const LIMITS_KEY: &str = "limits";
/// The group an upload's trial assignment runs on: the JSON contract's example (3 members on
/// 2 processes, a stateful subtopology with standbys and rack tags, a stateless one), small
/// enough to cost nothing and rich enough to exercise every output rule.
const TRIAL_GROUP: &str = include_str!("../../demo/group.json");
/// The longest an upload delete on a store replicas share waits for this replica's own
/// group writes to come back through the watch (milliseconds on loopback): past it, the
/// delete is made anyway, and loses if one has not (503, retriable).
const OWN_WRITES_WAIT: Duration = Duration::from_secs(2);
/// How often that wait looks again.
const OWN_WRITES_POLL: Duration = Duration::from_millis(5);
/// Store keys (inside the tenant's namespace) of group records start with this (the
/// coordinator's).
const GROUP_KEY_PREFIX: &str = "group/";
/// Instance slots beyond `max.concurrent.assignments` in a tenant's runtime: an upload's load
/// takes one while it reads `name()` and runs `configure`.
const EXTRA_INSTANCE_SLOTS: u32 = 1;

/// Whether `key` (inside the tenant's namespace) is one of the service's own records (an
/// upload or the limits), not the coordinator's.
fn is_tenant_record(key: &str) -> bool {
    key == LIMITS_KEY || key.starts_with(ASSIGNOR_KEY_PREFIX)
}

/// The answer to a write that lost its condition on a store replicas share: `what` was
/// changed on another replica since this one last saw it. The same answer as a group change
/// that loses (`COORDINATOR_NOT_AVAILABLE`, retriable): nothing changed, and this replica has
/// read the record again, so a retry starts from it.
fn changed_elsewhere(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "COORDINATOR_NOT_AVAILABLE",
        format!(
            "{what} was changed on another replica at the same time; nothing was changed here, \
             retry the request"
        ),
    )
    .with("retriable", true)
}

/// The revision `key` was last seen at, among `revisions`: [`Revision::ABSENT`] when absent.
fn held(revisions: &BTreeMap<String, Revision>, key: &str) -> Revision {
    revisions.get(key).copied().unwrap_or(Revision::ABSENT)
}

/// Whether a record of `key` read from the store at `at` (`None`: read now) is newer than
/// the one last seen: older ones (this replica's own writes coming back through the watch,
/// or records it has read again since) are not taken.
fn newer(revisions: &BTreeMap<String, Revision>, key: &str, at: Option<Revision>) -> bool {
    at.is_none_or(|at| revisions.get(key).is_none_or(|held| *held < at))
}

/// Notes `key` as read from the store at `at` (`None`: read now), `present` or deleted,
/// unless a newer record of it was seen.
fn note(
    revisions: &mut BTreeMap<String, Revision>,
    key: &str,
    present: bool,
    at: Option<Revision>,
) {
    if !newer(revisions, key, at) {
        return;
    }
    match at {
        Some(at) if present => {
            revisions.insert(key.to_owned(), at);
        }
        _ => {
            revisions.remove(key);
        }
    }
}

/// What a conditional write of `what` did: `Some` revision when written, `None` when it
/// lost its condition.
fn written(outcome: Conditional, what: &str) -> Result<Option<Revision>, ApiError> {
    match outcome {
        Conditional::Written(revision) => Ok(Some(revision)),
        Conditional::Conflict(_) => Ok(None),
        other => Err(ApiError::internal(format!(
            "storing {what} had an outcome this service does not know ({other:?}); nothing \
             changed"
        ))),
    }
}

/// Where a change of a tenant's limits comes from.
#[derive(Debug, Clone, Copy)]
enum LimitsSource {
    /// The admin, on this replica: stored (conditional on the revision held, on a store
    /// replicas share).
    Admin,
    /// The store: the record as the watch brought it at this revision, or as read again
    /// (`None`: read now, newer than anything held).
    Stored(Option<Revision>),
}

/// An uploaded assignor, as listed.
#[derive(Debug)]
pub(crate) struct Upload {
    pub(crate) sha256: String,
    /// The component as uploaded, for `GET /v1/assignors/{name}` (a broker plugin pulls new
    /// versions with it). Kept in memory: the store has no read of one key, and what a tenant
    /// keeps is bounded by its `max.assignors` × `max.component.bytes`.
    pub(crate) component: Bytes,
    /// Keeps its compiled entry in the cache while the upload is live.
    _cached: CacheRef,
}

/// What the tenant's lock guards: the coordinator (whose registry holds the uploads) and the
/// upload list, changed together.
#[derive(Debug)]
pub(crate) struct TenantState {
    pub(crate) coordinator: Coordinator,
    pub(crate) uploads: BTreeMap<String, Upload>,
    /// On a store replicas share, the revision of each upload's key and of the limits key as
    /// this replica last saw it (its start-up read, the watch, its own write, or a read after
    /// a lost write), served here or not: the condition of its next write of the key, so that
    /// a replica whose view is behind never replaces a newer record. A key not listed was
    /// absent. Empty on a store only this process writes.
    revisions: BTreeMap<String, Revision>,
    /// Keep the compiled entries of the registry's broker-configured components in the cache.
    _broker_cached: Vec<CacheRef>,
}

impl TenantState {
    /// Puts a checked upload of `bytes` bytes in the registry (replacing one of its name) and
    /// the upload list.
    fn make_selectable(&mut self, name: &str, component: Bytes, checked: CheckedUpload) {
        let upload = Upload {
            sha256: checked.assignor.sha256(),
            component,
            _cached: checked.cached,
        };
        self.coordinator
            .registry_mut()
            .insert(Assignor::Component(Arc::new(checked.assignor)));
        self.uploads.insert(name.to_owned(), upload);
    }
}

/// A tenant's limits in force and what enforces them. Replaced whole when an admin changes
/// the limits; work already started keeps the settings it started with.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The effective limits: the file's, with the admin's overrides on top.
    pub(crate) limits: TenantLimits,
    /// The admin's overrides (empty when none).
    pub(crate) overrides: LimitOverrides,
    runtime: Runtime,
    /// `limits.max_concurrent_assignments` permits. A change of limits brings a new
    /// semaphore: calls holding the old one's permits finish under the old bound.
    pub(crate) permits: Arc<Semaphore>,
}

impl Settings {
    /// The report of `usage`, with these limits beside the figures.
    pub(crate) fn usage_report(&self, usage: &assignor_sandbox::Usage) -> UsageReport {
        assignor_sandbox::wire::usage_report(usage, self.runtime.limits())
    }

    /// The limits of the tenant's calls, input limits included (what a group document is
    /// parsed under).
    pub(crate) fn call_limits(&self) -> &assignor_sandbox::Limits {
        self.runtime.limits()
    }
}

/// One tenant.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub(crate) name: String,
    /// Whether the store is shared with other service replicas (etcd): the store's watch
    /// then keeps the tenant current (see `replication`), a group this replica does not hold
    /// is read from the store before it is served, and its writes are conditional network
    /// round trips, made on the blocking pool.
    pub(crate) shared: bool,
    /// On a shared store, the store's revision the tenant was loaded at: what the replica's
    /// watch reports up to it is already here.
    pub(crate) loaded_at: Revision,
    /// On a shared store, the raw [`Revision`] up to which the watch's changes of this
    /// tenant are applied here (see [`Tenant::saw`]): the view an upload delete's condition
    /// on the tenant's group records is taken from.
    view: AtomicU64,
    broker: BrokerConfig,
    /// The service's compiled-component cache, shared by every tenant.
    cache: Arc<SharedDir>,
    /// The limits the config file gives, before any admin override.
    configured: TenantLimits,
    store: Arc<dyn Store>,
    /// Names an upload may never take: every built-in, listed or not, and the broker's
    /// configured entries.
    reserved: Vec<String>,
    state: Mutex<TenantState>,
    settings: RwLock<Arc<Settings>>,
}

/// Which checks an upload has passed so far, for the answer whether it passes or not.
#[derive(Debug, Default)]
pub(crate) struct Checks(Vec<String>);

impl Checks {
    /// The upload failed `check`: the answer names it, says why and lists what passed.
    pub(crate) fn reject(&self, status: StatusCode, check: &str, message: String) -> ApiError {
        ApiError::new(
            status,
            "ASSIGNOR_REJECTED",
            format!("upload rejected: {message}"),
        )
        .with("check", check)
        .with("passed", self.0.clone())
    }
}

/// A loaded upload waiting for its name and trial checks.
#[derive(Debug)]
pub(crate) struct LoadedUpload {
    assignor: ComponentAssignor,
    checks: Checks,
    /// Taken before the load: the entry it compiled stays until the upload is committed or
    /// dropped.
    cached: CacheRef,
}

/// A passed upload, ready to commit.
#[derive(Debug)]
pub(crate) struct CheckedUpload {
    assignor: ComponentAssignor,
    /// The answer, `replaced` still to be set by the commit.
    pub(crate) report: UploadReport,
    cached: CacheRef,
}

/// The runtime enforcing `limits` for a tenant: its engine, instance pool and deadlines, and
/// its compiles, in a child process (the broker config's compiler, which `assignor serve`
/// sets to itself) killed past the tenant's `compile.timeout.ms`, so an upload that would
/// compile for minutes frees its core at the limit. `max.component.bytes` binds uploads
/// (checked before they load), not the runtime: a lower limit must not stop the tenant's
/// stored uploads from reloading.
fn runtime_for(
    limits: &TenantLimits,
    broker: &BrokerConfig,
    cache: &SharedDir,
) -> anyhow::Result<Runtime> {
    let runtime_max = broker.limits.get_max_component_bytes();
    let runtime_limits = broker
        .limits
        .clone()
        .fuel(limits.fuel)
        .memory_bytes(limits.memory_bytes)
        .timeout(limits.timeout)
        .compile_timeout(limits.compile_timeout)
        .max_input_bytes(limits.max_input_bytes)
        .max_component_bytes(runtime_max.max(limits.max_component_bytes))
        .max_concurrent_calls(
            u32::try_from(limits.max_concurrent_assignments)
                .unwrap_or(u32::MAX)
                .saturating_add(EXTRA_INSTANCE_SLOTS),
        );
    let mut builder = Runtime::builder(runtime_limits).cache_dir(cache.path());
    if let Some(program) = &broker.compiler {
        builder = builder.compiler(program);
    }
    let runtime = builder.build()?;
    cache.register(&runtime);
    Ok(runtime)
}

/// References to the cache entries of `registry`'s components (the broker's), taken once it
/// is built. No other tenant can collect them meanwhile: every tenant's registry has the
/// same broker components, and holds them.
fn hold_components(cache: &Arc<SharedDir>, registry: &Registry) -> Vec<CacheRef> {
    registry
        .names()
        .filter_map(|name| match registry.get(name) {
            Some(Assignor::Component(c)) => Some(cache.hold(c.sha256())),
            _ => None,
        })
        .collect()
}

/// The broker's registry plus every upload among `entries` (the tenant's keys and values),
/// loaded on `runtime`, each holding its entry in `cache`; an upload that does not load (or
/// whose `name()` changed) is returned as (its name, why).
fn load_registry<'a>(
    runtime: &Runtime,
    cache: &Arc<SharedDir>,
    broker: &BrokerConfig,
    registry: Registry,
    entries: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<(Registry, BTreeMap<String, Upload>), (String, String)> {
    let mut registry = registry;
    let mut uploads = BTreeMap::new();
    for (key, bytes) in entries {
        let Some(name) = key.strip_prefix(ASSIGNOR_KEY_PREFIX) else {
            continue;
        };
        let cached = cache.hold_bytes(bytes);
        let assignor = runtime
            .load(bytes, name, broker.originals())
            .map_err(|e| (name.to_owned(), e.to_string()))?;
        if assignor.name() != name {
            return Err((
                name.to_owned(),
                format!("its name() is now `{}`", assignor.name()),
            ));
        }
        uploads.insert(
            name.to_owned(),
            Upload {
                sha256: assignor.sha256(),
                component: Bytes::copy_from_slice(bytes),
                _cached: cached,
            },
        );
        registry.insert(Assignor::Component(Arc::new(assignor)));
    }
    Ok((registry, uploads))
}

impl Tenant {
    /// Opens the tenant: its limits (the file's, then any stored admin overrides), its
    /// runtime (compiled components cached in `cache`), the broker's registry plus every
    /// upload in its namespace, and its coordinator. An upload that no longer loads stops
    /// startup, naming tenant and assignor: it was checked when uploaded, so this means the
    /// runtime or the tenant's limits changed underneath it. `captures` is told the outcome
    /// of each of its coordinator's capture writes (the service's metrics).
    pub(crate) fn open(
        config: &TenantConfig,
        broker: &BrokerConfig,
        store: Arc<dyn Store>,
        cache: &Arc<SharedDir>,
        captures: impl Fn(CaptureWrite) + Send + Sync + 'static,
    ) -> Result<Self, StartError> {
        let tenant = config.name.clone();
        let store_error = |what, source| StartError::Store {
            tenant: tenant.clone(),
            what,
            source,
        };
        let store: Arc<dyn Store> = Arc::new(Namespaced::tenant(store, &tenant));
        // One read of the tenant's keys (on a shared store, a scan of its prefix, whose
        // revision the replica's watch starts after).
        let snapshot = match store.shared() {
            Some(shared) => shared.load_prefix(""),
            None => store.load_all().map(|entries| Snapshot {
                entries: entries
                    .into_iter()
                    .map(|(k, v)| (k, v, Revision::ABSENT))
                    .collect(),
                at: Revision::ABSENT,
                damaged: Vec::new(),
            }),
        }
        .map_err(|e| store_error("its records cannot be read", e.into()))?;
        let entries = &snapshot.entries;
        let overrides: LimitOverrides = match entries.iter().find(|(k, _, _)| k == LIMITS_KEY) {
            Some((_, bytes, _)) => LimitsRecord::decode(bytes)
                .map_err(|e| store_error("its stored limits cannot be read", e.into()))?,
            None => LimitOverrides::default(),
        };
        let limits = config
            .limits
            .with_overrides(&overrides)
            .map_err(|m| store_error("its stored limits are invalid", m.into()))?;
        let runtime = runtime_for(&limits, broker, cache).map_err(|e| StartError::Engine {
            tenant: tenant.clone(),
            source: e.into(),
        })?;
        let registry =
            Registry::build(&runtime, broker).map_err(|source| StartError::Registry {
                tenant: tenant.clone(),
                source: Box::new(source),
            })?;
        let broker_cached = hold_components(cache, &registry);
        let reserved: Vec<String> = BUILTIN_NAMES
            .iter()
            .map(|s| (*s).to_owned())
            .chain(registry.names().map(str::to_owned))
            .collect();
        let stored = entries.iter().map(|(k, v, _)| (k.as_str(), v.as_slice()));
        let (registry, uploads) = load_registry(&runtime, cache, broker, registry, stored)
            .map_err(|(assignor, message)| StartError::Upload {
                tenant: tenant.clone(),
                assignor,
                message,
            })?;
        for name in uploads.keys() {
            tracing::info!(tenant = %tenant, assignor = %name, "uploaded assignor restored");
        }
        let revisions = match store.shared() {
            Some(_) => entries
                .iter()
                .filter(|(k, _, _)| is_tenant_record(k))
                .map(|(k, _, r)| (k.clone(), *r))
                .collect(),
            None => BTreeMap::new(),
        };
        let coordinator = Coordinator::open_from(registry, broker, store.clone(), entries)
            .map_err(|e| store_error("its groups cannot be opened", e.into()))?
            .on_capture_write(captures)
            .with_state_limits(limits.state_limits());
        let permits = Arc::new(Semaphore::new(limits.max_concurrent_assignments));
        Ok(Self {
            name: tenant,
            shared: store.shared().is_some(),
            loaded_at: snapshot.at,
            view: AtomicU64::new(snapshot.at.raw()),
            broker: broker.clone(),
            cache: cache.clone(),
            configured: config.limits.clone(),
            store,
            reserved,
            state: Mutex::new(TenantState {
                coordinator,
                uploads,
                revisions,
                _broker_cached: broker_cached,
            }),
            settings: RwLock::new(Arc::new(Settings {
                limits,
                overrides,
                runtime,
                permits,
            })),
        })
    }

    /// Notes that the watch's changes of this tenant up to `revision` are applied (the
    /// replica's thread for the tenant applies them in order).
    pub(crate) fn saw(&self, revision: Revision) {
        self.view.fetch_max(revision.raw(), Ordering::SeqCst);
    }

    /// The revision up to which the watch's changes of this tenant are applied here.
    fn view(&self) -> Revision {
        Revision::new(self.view.load(Ordering::SeqCst))
    }

    /// Whether a record of `key` read from the store at `at` by a request's thread was
    /// deleted since: this replica holds no revision of the key although its watch has
    /// applied every change up to a revision at or past `at`, so it saw the record and then
    /// its delete. Taking it would serve an upload (or limits) another replica deleted while
    /// the read was on its way. (Records the watch refused keep their revisions, so they are
    /// not taken for deleted.)
    fn deleted_since(&self, state: &TenantState, key: &str, at: Revision) -> bool {
        !state.revisions.contains_key(key) && at <= self.view()
    }

    /// The guards of a change of `group`'s config, `ops`, on a store replicas share: a change
    /// selecting an upload this replica serves is conditional on the upload's record being
    /// the one it loaded, so that the change and another replica's delete of the upload
    /// (conditional on the tenant's group records, see [`Tenant::delete_upload`]) cannot
    /// both land: the one that commits second loses (503, retriable).
    pub(crate) fn selection_guards(
        &self,
        state: &TenantState,
        ops: &[(&str, ConfigOp)],
    ) -> Vec<Guard> {
        if self.store.shared().is_none() {
            return Vec::new();
        }
        ops.iter()
            .filter_map(|(key, op)| match op {
                ConfigOp::Set(name)
                    if *key == ASSIGNOR_NAME && state.uploads.contains_key(name) =>
                {
                    let key = format!("{ASSIGNOR_KEY_PREFIX}{name}");
                    let revision = held(&state.revisions, &key);
                    Some(Guard::Key(key, revision))
                }
                _ => None,
            })
            .collect()
    }

    /// The tenant's state, for code on the blocking pool (or any thread outside the async
    /// runtime), which may wait for it.
    ///
    /// An async lock, so that async threads wait for it without blocking ([`Self::lock`]):
    /// it is held only briefly (an in-memory change and a buffered write, or a flush for a
    /// rare durable change), but often, by every trigger. A panic while it was held cannot
    /// leave it half-changed (every change is built on a copy and persisted before it is
    /// swapped in), and tokio's lock has no poisoning.
    pub(crate) fn state(&self) -> MutexGuard<'_, TenantState> {
        self.state.blocking_lock()
    }

    /// The tenant's state, for brief work on async threads: waits without blocking the thread.
    /// The guard must not be held across an `.await`, nor during anything slow.
    pub(crate) async fn lock(&self) -> MutexGuard<'_, TenantState> {
        self.state.lock().await
    }

    /// The limits in force now. Cheap and never blocks on other work: safe on async threads.
    pub(crate) fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the admin's overrides of this tenant's limits with `overrides` (empty: back
    /// to the file's values), all or nothing: the new limits are checked, every upload is
    /// reloaded under them (one that no longer loads refuses the change, named), the
    /// overrides are stored, and only then do new calls see them.
    ///
    /// On a store replicas share, the write is conditional on the revision of the limits
    /// record this replica last saw: when another replica changed it since, nothing changes,
    /// the answer is `COORDINATOR_NOT_AVAILABLE` (503, retriable) and this replica takes the
    /// stored limits, so the retry starts from them.
    pub(crate) fn set_limits(&self, overrides: LimitOverrides) -> Result<Arc<Settings>, ApiError> {
        self.change_limits(overrides, LimitsSource::Admin)
    }

    /// [`set_limits`](Self::set_limits) when `source` is the admin; else applies limits
    /// another replica stored, without storing them again (and, from the watch, only if this
    /// replica has not seen a newer record meanwhile).
    fn change_limits(
        &self,
        overrides: LimitOverrides,
        source: LimitsSource,
    ) -> Result<Arc<Settings>, ApiError> {
        let limits = self
            .configured
            .with_overrides(&overrides)
            .map_err(ApiError::bad_request)?;
        let runtime = runtime_for(&limits, &self.broker, &self.cache).map_err(|e| {
            ApiError::internal(format!("cannot create an engine for these limits: {e:#}"))
        })?;
        let registry = Registry::build(&runtime, &self.broker).map_err(|e| {
            ApiError::new(
                StatusCode::CONFLICT,
                "POLICY_VIOLATION",
                format!(
                    "the broker's assignors do not load under these limits, nothing changed: {e}"
                ),
            )
        })?;
        let broker_cached = hold_components(&self.cache, &registry);
        let mut state = self.state();
        if let LimitsSource::Stored(Some(revision)) = source
            && state
                .revisions
                .get(LIMITS_KEY)
                .is_some_and(|held| *held >= revision)
        {
            // A newer record was taken while these limits were prepared.
            return Ok(self.settings());
        }
        // The uploads as this replica holds them (each as stored: a change another replica
        // makes reaches this one through the watch).
        let keys: Vec<(String, Bytes)> = state
            .uploads
            .iter()
            .map(|(name, u)| (format!("{ASSIGNOR_KEY_PREFIX}{name}"), u.component.clone()))
            .collect();
        let stored = keys.iter().map(|(k, v)| (k.as_str(), v.as_ref()));
        let (registry, uploads) =
            load_registry(&runtime, &self.cache, &self.broker, registry, stored).map_err(
                |(assignor, message)| {
                    ApiError::new(
                        StatusCode::CONFLICT,
                        "POLICY_VIOLATION",
                        format!(
                            "upload `{assignor}` does not load under these limits ({message}); \
                         nothing changed"
                        ),
                    )
                    .with("assignor", assignor)
                },
            )?;
        if let LimitsSource::Admin = source {
            let failed =
                |e| ApiError::internal(format!("storing the limits failed, nothing changed: {e}"));
            let reset = overrides == LimitOverrides::default();
            match self.store.shared() {
                None if reset => self.store.delete(LIMITS_KEY).map_err(failed)?,
                None => self
                    .store
                    .put(LIMITS_KEY, &LimitsRecord::encode(&overrides))
                    .map_err(failed)?,
                Some(shared) => {
                    let expected = held(&state.revisions, LIMITS_KEY);
                    let outcome = if reset {
                        shared.delete_if(LIMITS_KEY, expected)
                    } else {
                        shared.put_if(LIMITS_KEY, &LimitsRecord::encode(&overrides), expected)
                    }
                    .map_err(failed)?;
                    match written(outcome, "the limits")? {
                        Some(revision) if !reset => {
                            state.revisions.insert(LIMITS_KEY.to_owned(), revision);
                        }
                        Some(_) => {
                            state.revisions.remove(LIMITS_KEY);
                        }
                        None => {
                            drop(state);
                            self.read_again(LIMITS_KEY);
                            return Err(changed_elsewhere("this tenant's limits record"));
                        }
                    }
                }
            }
        }
        if let LimitsSource::Stored(revision) = source {
            // Noted with the limits it stands for, under the same lock, so that a write of
            // this replica conditioned on it starts from them.
            let present = overrides != LimitOverrides::default();
            note(&mut state.revisions, LIMITS_KEY, present, revision);
        }
        *state.coordinator.registry_mut() = registry;
        state.coordinator.set_state_limits(limits.state_limits());
        state.uploads = uploads;
        state._broker_cached = broker_cached;
        let settings = Arc::new(Settings {
            permits: Arc::new(Semaphore::new(limits.max_concurrent_assignments)),
            limits,
            overrides,
            runtime,
        });
        *self
            .settings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = settings.clone();
        Ok(settings)
    }

    /// An upload's first check, made before its body is read: its size (declared, when the
    /// client sent it) over the tenant's `max.component.bytes`.
    pub(crate) fn oversized(tenant: &str, max: usize, size: Option<u64>) -> ApiError {
        let size = size.map_or_else(String::new, |s| format!(" is {s} bytes,"));
        Checks::default()
            .reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "size",
                format!(
                    "the component{size} over this tenant's {max}-byte limit \
                     (service.tenant.{tenant}.max.component.bytes); make it smaller"
                ),
            )
            .with("limit", max)
    }

    /// The size check an upload read within `max` bytes has passed.
    pub(crate) fn size_passed(max: usize, bytes: usize) -> Checks {
        Checks(vec![format!("size: {bytes} bytes, limit {max}")])
    }

    /// An upload's load: a component of this world and version importing only the allowed
    /// WASI, compiled, its `name()` read and `configure` run on the broker config. The
    /// caller bounds it with the tenant's `compile.timeout.ms`.
    pub(crate) fn load_upload(
        &self,
        settings: &Settings,
        mut checks: Checks,
        name: &str,
        bytes: &[u8],
    ) -> Result<LoadedUpload, ApiError> {
        let cached = self.cache.hold_bytes(bytes);
        let assignor = settings
            .runtime
            .load(bytes, name, self.broker.originals())
            .map_err(|e| {
                checks
                    .reject(StatusCode::UNPROCESSABLE_ENTITY, "load", e.to_string())
                    .with("kind", e.kind.as_str())
            })?;
        checks.0.push(format!(
            "component of `{}` importing only allowed WASI; compiled; name() and configure() ran",
            assignor_sandbox::EXPORT_NAME
        ));
        Ok(LoadedUpload {
            assignor,
            checks,
            cached,
        })
    }

    /// An upload's last checks: `name()` equal to `name` and not a reserved name; a valid
    /// trial assignment on [`TRIAL_GROUP`] within the tenant's limits.
    pub(crate) fn check_loaded(
        &self,
        settings: &Settings,
        loaded: LoadedUpload,
        name: &str,
        bytes: usize,
    ) -> Result<CheckedUpload, ApiError> {
        let LoadedUpload {
            assignor,
            mut checks,
            cached,
        } = loaded;
        let invalid = StatusCode::UNPROCESSABLE_ENTITY;
        if assignor.name() != name {
            return Err(checks.reject(
                invalid,
                "name",
                format!(
                    "the component's name() is `{}`, but it was uploaded as `{name}`; upload it \
                     under its own name",
                    assignor.name()
                ),
            ));
        }
        if self.reserved.iter().any(|r| r == name) {
            return Err(checks.reject(
                invalid,
                "name",
                format!(
                    "`{name}` is the name of a built-in or broker-configured assignor; rename \
                     yours"
                ),
            ));
        }
        checks
            .0
            .push(format!("name() is `{name}`, not a built-in's"));
        let (group, topology) = parse_input(TRIAL_GROUP).expect("the trial group parses");
        let (_, usage) = assignor.assign(&group, &topology).map_err(|e| {
            checks
                .reject(
                    invalid,
                    "trial",
                    format!("the trial assignment failed: {e}"),
                )
                .with("kind", e.kind.as_str())
        })?;
        checks.0.push(format!(
            "trial assignment of the example group ({} members, {} tasks) is valid",
            group.members.len(),
            topology.tasks().count()
        ));
        let report = UploadReport {
            assignor: name.to_owned(),
            bytes: bytes as u64,
            checks: checks.0,
            replaced: false,
            sha256: assignor.sha256(),
            trial: settings.usage_report(&usage),
        };
        Ok(CheckedUpload {
            assignor,
            report,
            cached,
        })
    }

    /// Stores a checked upload and makes it selectable, replacing any previous upload of the
    /// name atomically: the store write comes first, so a failed write changes nothing, and
    /// groups see either the old assignor or the new one. Returns whether it replaced one.
    pub(crate) fn commit_upload(
        &self,
        name: &str,
        bytes: &Bytes,
        checked: CheckedUpload,
    ) -> Result<bool, ApiError> {
        let mut state = self.state();
        let replaced = state.uploads.contains_key(name);
        let max = self.settings().limits.max_assignors;
        if !replaced && state.uploads.len() >= max {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "POLICY_VIOLATION",
                format!(
                    "this tenant already keeps {} uploaded assignors, its limit is {max}; delete \
                     one first",
                    state.uploads.len()
                ),
            ));
        }
        let key = format!("{ASSIGNOR_KEY_PREFIX}{name}");
        let failed =
            |e| ApiError::internal(format!("storing the upload failed, nothing changed: {e}"));
        match self.store.shared() {
            None => self.store.put(&key, bytes).map_err(failed)?,
            // Conditional on the revision this replica last saw: an upload of the name
            // another replica stored (or deleted) since is not replaced from an older view.
            Some(shared) => {
                let expected = held(&state.revisions, &key);
                let outcome = shared.put_if(&key, bytes, expected).map_err(failed)?;
                match written(outcome, "the upload")? {
                    Some(revision) => {
                        state.revisions.insert(key, revision);
                    }
                    None => {
                        drop(state);
                        self.read_again(&key);
                        return Err(changed_elsewhere(&format!("upload `{name}`")));
                    }
                }
            }
        }
        state.make_selectable(name, bytes.clone(), checked);
        Ok(replaced)
    }

    /// On a store replicas share: the upload `group` selects when this replica has not loaded
    /// it (another replica stored it since this one started), loaded and checked here exactly
    /// as an upload is (load, `name()`, trial assignment, under this tenant's limits), then
    /// made selectable; it is not written again. `Ok(false)` when there is nothing to load:
    /// the store is not shared, the group selects no upload or one already loaded, or no such
    /// upload is stored. A stored upload that fails the checks here is an error naming it,
    /// and the group is not computed with another assignor meanwhile.
    pub(crate) fn load_selected_upload(&self, group: &str) -> Result<bool, ApiError> {
        let Some(shared) = self.store.shared() else {
            return Ok(false);
        };
        let name = {
            let state = self.state();
            let c = &state.coordinator;
            match c.config(group)?.assignor_name.clone() {
                Some(name) if c.registry().get(&name).is_none() => name,
                _ => return Ok(false),
            }
        };
        let key = format!("{ASSIGNOR_KEY_PREFIX}{name}");
        let stored = shared.get(&key).map_err(|e| {
            ApiError::internal(format!(
                "reading upload `{name}` from the store failed: {e}"
            ))
        })?;
        let Some((bytes, revision)) = stored else {
            return Ok(false);
        };
        let checked = self.check_stored(&name, &bytes).map_err(|e| {
            ApiError::new(
                StatusCode::CONFLICT,
                "POLICY_VIOLATION",
                format!(
                    "group `{group}` selects upload `{name}`, stored by another replica, \
                         which does not pass this replica's checks: {}",
                    e.message
                ),
            )
            .with("assignor", name.clone())
        })?;
        let mut state = self.state();
        if state.uploads.contains_key(&name)
            || !newer(&state.revisions, &key, Some(revision))
            || self.deleted_since(&state, &key, revision)
        {
            // Loaded meanwhile by another request of this replica, or a newer record of it
            // seen (and served, refused or deleted) meanwhile.
            return Ok(state.uploads.contains_key(&name));
        }
        state.revisions.insert(key, revision);
        tracing::info!(tenant = %self.name, assignor = %name, "loaded and checked an upload another replica stored");
        state.make_selectable(&name, Bytes::from(bytes), checked);
        Ok(true)
    }

    /// An upload another replica stored, loaded and checked here exactly as an upload is
    /// (size, load, `name()`, trial assignment, under this tenant's limits), before this
    /// replica serves it.
    fn check_stored(&self, name: &str, bytes: &[u8]) -> Result<CheckedUpload, ApiError> {
        let settings = self.settings();
        let max = settings.limits.max_component_bytes;
        if bytes.len() > max {
            return Err(Self::oversized(&self.name, max, Some(bytes.len() as u64)));
        }
        let checked = Self::size_passed(max, bytes.len());
        let loaded = self.load_upload(&settings, checked, name, bytes)?;
        self.check_loaded(&settings, loaded, name, bytes.len())
    }

    /// Applies a change of one of the tenant's keys (`key` inside its namespace) that the
    /// store's watch reported, made by another replica (or this one: then it is here already
    /// and changes nothing): `value` is the key's new value (`None`: deleted) at `revision`.
    /// An upload is loaded and checked here before it is served, and one that fails is no
    /// longer served; limits are applied as an admin's change is, without storing them again.
    /// A record older than the one this replica last saw (its own write, or one it read again
    /// after losing a write) is not taken. `Err` says why the change is refused (a record that
    /// does not decode, an upload that fails its checks, limits under which an upload does not
    /// load); what it refuses is left as it was, except a failed upload, whose older version is
    /// not served either. A refused record still counts as seen: the next write of its key
    /// here is conditioned on it.
    pub(crate) fn apply_change(
        &self,
        key: &str,
        value: Option<&[u8]>,
        revision: Revision,
    ) -> Result<(), String> {
        if is_tenant_record(key) {
            return self.take_record(key, value, Some(revision));
        }
        self.state()
            .coordinator
            .apply_stored(key, value, revision)
            .map_err(|e| e.to_string())
    }

    /// Takes `value`, an upload's or the limits record as stored under `key` at `at` (`None`:
    /// read now, after a lost write; only for an absent key), unless a newer one was seen.
    fn take_record(
        &self,
        key: &str,
        value: Option<&[u8]>,
        at: Option<Revision>,
    ) -> Result<(), String> {
        // A record read by a request's thread (`read_again`) may have been deleted since, as
        // the watch has seen; the watch's own changes are always past the view.
        let stale = |state: &TenantState| {
            !newer(&state.revisions, key, at)
                || value.is_some() && at.is_some_and(|at| self.deleted_since(state, key, at))
        };
        if stale(&self.state()) {
            return Ok(());
        }
        if key == LIMITS_KEY {
            let taken = match value.map(LimitsRecord::decode).transpose() {
                Err(e) => Err(format!("the limits record does not decode: {e}")),
                Ok(overrides) => {
                    let overrides = overrides.unwrap_or_default();
                    if overrides == self.settings().overrides {
                        let mut state = self.state();
                        note(&mut state.revisions, key, value.is_some(), at);
                        return Ok(());
                    }
                    self.change_limits(overrides, LimitsSource::Stored(at))
                        .map(|_| {
                            tracing::info!(tenant = %self.name, "applied limits another replica stored");
                        })
                        .map_err(|e| format!("the stored limits are not applied here: {}", e.message))
                }
            };
            if taken.is_err() {
                let mut state = self.state();
                note(&mut state.revisions, key, value.is_some(), at);
            }
            return taken;
        }
        let Some(name) = key.strip_prefix(ASSIGNOR_KEY_PREFIX) else {
            return Ok(());
        };
        let Some(bytes) = value else {
            let mut state = self.state();
            if !newer(&state.revisions, key, at) {
                return Ok(());
            }
            state.revisions.remove(key);
            if state.uploads.remove(name).is_some() {
                state.coordinator.registry_mut().remove(name);
                tracing::info!(tenant = %self.name, assignor = %name, "an upload another replica deleted is no longer served");
            }
            return Ok(());
        };
        {
            let mut state = self.state();
            if state
                .uploads
                .get(name)
                .is_some_and(|u| u.component.as_ref() == bytes)
            {
                note(&mut state.revisions, key, true, at);
                return Ok(());
            }
        }
        // Compiles and runs a trial: without the tenant's lock.
        let checked = self.check_stored(name, bytes);
        let mut state = self.state();
        if stale(&state) {
            // A newer record of the name was taken, or its delete seen, meanwhile.
            return Ok(());
        }
        note(&mut state.revisions, key, true, at);
        match checked {
            Ok(checked) => {
                state.make_selectable(name, Bytes::copy_from_slice(bytes), checked);
                tracing::info!(tenant = %self.name, assignor = %name, "loaded and checked an upload another replica stored");
                Ok(())
            }
            Err(e) => {
                if state.uploads.remove(name).is_some() {
                    state.coordinator.registry_mut().remove(name);
                }
                Err(format!(
                    "upload `{name}` does not pass this replica's checks and is not served \
                     here: {}",
                    e.message
                ))
            }
        }
    }

    /// After a write of `key` lost its condition: reads the record again and takes it, so
    /// that a retry starts from what is stored. Best effort: a read that fails, or a record
    /// not taken here, is logged (the watch brings the record later).
    fn read_again(&self, key: &str) {
        let Some(shared) = self.store.shared() else {
            return;
        };
        let taken = match shared.get(key) {
            Ok(Some((bytes, revision))) => self.take_record(key, Some(&bytes), Some(revision)),
            Ok(None) => self.take_record(key, None, None),
            Err(e) => Err(format!("reading it again failed: {e}")),
        };
        if let Err(why) = taken {
            tracing::warn!(tenant = %self.name, key, error = %why, "a record another replica changed is not taken here after this replica's write of it lost");
        }
    }

    /// Applies a full read of the store at `at` (the watch's reset, after etcd compacted the
    /// history it needed): `entries` are the tenant's keys now, and `damaged` (sorted) keys
    /// that exist but could not be read, which keep what this replica holds; those this
    /// replica holds that are among neither are gone. Returns the refusals, each with its key.
    pub(crate) fn apply_reset(
        &self,
        entries: &[(String, Vec<u8>, Revision)],
        damaged: &[&str],
        at: Revision,
    ) -> Vec<(String, String)> {
        let mut refused = Vec::new();
        let held: Vec<String> = {
            let state = self.state();
            let mut held = state.coordinator.stored_keys();
            held.extend(
                state
                    .uploads
                    .keys()
                    .map(|n| format!("{ASSIGNOR_KEY_PREFIX}{n}")),
            );
            // Records seen but not served here (refused) are held too: their revisions go.
            held.extend(state.revisions.keys().cloned());
            held.push(LIMITS_KEY.to_owned());
            held.sort();
            held.dedup();
            held
        };
        for key in held {
            if entries
                .binary_search_by(|(k, _, _)| k.as_str().cmp(&key))
                .is_err()
                && damaged.binary_search(&key.as_str()).is_err()
                && let Err(why) = self.apply_change(&key, None, at)
            {
                refused.push((key, why));
            }
        }
        for (key, value, revision) in entries {
            if let Err(why) = self.apply_change(key, Some(value), *revision) {
                refused.push((key.clone(), why));
            }
        }
        refused
    }

    /// Deletes an upload, refused while a group selects it (`ASSIGNOR_IN_USE`, listing them):
    /// silently moving those groups to the default assignor would change their assignments
    /// behind their owners' backs.
    ///
    /// On a store replicas share the groups are checked as this replica holds them, so the
    /// delete is also conditional on the tenant's group records: none written since the
    /// watch's changes applied here (a group another replica pointed at the upload meanwhile
    /// makes the delete lose: 503, retriable). This replica's own group writes come back
    /// through the watch within its delay, which the delete waits for (at most
    /// [`OWN_WRITES_WAIT`]) so that they do not make it lose.
    pub(crate) fn delete_upload(&self, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
        if self.store.shared().is_some() {
            let deadline = Instant::now() + OWN_WRITES_WAIT;
            while self.view() < state.coordinator.latest_group_revision()
                && Instant::now() < deadline
            {
                // Without the lock, which the tenant's thread takes to apply the changes.
                drop(state);
                std::thread::sleep(OWN_WRITES_POLL);
                state = self.state();
            }
        }
        if !state.uploads.contains_key(name) {
            return Err(ApiError::assignor_not_found(name));
        }
        let users = state.coordinator.groups_using(name);
        if !users.is_empty() {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "ASSIGNOR_IN_USE",
                format!(
                    "groups select `{name}` with streams.assignor.name: {}; point them at \
                     another assignor (or delete their setting) first",
                    users.join(", ")
                ),
            )
            .with("groups", users));
        }
        let key = format!("{ASSIGNOR_KEY_PREFIX}{name}");
        let failed =
            |e| ApiError::internal(format!("deleting the upload failed, nothing changed: {e}"));
        match self.store.shared() {
            None => self.store.delete(&key).map_err(failed)?,
            // Fenced like the upload's other writes: a version another replica stored since
            // this one last saw the key is not deleted from the older view.
            Some(shared) => {
                let expected = held(&state.revisions, &key);
                let groups = Guard::Unchanged {
                    prefix: GROUP_KEY_PREFIX.to_owned(),
                    since: self.view(),
                };
                let outcome = shared
                    .write_if_guarded(&key, None, expected, &[groups])
                    .map_err(failed)?;
                if outcome == Conditional::Conflict(expected) {
                    // The upload is as this replica holds it: a group record moved.
                    return Err(changed_elsewhere(&format!(
                        "a group of this tenant (which may now select `{name}`)"
                    )));
                }
                if written(outcome, "the upload's deletion")?.is_none() {
                    drop(state);
                    self.read_again(&key);
                    return Err(changed_elsewhere(&format!("upload `{name}`")));
                }
                state.revisions.remove(&key);
            }
        }
        state.coordinator.registry_mut().remove(name);
        state.uploads.remove(name);
        Ok(())
    }
}

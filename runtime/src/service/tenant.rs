//! One tenant's world: its runtime (its call limits), its coordinator (its groups) over its
//! namespace of the store, its uploaded assignors, and the semaphore bounding its concurrent
//! assignments.
//!
//! Everything here is synchronous and may block (store writes fsync, loads compile, trials run
//! guests): the API calls it from `spawn_blocking`, never on the async runtime's threads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::assignor::Assignor;
use crate::builtin::BUILTIN_NAMES;
use crate::component::ComponentAssignor;
use crate::config::BrokerConfig;
use crate::coordinator::Coordinator;
use crate::json::{parse_input, usage_json};
use crate::registry::Registry;
use crate::runtime::Runtime;
use crate::store::Store;

use super::StartError;
use super::config::{TenantConfig, TenantLimits};
use super::error::ApiError;
use super::namespace::Namespaced;

/// Store keys of uploaded components (inside the tenant's namespace) start with this.
const ASSIGNOR_KEY_PREFIX: &str = "assignor/";
/// The group an upload's trial assignment runs on: the JSON contract's example (3 members on
/// 2 processes, a stateful subtopology with standbys and rack tags, a stateless one), small
/// enough to cost nothing and rich enough to exercise every output rule.
const TRIAL_GROUP: &str = include_str!("../../demo/group.json");
/// Instance slots beyond `max.concurrent.assignments` in a tenant's runtime: an upload's load
/// takes one while it reads `name()` and runs `configure`.
const EXTRA_INSTANCE_SLOTS: u32 = 1;

/// An uploaded assignor, as listed.
#[derive(Debug, Clone)]
pub(crate) struct Upload {
    pub(crate) sha256: String,
    pub(crate) bytes: usize,
}

/// What the tenant's lock guards: the coordinator (whose registry holds the uploads) and the
/// upload list, changed together.
#[derive(Debug)]
pub(crate) struct TenantState {
    pub(crate) coordinator: Coordinator,
    pub(crate) uploads: BTreeMap<String, Upload>,
}

/// One tenant.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub(crate) name: String,
    pub(crate) limits: TenantLimits,
    runtime: Runtime,
    store: Arc<dyn Store>,
    originals: BTreeMap<String, String>,
    /// Names an upload may never take: every built-in, listed or not, and the broker's
    /// configured entries.
    reserved: Vec<String>,
    state: Mutex<TenantState>,
    pub(crate) permits: Arc<Semaphore>,
}

/// A passed upload, ready to commit.
#[derive(Debug)]
pub(crate) struct CheckedUpload {
    assignor: ComponentAssignor,
    pub(crate) report: Value,
}

impl Tenant {
    /// Opens the tenant: its runtime (compiled components cached in `cache_dir`), the broker's
    /// registry plus every upload in its namespace, and its coordinator. An upload that no
    /// longer loads stops startup, naming tenant and assignor: it was checked when uploaded,
    /// so this means the runtime or the tenant's limits changed underneath it.
    pub(crate) fn open(
        config: &TenantConfig,
        broker: &BrokerConfig,
        store: Arc<dyn Store>,
        cache_dir: &Path,
    ) -> Result<Self, StartError> {
        let tenant = config.name.clone();
        let l = &config.limits;
        let limits = broker
            .limits
            .clone()
            .fuel(l.fuel)
            .memory_bytes(l.memory_bytes)
            .timeout(l.timeout)
            .max_component_bytes(l.max_component_bytes)
            .max_concurrent_calls(
                u32::try_from(l.max_concurrent_assignments)
                    .unwrap_or(u32::MAX)
                    .saturating_add(EXTRA_INSTANCE_SLOTS),
            );
        let runtime =
            Runtime::with_cache_dir(limits, cache_dir).map_err(|e| StartError::Engine {
                tenant: tenant.clone(),
                message: format!("{e:#}"),
            })?;
        let mut registry =
            Registry::build(&runtime, broker).map_err(|source| StartError::Registry {
                tenant: tenant.clone(),
                source,
            })?;
        let reserved: Vec<String> = BUILTIN_NAMES
            .iter()
            .map(|s| (*s).to_owned())
            .chain(registry.names().map(str::to_owned))
            .collect();
        let store: Arc<dyn Store> = Arc::new(Namespaced::tenant(store, &tenant));
        let mut uploads = BTreeMap::new();
        for (key, bytes) in store.load_all().map_err(|source| StartError::Store {
            tenant: tenant.clone(),
            message: source.to_string(),
        })? {
            let Some(name) = key.strip_prefix(ASSIGNOR_KEY_PREFIX) else {
                continue;
            };
            let assignor = runtime
                .load(&bytes, name, broker.originals())
                .map_err(|source| StartError::Upload {
                    tenant: tenant.clone(),
                    assignor: name.to_owned(),
                    message: source.to_string(),
                })?;
            if assignor.name() != name {
                return Err(StartError::Upload {
                    tenant: tenant.clone(),
                    assignor: name.to_owned(),
                    message: format!("its name() is now `{}`", assignor.name()),
                });
            }
            uploads.insert(
                name.to_owned(),
                Upload {
                    sha256: assignor.sha256(),
                    bytes: bytes.len(),
                },
            );
            registry.insert(Assignor::Component(Arc::new(assignor)));
            tracing::info!(tenant = %tenant, assignor = %name, "uploaded assignor restored");
        }
        let coordinator = Coordinator::open(registry, broker, store.clone()).map_err(|source| {
            StartError::Store {
                tenant: tenant.clone(),
                message: source.to_string(),
            }
        })?;
        Ok(Self {
            name: tenant,
            limits: config.limits.clone(),
            runtime,
            store,
            originals: broker.originals().clone(),
            reserved,
            state: Mutex::new(TenantState {
                coordinator,
                uploads,
            }),
            permits: Arc::new(Semaphore::new(l.max_concurrent_assignments)),
        })
    }

    /// The tenant's state. A panic while it was held cannot leave it half-changed (every
    /// change is built on a copy and persisted before it is swapped in), so poison is ignored.
    pub(crate) fn state(&self) -> MutexGuard<'_, TenantState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The usage object with this tenant's limits beside the figures.
    pub(crate) fn usage_json(&self, usage: &crate::Usage) -> Value {
        usage_json(usage, self.runtime.limits())
    }

    /// Every check an upload must pass, in order, before anything is stored: size; a
    /// component of this world and version importing only the allowed WASI, compiled;
    /// `name()` equal to `name` and not a reserved name; `configure` accepting the broker
    /// config; a valid trial assignment on [`TRIAL_GROUP`] within the tenant's limits.
    pub(crate) fn check_upload(&self, name: &str, bytes: &[u8]) -> Result<CheckedUpload, ApiError> {
        let mut passed: Vec<String> = Vec::new();
        let reject = |status: StatusCode, check: &str, message: String, passed: &[String]| {
            ApiError::new(
                status,
                "ASSIGNOR_REJECTED",
                format!("upload rejected: {message}"),
            )
            .with("check", check)
            .with("passed", passed.to_vec())
        };
        let max = self.limits.max_component_bytes;
        if bytes.len() > max {
            return Err(reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "size",
                format!(
                    "the component is {} bytes, over this tenant's {max}-byte limit",
                    bytes.len()
                ),
                &passed,
            ));
        }
        passed.push(format!("size: {} bytes, limit {max}", bytes.len()));
        let assignor = self
            .runtime
            .load(bytes, name, &self.originals)
            .map_err(|e| {
                reject(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "load",
                    e.to_string(),
                    &passed,
                )
                .with("kind", e.kind.as_str())
            })?;
        passed.push(format!(
            "component of `{}` importing only allowed WASI; compiled; name() and configure() ran",
            crate::EXPORT_NAME
        ));
        if assignor.name() != name {
            return Err(reject(
                StatusCode::UNPROCESSABLE_ENTITY,
                "name",
                format!(
                    "the component's name() is `{}`, but it was uploaded as `{name}`; upload it \
                     under its own name",
                    assignor.name()
                ),
                &passed,
            ));
        }
        if self.reserved.iter().any(|r| r == name) {
            return Err(reject(
                StatusCode::UNPROCESSABLE_ENTITY,
                "name",
                format!(
                    "`{name}` is the name of a built-in or broker-configured assignor; rename \
                     yours"
                ),
                &passed,
            ));
        }
        passed.push(format!("name() is `{name}`, not a built-in's"));
        let (group, topology) = parse_input(TRIAL_GROUP).expect("the trial group parses");
        let (_, usage) = assignor.assign(&group, &topology).map_err(|e| {
            reject(
                StatusCode::UNPROCESSABLE_ENTITY,
                "trial",
                format!("the trial assignment failed: {e}"),
                &passed,
            )
            .with("kind", e.kind.as_str())
        })?;
        passed.push(format!(
            "trial assignment of the example group ({} members, {} tasks) is valid",
            group.members.len(),
            topology.tasks().count()
        ));
        let report = json!({
            "assignor": name,
            "sha256": assignor.sha256(),
            "bytes": bytes.len(),
            "checks": passed,
            "trial": self.usage_json(&usage),
        });
        Ok(CheckedUpload { assignor, report })
    }

    /// Stores a checked upload and makes it selectable, replacing any previous upload of the
    /// name atomically: the store write comes first, so a failed write changes nothing, and
    /// groups see either the old assignor or the new one. Returns whether it replaced one.
    pub(crate) fn commit_upload(
        &self,
        name: &str,
        bytes: &[u8],
        checked: CheckedUpload,
    ) -> Result<bool, ApiError> {
        let mut state = self.state();
        let replaced = state.uploads.contains_key(name);
        if !replaced && state.uploads.len() >= self.limits.max_assignors {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "POLICY_VIOLATION",
                format!(
                    "this tenant already keeps {} uploaded assignors, its limit; delete one first",
                    state.uploads.len()
                ),
            ));
        }
        self.store
            .put(&format!("{ASSIGNOR_KEY_PREFIX}{name}"), bytes)
            .map_err(|e| {
                ApiError::internal(format!("storing the upload failed, nothing changed: {e}"))
            })?;
        let upload = Upload {
            sha256: checked.assignor.sha256(),
            bytes: bytes.len(),
        };
        state
            .coordinator
            .registry_mut()
            .insert(Assignor::Component(Arc::new(checked.assignor)));
        state.uploads.insert(name.to_owned(), upload);
        Ok(replaced)
    }

    /// Deletes an upload, refused while a group selects it (`ASSIGNOR_IN_USE`, listing them):
    /// silently moving those groups to the default assignor would change their assignments
    /// behind their owners' backs.
    pub(crate) fn delete_upload(&self, name: &str) -> Result<(), ApiError> {
        let mut state = self.state();
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
        self.store
            .delete(&format!("{ASSIGNOR_KEY_PREFIX}{name}"))
            .map_err(|e| {
                ApiError::internal(format!("deleting the upload failed, nothing changed: {e}"))
            })?;
        state.coordinator.registry_mut().remove(name);
        state.uploads.remove(name);
        Ok(())
    }
}

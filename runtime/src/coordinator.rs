//! The streams group coordinator model: what KIP-1357 asks of the broker, with components in
//! place of Java classes.
//!
//! Per group it owns the members (joined, updated and removed the way heartbeats do), the
//! topology, the group epoch, the group's config (`streams.assignor.name` and the
//! `AssignmentConfigs` overrides) and the target assignment with its epoch. Computing a target
//! resolves the assignor and configs, runs the assignor, and stores the result only on
//! success: a failure keeps the previous target and epoch, is recorded on the group, surfaces
//! as `UNKNOWN_SERVER_ERROR`, and is retried on a later trigger after a backoff.
//!
//! Every change is written to the [`Store`] before it becomes visible, so a restart (or a
//! crash at any point) finds exactly the committed state.
//!
//! A computation is three steps so that a service can run the assignor without holding the
//! coordinator: [`Coordinator::plan`] snapshots the input, [`AssignmentJob::run`] calls the
//! assignor, [`Coordinator::commit`] stores the outcome. [`Coordinator::compute_target`] does
//! all three.
//!
//! [`Coordinator::commit_unsynced`] splits the last step once more, for group commit: the new
//! target is written (ordered, safe from a crash of the process) and made current, and the
//! returned [`Pending`] waits for it to be durable *after* the caller has released the
//! coordinator, so that concurrent commits share one flush of the store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, MemberAssignment, TaskId, TaskSet,
    Topology,
};
use serde::{Deserialize, Serialize};

use crate::assignor::Assignor;
use crate::config::{BrokerConfig, parse_list};
use crate::error::TaskAssignorError;
use crate::registry::Registry;
use crate::store::{Store, StoreError, SyncToken};
use crate::usage::Usage;

/// Group config key selecting the assignor by name (KIP-1357).
pub const ASSIGNOR_NAME: &str = "streams.assignor.name";
/// Group config key overriding `group.streams.num.standby.replicas`.
pub const NUM_STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
/// Group config key overriding `group.streams.rack.aware.assignment.tags`.
pub const RACK_AWARE_ASSIGNMENT_TAGS: &str = "streams.rack.aware.assignment.tags";

/// Wait before retrying an assignor that just failed on the same group epoch: 1 s, doubling
/// with each further failure up to [`MAX_RETRY_BACKOFF`]. Heartbeats arrive every few
/// seconds per member, so without it a failing assignor would run on nearly every one.
pub const INITIAL_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries of a failing assignor: 60 s.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(60);

/// Version of the persisted group encoding; bumped on any change to [`GroupState`]. Version 2
/// added the fuel of a failed call to [`Failure::error`]; version 1 is still read ([`v1`]).
const FORMAT_VERSION: u32 = 2;
/// Store keys of groups start with this.
const GROUP_KEY_PREFIX: &str = "group/";
/// Store keys of the captures of groups' last failed computations start with this.
const CAPTURE_KEY_PREFIX: &str = "capture/";

/// Kafka error codes the coordinator answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// `INVALID_CONFIG`: a group config was rejected; nothing was stored.
    InvalidConfig,
    /// `UNKNOWN_SERVER_ERROR`: the assignment failed (or the store did).
    UnknownServerError,
    /// `GROUP_ID_NOT_FOUND`.
    GroupIdNotFound,
    /// `UNKNOWN_MEMBER_ID`.
    UnknownMemberId,
}

impl ErrorCode {
    /// Kafka's name for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidConfig => "INVALID_CONFIG",
            Self::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            Self::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            Self::UnknownMemberId => "UNKNOWN_MEMBER_ID",
        }
    }
}

/// Why a coordinator request failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// A group config change was rejected; nothing was stored.
    #[error("INVALID_CONFIG: group `{group}`: {key}: {message}")]
    InvalidConfig {
        /// The group.
        group: String,
        /// The offending key.
        key: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// The assignor failed; the previous target assignment and its epoch are unchanged.
    #[error("UNKNOWN_SERVER_ERROR: group `{group}`: {error}{}", retry_note(*.retry_at))]
    AssignmentFailed {
        /// The group.
        group: String,
        /// The assignor's failure (now, or the one being backed off from).
        error: TaskAssignorError,
        /// When the next trigger may run the assignor again.
        retry_at: SystemTime,
        /// True when this trigger did not run the assignor because of the backoff.
        backed_off: bool,
    },
    /// No such group.
    #[error("GROUP_ID_NOT_FOUND: group `{0}` does not exist")]
    UnknownGroup(String),
    /// No such member in the group.
    #[error("UNKNOWN_MEMBER_ID: group `{group}` has no member `{member}`")]
    UnknownMember {
        /// The group.
        group: String,
        /// The member id.
        member: String,
    },
    /// The store failed; the change was not applied.
    #[error("UNKNOWN_SERVER_ERROR: the state store failed, nothing was changed: {0}")]
    Store(#[from] StoreError),
    /// A persisted group cannot be decoded.
    #[error(
        "stored group under key `{key}` cannot be read ({message}); restore it from a backup or \
         delete it from the data directory"
    )]
    Corrupt {
        /// The store key.
        key: String,
        /// Why.
        message: String,
    },
}

fn retry_note(at: SystemTime) -> String {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => format!(
            " (next retry no earlier than {} s after the epoch)",
            d.as_secs()
        ),
        Err(_) => String::new(),
    }
}

impl CoordinatorError {
    /// The Kafka error code this answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            Self::AssignmentFailed { .. } | Self::Store(_) | Self::Corrupt { .. } => {
                ErrorCode::UnknownServerError
            }
            Self::UnknownGroup(_) => ErrorCode::GroupIdNotFound,
            Self::UnknownMember { .. } => ErrorCode::UnknownMemberId,
        }
    }
}

/// A group's dynamic config; `None` means "use the broker's value".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupConfig {
    /// `streams.assignor.name`.
    pub assignor_name: Option<String>,
    /// `streams.num.standby.replicas`.
    pub num_standby_replicas: Option<u32>,
    /// `streams.rack.aware.assignment.tags`.
    pub rack_aware_assignment_tags: Option<Vec<String>>,
}

/// One change of an `IncrementalAlterConfigs` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    /// `SET` the key to the value.
    Set(String),
    /// `DELETE` the key (back to the broker's value).
    Delete,
}

/// A committed target assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetAssignment {
    /// The group epoch it was computed for (Kafka's target assignment epoch).
    pub epoch: u32,
    /// The assignor that computed it.
    pub assignor: String,
    /// Per member id, its tasks (indices into the group's topology).
    pub members: BTreeMap<String, MemberAssignment>,
    /// What the computation used.
    pub usage: Usage,
    /// When it was committed.
    pub computed_at: SystemTime,
}

/// The last failed computation of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The assignor's error.
    pub error: TaskAssignorError,
    /// When it failed.
    pub at: SystemTime,
    /// The group epoch it was computing for.
    pub group_epoch: u32,
    /// Failures in a row, this one included.
    pub consecutive: u32,
    /// No retry before this (same group epoch and assignor).
    pub retry_at: SystemTime,
}

/// Everything the coordinator keeps per group; persisted as one value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct GroupState {
    config: GroupConfig,
    group_epoch: u32,
    topology: Option<Topology>,
    /// Keyed by member id, which also fixes the order members are given to the assignor.
    members: BTreeMap<String, Member>,
    target: Option<TargetAssignment>,
    last_failure: Option<Failure>,
}

/// A group as `StreamsGroupDescribe` shows it, plus what this runtime adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// The group epoch.
    pub group_epoch: u32,
    /// The target assignment epoch, if a target was ever computed.
    pub target_assignment_epoch: Option<u32>,
    /// KIP-1357's `AssignorName`: the assignor the next computation will use.
    pub assignor_name: String,
    /// `streams.assignor.name` as configured, which differs from `assignor_name` when the
    /// configured assignor is no longer registered (the coordinator falls back).
    pub configured_assignor: Option<String>,
    /// The resolved `AssignmentConfigs` the next computation will use.
    pub configs: AssignmentConfigs,
    /// Member ids, sorted.
    pub members: Vec<String>,
    /// The assignor that computed the current target.
    pub target_assignor: Option<String>,
    /// Usage of the computation that produced the current target.
    pub target_usage: Option<Usage>,
    /// The last failure, while the group has not succeeded since.
    pub last_failure: Option<Failure>,
}

/// The input of one computation, taken from a group by [`Coordinator::plan`].
#[derive(Debug)]
pub struct AssignmentJob {
    group_id: String,
    group_epoch: u32,
    assignor: Assignor,
    /// The member ids, index-aligned with `spec.members`.
    spec: GroupSpec,
    topology: Topology,
}

impl AssignmentJob {
    /// The group.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The assignor that will run.
    pub fn assignor_name(&self) -> &str {
        self.assignor.name()
    }

    /// Runs the assignor; touches no coordinator state.
    pub fn run(self) -> CompletedJob {
        let outcome = self.assignor.assign(&self.spec, &self.topology);
        CompletedJob { job: self, outcome }
    }

    /// [`run`](Self::run) for async code, inside a Tokio runtime. A component runs on the
    /// polling thread, yielding between slices of fuel
    /// ([`ComponentAssignor::assign_async`](crate::ComponentAssignor::assign_async)); a
    /// built-in is native code that cannot yield, so it runs on Tokio's blocking pool.
    pub async fn run_async(self) -> CompletedJob {
        match &self.assignor {
            Assignor::Component(c) => {
                let outcome = Assignor::report(
                    c.name(),
                    &self.spec,
                    c.assign_async(&self.spec, &self.topology).await,
                );
                CompletedJob { job: self, outcome }
            }
            Assignor::BuiltIn { .. } => {
                let span = tracing::Span::current();
                match tokio::task::spawn_blocking(move || span.in_scope(|| self.run())).await {
                    Ok(done) => done,
                    // A built-in's panic is caught by `Assignor::assign`; the task is only
                    // cancelled when the runtime shuts down, which drops this future too.
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            }
        }
    }
}

/// A computation's outcome, to hand to [`Coordinator::commit`].
#[derive(Debug)]
pub struct CompletedJob {
    job: AssignmentJob,
    outcome: Result<(GroupAssignment, Usage), TaskAssignorError>,
}

impl CompletedJob {
    /// What the call used, or why it failed.
    pub fn outcome(&self) -> Result<&Usage, &TaskAssignorError> {
        self.outcome.as_ref().map(|(_, usage)| usage)
    }
}

/// Streams groups, their configs and target assignments, backed by a [`Store`].
pub struct Coordinator {
    registry: Registry,
    broker_configs: AssignmentConfigs,
    store: Arc<dyn Store>,
    groups: BTreeMap<String, GroupState>,
    /// Per group, the capture of its last failed computation (see [`Coordinator::last_capture`]).
    captures: BTreeMap<String, Vec<u8>>,
    /// The token of the latest write, for [`Coordinator::pending_writes`].
    last_write: SyncToken,
    clock: Box<dyn Fn() -> SystemTime + Send + Sync>,
}

/// A committed change that may not be durable yet (see [`Coordinator::commit_unsynced`]).
#[must_use = "a change may be acknowledged only once `wait` has returned Ok"]
#[derive(Debug)]
pub struct Pending {
    store: Arc<dyn Store>,
    token: SyncToken,
}

impl Pending {
    /// Blocks until the change (and every change before it) is durable; concurrent waiters
    /// share one flush. An error means the store could not flush: the change is current in
    /// memory but may not survive a crash of the machine, and the store refuses every later
    /// write until the process is restarted and reloads what is durable.
    pub fn wait(self) -> Result<(), CoordinatorError> {
        Ok(self.store.sync(self.token)?)
    }

    /// [`wait`](Self::wait) for async code: no thread waits for the flush
    /// ([`Store::sync_then`]), so any number of commits can wait for their shared flush.
    pub async fn durable(self) -> Result<(), CoordinatorError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.store.sync_then(
            self.token,
            Box::new(move |result| {
                // The receiver is gone only if the waiting request was dropped.
                let _ = tx.send(result);
            }),
        );
        match rx.await {
            Ok(result) => Ok(result?),
            // A store that drops `done` uncalled breaks its contract: never acknowledge.
            Err(_) => Err(StoreError::Backend {
                backend: format!("{:?}", self.store),
                source: "the store dropped a flush waiter without answering it".into(),
            }
            .into()),
        }
    }
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("registry", &self.registry)
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

impl Coordinator {
    /// A coordinator over `registry` with the broker's `AssignmentConfigs` defaults from
    /// `config`, holding every group committed to `store`.
    pub fn open(
        registry: Registry,
        config: &BrokerConfig,
        store: Arc<dyn Store>,
    ) -> Result<Self, CoordinatorError> {
        let mut groups = BTreeMap::new();
        let mut captures = BTreeMap::new();
        for (key, value) in store.load_all()? {
            if let Some(group) = key.strip_prefix(GROUP_KEY_PREFIX) {
                groups.insert(group.to_owned(), decode(&key, &value)?);
            } else if let Some(group) = key.strip_prefix(CAPTURE_KEY_PREFIX) {
                captures.insert(group.to_owned(), value);
            }
        }
        Ok(Self {
            registry,
            broker_configs: AssignmentConfigs {
                num_standby_replicas: config.num_standby_replicas,
                rack_aware_assignment_tags: config.rack_aware_assignment_tags.clone(),
            },
            store,
            groups,
            captures,
            last_write: SyncToken::DURABLE,
            clock: Box::new(SystemTime::now),
        })
    }

    /// Uses `clock` instead of the system clock (for failure times and retry backoff).
    pub fn with_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// The registry assignors are resolved in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry, to add, replace or remove assignors at run time (a service's uploads).
    /// Groups whose configured assignor disappears fall back to the default on their next
    /// computation, with a warning.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The groups whose `streams.assignor.name` is `assignor`, sorted.
    pub fn groups_using(&self, assignor: &str) -> Vec<String> {
        self.groups
            .iter()
            .filter(|(_, g)| g.config.assignor_name.as_deref() == Some(assignor))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// The group ids, sorted.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Applies an `IncrementalAlterConfigs` request to `group` (creating it if new): every
    /// change is checked first, and if any is invalid the request fails with
    /// `INVALID_CONFIG` and nothing is stored. Changing the assignor does not trigger a
    /// rebalance (KIP-1357); it clears the failure backoff so the next trigger runs at once.
    pub fn alter_config(
        &mut self,
        group: &str,
        changes: &[(&str, ConfigOp)],
    ) -> Result<GroupConfig, CoordinatorError> {
        let config = self.changed_config(group, changes)?;
        self.update(group, |g| {
            set_config(g, &config);
            Ok(config)
        })
    }

    /// Replaces a whole group in one change, as a service's "PUT the group document" does:
    /// applies `changes` to its config (checked first, exactly as
    /// [`alter_config`](Self::alter_config)), sets `topology`, upserts `members` and removes
    /// every member not among them. It is persisted as one store write: a rejected config or
    /// a failed write changes nothing, and a crash leaves the old group or the new one. The
    /// group epoch moves once if the topology or the members' metadata changed. Returns the
    /// group epoch.
    pub fn set_group(
        &mut self,
        group: &str,
        changes: &[(&str, ConfigOp)],
        topology: Topology,
        members: Vec<Member>,
    ) -> Result<u32, CoordinatorError> {
        let config = self.changed_config(group, changes)?;
        self.update(group, |g| {
            set_config(g, &config);
            let mut bump = false;
            if g.topology.as_ref() != Some(&topology) {
                if let Some(old) = g.topology.take() {
                    remap(&mut g.members, g.target.as_mut(), &old, &topology);
                }
                g.topology = Some(topology);
                bump = true;
            }
            let mut next = BTreeMap::new();
            for member in members {
                bump |= g
                    .members
                    .get(&member.member_id)
                    .is_none_or(|old| !same_metadata(old, &member));
                next.insert(member.member_id.clone(), member);
            }
            bump |= g.members.keys().any(|id| !next.contains_key(id));
            g.members = next;
            if bump {
                g.group_epoch += 1;
            }
            Ok(g.group_epoch)
        })
    }

    /// `group`'s config with `changes` applied, every change checked; `INVALID_CONFIG` names
    /// the first bad one.
    fn changed_config(
        &self,
        group: &str,
        changes: &[(&str, ConfigOp)],
    ) -> Result<GroupConfig, CoordinatorError> {
        let invalid = |key: &str, message: String| CoordinatorError::InvalidConfig {
            group: group.to_owned(),
            key: key.to_owned(),
            message,
        };
        let mut config = self
            .groups
            .get(group)
            .map(|g| g.config.clone())
            .unwrap_or_default();
        for (key, op) in changes {
            let value = match op {
                ConfigOp::Set(v) => Some(v.as_str()),
                ConfigOp::Delete => None,
            };
            match *key {
                ASSIGNOR_NAME => {
                    if let Some(name) = value
                        && self.registry.get(name).is_none()
                    {
                        return Err(invalid(
                            key,
                            format!(
                                "no assignor named `{name}` is registered (available: {})",
                                self.registry.names().collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
                    config.assignor_name = value.map(str::to_owned);
                }
                NUM_STANDBY_REPLICAS => {
                    config.num_standby_replicas = value
                        .map(|v| {
                            v.trim().parse().map_err(|_| {
                                invalid(key, format!("`{v}` is not a non-negative integer"))
                            })
                        })
                        .transpose()?;
                }
                RACK_AWARE_ASSIGNMENT_TAGS => {
                    config.rack_aware_assignment_tags = value.map(parse_list);
                }
                _ => {
                    return Err(invalid(
                        key,
                        format!(
                            "unknown group config (known: {ASSIGNOR_NAME}, \
                             {NUM_STANDBY_REPLICAS}, {RACK_AWARE_ASSIGNMENT_TAGS})"
                        ),
                    ));
                }
            }
        }
        Ok(config)
    }

    /// A member joins or updates itself, as a heartbeat does: new members and changed
    /// metadata (instance id, rack, process, client tags) bump the group epoch; reported
    /// tasks and offsets are recorded without a bump. Task ids refer to the group's current
    /// topology. Returns the group epoch.
    pub fn upsert_member(&mut self, group: &str, member: Member) -> Result<u32, CoordinatorError> {
        self.update(group, |g| {
            let bump = g
                .members
                .get(&member.member_id)
                .is_none_or(|old| !same_metadata(old, &member));
            if bump {
                g.group_epoch += 1;
            }
            g.members.insert(member.member_id.clone(), member);
            Ok(g.group_epoch)
        })
    }

    /// A member leaves: the group epoch is bumped. Returns the group epoch.
    pub fn remove_member(&mut self, group: &str, member_id: &str) -> Result<u32, CoordinatorError> {
        if !self
            .groups
            .get(group)
            .ok_or_else(|| CoordinatorError::UnknownGroup(group.to_owned()))?
            .members
            .contains_key(member_id)
        {
            return Err(CoordinatorError::UnknownMember {
                group: group.to_owned(),
                member: member_id.to_owned(),
            });
        }
        self.update(group, |g| {
            g.members.remove(member_id);
            g.group_epoch += 1;
            Ok(g.group_epoch)
        })
    }

    /// Sets the group's topology; a different topology bumps the group epoch. Tasks already
    /// held (target and reported) follow their subtopology by id; those of removed
    /// subtopologies are dropped. Returns the group epoch.
    pub fn set_topology(
        &mut self,
        group: &str,
        topology: Topology,
    ) -> Result<u32, CoordinatorError> {
        self.update(group, |g| {
            if g.topology.as_ref() != Some(&topology) {
                if let Some(old) = g.topology.take() {
                    remap(&mut g.members, g.target.as_mut(), &old, &topology);
                }
                g.topology = Some(topology);
                g.group_epoch += 1;
            }
            Ok(g.group_epoch)
        })
    }

    /// The group's own config: the overrides set on it, `None` where the broker's default
    /// applies.
    pub fn config(&self, group: &str) -> Result<&GroupConfig, CoordinatorError> {
        self.groups
            .get(group)
            .map(|g| &g.config)
            .ok_or_else(|| CoordinatorError::UnknownGroup(group.to_owned()))
    }

    /// The group's committed target assignment.
    pub fn target(&self, group: &str) -> Option<&TargetAssignment> {
        self.groups.get(group)?.target.as_ref()
    }

    /// The group's topology.
    pub fn topology(&self, group: &str) -> Option<&Topology> {
        self.groups.get(group)?.topology.as_ref()
    }

    /// Describes `group`, including the assignor the next computation will use.
    pub fn describe(&self, group: &str) -> Result<GroupDescription, CoordinatorError> {
        let g = self
            .groups
            .get(group)
            .ok_or_else(|| CoordinatorError::UnknownGroup(group.to_owned()))?;
        Ok(GroupDescription {
            group_id: group.to_owned(),
            group_epoch: g.group_epoch,
            target_assignment_epoch: g.target.as_ref().map(|t| t.epoch),
            assignor_name: self.resolve_assignor(group, g, false).name().to_owned(),
            configured_assignor: g.config.assignor_name.clone(),
            configs: self.resolve_configs(g),
            members: g.members.keys().cloned().collect(),
            target_assignor: g.target.as_ref().map(|t| t.assignor.clone()),
            target_usage: g.target.as_ref().map(|t| t.usage),
            last_failure: g.last_failure.clone(),
        })
    }

    /// The trigger (a heartbeat's): computes and commits a new target if the group epoch has
    /// moved past the target's. Returns the current target (`None` while the group has no
    /// topology). A failure keeps the previous target and epoch and is returned as
    /// `UNKNOWN_SERVER_ERROR`; while it is being backed off the assignor is not run again.
    pub fn compute_target(
        &mut self,
        group: &str,
    ) -> Result<Option<&TargetAssignment>, CoordinatorError> {
        if let Some(job) = self.plan(group)? {
            let done = job.run();
            self.commit(done)?;
        }
        Ok(self.target(group))
    }

    /// Step one of a computation: the job to run, if the target is behind the group epoch
    /// and the group has a topology; `AssignmentFailed` (with `backed_off`) while a failed
    /// assignor waits for its retry time.
    pub fn plan(&self, group: &str) -> Result<Option<AssignmentJob>, CoordinatorError> {
        let g = self
            .groups
            .get(group)
            .ok_or_else(|| CoordinatorError::UnknownGroup(group.to_owned()))?;
        let Some(topology) = &g.topology else {
            return Ok(None);
        };
        if g.target.as_ref().is_some_and(|t| t.epoch >= g.group_epoch) {
            return Ok(None);
        }
        let assignor = self.resolve_assignor(group, g, true).clone();
        if let Some(f) = &g.last_failure
            && f.group_epoch == g.group_epoch
            && f.error.assignor == assignor.name()
            && (self.clock)() < f.retry_at
        {
            return Err(CoordinatorError::AssignmentFailed {
                group: group.to_owned(),
                error: f.error.clone(),
                retry_at: f.retry_at,
                backed_off: true,
            });
        }
        let configs = self.resolve_configs(g);
        let members = g
            .members
            .values()
            .map(|m| {
                let mut m = m.clone();
                // The assignor sees each member's current *target* tasks, as in Kafka; what
                // the member reported stands in only before it has a target.
                if let Some(a) = g.target.as_ref().and_then(|t| t.members.get(&m.member_id)) {
                    m.active_tasks = a.active_tasks.clone();
                    m.standby_tasks = a.standby_tasks.clone();
                }
                m
            })
            .collect();
        Ok(Some(AssignmentJob {
            group_id: group.to_owned(),
            group_epoch: g.group_epoch,
            assignor,
            spec: GroupSpec { members, configs },
            topology: topology.clone(),
        }))
    }

    /// Step three: stores a successful result as the new target (epoch = the group epoch it
    /// was computed for), or records the failure and its retry time and returns it as
    /// `UNKNOWN_SERVER_ERROR`; the previous target is untouched either way until stored.
    pub fn commit(&mut self, done: CompletedJob) -> Result<(), CoordinatorError> {
        self.commit_unsynced(done)?.wait()
    }

    /// [`commit`](Self::commit) for group commit: a new target is written and made current,
    /// and the returned [`Pending`] waits until it is durable — call it after releasing the
    /// coordinator, and acknowledge the target only once it returns. Until then a crash of
    /// the machine (not of the process) may lose the target; the group then keeps its previous
    /// one, as after a failed computation. A failure is recorded durably before this returns:
    /// failures are rare, and backoff must survive.
    pub fn commit_unsynced(&mut self, done: CompletedJob) -> Result<Pending, CoordinatorError> {
        let CompletedJob { job, outcome } = done;
        let now = (self.clock)();
        let group = job.group_id.clone();
        match outcome {
            Ok((assignment, usage)) => {
                let members = job
                    .spec
                    .members
                    .iter()
                    .map(|m| m.member_id.clone())
                    .zip(assignment.members)
                    .collect();
                let g = self
                    .groups
                    .get_mut(&group)
                    .ok_or_else(|| CoordinatorError::UnknownGroup(group.clone()))?;
                if g.target
                    .as_ref()
                    .is_some_and(|t| t.epoch >= job.group_epoch)
                {
                    // A newer computation committed first (and may still be flushing).
                    return Ok(self.pending_writes());
                }
                // Changed in place and undone if the write fails, rather than built on a copy
                // as `update` does: commits are the hot path, and a group's members and
                // topology are most of its state.
                let new_target = TargetAssignment {
                    epoch: job.group_epoch,
                    assignor: job.assignor.name().to_owned(),
                    members,
                    usage,
                    computed_at: now,
                };
                let old_target = g.target.replace(new_target);
                let old_failure = g.last_failure.take();
                let written = self
                    .store
                    .put_unsynced(&format!("{GROUP_KEY_PREFIX}{group}"), &encode(g));
                let token = match written {
                    Ok(token) => token,
                    Err(e) => {
                        g.target = old_target;
                        g.last_failure = old_failure;
                        return Err(e.into());
                    }
                };
                self.last_write = self.last_write.max(token);
                tracing::info!(
                    group = %group,
                    assignor = %job.assignor.name(),
                    epoch = job.group_epoch,
                    fuel = usage.fuel,
                    wall_time_us = usage.wall_time.as_micros() as u64,
                    "target assignment committed"
                );
                Ok(self.pending(token))
            }
            Err(error) => {
                self.capture_failure(&job, &error);
                let failure = self.update(&group, |g| {
                    let consecutive = g.last_failure.as_ref().map_or(0, |f| f.consecutive) + 1;
                    let backoff = INITIAL_RETRY_BACKOFF
                        .saturating_mul(1 << (consecutive - 1).min(16))
                        .min(MAX_RETRY_BACKOFF);
                    let failure = Failure {
                        error: error.clone(),
                        at: now,
                        group_epoch: job.group_epoch,
                        consecutive,
                        retry_at: now + backoff,
                    };
                    g.last_failure = Some(failure.clone());
                    Ok(failure)
                })?;
                tracing::warn!(
                    group = %group,
                    assignor = %error.assignor,
                    kind = %error.kind,
                    consecutive = failure.consecutive,
                    message = %error.message,
                    "assignment failed; keeping the previous target assignment"
                );
                Err(CoordinatorError::AssignmentFailed {
                    group,
                    error,
                    retry_at: failure.retry_at,
                    backed_off: false,
                })
            }
        }
    }

    /// The group's assignor: its configured one, else the default; a configured name that is
    /// no longer registered falls back to the default, with a warning when `warn`.
    fn resolve_assignor(&self, group: &str, g: &GroupState, warn: bool) -> &Assignor {
        let default = self.registry.default_assignor();
        match &g.config.assignor_name {
            None => default,
            Some(name) => self.registry.get(name).unwrap_or_else(|| {
                if warn {
                    tracing::warn!(
                        group = %group,
                        assignor = %name,
                        default = %default.name(),
                        "the group's streams.assignor.name is not registered; falling back to \
                         the default assignor"
                    );
                }
                default
            }),
        }
    }

    fn resolve_configs(&self, g: &GroupState) -> AssignmentConfigs {
        AssignmentConfigs {
            num_standby_replicas: g
                .config
                .num_standby_replicas
                .unwrap_or(self.broker_configs.num_standby_replicas),
            rack_aware_assignment_tags: g
                .config
                .rack_aware_assignment_tags
                .clone()
                .unwrap_or_else(|| self.broker_configs.rack_aware_assignment_tags.clone()),
        }
    }

    /// The capture (the SDK's file format, for `assignor replay`) of `group`'s last failed
    /// computation: the exact input the assignor saw, its configuration, limits and error.
    /// Kept, and persisted, until the next failure replaces it.
    pub fn last_capture(&self, group: &str) -> Option<&[u8]> {
        self.captures.get(group).map(Vec::as_slice)
    }

    /// Records the capture of a failed computation. Best effort: a store that cannot take it
    /// must not turn the assignor's failure into a store failure.
    fn capture_failure(&mut self, job: &AssignmentJob, error: &TaskAssignorError) {
        let bytes =
            crate::capture::of_failure(&job.assignor, &job.spec, &job.topology, error).to_bytes();
        let key = format!("{CAPTURE_KEY_PREFIX}{}", job.group_id);
        if let Err(e) = self.store.put(&key, &bytes) {
            tracing::warn!(
                group = %job.group_id,
                assignor = %error.assignor,
                error = %e,
                "cannot persist the capture of a failed assignment; kept in memory only"
            );
        }
        self.captures.insert(job.group_id.clone(), bytes);
    }

    /// A handle that waits until every change made so far is durable: what a reader waits
    /// on before answering a state that a concurrent [`commit_unsynced`](Self::commit_unsynced)
    /// may not have flushed yet. Returns at once when all is flushed.
    pub fn pending_writes(&self) -> Pending {
        self.pending(self.last_write)
    }

    fn pending(&self, token: SyncToken) -> Pending {
        Pending {
            store: self.store.clone(),
            token,
        }
    }

    /// [`update_unsynced`](Self::update_unsynced), then waits for the change to be durable.
    fn update<R>(
        &mut self,
        group: &str,
        change: impl FnOnce(&mut GroupState) -> Result<R, CoordinatorError>,
    ) -> Result<R, CoordinatorError> {
        let (result, token) = self.update_unsynced(group, change)?;
        self.pending(token).wait()?;
        Ok(result)
    }

    /// Applies `change` to a copy of `group`'s state (a new group if absent), writes the copy,
    /// and only then makes it current: a failed write leaves nothing changed. Returns the
    /// write's token; when nothing changed, the latest write's, since the state found may be
    /// one still being flushed.
    fn update_unsynced<R>(
        &mut self,
        group: &str,
        change: impl FnOnce(&mut GroupState) -> Result<R, CoordinatorError>,
    ) -> Result<(R, SyncToken), CoordinatorError> {
        let mut state = self.groups.get(group).cloned().unwrap_or_default();
        let result = change(&mut state)?;
        if self.groups.get(group) == Some(&state) {
            return Ok((result, self.last_write));
        }
        let token = self
            .store
            .put_unsynced(&format!("{GROUP_KEY_PREFIX}{group}"), &encode(&state))?;
        self.last_write = self.last_write.max(token);
        self.groups.insert(group.to_owned(), state);
        Ok((result, token))
    }
}

/// Makes `config` the group's; a different config clears the failure backoff, so the next
/// trigger runs the (possibly new) assignor at once.
fn set_config(g: &mut GroupState, config: &GroupConfig) {
    if g.config != *config {
        g.config = config.clone();
        if let Some(f) = &mut g.last_failure {
            f.retry_at = f.at;
        }
    }
}

fn same_metadata(a: &Member, b: &Member) -> bool {
    a.instance_id == b.instance_id
        && a.rack_id == b.rack_id
        && a.process_id == b.process_id
        && a.client_tags == b.client_tags
}

/// Moves the task ids of members (reported tasks and offsets) and of the target from `old`'s
/// subtopology indices to `new`'s, by subtopology id; tasks of subtopologies `new` lacks are
/// dropped.
fn remap(
    members: &mut BTreeMap<String, Member>,
    target: Option<&mut TargetAssignment>,
    old: &Topology,
    new: &Topology,
) {
    let index: Vec<Option<u32>> = old
        .subtopologies
        .iter()
        .map(|s| {
            (0u32..)
                .zip(&new.subtopologies)
                .find(|(_, n)| n.id == s.id)
                .map(|(i, _)| i)
        })
        .collect();
    let task = |t: &TaskId| {
        index
            .get(t.subtopology as usize)
            .copied()
            .flatten()
            .map(|s| TaskId::new(s, t.partition))
    };
    let set = |s: &mut TaskSet| *s = s.iter().filter_map(task).collect();
    let map = |m: &mut BTreeMap<TaskId, i64>| {
        *m = m
            .iter()
            .filter_map(|(t, &o)| task(t).map(|t| (t, o)))
            .collect();
    };
    for m in members.values_mut() {
        set(&mut m.active_tasks);
        set(&mut m.standby_tasks);
        set(&mut m.warmup_tasks);
        map(&mut m.task_offsets);
        map(&mut m.task_end_offsets);
    }
    if let Some(t) = target {
        for a in t.members.values_mut() {
            set(&mut a.active_tasks);
            set(&mut a.standby_tasks);
        }
    }
}

fn encode(state: &GroupState) -> Vec<u8> {
    postcard::to_stdvec(&(FORMAT_VERSION, state)).expect("group state always serializes")
}

fn decode(key: &str, bytes: &[u8]) -> Result<GroupState, CoordinatorError> {
    let corrupt = |message: String| CoordinatorError::Corrupt {
        key: key.to_owned(),
        message,
    };
    let (version, rest): (u32, &[u8]) =
        postcard::take_from_bytes(bytes).map_err(|e| corrupt(e.to_string()))?;
    match version {
        FORMAT_VERSION => postcard::from_bytes(rest).map_err(|e| corrupt(e.to_string())),
        1 => postcard::from_bytes::<v1::GroupState>(rest)
            .map(GroupState::from)
            .map_err(|e| corrupt(e.to_string())),
        _ => Err(corrupt(format!(
            "format version {version}, this runtime reads versions 1 to {FORMAT_VERSION} (a \
             newer runtime wrote it?)"
        ))),
    }
}

/// Version 1 of the group encoding, before failures carried fuel: read so that a data
/// directory written by an older runtime still loads. A group is rewritten in the current
/// version the next time it changes.
mod v1 {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use assignor_sdk::{Member, Topology};
    use serde::Deserialize;

    use super::{GroupConfig, TargetAssignment};
    use crate::error::{ErrorKind, TaskAssignorError};

    #[derive(Deserialize)]
    pub(super) struct GroupState {
        config: GroupConfig,
        group_epoch: u32,
        topology: Option<Topology>,
        members: BTreeMap<String, Member>,
        target: Option<TargetAssignment>,
        last_failure: Option<Failure>,
    }

    #[derive(Deserialize)]
    struct Failure {
        error: Error,
        at: SystemTime,
        group_epoch: u32,
        consecutive: u32,
        retry_at: SystemTime,
    }

    #[derive(Deserialize)]
    struct Error {
        assignor: String,
        kind: ErrorKind,
        message: String,
    }

    impl From<GroupState> for super::GroupState {
        fn from(v1: GroupState) -> Self {
            Self {
                config: v1.config,
                group_epoch: v1.group_epoch,
                topology: v1.topology,
                members: v1.members,
                target: v1.target,
                last_failure: v1.last_failure.map(|f| super::Failure {
                    error: TaskAssignorError::new(f.error.assignor, f.error.kind, f.error.message),
                    at: f.at,
                    group_epoch: f.group_epoch,
                    consecutive: f.consecutive,
                    retry_at: f.retry_at,
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// A group written by a version-1 runtime (a failure without fuel) still loads, with its
    /// failure intact and no fuel.
    #[test]
    fn reads_version_1() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let retry_at = at + INITIAL_RETRY_BACKOFF;
        // postcard encodes a struct as its fields in order, so tuples reproduce version 1.
        let v1_failure = (
            ("sticky", ErrorKind::Trap, "boom"),
            at,
            3u32,
            2u32,
            retry_at,
        );
        let bytes = postcard::to_stdvec(&(
            1u32,
            GroupConfig::default(),
            3u32,
            None::<Topology>,
            BTreeMap::<String, Member>::new(),
            None::<TargetAssignment>,
            Some(v1_failure),
        ))
        .expect("serializes");
        let state = decode("group/g", &bytes).expect("version 1 decodes");
        assert_eq!(state.group_epoch, 3);
        let failure = state.last_failure.as_ref().expect("the failure survives");
        assert_eq!(
            failure.error,
            TaskAssignorError::new("sticky", ErrorKind::Trap, "boom")
        );
        assert_eq!((failure.consecutive, failure.retry_at), (2, retry_at));
        let rewritten = decode("group/g", &encode(&state)).expect("version 2 decodes");
        assert_eq!(rewritten, state);
    }

    /// A version this runtime does not know is refused with both versions named.
    #[test]
    fn refuses_unknown_versions() {
        let bytes = postcard::to_stdvec(&(9u32, 0u8)).expect("serializes");
        let err = decode("group/g", &bytes).expect_err("version 9 is unknown");
        assert!(
            err.to_string().contains("format version 9"),
            "unexpected error: {err}"
        );
    }
}

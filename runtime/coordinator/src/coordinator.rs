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
//!
//! What it keeps is bounded before anything is stored: every group change is checked against
//! the input [`Limits`] (members, subtopologies, partitions, tasks, id length) and refused
//! whole (`INVALID_REQUEST`) when over one; the number of groups, and the count and bytes of
//! the captures of failed computations, are bounded by [`StateLimits`] (creating a group past
//! the limit is `POLICY_VIOLATION`; the oldest captures make room for new ones); a failure
//! record keeps at most twice the limits' message length. A call the host had no capacity for
//! ([`ErrorKind::Capacity`]) is not the assignor's fault: it is not recorded, captured or
//! backed off, so the next trigger runs it again at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use assignor_sdk::{
    AssignmentConfigs, GroupAssignment, GroupSpec, Member, MemberAssignment, TaskId, TaskSet,
    Topology,
};

use crate::assignor::Assignor;
use crate::config::{BrokerConfig, MAX_STANDBY_REPLICAS, parse_list};
use crate::registry::Registry;
use crate::store::{Conditional, Guard, Revision, SharedStore, Store, StoreError, SyncToken};
use assignor_sandbox::Usage;
use assignor_sandbox::{ErrorKind, TaskAssignorError};
use assignor_sandbox::{InputLimitError, Limits, cut};

mod records;

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

/// Default of [`StateLimits::max_groups`]: 10,000 groups.
pub const DEFAULT_MAX_GROUPS: usize = 10_000;
/// Default of [`StateLimits::max_captures`]: 32 captures of failed computations.
pub const DEFAULT_MAX_CAPTURES: usize = 32;
/// Default of [`StateLimits::max_capture_bytes`]: 64 MiB of captures in all, room for one
/// capture of the largest group document the default input limit lets in, or dozens of a
/// 1000-member group (~1 MiB each).
pub const DEFAULT_MAX_CAPTURE_BYTES: usize = 64 << 20;
/// How much of an id (group, member, assignor name) an error message repeats: ids come from
/// callers, and a message must stay small whatever they sent.
const ECHO_BYTES: usize = 256;

/// Store keys of groups start with this.
const GROUP_KEY_PREFIX: &str = "group/";
/// Store keys of the captures of groups' last failed computations start with this.
const CAPTURE_KEY_PREFIX: &str = "capture/";

/// Kafka error codes the coordinator answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `INVALID_CONFIG`: a group config was rejected; nothing was stored.
    InvalidConfig,
    /// `UNKNOWN_SERVER_ERROR`: the assignment failed (or the store did).
    UnknownServerError,
    /// `GROUP_ID_NOT_FOUND`.
    GroupIdNotFound,
    /// `UNKNOWN_MEMBER_ID`.
    UnknownMemberId,
    /// `INVALID_REQUEST`: the group is over an input limit; nothing was stored.
    InvalidRequest,
    /// `POLICY_VIOLATION`: the change would keep more groups than the coordinator's limit.
    PolicyViolation,
    /// `COORDINATOR_NOT_AVAILABLE`: the host had no capacity for the assignment right now;
    /// retriable at once.
    CoordinatorNotAvailable,
}

impl ErrorCode {
    /// Kafka's name for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidConfig => "INVALID_CONFIG",
            Self::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            Self::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            Self::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::PolicyViolation => "POLICY_VIOLATION",
            Self::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
        }
    }
}

/// Why a coordinator request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// A group config change was rejected; nothing was stored.
    #[error("INVALID_CONFIG: group `{}`: {key}: {message}", cut(group, ECHO_BYTES))]
    InvalidConfig {
        /// The group.
        group: String,
        /// The offending key.
        key: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// The group (or a change to it) is over one of the input limits: refused before
    /// anything was stored or sized from it.
    #[error("INVALID_REQUEST: group `{}`: {source}", cut(group, ECHO_BYTES))]
    InputLimit {
        /// The group.
        group: String,
        /// Which field, its value, the limit and the limit's name.
        source: InputLimitError,
    },
    /// Creating the group would keep more groups than [`StateLimits::max_groups`]; nothing
    /// was stored.
    #[error(
        "POLICY_VIOLATION: cannot create group `{}`: {limit} groups exist, the limit \
         (max.groups); delete a group first",
        cut(group, ECHO_BYTES)
    )]
    TooManyGroups {
        /// The group that was not created.
        group: String,
        /// The limit.
        limit: usize,
    },
    /// The host had no capacity for the call (every instance slot was in use): not the
    /// assignor's fault, so nothing was recorded and the next trigger runs it at once.
    #[error(
        "COORDINATOR_NOT_AVAILABLE: group `{}`: no capacity for the assignment right now \
         ({}); retry at once, the previous target assignment is kept",
        cut(group, ECHO_BYTES),
        error.message
    )]
    NoCapacity {
        /// The group.
        group: String,
        /// The runtime's refusal (boxed, as below).
        error: Box<TaskAssignorError>,
    },
    /// The assignor failed; the previous target assignment and its epoch are unchanged.
    #[error(
        "UNKNOWN_SERVER_ERROR: group `{}`: {error}{}",
        cut(group, ECHO_BYTES),
        retry_note(*.retry_at)
    )]
    AssignmentFailed {
        /// The group.
        group: String,
        /// The assignor's failure (now, or the one being backed off from); boxed, so that
        /// every `Result` of the coordinator stays small.
        error: Box<TaskAssignorError>,
        /// When the next trigger may run the assignor again.
        retry_at: SystemTime,
        /// True when this trigger did not run the assignor because of the backoff.
        backed_off: bool,
    },
    /// No such group.
    #[error("GROUP_ID_NOT_FOUND: group `{}` does not exist", cut(.0, ECHO_BYTES))]
    UnknownGroup(String),
    /// No such member in the group.
    #[error(
        "UNKNOWN_MEMBER_ID: group `{}` has no member `{}`",
        cut(group, ECHO_BYTES),
        cut(member, ECHO_BYTES)
    )]
    UnknownMember {
        /// The group.
        group: String,
        /// The member id.
        member: String,
    },
    /// The store failed; the change was not applied.
    #[error("UNKNOWN_SERVER_ERROR: the state store failed, nothing was changed: {0}")]
    Store(#[from] StoreError),
    /// Another process sharing the store (a service replica) changed the group, or the
    /// upload a config change selects, first: this change was not applied, the group was
    /// read again, and the request may be retried.
    #[error(
        "COORDINATOR_NOT_AVAILABLE: group `{0}`, or the upload its change selects, was changed \
         by another replica at the same time; nothing was changed here, retry the request"
    )]
    Conflict(String),
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
    format!(" (next retry no earlier than {})", rfc3339(at))
}

/// `t` as an RFC 3339 UTC time to the second, e.g. `2026-06-01T12:00:05Z` (what an operator
/// reads in a message; the API's JSON carries milliseconds since the epoch).
fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm, on the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

impl CoordinatorError {
    /// The Kafka error code this answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidConfig { .. } => ErrorCode::InvalidConfig,
            Self::InputLimit { .. } => ErrorCode::InvalidRequest,
            Self::TooManyGroups { .. } => ErrorCode::PolicyViolation,
            Self::NoCapacity { .. } | Self::Conflict(_) => ErrorCode::CoordinatorNotAvailable,
            Self::AssignmentFailed { .. } | Self::Store(_) | Self::Corrupt { .. } => {
                ErrorCode::UnknownServerError
            }
            Self::UnknownGroup(_) => ErrorCode::GroupIdNotFound,
            Self::UnknownMember { .. } => ErrorCode::UnknownMemberId,
        }
    }
}

/// A group's dynamic config; `None` means "use the broker's value".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
#[non_exhaustive]
pub enum ConfigOp {
    /// `SET` the key to the value.
    Set(String),
    /// `DELETE` the key (back to the broker's value).
    Delete,
}

/// A committed target assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Everything the coordinator keeps per group; persisted as one value, a record of
/// [`records`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct GroupState {
    config: GroupConfig,
    group_epoch: u32,
    topology: Option<Topology>,
    /// Keyed by member id, which also fixes the order members are given to the assignor.
    members: BTreeMap<String, Member>,
    target: Option<TargetAssignment>,
    last_failure: Option<Failure>,
    /// Which creation of this group id this is, in this process: a job planned before the
    /// group was deleted and created again must not commit into the new group, even at the
    /// same group epoch. Not stored: no job outlives the process, and groups loaded at open
    /// are all 0, below every group created since.
    incarnation: u64,
    /// On a [`SharedStore`](crate::store::SharedStore), the revision of the group's record
    /// this state was read or written at: the condition of its next write. Not stored; unused
    /// on other stores.
    revision: Revision,
}

impl GroupState {
    /// Whether a job's result must not commit into this group: a computation of this epoch
    /// or a newer one committed first (and may still be flushing), the job's epoch is not one
    /// this group reached, or the job is of a group deleted and created again since it was
    /// planned.
    fn supersedes(&self, job: &AssignmentJob) -> bool {
        self.target
            .as_ref()
            .is_some_and(|t| t.epoch >= job.group_epoch)
            || job.group_epoch > self.group_epoch
            || job.incarnation != self.incarnation
    }
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
    /// The group's [`GroupState::incarnation`] when the job was planned.
    incarnation: u64,
    assignor: Assignor,
    /// The member ids, index-aligned with `spec.members`.
    spec: Arc<GroupSpec>,
    topology: Arc<Topology>,
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

    /// [`run`](Self::run) for async code, on any executor: a component runs on the sandbox's
    /// call threads, awaited without a thread
    /// ([`ComponentAssignor::assign_async`](assignor_sandbox::ComponentAssignor::assign_async)).
    /// A built-in is native code that cannot yield, so the job comes back as `Err` for the
    /// caller to [`run`](Self::run) on threads of its choice that may block (the coordinator
    /// picks no executor).
    pub async fn run_async(self) -> Result<CompletedJob, Self> {
        match &self.assignor {
            Assignor::Component(c) => {
                let outcome = Assignor::report(
                    c.name(),
                    &self.spec,
                    c.assign_async(Arc::clone(&self.spec), Arc::clone(&self.topology))
                        .await,
                );
                Ok(CompletedJob { job: self, outcome })
            }
            _ => Err(self),
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

/// How much a coordinator keeps in its store beyond what each group's own state needs: how
/// many groups, and the count and bytes of the captures of failed computations. A service
/// gives each tenant its own, so no tenant can fill the data directory.
///
/// ```
/// use assignor_coordinator::StateLimits;
///
/// let limits = StateLimits::default().max_groups(100).max_captures(4);
/// # let _ = limits;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateLimits {
    max_groups: usize,
    max_captures: usize,
    max_capture_bytes: usize,
}

impl Default for StateLimits {
    fn default() -> Self {
        Self {
            max_groups: DEFAULT_MAX_GROUPS,
            max_captures: DEFAULT_MAX_CAPTURES,
            max_capture_bytes: DEFAULT_MAX_CAPTURE_BYTES,
        }
    }
}

impl StateLimits {
    /// Most groups kept; a change that would create one more is refused
    /// (`POLICY_VIOLATION`) and stores nothing. Each group keeps at most one failure record,
    /// so this bounds those too. Default [`DEFAULT_MAX_GROUPS`].
    pub fn max_groups(mut self, groups: usize) -> Self {
        self.max_groups = groups;
        self
    }

    /// Most captures of failed computations kept (at most one per group); the oldest is
    /// dropped to make room for a new one. 0 keeps none. Default [`DEFAULT_MAX_CAPTURES`].
    pub fn max_captures(mut self, captures: usize) -> Self {
        self.max_captures = captures;
        self
    }

    /// Most bytes of captures kept, all together; the oldest are dropped to make room, and a
    /// capture larger than this on its own is not kept. Default
    /// [`DEFAULT_MAX_CAPTURE_BYTES`].
    pub fn max_capture_bytes(mut self, bytes: usize) -> Self {
        self.max_capture_bytes = bytes;
        self
    }
}

/// Which ids [`Coordinator::check_input`] measures besides those of the members and configs.
#[derive(Debug, Clone, Copy)]
enum Ids {
    /// The topology's too.
    All,
    /// Only the spec's: the topology's were checked when it was set.
    SpecOnly,
}

/// A kept capture: its bytes and when it was taken, by a counter that orders captures from
/// oldest to newest.
#[derive(Debug)]
struct KeptCapture {
    bytes: Vec<u8>,
    order: u64,
}

/// What became of one write of a capture record to the store (a capture stored, or a
/// dropped one deleted), for [`Coordinator::on_capture_write`]. Captures are best effort:
/// none of these fails the computation that was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CaptureWrite {
    /// The store took it: the capture is stored, or the dropped one removed.
    Written,
    /// On a [`SharedStore`](crate::store::SharedStore), another replica wrote the capture
    /// record since this one last saw it: nothing was written, and the newer capture stays.
    Lost,
    /// The store failed it (logged): a capture is then kept in memory only, and a dropped
    /// one's record comes back after a restart.
    Failed,
}

impl CaptureWrite {
    /// Its name in metrics and logs: `written`, `lost`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Lost => "lost",
            Self::Failed => "failed",
        }
    }
}

/// Streams groups, their configs and target assignments, backed by a [`Store`].
pub struct Coordinator {
    registry: Registry,
    broker_configs: AssignmentConfigs,
    /// `group.streams.max.standby.replicas`: no group's count goes above it.
    max_standby_replicas: u32,
    /// The input limits every group change is checked against (the broker's).
    limits: Limits,
    state_limits: StateLimits,
    store: Arc<dyn Store>,
    groups: BTreeMap<String, GroupState>,
    /// Per group, the capture of its last failed computation (see [`Coordinator::last_capture`]).
    captures: BTreeMap<String, KeptCapture>,
    /// The bytes of `captures`, all together.
    capture_bytes: usize,
    /// The `order` of the next capture taken.
    next_capture: u64,
    /// On a [`SharedStore`](crate::store::SharedStore), the revision of each group's capture
    /// record as this coordinator last saw it (opened, applied from the watch, written, or
    /// read again after a lost write), kept here or not: the condition of its next write, so
    /// that a replica behind never replaces or deletes a newer capture. A group not listed
    /// had none. Empty on other stores.
    capture_revisions: BTreeMap<String, Revision>,
    /// The token of the latest write, for [`Coordinator::pending_writes`].
    last_write: SyncToken,
    /// The [`GroupState::incarnation`] of the next group created.
    next_incarnation: u64,
    clock: Box<dyn Fn() -> SystemTime + Send + Sync>,
    /// Told the outcome of every write of a capture record (see
    /// [`Coordinator::on_capture_write`]).
    capture_writes: Box<dyn Fn(CaptureWrite) + Send + Sync>,
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
        let (tx, rx) = futures_channel::oneshot::channel();
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
        let entries = match store.shared() {
            Some(shared) => shared.load_prefix("")?.entries,
            None => store
                .load_all()?
                .into_iter()
                .map(|(key, value)| (key, value, Revision::ABSENT))
                .collect(),
        };
        Self::open_from(registry, config, store, &entries)
    }

    /// [`open`](Self::open) from `entries`, the store's keys with their values and revisions
    /// ([`Revision::ABSENT`] on a store that is not shared), read by the caller, who may need
    /// them too: a store is then read once.
    pub fn open_from(
        registry: Registry,
        config: &BrokerConfig,
        store: Arc<dyn Store>,
        entries: &[(String, Vec<u8>, Revision)],
    ) -> Result<Self, CoordinatorError> {
        let mut groups = BTreeMap::new();
        let mut stored_captures = Vec::new();
        let mut capture_revisions = BTreeMap::new();
        for (key, value, revision) in entries {
            if let Some(group) = key.strip_prefix(GROUP_KEY_PREFIX) {
                let mut state = decode(key, value)?;
                state.revision = *revision;
                groups.insert(group.to_owned(), state);
            } else if let Some(group) = key.strip_prefix(CAPTURE_KEY_PREFIX) {
                stored_captures.push((group.to_owned(), value.clone()));
                if store.shared().is_some() {
                    capture_revisions.insert(group.to_owned(), *revision);
                }
            }
        }
        // The store keeps no capture times: a group's last failure (which its capture is of,
        // unless the group has succeeded since) orders them; captures of groups that have
        // since succeeded count as the oldest.
        let failed_at = |group: &str| {
            groups
                .get(group)
                .and_then(|g: &GroupState| g.last_failure.as_ref())
                .map(|f| f.at)
        };
        stored_captures.sort_by_key(|(group, _)| failed_at(group));
        let capture_bytes = stored_captures.iter().map(|(_, b)| b.len()).sum();
        let captures: BTreeMap<String, KeptCapture> = (0u64..)
            .zip(stored_captures)
            .map(|(order, (group, bytes))| (group, KeptCapture { bytes, order }))
            .collect();
        Ok(Self {
            registry,
            broker_configs: AssignmentConfigs {
                num_standby_replicas: config.num_standby_replicas,
                rack_aware_assignment_tags: config.rack_aware_assignment_tags.clone(),
            },
            max_standby_replicas: config.max_standby_replicas,
            limits: config.limits.clone(),
            state_limits: StateLimits::default(),
            store,
            groups,
            next_capture: captures.len() as u64,
            captures,
            capture_bytes,
            capture_revisions,
            last_write: SyncToken::DURABLE,
            next_incarnation: 1,
            clock: Box::new(SystemTime::now),
            capture_writes: Box::new(|_| {}),
        })
    }

    /// Keeps to `limits` from now on (instead of [`StateLimits::default`]): captures over the
    /// new bounds are dropped at once, oldest first; groups already over `max_groups` stay,
    /// but no new one is created.
    pub fn with_state_limits(mut self, limits: StateLimits) -> Self {
        self.set_state_limits(limits);
        self
    }

    /// [`with_state_limits`](Self::with_state_limits) on a running coordinator (a service
    /// admin's change of a tenant's limits).
    pub fn set_state_limits(&mut self, limits: StateLimits) {
        self.state_limits = limits;
        self.evict_captures(0);
    }

    /// Checks group changes against `limits` instead of the broker config's.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Uses `clock` instead of the system clock (for failure times and retry backoff).
    pub fn with_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }

    /// Calls `observe` with the outcome of every write of a capture record to the store
    /// (stored, or a dropped capture deleted), on the thread making it: a capture write never
    /// fails the call it captures, so this is how a caller counts the ones that did not land
    /// (a service's metrics). The default observes nothing.
    pub fn on_capture_write(
        mut self,
        observe: impl Fn(CaptureWrite) + Send + Sync + 'static,
    ) -> Self {
        self.capture_writes = Box::new(observe);
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

    /// On a [`SharedStore`](crate::store::SharedStore), the highest revision among the group
    /// records held ([`Revision::ABSENT`] when none, and on other stores): a view of the
    /// store current at or after it holds every group record as this coordinator does (its
    /// own writes included).
    pub fn latest_group_revision(&self) -> Revision {
        self.groups
            .values()
            .map(|g| g.revision)
            .max()
            .unwrap_or(Revision::ABSENT)
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
        self.alter_config_guarded(group, changes, &[])
    }

    /// [`alter_config`](Self::alter_config) whose write, on a
    /// [`SharedStore`](crate::store::SharedStore), is also conditional on `guards` (see
    /// [`SharedStore::write_if_guarded`]): a service selecting an upload guards the change
    /// with the upload record's revision, so that it and another replica's delete of the
    /// upload cannot both land. A guard that fails is a [`CoordinatorError::Conflict`], as a
    /// lost write of the group is; other stores, written by this process alone, ignore them.
    pub fn alter_config_guarded(
        &mut self,
        group: &str,
        changes: &[(&str, ConfigOp)],
        guards: &[Guard],
    ) -> Result<GroupConfig, CoordinatorError> {
        let config = self.changed_config(group, changes)?;
        let (config, token) = self.update_unsynced(group, guards, |g| {
            set_config(g, &config);
            Ok(config)
        })?;
        self.pending(token).wait()?;
        Ok(config)
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
        self.replace_with(group, config, topology, members)
    }

    /// [`set_group`](Self::set_group) with the document's assignment configs as parsed,
    /// typed: `Some` makes them the group's standby and rack-tag overrides (its assignor stays
    /// as configured), `None` leaves its config as it is. The tags are checked against the
    /// input limits with the rest of the group.
    pub fn replace_group(
        &mut self,
        group: &str,
        configs: Option<AssignmentConfigs>,
        topology: Topology,
        members: Vec<Member>,
    ) -> Result<u32, CoordinatorError> {
        let mut config = self
            .groups
            .get(group)
            .map(|g| g.config.clone())
            .unwrap_or_default();
        if let Some(c) = configs {
            config.num_standby_replicas = Some(c.num_standby_replicas);
            config.rack_aware_assignment_tags = Some(c.rack_aware_assignment_tags);
        }
        self.replace_with(group, config, topology, members)
    }

    /// The change of [`set_group`](Self::set_group) and [`replace_group`](Self::replace_group)
    /// once the group's new `config` is known.
    fn replace_with(
        &mut self,
        group: &str,
        config: GroupConfig,
        topology: Topology,
        members: Vec<Member>,
    ) -> Result<u32, CoordinatorError> {
        let spec = GroupSpec {
            members,
            configs: self.resolve_configs(&config),
        };
        self.check_input(group, spec.members.len(), &spec, &topology, Ids::All)?;
        let members = spec.members;
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
                            let n: u32 = v.trim().parse().map_err(|_| {
                                invalid(key, format!("`{v}` is not a non-negative integer"))
                            })?;
                            if n > self.max_standby_replicas {
                                return Err(invalid(
                                    key,
                                    format!(
                                        "{n} is above the broker's {} ({}); ask for at most \
                                         that many",
                                        MAX_STANDBY_REPLICAS, self.max_standby_replicas
                                    ),
                                ));
                            }
                            Ok(n)
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
        // The rack-aware tags are ids the assignor gets: bounded like the group's own.
        let tags = GroupSpec {
            members: Vec::new(),
            configs: self.resolve_configs(&config),
        };
        self.check_input(group, 0, &tags, &Topology::default(), Ids::SpecOnly)?;
        Ok(config)
    }

    /// Checks a group of `members` members on `topology` against the input limits, and the
    /// ids of `spec` (its configs' tags and the members among its `members`, which may be
    /// only the changed ones) and, with `Ids::All`, of `topology`: before anything is stored
    /// or sized from them.
    fn check_input(
        &self,
        group: &str,
        members: usize,
        spec: &GroupSpec,
        topology: &Topology,
        ids: Ids,
    ) -> Result<(), CoordinatorError> {
        let refuse = |source| CoordinatorError::InputLimit {
            group: group.to_owned(),
            source,
        };
        self.limits
            .check_counts(
                members,
                topology.subtopologies.len(),
                topology
                    .subtopologies
                    .iter()
                    .map(|s| s.max_num_input_partitions),
            )
            .map_err(refuse)?;
        let no_topology = Topology::default();
        let topology = match ids {
            Ids::All => topology,
            Ids::SpecOnly => &no_topology,
        };
        self.limits.check_group(spec, topology).map_err(refuse)
    }

    /// A member joins or updates itself, as a heartbeat does: new members and changed
    /// metadata (instance id, rack, process, client tags) bump the group epoch; reported
    /// tasks and offsets are recorded without a bump. Task ids refer to the group's current
    /// topology. Returns the group epoch.
    pub fn upsert_member(&mut self, group: &str, member: Member) -> Result<u32, CoordinatorError> {
        let g = self.groups.get(group);
        let members = g.map_or(0, |g| g.members.len())
            + usize::from(!g.is_some_and(|g| g.members.contains_key(&member.member_id)));
        let no_topology = Topology::default();
        let topology = g.and_then(|g| g.topology.as_ref()).unwrap_or(&no_topology);
        let spec = GroupSpec {
            members: vec![member],
            configs: AssignmentConfigs::default(),
        };
        // The topology's ids were checked when it was set: only the counts, and this member's
        // ids, are checked on every heartbeat.
        self.check_input(group, members, &spec, topology, Ids::SpecOnly)
            .map_err(|e| match e {
                CoordinatorError::InputLimit { group, mut source } => {
                    // The one member checked is not the group's first: name it as "member".
                    if let Some(rest) = source.field.strip_prefix("members[0]") {
                        source.field = format!("member{rest}");
                    }
                    CoordinatorError::InputLimit { group, source }
                }
                e => e,
            })?;
        let member = spec.members.into_iter().next().expect("the one member");
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

    /// Deletes a group (Kafka's `DeleteGroups`): its state, target and capture, durably.
    /// The group's id is free again, and counts no more against
    /// [`StateLimits::max_groups`].
    pub fn delete_group(&mut self, group: &str) -> Result<(), CoordinatorError> {
        let Some(g) = self.groups.get(group) else {
            return Err(CoordinatorError::UnknownGroup(group.to_owned()));
        };
        let key = format!("{GROUP_KEY_PREFIX}{group}");
        let store = self.store.clone();
        match store.shared() {
            None => store.delete(&key)?,
            // Conditional on the revision this coordinator holds, so that a delete made from
            // an older state (or retried after the cluster came back) never removes a group
            // another replica has changed, or created again, since.
            Some(shared) => {
                if let Conditional::Conflict(_) = shared.delete_if(&key, g.revision)? {
                    self.refresh_group(group)?;
                    return Err(CoordinatorError::Conflict(group.to_owned()));
                }
            }
        }
        self.groups.remove(group);
        self.drop_capture(group);
        Ok(())
    }

    /// Sets the group's topology; a different topology bumps the group epoch. Tasks already
    /// held (target and reported) follow their subtopology by id; those of removed
    /// subtopologies are dropped. Returns the group epoch.
    pub fn set_topology(
        &mut self,
        group: &str,
        topology: Topology,
    ) -> Result<u32, CoordinatorError> {
        let members = self.groups.get(group).map_or(0, |g| g.members.len());
        self.check_input(group, members, &GroupSpec::default(), &topology, Ids::All)?;
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
            configs: self.resolve_configs(&g.config),
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
                error: Box::new(f.error.clone()),
                retry_at: f.retry_at,
                backed_off: true,
            });
        }
        let configs = self.resolve_configs(&g.config);
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
            incarnation: g.incarnation,
            assignor,
            spec: Arc::new(GroupSpec { members, configs }),
            topology: Arc::new(topology.clone()),
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
    /// failures are rare, and backoff must survive. (Written unsynced and awaited with the
    /// service's other commits instead, the failures of hostile tenants measured no better
    /// for a third tenant's latency and worse for `/health`'s: the writes then ran on the
    /// async threads.)
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
                if g.supersedes(&job) {
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
                let token = match write_group(&self.store, &group, g, &[]) {
                    Ok(Written::Queued(token)) => {
                        self.last_write = self.last_write.max(token);
                        token
                    }
                    Ok(Written::Durable(revision)) => {
                        g.revision = revision;
                        SyncToken::DURABLE
                    }
                    Ok(Written::Lost) => {
                        // Another replica changed the group first (KIP-1357's one target per
                        // epoch: its commit stands). The group as stored replaces this
                        // replica's, and the caller answers with its target: the winner's,
                        // when it computed the same epoch.
                        tracing::info!(
                            group = %group,
                            epoch = job.group_epoch,
                            "another replica changed the group first; answering from its state"
                        );
                        self.refresh_group(&group)?;
                        return Ok(self.pending_writes());
                    }
                    Err(e) => {
                        g.target = old_target;
                        g.last_failure = old_failure;
                        return Err(e.into());
                    }
                };
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
            Err(error) if error.kind == ErrorKind::Capacity => {
                // The host's capacity, not the assignor: a record, a capture or a backoff would
                // blame the assignor and cost a flush while the host is busiest.
                tracing::warn!(
                    group = %group,
                    assignor = %error.assignor,
                    message = %error.message,
                    "no capacity for the assignment; the next trigger retries at once"
                );
                Err(CoordinatorError::NoCapacity {
                    group,
                    error: Box::new(error),
                })
            }
            Err(_)
                if self
                    .groups
                    .get(&group)
                    .is_none_or(|g| g.incarnation != job.incarnation) =>
            {
                // Deleted while its assignor ran (and perhaps created again: a new group must
                // not inherit the old one's failure, backoff and capture): nothing to record
                // the failure on.
                Err(CoordinatorError::UnknownGroup(group))
            }
            Err(error) => {
                self.capture_failure(&job, &error);
                // A failure record stays with the group until it succeeds: keep it small
                // whatever the error says (room for the host's words around the guest's).
                let mut error = error;
                error.message =
                    cut(&error.message, 2 * self.limits.get_max_message_bytes()).into_owned();
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
                    error: Box::new(error),
                    retry_at: failure.retry_at,
                    backed_off: false,
                })
            }
        }
    }

    /// [`commit_unsynced`](Self::commit_unsynced) in three steps for a store replicas share,
    /// so that the conditional write's round trip to the cluster runs without the coordinator
    /// and concurrent commits of other groups share the cluster's commits: this step (under
    /// the coordinator) returns the write to make ([`Prepared::Write`]), or the finished
    /// commit when there is none (a failure, recorded as `commit_unsynced` does; a job made
    /// stale by a newer commit; a store that is not shared). Then [`SharedWrite::write`]
    /// (without the coordinator), then [`finish_commit`](Self::finish_commit) (under it).
    pub fn prepare_commit(&mut self, done: CompletedJob) -> Result<Prepared, CoordinatorError> {
        if self.store.shared().is_none() {
            return self.commit_unsynced(done).map(Prepared::Done);
        }
        let CompletedJob { job, outcome } = done;
        let (assignment, usage) = match outcome {
            Ok(done) => done,
            Err(error) => {
                let failed = CompletedJob {
                    job,
                    outcome: Err(error),
                };
                return self.commit_unsynced(failed).map(Prepared::Done);
            }
        };
        let group = job.group_id.clone();
        let g = self
            .groups
            .get(&group)
            .ok_or_else(|| CoordinatorError::UnknownGroup(group.clone()))?;
        if g.supersedes(&job) {
            return Ok(Prepared::Done(self.pending_writes()));
        }
        let mut state = g.clone();
        state.target = Some(TargetAssignment {
            epoch: job.group_epoch,
            assignor: job.assignor.name().to_owned(),
            members: job
                .spec
                .members
                .iter()
                .map(|m| m.member_id.clone())
                .zip(assignment.members)
                .collect(),
            usage,
            computed_at: (self.clock)(),
        });
        state.last_failure = None;
        Ok(Prepared::Write(Box::new(SharedWrite {
            store: self.store.clone(),
            group,
            state,
        })))
    }

    /// The last step of a [`prepare_commit`](Self::prepare_commit): a written target becomes
    /// current (unless this coordinator has since read a newer state of the group); a lost
    /// one makes the coordinator read the group again, whose stored target (the winner's) the
    /// caller answers with.
    pub fn finish_commit(&mut self, written: SharedWritten) -> Result<Pending, CoordinatorError> {
        let SharedWritten {
            group,
            mut state,
            outcome,
        } = written;
        let expected = state.revision;
        match outcome {
            Conditional::Written(revision) => {
                let epoch = state.target.as_ref().map_or(0, |t| t.epoch);
                if let Some(g) = self.groups.get_mut(&group)
                    && g.revision == expected
                {
                    state.revision = revision;
                    *g = state;
                }
                tracing::info!(group = %group, epoch, "target assignment committed");
            }
            Conditional::Conflict(_) => {
                tracing::info!(
                    group = %group,
                    "another replica changed the group first; answering from its state"
                );
                self.refresh_group(&group)?;
            }
        }
        Ok(self.pending_writes())
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

    /// The configs an assignor gets for a group: its own, else the broker's. A group's count
    /// stored before the operator lowered `group.streams.max.standby.replicas` is clamped to
    /// it, as Kafka clamps it.
    fn resolve_configs(&self, config: &GroupConfig) -> AssignmentConfigs {
        AssignmentConfigs {
            num_standby_replicas: config
                .num_standby_replicas
                .unwrap_or(self.broker_configs.num_standby_replicas)
                .min(self.max_standby_replicas),
            rack_aware_assignment_tags: config
                .rack_aware_assignment_tags
                .clone()
                .unwrap_or_else(|| self.broker_configs.rack_aware_assignment_tags.clone()),
        }
    }

    /// The capture (the SDK's file format, for `assignor replay`) of `group`'s last failed
    /// computation: the exact input the assignor saw, its configuration, limits and error.
    /// Kept, and persisted, until the next failure replaces it.
    pub fn last_capture(&self, group: &str) -> Option<&[u8]> {
        self.captures.get(group).map(|c| c.bytes.as_slice())
    }

    /// Records the capture of a failed computation, replacing the group's previous one and
    /// dropping the oldest others as [`StateLimits`] asks. Best effort: a store that cannot
    /// take it must not turn the assignor's failure into a store failure.
    fn capture_failure(&mut self, job: &AssignmentJob, error: &TaskAssignorError) {
        let group = &job.group_id;
        // The group's previous capture is of an older failure: overwritten or, if this one
        // cannot be kept, deleted, so that no capture stands for a failure it is not of.
        let had_one = self.forget_capture(group);
        let bytes =
            crate::capture::of_failure(&job.assignor, &job.spec, &job.topology, error).to_bytes();
        let limits = self.state_limits;
        if limits.max_captures == 0 || bytes.len() > limits.max_capture_bytes {
            tracing::warn!(
                group = %group,
                assignor = %error.assignor,
                capture_bytes = bytes.len(),
                max_capture_bytes = limits.max_capture_bytes,
                max_captures = limits.max_captures,
                "the failed assignment's capture is over the capture limits; not kept"
            );
            if had_one {
                self.delete_capture_record(group);
            }
            return;
        }
        self.evict_captures(bytes.len());
        let key = format!("{CAPTURE_KEY_PREFIX}{group}");
        let store = self.store.clone();
        let stored = match store.shared() {
            None => store.put(&key, &bytes),
            // Conditional on the capture record this replica last saw: one another replica
            // wrote since (of a failure this replica had not seen) is newer than this one's
            // view, so it stays and is the one kept here too.
            Some(shared) => {
                let expected = self.held_capture(group);
                match shared.put_if(&key, &bytes, expected) {
                    Ok(Conditional::Written(revision)) => {
                        self.capture_revisions.insert(group.clone(), revision);
                        Ok(())
                    }
                    Ok(Conditional::Conflict(_)) => {
                        tracing::info!(
                            group = %group,
                            assignor = %error.assignor,
                            "another replica wrote the group's capture first; keeping the stored one"
                        );
                        (self.capture_writes)(CaptureWrite::Lost);
                        self.read_capture_again(shared, group);
                        return;
                    }
                    Err(e) => Err(e),
                }
            }
        };
        match stored {
            Ok(()) => (self.capture_writes)(CaptureWrite::Written),
            Err(e) => {
                tracing::warn!(
                    group = %group,
                    assignor = %error.assignor,
                    error = %e,
                    "cannot persist the capture of a failed assignment; kept in memory only"
                );
                (self.capture_writes)(CaptureWrite::Failed);
            }
        }
        self.keep_capture(group, bytes);
    }

    /// The revision of `group`'s capture record as last seen ([`Revision::ABSENT`]: none).
    fn held_capture(&self, group: &str) -> Revision {
        self.capture_revisions
            .get(group)
            .copied()
            .unwrap_or(Revision::ABSENT)
    }

    /// Keeps `bytes` as `group`'s capture, in memory, as the newest (the caller has made
    /// room for it).
    fn keep_capture(&mut self, group: &str, bytes: Vec<u8>) {
        self.capture_bytes += bytes.len();
        let order = self.next_capture;
        self.next_capture += 1;
        self.captures
            .insert(group.to_owned(), KeptCapture { bytes, order });
    }

    /// Keeps `bytes`, `group`'s capture as stored (by another process), in place of the one
    /// held, if the [`StateLimits`] let it in (the oldest others dropped to make room).
    fn take_capture(&mut self, group: &str, bytes: Option<&[u8]>) {
        self.forget_capture(group);
        let limits = self.state_limits;
        if let Some(bytes) = bytes
            && limits.max_captures > 0
            && bytes.len() <= limits.max_capture_bytes
        {
            self.evict_captures(bytes.len());
            self.keep_capture(group, bytes.to_vec());
        }
    }

    /// After a capture write of `group` lost its condition: reads the record again and
    /// keeps it (or none, when it is gone), so that the newest capture is the one kept.
    /// Best effort, like every capture write: a failed read is logged, and nothing is kept.
    fn read_capture_again(&mut self, shared: &dyn SharedStore, group: &str) {
        match shared.get(&format!("{CAPTURE_KEY_PREFIX}{group}")) {
            Ok(Some((bytes, revision))) => {
                self.capture_revisions.insert(group.to_owned(), revision);
                self.take_capture(group, Some(&bytes));
            }
            Ok(None) => {
                self.capture_revisions.remove(group);
                self.take_capture(group, None);
            }
            Err(e) => tracing::warn!(
                group = %group,
                error = %e,
                "cannot read again the capture another replica wrote; none is kept here"
            ),
        }
    }

    /// Drops the oldest captures until one of `room` more bytes fits the [`StateLimits`]
    /// (`room` 0: until the kept ones do).
    fn evict_captures(&mut self, room: usize) {
        let limits = self.state_limits;
        let incoming = usize::from(room > 0);
        while !self.captures.is_empty()
            && (self.captures.len() + incoming > limits.max_captures
                || self.capture_bytes + room > limits.max_capture_bytes)
        {
            // Linear in the captures kept, which the limit keeps few; evictions are as rare
            // as failures.
            let oldest = self
                .captures
                .iter()
                .min_by_key(|(_, c)| c.order)
                .map(|(g, _)| g.clone())
                .expect("not empty");
            tracing::info!(
                group = %oldest,
                max_captures = limits.max_captures,
                max_capture_bytes = limits.max_capture_bytes,
                "dropping the oldest capture to keep to the capture limits"
            );
            self.drop_capture(&oldest);
        }
    }

    /// Forgets `group`'s capture, in memory and (best effort) in the store.
    fn drop_capture(&mut self, group: &str) {
        if self.forget_capture(group) {
            self.delete_capture_record(group);
        }
    }

    /// Forgets `group`'s capture in memory; whether it had one.
    fn forget_capture(&mut self, group: &str) -> bool {
        let Some(old) = self.captures.remove(group) else {
            return false;
        };
        self.capture_bytes -= old.bytes.len();
        true
    }

    /// Deletes `group`'s capture from the store, best effort. On a
    /// [`SharedStore`](crate::store::SharedStore), conditional on the capture record this
    /// replica last saw: a newer one another replica wrote since stays (its watch brings it
    /// here, where it is kept within the limits like any other).
    fn delete_capture_record(&mut self, group: &str) {
        let key = format!("{CAPTURE_KEY_PREFIX}{group}");
        let store = self.store.clone();
        let deleted = match store.shared() {
            None => store.delete(&key),
            Some(shared) => match shared.delete_if(&key, self.held_capture(group)) {
                Ok(Conditional::Written(_)) => {
                    self.capture_revisions.remove(group);
                    Ok(())
                }
                Ok(Conditional::Conflict(_)) => {
                    tracing::info!(
                        group = %group,
                        "another replica wrote the group's capture since; the newer one stays"
                    );
                    (self.capture_writes)(CaptureWrite::Lost);
                    return;
                }
                Err(e) => Err(e),
            },
        };
        match deleted {
            Ok(()) => (self.capture_writes)(CaptureWrite::Written),
            Err(e) => {
                tracing::warn!(
                    group = %group,
                    error = %e,
                    "cannot delete a dropped capture from the store; it comes back after a restart"
                );
                (self.capture_writes)(CaptureWrite::Failed);
            }
        }
    }

    /// A group about to be created: its id within the id limit (it is a store key and is
    /// echoed in answers), and room for it under [`StateLimits::max_groups`].
    fn check_new_group(&self, group: &str) -> Result<(), CoordinatorError> {
        self.limits
            .check_id(&|| "groupId".to_owned(), group)
            .map_err(|source| CoordinatorError::InputLimit {
                group: group.to_owned(),
                source,
            })?;
        let limit = self.state_limits.max_groups;
        if self.groups.len() >= limit {
            return Err(CoordinatorError::TooManyGroups {
                group: group.to_owned(),
                limit,
            });
        }
        Ok(())
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
        let (result, token) = self.update_unsynced(group, &[], change)?;
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
        guards: &[Guard],
        change: impl FnOnce(&mut GroupState) -> Result<R, CoordinatorError>,
    ) -> Result<(R, SyncToken), CoordinatorError> {
        let mut state = match self.groups.get(group) {
            Some(state) => state.clone(),
            None => {
                self.check_new_group(group)?;
                let incarnation = self.next_incarnation;
                self.next_incarnation += 1;
                GroupState {
                    incarnation,
                    ..GroupState::default()
                }
            }
        };
        let result = change(&mut state)?;
        if self.groups.get(group) == Some(&state) {
            return Ok((result, self.last_write));
        }
        let token = match write_group(&self.store, group, &state, guards)? {
            Written::Queued(token) => {
                self.last_write = self.last_write.max(token);
                token
            }
            Written::Durable(revision) => {
                state.revision = revision;
                SyncToken::DURABLE
            }
            Written::Lost => {
                self.refresh_group(group)?;
                return Err(CoordinatorError::Conflict(group.to_owned()));
            }
        };
        self.groups.insert(group.to_owned(), state);
        Ok((result, token))
    }

    /// On a [`SharedStore`](crate::store::SharedStore) (several service replicas), reads `group`'s record again if
    /// another process changed it since this coordinator last read or wrote it, so that what
    /// this one plans, answers and writes next starts from the stored state: a group created
    /// elsewhere appears, one deleted elsewhere goes. One read of one key; nothing on other
    /// stores, whose only writer is this coordinator.
    pub fn refresh_group(&mut self, group: &str) -> Result<(), CoordinatorError> {
        let store = self.store.clone();
        let Some(shared) = store.shared() else {
            return Ok(());
        };
        let key = format!("{GROUP_KEY_PREFIX}{group}");
        match shared.get(&key)? {
            None => {
                self.groups.remove(group);
            }
            Some((_, revision))
                if self
                    .groups
                    .get(group)
                    .is_some_and(|g| g.revision == revision) => {}
            Some((bytes, revision)) => self.adopt(group, &key, &bytes, revision)?,
        }
        Ok(())
    }

    /// Takes `bytes`, `group`'s record as stored under `key` at `revision`, as its state here.
    /// A group held already keeps its incarnation: a job planned on the state replaced may
    /// still commit into it, as its write is conditional on the revision it was planned from,
    /// which is gone.
    fn adopt(
        &mut self,
        group: &str,
        key: &str,
        bytes: &[u8],
        revision: Revision,
    ) -> Result<(), CoordinatorError> {
        let mut state = decode(key, bytes)?;
        state.revision = revision;
        state.incarnation = match self.groups.get(group) {
            Some(g) => g.incarnation,
            None => {
                self.next_incarnation += 1;
                self.next_incarnation - 1
            }
        };
        self.groups.insert(group.to_owned(), state);
        Ok(())
    }
}

impl Coordinator {
    /// Applies a change another process made to this coordinator's store (a service replica's
    /// watch): `key` (a group's record or capture; other keys are not the coordinator's and
    /// are ignored) now holds `value` (`None`: deleted) at `revision`. A group's record older
    /// than the one held (this coordinator wrote or read a later one) is ignored; a newer one
    /// replaces the group's state, so that a job planned on the old state cannot commit into
    /// the new one unless its write's condition still holds. A record that does not decode is
    /// an error naming the key, and nothing changes.
    pub fn apply_stored(
        &mut self,
        key: &str,
        value: Option<&[u8]>,
        revision: Revision,
    ) -> Result<(), CoordinatorError> {
        if let Some(group) = key.strip_prefix(GROUP_KEY_PREFIX) {
            if self
                .groups
                .get(group)
                .is_some_and(|g| g.revision >= revision)
            {
                return Ok(());
            }
            match value {
                None => {
                    self.groups.remove(group);
                }
                Some(bytes) => self.adopt(group, key, bytes, revision)?,
            }
        } else if let Some(group) = key.strip_prefix(CAPTURE_KEY_PREFIX) {
            if self
                .capture_revisions
                .get(group)
                .is_some_and(|held| *held >= revision)
            {
                // This coordinator's own write, or one it has read again since.
                return Ok(());
            }
            match value {
                Some(_) => self.capture_revisions.insert(group.to_owned(), revision),
                None => self.capture_revisions.remove(group),
            };
            // Kept in memory as this coordinator keeps its own: replacing the group's, the
            // oldest dropped to stay within the limits.
            self.take_capture(group, value);
        }
        Ok(())
    }

    /// The store keys of the groups and captures this coordinator holds, for a caller that
    /// must tell which of them a full read of the store no longer has.
    pub fn stored_keys(&self) -> Vec<String> {
        let captures: std::collections::BTreeSet<&String> = self
            .captures
            .keys()
            .chain(self.capture_revisions.keys())
            .collect();
        self.groups
            .keys()
            .map(|g| format!("{GROUP_KEY_PREFIX}{g}"))
            .chain(
                captures
                    .into_iter()
                    .map(|g| format!("{CAPTURE_KEY_PREFIX}{g}")),
            )
            .collect()
    }
}

/// What [`Coordinator::prepare_commit`] leaves to do.
#[derive(Debug)]
#[non_exhaustive]
pub enum Prepared {
    /// Nothing more: the commit is made; the answer may be sent once this is durable.
    Done(Pending),
    /// A conditional write to make without the coordinator, then to finish under it (boxed:
    /// it holds the group's new state).
    Write(Box<SharedWrite>),
}

/// A target's conditional write to a store replicas share (see
/// [`Coordinator::prepare_commit`]).
#[must_use = "the commit is made only once written and finished"]
pub struct SharedWrite {
    store: Arc<dyn Store>,
    group: String,
    state: GroupState,
}

impl std::fmt::Debug for SharedWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWrite")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl SharedWrite {
    /// Writes the group's new record, durably, if its revision is still the one the state was
    /// planned from; a network round trip: call it without holding the coordinator.
    pub fn write(self: Box<Self>) -> Result<SharedWritten, CoordinatorError> {
        let shared = self.store.shared().ok_or_else(|| StoreError::Backend {
            backend: format!("{:?}", self.store),
            source: "a shared write was prepared on a store that is not shared".into(),
        })?;
        let outcome = put_group_if(shared, &self.group, &self.state)?;
        let SharedWrite { group, state, .. } = *self;
        Ok(SharedWritten {
            group,
            state,
            outcome,
        })
    }
}

/// A [`SharedWrite`] made, for [`Coordinator::finish_commit`].
#[must_use = "the commit is current only once finished"]
pub struct SharedWritten {
    group: String,
    state: GroupState,
    outcome: Conditional,
}

impl SharedWritten {
    /// Whether another process changed the group first, so this target was not written (the
    /// caller may plan the group again once [`Coordinator::finish_commit`] has read it).
    pub fn lost(&self) -> bool {
        matches!(self.outcome, Conditional::Conflict(_))
    }
}

impl std::fmt::Debug for SharedWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWritten")
            .field("group", &self.group)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

/// How [`write_group`] wrote a group's record.
enum Written {
    /// Queued for the store's group commit: durable once the token is synced.
    Queued(SyncToken),
    /// Written, durably, conditional on the revision the state was read at; its new revision.
    Durable(Revision),
    /// Not written: another process changed the record since.
    Lost,
}

/// Writes `state` as `group`'s record: queued for group commit on a store only this process
/// writes; on a [`SharedStore`](crate::store::SharedStore), conditional on the revision the state was read or written
/// at (and on `guards`), so that a replica working from an older state never overwrites
/// another's change.
fn write_group(
    store: &Arc<dyn Store>,
    group: &str,
    state: &GroupState,
    guards: &[Guard],
) -> Result<Written, StoreError> {
    let key = format!("{GROUP_KEY_PREFIX}{group}");
    let written = match store.shared() {
        None => {
            return store
                .put_unsynced(&key, &records::encode(state))
                .map(Written::Queued);
        }
        Some(shared) if guards.is_empty() => put_group_if(shared, group, state)?,
        Some(shared) => {
            shared.write_if_guarded(&key, Some(&records::encode(state)), state.revision, guards)?
        }
    };
    Ok(match written {
        Conditional::Written(revision) => Written::Durable(revision),
        Conditional::Conflict(_) => Written::Lost,
    })
}

/// Writes a group's record to a shared store if it is still at the revision `state` was read
/// or written at.
fn put_group_if(
    shared: &dyn SharedStore,
    group: &str,
    state: &GroupState,
) -> Result<Conditional, StoreError> {
    shared.put_if(
        &format!("{GROUP_KEY_PREFIX}{group}"),
        &records::encode(state),
        state.revision,
    )
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

/// A stored group value as the coordinator's state (see [`records`]).
fn decode(key: &str, bytes: &[u8]) -> Result<GroupState, CoordinatorError> {
    records::decode(bytes).map_err(|message| CoordinatorError::Corrupt {
        key: key.to_owned(),
        message,
    })
}

#[cfg(test)]
mod tests {
    use assignor_sdk::Subtopology;

    use super::*;
    use crate::store::MemoryStore;
    use assignor_sandbox::ErrorKind;

    /// A coordinator with only the built-in `sticky`, over `store`, on a clock at
    /// 1,000,000 s after the epoch.
    fn coordinator(store: Arc<dyn Store>) -> Coordinator {
        let config = BrokerConfig::load(None, &["group.streams.assignors=sticky".into()])
            .expect("valid config");
        let runtime = assignor_sandbox::Runtime::new(Limits::default()).expect("runtime");
        let registry = Registry::build(&runtime, &config).expect("registry");
        Coordinator::open(registry, &config, store)
            .expect("opens")
            .with_clock(|| SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
    }

    fn member(id: &str) -> Member {
        Member {
            member_id: id.to_owned(),
            process_id: format!("process-of-{id}"),
            ..Member::default()
        }
    }

    fn topology(partitions: u32) -> Topology {
        Topology {
            subtopologies: vec![Subtopology {
                id: "s0".into(),
                max_num_input_partitions: partitions,
                ..Subtopology::default()
            }],
            racks: Vec::new(),
        }
    }

    /// Plans `group`'s computation and completes it with `kind` without running anything,
    /// as the runtime would report it.
    fn fail(c: &mut Coordinator, group: &str, kind: ErrorKind) -> CoordinatorError {
        let job = c.plan(group).expect("plans").expect("a job to run");
        let error = TaskAssignorError::new(job.assignor_name(), kind, "refused");
        let done = CompletedJob {
            job,
            outcome: Err(error),
        };
        c.commit(done).expect_err("the outcome is a failure")
    }

    /// The stored record of `group` in `store`.
    fn stored(store: &MemoryStore, group: &str) -> Vec<u8> {
        let key = format!("{GROUP_KEY_PREFIX}{group}");
        let entries = store.load_all().expect("loads");
        entries
            .into_iter()
            .find(|(k, _)| *k == key)
            .expect("stored")
            .1
    }

    /// Changes another process stored (a replica's watch): a group's newer record replaces
    /// the one held and an older one is ignored; a record that does not decode is an error
    /// naming its key and changes nothing; a delete removes the group; a capture is kept,
    /// an older capture or delete of it ignored, a newer delete applied.
    #[test]
    fn stored_changes_apply_newest_first_and_refuse_damaged_records() {
        let (writer_store, reader_store) =
            (Arc::new(MemoryStore::new()), Arc::new(MemoryStore::new()));
        let mut writer = coordinator(writer_store.clone());
        let mut reader = coordinator(reader_store);
        writer.set_topology("g", topology(4)).expect("topology");
        writer.upsert_member("g", member("m1")).expect("member");
        let first = stored(&writer_store, "g");
        let epoch = writer.upsert_member("g", member("m2")).expect("member");
        let second = stored(&writer_store, "g");

        let key = format!("{GROUP_KEY_PREFIX}g");
        reader
            .apply_stored(&key, Some(&second), Revision::new(10))
            .expect("applies");
        assert_eq!(reader.describe("g").expect("held").group_epoch, epoch);
        reader
            .apply_stored(&key, Some(&first), Revision::new(8))
            .expect("an older record is ignored");
        assert_eq!(reader.describe("g").expect("held").group_epoch, epoch);
        let error = reader
            .apply_stored(&key, Some(b"not a record"), Revision::new(12))
            .expect_err("refused");
        assert!(error.to_string().contains(&key), "{error}");
        assert_eq!(reader.describe("g").expect("held").group_epoch, epoch);
        reader
            .apply_stored(&key, None, Revision::new(14))
            .expect("applies");
        assert!(reader.describe("g").is_err(), "deleted");

        reader
            .apply_stored(
                &format!("{CAPTURE_KEY_PREFIX}g"),
                Some(b"capture"),
                Revision::new(16),
            )
            .expect("applies");
        assert_eq!(reader.last_capture("g"), Some(&b"capture"[..]));
        let capture = format!("{CAPTURE_KEY_PREFIX}g");
        reader
            .apply_stored(&capture, Some(b"older"), Revision::new(15))
            .expect("an older capture is ignored");
        reader
            .apply_stored(&capture, None, Revision::new(15))
            .expect("so is an older delete");
        assert_eq!(reader.last_capture("g"), Some(&b"capture"[..]));
        reader
            .apply_stored(&capture, None, Revision::new(18))
            .expect("applies");
        assert_eq!(reader.last_capture("g"), None, "deleted");
    }

    /// A capacity refusal is not the assignor's failure: it is answered as
    /// `COORDINATOR_NOT_AVAILABLE`, stores nothing (no failure record, no capture, no
    /// write), and the very next trigger runs the assignor again; a real failure in its place
    /// is recorded, captured and backed off.
    #[test]
    fn capacity_is_retried_at_once_without_record_or_capture() {
        let store = Arc::new(MemoryStore::new());
        let mut c = coordinator(store.clone());
        c.set_group("g", &[], topology(4), vec![member("a")])
            .expect("group set");
        let stored = store.load_all().expect("loads");
        let e = fail(&mut c, "g", ErrorKind::Capacity);
        assert!(matches!(e, CoordinatorError::NoCapacity { .. }), "{e}");
        assert_eq!(e.code(), ErrorCode::CoordinatorNotAvailable);
        assert!(e.to_string().contains("retry at once"), "{e}");
        assert_eq!(c.describe("g").expect("exists").last_failure, None);
        assert_eq!(c.last_capture("g"), None);
        assert_eq!(store.load_all().expect("loads"), stored, "nothing written");
        assert!(c.plan("g").expect("plans").is_some(), "retried at once");

        let e = fail(&mut c, "g", ErrorKind::Trap);
        assert_eq!(e.code(), ErrorCode::UnknownServerError);
        assert!(c.last_capture("g").is_some(), "a real failure is captured");
        let e = c.plan("g").expect_err("backed off");
        assert!(
            matches!(
                e,
                CoordinatorError::AssignmentFailed {
                    backed_off: true,
                    ..
                }
            ),
            "{e}"
        );
    }

    /// A group over an input limit is refused whole with the field, value and limit, through
    /// every change that can grow it, and nothing is stored; the same group within the limits
    /// is accepted.
    #[test]
    fn groups_over_input_limits_store_nothing() {
        let store = Arc::new(MemoryStore::new());
        let mut c = coordinator(store.clone()).with_limits(
            Limits::default()
                .max_members(2)
                .max_partitions(8)
                .max_id_bytes(16),
        );
        let e = c
            .set_group("g", &[], topology(u32::MAX), vec![member("a")])
            .expect_err("partitions over the limit");
        let CoordinatorError::InputLimit { source, .. } = &e else {
            panic!("not an input limit: {e}");
        };
        assert_eq!(
            (source.field.as_str(), source.value, source.limit),
            (
                "topology.subtopologies[0].maxNumInputPartitions",
                u64::from(u32::MAX),
                8
            )
        );
        assert_eq!(e.code(), ErrorCode::InvalidRequest);
        assert!(
            store.load_all().expect("loads").is_empty(),
            "nothing stored"
        );
        assert!(c.describe("g").is_err(), "no group created");

        let three = vec![member("a"), member("b"), member("c")];
        let e = c
            .set_group("g", &[], topology(8), three)
            .expect_err("3 members");
        assert!(
            e.to_string().contains("members is 3, over the limit of 2"),
            "{e}"
        );
        c.set_group("g", &[], topology(8), vec![member("a"), member("b")])
            .expect("within the limits");
        let stored = store.load_all().expect("loads");

        let e = c
            .upsert_member("g", member("c"))
            .expect_err("a third member");
        assert!(e.to_string().contains("members is 3"), "{e}");
        c.upsert_member("g", member("b"))
            .expect("updating a member adds none");
        let e = c
            .upsert_member("h", member(&"x".repeat(100)))
            .expect_err("a long member id");
        assert!(
            e.to_string().contains("member.memberId (bytes) is 100"),
            "{e}"
        );
        assert!(e.to_string().len() < 300, "the id is not echoed: {e}");
        let e = c.set_topology("g", topology(9)).expect_err("9 partitions");
        assert!(e.to_string().contains("is 9, over the limit of 8"), "{e}");
        let e = c
            .alter_config(
                "g",
                &[(RACK_AWARE_ASSIGNMENT_TAGS, ConfigOp::Set("t".repeat(17)))],
            )
            .expect_err("a long tag");
        assert!(e.to_string().contains("rackAwareAssignmentTags[0]"), "{e}");
        let e = c
            .alter_config(&"g".repeat(17), &[])
            .expect_err("a long group id");
        assert!(e.to_string().contains("groupId (bytes) is 17"), "{e}");
        assert_eq!(store.load_all().expect("loads"), stored, "nothing changed");
    }

    /// Past `max.groups` no group is created (`POLICY_VIOLATION`, nothing stored) while
    /// existing groups still change; deleting one makes room.
    #[test]
    fn groups_are_bounded_and_deletable() {
        let store = Arc::new(MemoryStore::new());
        let mut c =
            coordinator(store.clone()).with_state_limits(StateLimits::default().max_groups(2));
        for g in ["g1", "g2"] {
            c.set_topology(g, topology(1)).expect("created");
        }
        let e = c
            .set_topology("g3", topology(1))
            .expect_err("a third group");
        assert_eq!(e.code(), ErrorCode::PolicyViolation);
        assert!(e.to_string().contains("2 groups exist"), "{e}");
        assert_eq!(c.groups().collect::<Vec<_>>(), ["g1", "g2"]);
        c.set_topology("g2", topology(2))
            .expect("existing groups change");
        c.delete_group("g1").expect("deleted");
        assert!(matches!(
            c.delete_group("g1"),
            Err(CoordinatorError::UnknownGroup(_))
        ));
        c.set_topology("g3", topology(1)).expect("room again");
        let keys: Vec<String> = store
            .load_all()
            .expect("loads")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["group/g2", "group/g3"]);
    }

    /// A computation planned before its group was deleted and created again commits nothing
    /// into the new group, even at the same group epoch: neither its target (computed for
    /// other members) nor its failure (with backoff and capture).
    #[test]
    fn a_job_of_a_deleted_group_does_not_reach_its_successor() {
        let store = Arc::new(MemoryStore::new());
        let mut c = coordinator(store);
        let build = |c: &mut Coordinator, ids: &[&str]| {
            c.set_topology("g", topology(4)).expect("created");
            for id in ids {
                c.upsert_member("g", member(id)).expect("joins");
            }
        };
        build(&mut c, &["a", "b"]);
        let old_success = c.plan("g").expect("plans").expect("a job");
        let old_failure = c.plan("g").expect("plans").expect("a job");
        let epoch = c.describe("g").expect("exists").group_epoch;
        c.delete_group("g").expect("deleted");
        build(&mut c, &["c", "d"]);
        assert_eq!(c.describe("g").expect("exists").group_epoch, epoch);

        c.commit(old_success.run())
            .expect("a stale job is dropped quietly");
        assert!(
            c.target("g").is_none(),
            "the new group got the old one's target"
        );
        let error = TaskAssignorError::new(old_failure.assignor_name(), ErrorKind::Trap, "x");
        let failed = c.commit(CompletedJob {
            job: old_failure,
            outcome: Err(error),
        });
        assert!(
            matches!(failed, Err(CoordinatorError::UnknownGroup(_))),
            "{failed:?}"
        );
        assert!(c.last_capture("g").is_none());

        let job = c.plan("g").expect("plans").expect("not backed off");
        c.commit(job.run()).expect("commits");
        let target = c.target("g").expect("a target");
        assert_eq!(target.members.keys().collect::<Vec<_>>(), ["c", "d"]);
    }

    /// Captures are bounded in count and bytes: each failure of another group past the limit
    /// drops the oldest capture from memory and the store, a capture larger than the byte
    /// limit is not kept (nor is the group's older one), and a reopened coordinator keeps to
    /// the limits it is given.
    #[test]
    fn captures_are_bounded_oldest_first() {
        let store = Arc::new(MemoryStore::new());
        let mut c =
            coordinator(store.clone()).with_state_limits(StateLimits::default().max_captures(2));
        for g in ["g1", "g2", "g3"] {
            c.set_group(g, &[], topology(4), vec![member("a")])
                .expect("group set");
            fail(&mut c, g, ErrorKind::Trap);
        }
        let captured = |c: &Coordinator| {
            ["g1", "g2", "g3"]
                .into_iter()
                .filter(|g| c.last_capture(g).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(captured(&c), ["g2", "g3"]);
        let stored_captures = |store: &MemoryStore| {
            store
                .load_all()
                .expect("loads")
                .into_iter()
                .filter(|(k, _)| k.starts_with(CAPTURE_KEY_PREFIX))
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        };
        assert_eq!(stored_captures(&store), ["capture/g2", "capture/g3"]);

        let one = c.last_capture("g3").expect("kept").len();
        c.set_state_limits(StateLimits::default().max_capture_bytes(one + one / 2));
        assert_eq!(captured(&c), ["g3"], "the oldest dropped to fit the bytes");
        c.set_group(
            "g3",
            &[],
            topology(4),
            (0..50).map(|i| member(&format!("m{i}"))).collect(),
        )
        .expect("a larger group");
        fail(&mut c, "g3", ErrorKind::Trap);
        assert_eq!(captured(&c), Vec::<&str>::new(), "too large to keep");
        assert_eq!(stored_captures(&store), Vec::<String>::new());

        // A new member moves g1's epoch past its backed-off failure.
        c.upsert_member("g1", member("b")).expect("joined");
        fail(&mut c, "g1", ErrorKind::Trap);
        drop(c);
        let c = coordinator(store.clone());
        assert_eq!(captured(&c), ["g1"], "restored");
        let c = c.with_state_limits(StateLimits::default().max_captures(0));
        assert_eq!(captured(&c), Vec::<&str>::new());
        assert_eq!(stored_captures(&store), Vec::<String>::new());
    }

    /// A store that refuses every write of a capture record (a full disk for them alone).
    #[derive(Debug, Default)]
    struct CapturesRefused(MemoryStore);

    impl Store for CapturesRefused {
        fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
            self.0.load_all()
        }

        fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
            if key.starts_with(CAPTURE_KEY_PREFIX) {
                return Err(StoreError::Backend {
                    backend: "test".into(),
                    source: "captures refused".into(),
                });
            }
            self.0.put(key, value)
        }

        fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.0.delete(key)
        }
    }

    /// Each capture write's outcome reaches the observer: stored ones `Written`, and one the
    /// store refuses `Failed` (the capture kept in memory, the computation's error intact);
    /// a dropped capture's delete is a write too.
    #[test]
    fn capture_writes_are_observed_written_or_failed() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let observer = |seen: &Arc<std::sync::Mutex<Vec<CaptureWrite>>>| {
            let seen = seen.clone();
            move |w| seen.lock().unwrap().push(w)
        };
        let mut c = coordinator(Arc::new(MemoryStore::new())).on_capture_write(observer(&seen));
        c.set_group("g", &[], topology(4), vec![member("a")])
            .expect("group set");
        fail(&mut c, "g", ErrorKind::Trap);
        c.set_state_limits(StateLimits::default().max_captures(0));
        assert_eq!(
            *seen.lock().unwrap(),
            [CaptureWrite::Written, CaptureWrite::Written],
            "stored, then deleted"
        );

        seen.lock().unwrap().clear();
        let mut c =
            coordinator(Arc::new(CapturesRefused::default())).on_capture_write(observer(&seen));
        c.set_group("g", &[], topology(4), vec![member("a")])
            .expect("group set");
        fail(&mut c, "g", ErrorKind::Trap);
        assert_eq!(*seen.lock().unwrap(), [CaptureWrite::Failed]);
        assert!(c.last_capture("g").is_some(), "kept in memory");
    }

    /// A failure's retry time reads as an RFC 3339 time, not as epoch seconds.
    #[test]
    fn retry_times_read_as_rfc3339() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_152_127);
        assert_eq!(rfc3339(at), "2026-12-01T19:08:47Z");
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(951_825_600)),
            "2000-02-29T12:00:00Z"
        );
        assert_eq!(
            retry_note(at),
            " (next retry no earlier than 2026-12-01T19:08:47Z)"
        );
    }
}

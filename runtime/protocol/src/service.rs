//! The `assignor serve` HTTP API's requests and answers (beyond the group document, which is
//! the input JSON, and the capture, which is the SDK's binary format), and its error object.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::call::UsageReport;
use super::document::AssignmentDoc;
use super::limits::{LimitOverrides, TenantLimitsReport};

/// `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// `ok`.
    pub status: String,
}

/// `GET /v1/assignors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignorList {
    /// Built-ins (or broker-configured assignors) and the tenant's uploads, default first.
    pub assignors: Vec<AssignorEntry>,
}

/// One entry of [`AssignorList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignorEntry {
    /// An upload's size; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Whether groups without `streams.assignor.name` use it.
    pub default: bool,
    /// `built-in` or `component` (a string, so that a newer service's kinds still read).
    pub kind: String,
    /// The name groups select it by.
    pub name: String,
    /// An upload's content hash; absent for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Whether it is one of this tenant's uploads.
    pub uploaded: bool,
}

/// `PUT /v1/assignors/{name}`: every check passed and the trial's usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadReport {
    /// The name it was stored under.
    pub assignor: String,
    /// Its size.
    pub bytes: u64,
    /// The checks it passed, in order.
    pub checks: Vec<String>,
    /// Whether it replaced an earlier upload of the name.
    pub replaced: bool,
    /// Its content hash.
    pub sha256: String,
    /// The trial assignment's usage under the tenant's limits.
    pub trial: UsageReport,
}

/// `PUT /v1/groups/{group}/config`: an `IncrementalAlterConfigs`-like change, all or nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigChange {
    /// Keys to delete (back to the broker's value), applied after the sets.
    #[serde(default)]
    pub delete: Vec<String>,
    /// Key → value: a string, a number, a boolean, or a list of strings (joined with commas,
    /// as `streams.rack.aware.assignment.tags` takes them). Kept as JSON so the service can
    /// say which key has a value of the wrong type.
    #[serde(default)]
    pub set: BTreeMap<String, Value>,
}

/// The answer to `PUT` and `GET /v1/groups/{group}/config`: the group's own overrides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupOverrides {
    /// Config key → the group's value, `null` where the broker's applies.
    pub config: ConfigOverrides,
    /// The group.
    pub group_id: String,
}

/// A group's config overrides under their Kafka config keys; `None` (JSON `null`): the
/// broker's value applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigOverrides {
    /// `streams.assignor.name`.
    #[serde(rename = "streams.assignor.name")]
    pub assignor_name: Option<String>,
    /// `streams.num.standby.replicas`.
    #[serde(rename = "streams.num.standby.replicas")]
    pub num_standby_replicas: Option<u32>,
    /// `streams.rack.aware.assignment.tags`, comma-separated as the config key takes them.
    #[serde(rename = "streams.rack.aware.assignment.tags")]
    pub rack_aware_assignment_tags: Option<String>,
}

/// `GET /v1/groups/{group}` (and the answer to `PUT /v1/groups/{group}`): a group as
/// `StreamsGroupDescribe` shows it, plus what this runtime adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribedGroup {
    /// The assignor the next computation uses (KIP-1357's `AssignorName`).
    pub assignor_name: String,
    /// The assignment configs the next computation uses.
    pub configs: GroupConfigs,
    /// `streams.assignor.name` as configured; differs from `assignor_name` when the group
    /// falls back to the default.
    pub configured_assignor: Option<String>,
    /// The group epoch.
    pub group_epoch: u32,
    /// The group.
    pub group_id: String,
    /// The last failure, while none has succeeded since.
    pub last_failure: Option<LastFailure>,
    /// Member ids, sorted.
    pub members: Vec<String>,
    /// The target assignment's epoch; `None` before the first assignment.
    pub target_assignment_epoch: Option<u32>,
    /// The assignor that computed the current target.
    pub target_assignor: Option<String>,
    /// The usage of that computation.
    pub target_usage: Option<UsageReport>,
}

/// The resolved assignment configs of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupConfigs {
    /// Standby replicas per stateful task.
    pub num_standby_replicas: u32,
    /// Client tags the rack-aware assignor balances over.
    pub rack_aware_assignment_tags: Vec<String>,
}

/// A group's last failed assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastFailure {
    /// The assignor that failed.
    pub assignor: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Failures in a row.
    pub consecutive: u32,
    /// The group epoch it was computing for.
    pub group_epoch: u32,
    /// The error kind, e.g. `out-of-fuel`.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// No retry before this, in milliseconds since the Unix epoch.
    pub retry_at_ms: u64,
}

/// `POST /v1/groups/{group}/assign` and `GET /v1/groups/{group}/assignment`: the committed
/// target. `A` is the assignment's type: a borrowed view when the service writes it (one per
/// assignment, so without building maps), [`AssignmentDoc`] when the client reads it. Unlike
/// the other answers, its fields are in this order on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommittedTarget<A = AssignmentDoc> {
    /// The assignment, in the output JSON contract.
    pub assignment: A,
    /// Its epoch.
    pub target_assignment_epoch: u32,
    /// The assignor that computed it.
    pub assignor: String,
    /// That computation's usage.
    pub usage: UsageReport,
    /// When it was computed, in milliseconds since the Unix epoch.
    pub computed_at_ms: u64,
}

/// `GET /v1/admin/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantList {
    /// Every tenant, in the configured order.
    pub tenants: Vec<TenantReport>,
}

/// One tenant's limits; also the answer to `PUT` and `DELETE
/// /v1/admin/tenants/{tenant}/limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantReport {
    /// The limits in force: the config file's with the overrides on top.
    pub limits: TenantLimitsReport,
    /// The tenant.
    pub name: String,
    /// The admin's overrides (empty when none).
    pub overrides: LimitOverrides,
}

/// Every error answer: `{"error": {"code", "message", …}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorAnswer {
    /// The error.
    pub error: ServiceError,
}

/// The service's error object: Kafka's error code name where one applies, a message that
/// says what to do, and the fields that go with the code (`check` and `passed` of a rejected
/// upload, `groups` of an assignor in use, `kind` and `retryAtMs` of a failed assignment, …).
///
/// The service writes it through a `serde_json::Value`, so all its keys, `code` and `message`
/// included, come out sorted, as they always have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceError {
    /// E.g. `RESOURCE_NOT_FOUND`.
    pub code: String,
    /// What went wrong and what to do.
    pub message: String,
    /// The other fields.
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

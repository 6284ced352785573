//! Every shape that crosses a process boundary, declared once: what `assignor assign`,
//! `replay` and `check` print with `--json`, and the requests and answers of the
//! `assignor serve` HTTP API. The service writes its answers and reads its requests with these
//! types, and the client reads the answers and writes the requests with the same ones, so the
//! two sides cannot drift apart.
//!
//! # Layout
//!
//! - [`document`]: the output JSON (an assignment), written straight from the model.
//! - [`call`]: one call's usage, the limits it ran under, and its error.
//! - [`limits`]: a tenant's limits as the service reports them and the overrides it accepts.
//! - [`service`]: the HTTP API's other requests and answers, and its error object.
//!
//! # What it depends on
//!
//! serde, serde_json, std and the guest SDK's model types, nothing else (no wasmtime, axum,
//! ureq or tokio), so the client builds without the sandbox. Conversions from the sandbox's
//! own types (`Limits`, `Usage`, errors) live beside them, in `assignor_coordinator::wire`.
//!
//! # Field order
//!
//! Fields are declared in the order they are written. The answers first written as
//! `serde_json::Value` objects had their keys sorted (serde_json's maps are ordered by key),
//! so those types declare their fields alphabetically: the bytes stay the contract's
//! (`tests/golden/` pins them). Types the other side builds are plain structs; the enums are
//! `#[non_exhaustive]`.

#![deny(missing_docs)]

pub mod call;
pub mod document;
pub mod limits;
pub mod service;

pub use call::{CallError, CallLimits, ErrorDoc, Outcome, UsageReport};
pub use document::{AssignmentDoc, AssignmentView, MemberAssignmentDoc};
pub use limits::{FuelLimit, LimitOverrides, NoFuel, TenantLimitsReport};
pub use service::{
    AssignorEntry, AssignorList, CommittedTarget, ConfigChange, ConfigOverrides, DescribedGroup,
    ErrorAnswer, GroupConfigs, GroupOverrides, Health, LastFailure, ServiceError, TenantList,
    TenantReport, UploadReport,
};

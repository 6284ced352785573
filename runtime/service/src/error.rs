//! The API's one error type and its JSON form, `{"error": {"code", "message", ...}}`, with
//! Kafka's error code names where one applies.
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `INVALID_CONFIG` | a group config change was rejected (nothing stored) |
//! | 400 | `INVALID_REQUEST` | a body is not the expected JSON, a name is malformed, a group is over an input limit (`field`, `value`, `limit`, `limitName`) |
//! | 401 | `AUTHENTICATION_FAILED` | missing, malformed or unknown bearer token |
//! | 404 | `RESOURCE_NOT_FOUND` | no such assignor or group *for this tenant* (another tenant's looks the same) |
//! | 409 | `ASSIGNOR_IN_USE` | deleting an assignor some groups select (the groups are listed) |
//! | 409 | `POLICY_VIOLATION` | an upload past the tenant's `max.assignors`, a new group past its `max.groups` |
//! | 409 | `GROUP_NOT_READY` | assigning a group that has no topology yet |
//! | 413 | `ASSIGNOR_REJECTED` | an upload over the tenant's `max.component.bytes` (refused before it is read) |
//! | 413 | `MESSAGE_TOO_LARGE` | any other body over its limit (`limit`, `limitName`): a group document over the tenant's `max.input.bytes` |
//! | 422 | `ASSIGNOR_REJECTED` | an upload failed a check (which one, and why) |
//! | 429 | `THROTTLING_QUOTA_EXCEEDED` | the tenant's concurrent assignments stayed full for its deadline |
//! | 500 | `UNKNOWN_SERVER_ERROR` | the assignor failed (`kind`, `assignor`, `retryAtMs`; the previous target is kept), the store did, or handling the request panicked (a bug; other requests carry on) |
//! | 503 | `COORDINATOR_NOT_AVAILABLE` | the host had no capacity for the call (`kind` `capacity`, `retriable`): nothing recorded, retry at once |
//! | 503 | `COORDINATOR_NOT_AVAILABLE` | on a store replicas share, another replica changed the group, upload or limits record first (`retriable`): nothing changed here, the record was read again, retry |

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use assignor_coordinator::CoordinatorError;
use assignor_protocol::{ErrorAnswer, ServiceError};
use assignor_sandbox::cut;

/// How much of a caller's name (group, assignor) an answer repeats.
const ECHO_BYTES: usize = 256;

/// An error answer: status, code, message and any extra fields.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) extra: Map<String, Value>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// Adds a field beside `code` and `message`.
    pub(crate) fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "AUTHENTICATION_FAILED",
            "missing or unknown bearer token; send `Authorization: Bearer <your tenant token>`",
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "INVALID_REQUEST", message)
    }

    pub(crate) fn assignor_not_found(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!(
                "no assignor `{}` among this tenant's uploads; GET /v1/assignors lists them",
                cut(name, ECHO_BYTES)
            ),
        )
    }

    pub(crate) fn group_not_found(group: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!(
                "no group `{0}` for this tenant; PUT /v1/groups/{0} creates it",
                cut(group, ECHO_BYTES)
            ),
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "UNKNOWN_SERVER_ERROR",
            message,
        )
    }
}

impl From<CoordinatorError> for ApiError {
    fn from(e: CoordinatorError) -> Self {
        let message = e.to_string();
        match e {
            CoordinatorError::InvalidConfig { key, .. } => {
                Self::new(StatusCode::BAD_REQUEST, "INVALID_CONFIG", message).with("key", key)
            }
            CoordinatorError::InputLimit { source, .. } => Self::bad_request(message)
                .with("kind", assignor_sandbox::ErrorKind::InputLimit.as_str())
                .with("field", source.field)
                .with("value", source.value)
                .with("limit", source.limit)
                .with("limitName", source.name),
            CoordinatorError::TooManyGroups { limit, .. } => {
                Self::new(StatusCode::CONFLICT, "POLICY_VIOLATION", message).with("limit", limit)
            }
            CoordinatorError::NoCapacity { error, .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "COORDINATOR_NOT_AVAILABLE",
                message,
            )
            .with("assignor", error.assignor)
            .with("kind", error.kind.as_str())
            .with("retriable", true),
            // Another replica changed the group first: nothing changed, the group was read
            // again, and a retry starts from it.
            CoordinatorError::Conflict(group) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "COORDINATOR_NOT_AVAILABLE",
                message,
            )
            .with("group", cut(&group, ECHO_BYTES))
            .with("retriable", true),
            CoordinatorError::UnknownGroup(group) => Self::group_not_found(&group),
            CoordinatorError::UnknownMember { .. } => {
                Self::new(StatusCode::NOT_FOUND, "UNKNOWN_MEMBER_ID", message)
            }
            CoordinatorError::AssignmentFailed {
                error,
                retry_at,
                backed_off,
                ..
            } => Self::internal(message)
                .with("assignor", error.assignor)
                .with("kind", error.kind.as_str())
                .with("retryAtMs", super::api::millis(retry_at))
                .with("backedOff", backed_off),
            // Store and corruption errors, and kinds a newer coordinator may add: the service's
            // own failure, said as the coordinator says it.
            _ => Self::internal(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let answer = ErrorAnswer {
            error: ServiceError {
                code: self.code.to_owned(),
                message: self.message,
                details: self.extra,
            },
        };
        // Through a `Value`, so every key of the error object comes out sorted, `code` and
        // `message` among the details, as the contract has always had them.
        let body = serde_json::to_value(answer).expect("strings and JSON values always serialize");
        (self.status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assignor_sandbox::{ErrorKind, TaskAssignorError};

    /// The host's lack of capacity is answered 503 `COORDINATOR_NOT_AVAILABLE`, retriable,
    /// with the kind and the runtime's reason, not as the assignor's 500.
    #[test]
    fn capacity_is_a_retriable_503() {
        let e = ApiError::from(CoordinatorError::NoCapacity {
            group: "g".into(),
            error: Box::new(TaskAssignorError::new(
                "sticky",
                ErrorKind::Capacity,
                "all 3 instance slots are in use",
            )),
        });
        assert_eq!(
            (e.status, e.code),
            (StatusCode::SERVICE_UNAVAILABLE, "COORDINATOR_NOT_AVAILABLE")
        );
        assert_eq!(e.extra["kind"], "capacity");
        assert_eq!(e.extra["retriable"], true);
        assert!(
            e.message.contains("all 3 instance slots are in use"),
            "{}",
            e.message
        );
    }

    /// A group change another replica made first is answered 503 `COORDINATOR_NOT_AVAILABLE`,
    /// retriable, naming the group, not as the service's own 500.
    #[test]
    fn a_lost_group_change_is_a_retriable_503() {
        let e = ApiError::from(CoordinatorError::Conflict("g".into()));
        assert_eq!(
            (e.status, e.code),
            (StatusCode::SERVICE_UNAVAILABLE, "COORDINATOR_NOT_AVAILABLE")
        );
        assert_eq!(e.extra["group"], "g");
        assert_eq!(e.extra["retriable"], true);
        assert!(e.message.contains("another replica"), "{}", e.message);
    }

    /// Names echoed in answers are cut: a 1 MiB group id makes a short message.
    #[test]
    fn echoed_names_are_cut() {
        let e = ApiError::group_not_found(&"g".repeat(1 << 20));
        assert!(e.message.len() < 1200, "{} bytes", e.message.len());
        assert!(e.message.contains("bytes dropped"), "{}", e.message);
    }
}

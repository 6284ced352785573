//! The API's one error type and its JSON form, `{"error": {"code", "message", ...}}`, with
//! Kafka's error code names where one applies.
//!
//! | status | code | when |
//! |---|---|---|
//! | 400 | `INVALID_CONFIG` | a group config change was rejected (nothing stored) |
//! | 400 | `INVALID_REQUEST` | a body is not the expected JSON, a name is malformed |
//! | 401 | `AUTHENTICATION_FAILED` | missing, malformed or unknown bearer token |
//! | 404 | `RESOURCE_NOT_FOUND` | no such assignor or group *for this tenant* (another tenant's looks the same) |
//! | 409 | `ASSIGNOR_IN_USE` | deleting an assignor some groups select (the groups are listed) |
//! | 409 | `POLICY_VIOLATION` | an upload past the tenant's `max.assignors` |
//! | 409 | `GROUP_NOT_READY` | assigning a group that has no topology yet |
//! | 413 | `ASSIGNOR_REJECTED` | an upload over the tenant's `max.component.bytes` |
//! | 422 | `ASSIGNOR_REJECTED` | an upload failed a check (which one, and why) |
//! | 429 | `THROTTLING_QUOTA_EXCEEDED` | the tenant's concurrent assignments stayed full for its deadline |
//! | 500 | `UNKNOWN_SERVER_ERROR` | the assignor failed (`kind`, `assignor`, `retryAtMs`; the previous target is kept), or the store did |

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::coordinator::CoordinatorError;

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
                "no assignor `{name}` among this tenant's uploads; GET /v1/assignors lists them"
            ),
        )
    }

    pub(crate) fn group_not_found(group: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!("no group `{group}` for this tenant; PUT /v1/groups/{group} creates it"),
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
            CoordinatorError::Store(_) | CoordinatorError::Corrupt { .. } => {
                Self::internal(message)
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = Map::new();
        error.insert("code".into(), self.code.into());
        error.insert("message".into(), self.message.into());
        error.extend(self.extra);
        (self.status, Json(json!({ "error": error }))).into_response()
    }
}

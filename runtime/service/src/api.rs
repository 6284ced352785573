//! The HTTP API: routes, authentication, and handlers that hand every blocking step to
//! `spawn_blocking` (a component's call yields instead; see the trigger, `assign`). Reads of
//! a tenant's state and the trigger's in-memory steps take the tenant's async lock right on
//! the async thread: they take microseconds and wait for the lock without a thread. Each
//! request runs in a `request` span (method, route, tenant) and each computation in an
//! `assignment` span (tenant, group, assignor, fuel, duration, outcome); both end with an
//! event carrying them. No span or event ever holds a header.
//!
//! | method and path | does |
//! |---|---|
//! | `GET /health` | liveness, no token |
//! | `GET /v1/assignors` | the built-ins/broker-configured assignors and the tenant's uploads |
//! | `PUT /v1/assignors/{name}` | upload (or atomically replace) a component after every check |
//! | `GET /v1/assignors/{name}` | the tenant's upload as uploaded (`application/wasm`), `ETag` its SHA-256; `If-None-Match` answers 304 |
//! | `DELETE /v1/assignors/{name}` | delete an upload no group selects |
//! | `PUT /v1/groups/{group}/config` | `{"set": {k: v}, "delete": [k]}`, all or nothing |
//! | `GET /v1/groups/{group}/config` | the group's own config (overrides; `null`: the default) |
//! | `PUT /v1/groups/{group}` | the whole group in the input JSON, as one all-or-nothing change: topology set, members upserted, absent members removed, `configs` applied if present |
//! | `DELETE /v1/groups/{group}` | delete the group: its state, target and capture |
//! | `POST /v1/groups/{group}/assign` | the trigger: computes the target if behind, answers it with usage |
//! | `GET /v1/groups/{group}/assignment` | the committed target |
//! | `GET /v1/groups/{group}` | describe |
//! | `GET /v1/admin/tenants` | admin token only: tenants, their limits and the admin's overrides |
//! | `PUT /v1/admin/tenants/{tenant}/limits` | admin token only: change some of a tenant's limits at run time (see `admin`) |
//! | `DELETE /v1/admin/tenants/{tenant}/limits` | admin token only: back to the config file's limits |
//! | `GET /metrics` | admin token only: Prometheus metrics (see `metrics`) |
//!
//! Every body is bounded before it is read: a `Content-Length` over the route's limit is
//! answered 413 at once, without reading (so a client that sent `Expect: 100-continue` never
//! sends the body), and a body without one is cut off as soon as it passes the limit. The
//! limits: an upload, the tenant's `max.component.bytes`; a group document, its
//! `max.input.bytes`; anything else, [`MAX_REQUEST_BYTES`]. A group over one of the input
//! limits (members, subtopologies, partitions, tasks, id length) is refused 400 with the
//! field, its value and the limit, and nothing is stored.
//!
//! With replicas on one store, an upload PUT or DELETE of a name another replica has
//! stored or deleted since this one last saw it is refused with `COORDINATOR_NOT_AVAILABLE`
//! (503, retriable, nothing changed); this replica reads the upload again first (loading and
//! checking it), so a retry acts on the stored version.
//!
//! A panic while handling a request answers that request 500 and nothing else: the layer
//! [`catch_panic`] turns it into an answer, and the tenant's state is never left half
//! changed (every change is built on a copy; its lock does not poison).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use futures_util::{FutureExt as _, StreamExt as _};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument as _;
use tracing::field::Empty;

use assignor_coordinator::Assignor;
use assignor_coordinator::json::{AssignmentView, parse_document_with};
use assignor_coordinator::{
    AssignmentJob, CompletedJob, ConfigOp, Coordinator, CoordinatorError, GroupConfig,
    GroupDescription, Pending, Prepared,
};
use assignor_protocol::{
    AssignorEntry, AssignorList, CommittedTarget, ConfigChange, ConfigOverrides, DescribedGroup,
    GroupConfigs, GroupOverrides, Health, LastFailure, UploadReport,
};
use assignor_sandbox::{ErrorKind, cut};

use super::Service;
use super::admin;
use super::auth::{Caller, authenticate};
use super::error::ApiError;
use super::tenant::{Settings, Tenant};

pub(crate) type AppState = Arc<Service>;

/// Largest body of the small requests (a group's config change, an admin's limits): 1 MiB,
/// far more than they need. Uploads and group documents have the tenant's own limits.
pub(crate) const MAX_REQUEST_BYTES: usize = 1 << 20;
/// How much of a body's declared length is allocated before it arrives: a client may declare
/// the limit and send nothing, and many may do so at once.
const BODY_PREALLOCATION: usize = 1 << 20;
/// How much of a refused body is read and dropped before the answer, for a client that did not
/// wait for `100 Continue`: 1 MiB (see [`read_body`]).
const DRAIN_BYTES: usize = 1 << 20;

pub(crate) fn router(service: AppState) -> Router {
    let routes = Router::new()
        .route("/health", get(health))
        .route("/v1/assignors", get(list_assignors))
        .route(
            "/v1/assignors/{name}",
            put(put_assignor).get(get_assignor).delete(delete_assignor),
        )
        .route(
            "/v1/groups/{group}",
            put(put_group).get(describe).delete(delete_group),
        )
        .route(
            "/v1/groups/{group}/config",
            put(put_group_config).get(get_group_config),
        )
        .route("/v1/groups/{group}/assign", post(assign))
        .route("/v1/groups/{group}/assignment", get(get_assignment))
        .route("/v1/groups/{group}/capture", get(get_capture))
        .route("/v1/admin/tenants", get(admin::tenants))
        .route(
            "/v1/admin/tenants/{tenant}/limits",
            put(admin::put_limits).delete(admin::delete_limits),
        )
        .route("/metrics", get(admin::metrics));
    layers(routes).with_state(service)
}

/// The layers every route runs in: the `request` span and its event, and, inside it, the
/// panic catcher (so a panic's 500 is logged like any answer).
fn layers<S: Clone + Send + Sync + 'static>(routes: Router<S>) -> Router<S> {
    routes
        .layer(middleware::from_fn(catch_panic))
        .layer(middleware::from_fn(log_request))
}

/// Answers a request whose handling panicked with 500, logging the panic: the connection, the
/// other requests and the process carry on. Unwinding is safe here: a handler's state is its
/// own, and the shared state it may have been changing is only ever changed through copies
/// swapped in whole, behind locks that do not poison (see `Tenant::state`).
async fn catch_panic(request: Request, next: Next) -> Response {
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            let reason = cut(&reason, 1024);
            tracing::error!(panic = %reason, "request handling panicked; answered 500");
            ApiError::internal(format!(
                "the service failed handling this request (a bug: it panicked: {reason}); \
                 other requests are unaffected; retry, and report it with the service's log"
            ))
            .into_response()
        }
    }
}

/// Runs each request in a `request` span (method, matched route, and the tenant once
/// authenticated; never a header, so never a token) and ends it with an event giving status
/// and duration.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| request.uri().path().to_owned());
    let span = tracing::info_span!("request", method = %method, route = %route, tenant = Empty);
    let start = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    tracing::info!(
        parent: &span,
        status = response.status().as_u16(),
        duration_us = micros(start.elapsed()),
        "request"
    );
    response
}

/// A duration in whole microseconds, for log fields.
pub(crate) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The calling tenant; any other caller is rejected with 401.
struct TenantCaller(Arc<Tenant>);

impl FromRequestParts<AppState> for TenantCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        match authenticate(&parts.headers, &s.tenant_hashes, s.admin_hash.as_ref()) {
            Some(Caller::Tenant(i)) => {
                let tenant = s.tenants[i].clone();
                tracing::Span::current().record("tenant", tenant.name.as_str());
                Ok(Self(tenant))
            }
            _ => Err(ApiError::unauthorized()),
        }
    }
}

/// Runs `f` on the blocking pool (coordinator changes fsync, loads compile), inside the
/// caller's span.
pub(crate) async fn blocking<R: Send + 'static>(
    tenant: &Arc<Tenant>,
    f: impl FnOnce(&Tenant) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let tenant = tenant.clone();
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(|| f(&tenant)))
        .await
        .map_err(|e| ApiError::internal(format!("the request's worker failed: {e}")))?
}

/// One of the tenant's assignment slots, waiting at most the tenant's deadline (a running
/// call ends by then): past it, 429. A service that starts stopping meanwhile answers 503 at
/// once: its stop waits for the calls running, not for calls yet to start.
async fn permit(s: &Service, settings: &Settings) -> Result<OwnedSemaphorePermit, ApiError> {
    let wait = settings.limits.timeout;
    let mut stopping = s.stopping.subscribe();
    let acquired = tokio::select! {
        acquired = tokio::time::timeout(wait, settings.permits.clone().acquire_owned()) => acquired,
        Ok(_) = stopping.wait_for(|stop| *stop) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "COORDINATOR_NOT_AVAILABLE",
                "the service is stopping, so this call did not start and nothing changed; \
                 retry once it is back",
            )
            .with("retriable", true));
        }
    };
    match acquired {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "THROTTLING_QUOTA_EXCEEDED",
            format!(
                "all {} of this tenant's concurrent assignment slots stayed busy for {} ms; \
                 retry later",
                settings.limits.max_concurrent_assignments,
                wait.as_millis()
            ),
        )
        .with(
            "retryAfterMs",
            u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        )),
    }
}

/// Why a body was not read whole.
pub(crate) enum BodyError {
    /// It is over the limit: its declared size if it had one.
    TooLarge(Option<u64>),
    /// The client stopped sending it.
    BrokeOff(String),
}

impl BodyError {
    /// The answer: 413 `MESSAGE_TOO_LARGE` naming `what`, its size if declared, the limit and
    /// the limit's key; 400 for a body that broke off.
    pub(crate) fn answer(self, what: &str, limit: usize, limit_key: &str) -> ApiError {
        match self {
            Self::TooLarge(size) => {
                let size_text = size.map_or_else(String::new, |s| format!(" is {s} bytes,"));
                let error = ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "MESSAGE_TOO_LARGE",
                    format!(
                        "{what}{size_text} over the limit of {limit} bytes ({limit_key}); send \
                         a smaller one, or ask the service's admin to raise the limit"
                    ),
                )
                .with("limit", limit)
                .with("limitName", limit_key);
                match size {
                    Some(s) => error.with("bytes", s),
                    None => error,
                }
            }
            Self::BrokeOff(reason) => {
                ApiError::bad_request(format!("{what} broke off before its end: {reason}"))
            }
        }
    }
}

/// Reads a request body of at most `limit` bytes. A `Content-Length` over it is refused before
/// anything is read, so a client waiting on `Expect: 100-continue` is answered without sending
/// the body; a body without one is cut off as soon as it passes the limit.
///
/// A client that did not wait has its body on the way: a server closing a connection with
/// unread data makes it send a reset, which can destroy the answer before the client reads
/// it. So a refused body is read and dropped first, if that is at most [`DRAIN_BYTES`] more;
/// a larger one is refused unread all the same (the service's own client waits for
/// `100 Continue` on large bodies).
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let waits = headers
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut stream = body.into_data_stream();
    if let Some(size) = declared
        && size > limit as u64
    {
        if !waits && size <= DRAIN_BYTES as u64 {
            drain(&mut stream).await;
        }
        return Err(BodyError::TooLarge(Some(size)));
    }
    let expected = declared.map_or(0, |d| usize::try_from(d).unwrap_or(limit));
    let mut bytes = Vec::with_capacity(expected.min(BODY_PREALLOCATION));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::BrokeOff(e.to_string()))?;
        if bytes.len() + chunk.len() > limit {
            if !waits {
                drain(&mut stream).await;
            }
            return Err(BodyError::TooLarge(None));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.into())
}

/// Reads and drops what is left of a body, up to [`DRAIN_BYTES`].
async fn drain(stream: &mut axum::body::BodyDataStream) {
    let mut dropped = 0;
    while dropped <= DRAIN_BYTES {
        match stream.next().await {
            Some(Ok(chunk)) => dropped += chunk.len(),
            _ => return,
        }
    }
}

/// Milliseconds since the Unix epoch, for JSON.
pub(crate) fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid request body at {}: {}",
            e.path(),
            e.inner()
        ))
    })
}

async fn health() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

async fn list_assignors(TenantCaller(t): TenantCaller) -> Result<Json<AssignorList>, ApiError> {
    let state = t.lock().await;
    let registry = state.coordinator.registry();
    let default = registry.default_assignor().name().to_owned();
    let assignors = registry
        .names()
        .map(|name| {
            let upload = state.uploads.get(name);
            let kind = match registry.get(name) {
                Some(Assignor::Component(_)) => "component",
                _ => "built-in",
            };
            AssignorEntry {
                bytes: upload.map(|u| u.component.len() as u64),
                default: name == default,
                kind: kind.to_owned(),
                name: name.to_owned(),
                sha256: upload.map(|u| u.sha256.clone()),
                uploaded: upload.is_some(),
            }
        })
        .collect();
    Ok(Json(AssignorList { assignors }))
}

/// Names the tenant whose upload `GET /v1/assignors/{name}` answered, so that a puller
/// configured for one tenant can refuse another's (a token pasted from the wrong tenant).
pub const TENANT_HEADER: &str = "x-assignor-tenant";

/// `GET /v1/assignors/{name}`: the tenant's upload of `name` exactly as uploaded
/// (`application/wasm`), with its SHA-256 (hex) as a strong `ETag` and the tenant in
/// [`TENANT_HEADER`]. An `If-None-Match` holding that tag (or `*`) answers 304 without the
/// body, so a broker plugin polling for a new version (`runtime/kafka`) transfers a component
/// only when it changed. A built-in or broker-configured assignor has no upload: 404.
async fn get_assignor(
    TenantCaller(t): TenantCaller,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (sha256, component) = {
        let state = t.lock().await;
        let upload = state
            .uploads
            .get(&name)
            .ok_or_else(|| ApiError::assignor_not_found(&name))?;
        (upload.sha256.clone(), upload.component.clone())
    };
    let etag = format!("\"{sha256}\"");
    let unchanged = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag == etag
        });
    let tenant = t.name.clone();
    if unchanged {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, etag),
                (header::HeaderName::from_static(TENANT_HEADER), tenant),
            ],
        )
            .into_response());
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/wasm".to_owned()),
            (header::ETAG, etag),
            (header::HeaderName::from_static(TENANT_HEADER), tenant),
        ],
        component,
    )
        .into_response())
}

/// Upload: every check of [`Tenant`]'s, in order. The body is read only if its declared size
/// is within the tenant's `max.component.bytes`, and only up to it; the load (validation,
/// compilation, `name()`, `configure`) must finish within `compile.timeout.ms`. The compile
/// runs in a child process that is killed when that limit passes, so a load past it is
/// answered at once and frees its assignment slot and its core; a tenant's uploads occupy
/// no more cores than its assignments can.
async fn put_assignor(
    State(s): State<AppState>,
    TenantCaller(t): TenantCaller,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let result = upload(&s, &t, name.clone(), &headers, body).await;
    match result {
        Ok((replaced, report)) => {
            s.metrics.upload(&t.name, "accepted");
            tracing::info!(assignor = %name, replaced, "assignor uploaded");
            let status = if replaced {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((status, Json(report)).into_response())
        }
        Err(e) => {
            let outcome = match e.code {
                "ASSIGNOR_REJECTED" => e
                    .extra
                    .get("check")
                    .and_then(Value::as_str)
                    .unwrap_or("rejected"),
                "POLICY_VIOLATION" => "policy",
                "THROTTLING_QUOTA_EXCEEDED" => "throttled",
                _ => "error",
            };
            s.metrics.upload(&t.name, outcome);
            tracing::warn!(
                assignor = %name,
                code = e.code,
                check = outcome,
                message = %e.message,
                "assignor upload rejected"
            );
            Err(e)
        }
    }
}

/// The upload's checks and commit; answers whether it replaced one, and the report.
async fn upload(
    s: &Service,
    t: &Arc<Tenant>,
    name: String,
    headers: &HeaderMap,
    body: Body,
) -> Result<(bool, UploadReport), ApiError> {
    let settings = t.settings();
    let max = settings.limits.max_component_bytes;
    let body = read_body(headers, body, max).await.map_err(|e| match e {
        BodyError::TooLarge(size) => Tenant::oversized(&t.name, max, size),
        e => e.answer("the component", max, "max.component.bytes"),
    })?;
    let checks = Tenant::size_passed(max, body.len());
    let permit = permit(s, &settings).await?;
    let compile_timeout = settings.limits.compile_timeout;
    let load = {
        let (t, settings, name, body) = (t.clone(), settings.clone(), name.clone(), body.clone());
        let span = tracing::Span::current();
        tokio::task::spawn_blocking(move || {
            let loaded = span.in_scope(|| t.load_upload(&settings, checks, &name, &body));
            (loaded, permit)
        })
    };
    let (loaded, permit) = match tokio::time::timeout(compile_timeout, load).await {
        Ok(done) => {
            done.map_err(|e| ApiError::internal(format!("the upload's worker failed: {e}")))?
        }
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ASSIGNOR_REJECTED",
                format!(
                    "upload rejected: it did not validate, compile and load within this \
                     tenant's compile time limit of {} ms; make the component smaller",
                    compile_timeout.as_millis()
                ),
            )
            .with("check", "load")
            .with(
                "passed",
                vec![format!("size: {} bytes, limit {max}", body.len())],
            ));
        }
    };
    let loaded = loaded?;
    blocking(t, move |t| {
        let _permit = permit;
        let checked = t.check_loaded(&settings, loaded, &name, body.len())?;
        let mut report = checked.report.clone();
        report.replaced = t.commit_upload(&name, &body, checked)?;
        Ok((report.replaced, report))
    })
    .await
}

async fn delete_assignor(
    TenantCaller(t): TenantCaller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let assignor = name.clone();
    blocking(&t, move |t| t.delete_upload(&name)).await?;
    tracing::info!(assignor = %assignor, "assignor deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// A config value as text: strings as they are, numbers and booleans printed, lists joined
/// with commas (as `streams.rack.aware.assignment.tags` takes them).
fn config_text(key: &str, value: &Value) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Array(items) => items
            .iter()
            .map(|i| {
                i.as_str().map(str::to_owned).ok_or_else(|| {
                    ApiError::bad_request(format!("set.{key}: a list must hold strings"))
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|v| v.join(",")),
        _ => Err(ApiError::bad_request(format!(
            "set.{key}: expected a string, number, boolean or list of strings"
        ))),
    }
}

/// The changes a `PUT …/config` body asks for, in order: its sets, then its deletes.
pub(crate) fn config_changes(body: &[u8]) -> Result<Vec<(String, ConfigOp)>, ApiError> {
    let change: ConfigChange = parse_json(body)?;
    let mut ops: Vec<(String, ConfigOp)> = Vec::new();
    for (k, v) in &change.set {
        ops.push((k.clone(), ConfigOp::Set(config_text(k, v)?)));
    }
    ops.extend(change.delete.iter().map(|k| (k.clone(), ConfigOp::Delete)));
    Ok(ops)
}

async fn put_group_config(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<GroupOverrides>, ApiError> {
    let body = read_small_body(&headers, body, "the config change").await?;
    let ops = config_changes(&body)?;
    blocking(&t, move |t| {
        let ops: Vec<(&str, ConfigOp)> = ops.iter().map(|(k, o)| (k.as_str(), o.clone())).collect();
        let mut state = t.state();
        let guards = t.selection_guards(&state, &ops);
        let config = state
            .coordinator
            .alter_config_guarded(&group, &ops, &guards)?;
        tracing::info!(group = %group, assignor = ?config.assignor_name, "group config altered");
        Ok(Json(config_json(&group, &config)))
    })
    .await
}

/// The group's own config, as `PUT …/config` answers it: what is set on the group, `null`
/// where the broker's default applies (`GET /v1/groups/{g}` gives the values in effect).
async fn get_group_config(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Json<GroupOverrides>, ApiError> {
    let state = t.lock().await;
    Ok(Json(config_json(&group, state.coordinator.config(&group)?)))
}

fn config_json(group: &str, config: &GroupConfig) -> GroupOverrides {
    GroupOverrides {
        config: ConfigOverrides {
            assignor_name: config.assignor_name.clone(),
            num_standby_replicas: config.num_standby_replicas,
            rack_aware_assignment_tags: config
                .rack_aware_assignment_tags
                .as_ref()
                .map(|t| t.join(",")),
        },
        group_id: group.to_owned(),
    }
}

/// A small request's body, within [`MAX_REQUEST_BYTES`].
pub(crate) async fn read_small_body(
    headers: &HeaderMap,
    body: Body,
    what: &str,
) -> Result<Bytes, ApiError> {
    read_body(headers, body, MAX_REQUEST_BYTES)
        .await
        .map_err(|e| {
            e.answer(
                what,
                MAX_REQUEST_BYTES,
                "the service's limit on request bodies",
            )
        })
}

/// `PUT /v1/groups/{group}`: the body is read up to the tenant's `max.input.bytes`, then parsed
/// once and checked on the blocking pool (a large document takes a while to parse, which must
/// not hold an async thread); a group over an input limit stores nothing. The document's
/// configs go to the coordinator as they were parsed, typed.
async fn put_group(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<DescribedGroup>, ApiError> {
    let max = t.settings().limits.max_input_bytes;
    let body = read_body(&headers, body, max).await.map_err(|e| {
        e.answer(
            "the group document",
            max,
            &format!("service.tenant.{}.max.input.bytes", t.name),
        )
    })?;
    blocking(&t, move |t| {
        let text = std::str::from_utf8(&body)
            .map_err(|_| ApiError::bad_request("the group document is not UTF-8"))?;
        let doc = parse_document_with(text, t.settings().call_limits())
            .map_err(|e| ApiError::bad_request(e.to_string()).with("path", e.path))?;
        // The document's `configs` become the group's overrides only when it has them: parsing
        // fills absent configs with defaults, which must not erase settings made through
        // /config.
        let configs = doc.has_configs.then_some(doc.group.configs);
        let mut state = t.state();
        let c = &mut state.coordinator;
        // On a shared store, replaced from this replica's view (the watch keeps it current,
        // and its own writes are in it): a view that was behind loses the write's condition,
        // which reads the group again, and the document is applied once more to the stored
        // group (a second loss answers 503, retriable).
        if t.shared {
            let (topology, members) = (doc.topology.clone(), doc.group.members.clone());
            match c.replace_group(&group, configs.clone(), topology, members) {
                Err(CoordinatorError::Conflict(_)) => {
                    c.replace_group(&group, configs, doc.topology, doc.group.members)?;
                }
                replaced => {
                    replaced?;
                }
            }
        } else {
            c.replace_group(&group, configs, doc.topology, doc.group.members)?;
        }
        let d = c.describe(&group)?;
        tracing::info!(group = %group, epoch = d.group_epoch, members = d.members.len(), "group updated");
        Ok(Json(describe_json(&d, &t.settings())))
    })
    .await
}

/// What a trigger found when it planned.
enum Planned {
    /// The target is behind: this computation must run.
    Run(AssignmentJob),
    /// The target is current: the answer, to send once the `Pending` write (a concurrent
    /// commit's, if any) is durable.
    Current(Response, Pending),
}

/// The trigger's first step, under the tenant's lock.
fn plan(t: &Tenant, c: &Coordinator, group: &str) -> Result<Planned, ApiError> {
    if c.topology(group).is_none() {
        c.describe(group)?;
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "GROUP_NOT_READY",
            format!(
                "group `{group}` has no topology yet; PUT /v1/groups/{group} with the group \
                 document first"
            ),
        ));
    }
    Ok(match c.plan(group)? {
        Some(job) => Planned::Run(job),
        None => Planned::Current(target_answer(t, c, group)?, c.pending_writes()),
    })
}

/// The trigger: plans under the tenant's lock, then (holding one of the tenant's slots, in an
/// `assignment` span) runs the assignor without the lock, commits under it, and answers once
/// the commit is durable.
///
/// Everything quick happens on this async thread; nothing that waits does. Planning and a
/// successful commit (an in-memory change and one buffered write) take microseconds, so they
/// run right here, under the tenant's async lock: a trigger that finds it taken waits
/// without holding a thread, and no trip to the blocking pool (two context switches, and a
/// pool thread blocked on the lock) is needed. A component's call runs on the runtime's call
/// threads and is awaited here without holding this thread; a built-in runs on the pool. A
/// failed call is recorded durably (a flush), on the pool. The flush a commit needs is awaited
/// without a thread ([`Pending::durable`]), so concurrent commits share it.
async fn assign(
    State(s): State<AppState>,
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    let planned = if t.shared {
        // The store's watch keeps this replica's groups and uploads current, and the commit's
        // write is conditional on the group's revision, so the group is planned as held
        // here. Only a group this replica does not hold yet (or without its topology), or one
        // selecting an upload not loaded here, is read from the store first, on the pool.
        let held = {
            let state = t.lock().await;
            let c = &state.coordinator;
            let ready = c.topology(&group).is_some()
                && c.config(&group).is_ok_and(|config| {
                    config
                        .assignor_name
                        .as_ref()
                        .is_none_or(|name| c.registry().get(name).is_some())
                });
            ready.then(|| plan(&t, c, &group))
        };
        match held {
            Some(planned) => planned?,
            None => {
                let g = group.clone();
                blocking(&t, move |t| {
                    t.state().coordinator.refresh_group(&g)?;
                    // An upload another replica stored is loaded and checked here before it
                    // serves.
                    t.load_selected_upload(&g)?;
                    plan(t, &t.state().coordinator, &g)
                })
                .await?
            }
        }
    } else {
        plan(&t, &t.lock().await.coordinator, &group)?
    };
    let mut job = match planned {
        Planned::Run(job) => job,
        Planned::Current(answer, pending) => {
            return pending
                .durable()
                .await
                .map(|()| answer)
                .map_err(ApiError::from);
        }
    };
    // On a shared store, a replica whose view was behind loses its commit's condition: it
    // plans again from the group as stored, and computes once more if the target there is
    // behind too; a second loss answers the stored target.
    let mut replans = 1;
    loop {
        match compute(&s, &t, &group, job, replans > 0).await? {
            Computed::Answer(answer) => return Ok(answer),
            Computed::Again(next) => {
                replans -= 1;
                job = next;
            }
        }
    }
}

/// What [`compute`] ended with.
enum Computed {
    /// The answer to send.
    Answer(Response),
    /// The commit lost to another replica's and the group as stored needs this computation.
    Again(AssignmentJob),
}

/// Runs a trigger's job (holding one of the tenant's slots, in an `assignment` span) without
/// the lock, commits under it, and answers once the commit is durable; on a shared store, a
/// commit that lost to another replica's, when `may_replan`, plans the group again.
async fn compute(
    s: &AppState,
    t: &Arc<Tenant>,
    group: &str,
    job: AssignmentJob,
    may_replan: bool,
) -> Result<Computed, ApiError> {
    let assignor = job.assignor_name().to_owned();
    let span = tracing::info_span!(
        "assignment",
        tenant = %t.name,
        group = %group,
        assignor = %assignor,
        fuel = Empty,
        duration_us = Empty,
        outcome = Empty,
    );
    // The call itself runs without the tenant's lock: describe, configs and other groups'
    // assignments go on meanwhile. The slot bounds calls, which use a core, and is freed
    // before the commit: waiting for a flush does not, and holding the slot through it would
    // cap how many commits can share one flush.
    let permit = permit(s, &t.settings()).instrument(span.clone()).await?;
    let start = Instant::now();
    let done = match job.run_async().instrument(span.clone()).await {
        Ok(done) => done,
        // A built-in: native code that cannot yield, so on the blocking pool (its panic is
        // caught by `Assignor::assign`).
        Err(job) => {
            blocking(t, move |_| Ok(job.run()))
                .instrument(span.clone())
                .await?
        }
    };
    drop(permit);
    let duration = start.elapsed();
    let outcome = done.outcome().map(|u| u.fuel).map_err(|e| e.kind);
    // A success commits here: an in-memory change and one buffered write, as does a refusal
    // for want of capacity, which writes nothing. A failure is recorded durably (a flush), on
    // the pool, and so is every commit to a store replicas share (a conditional write, which
    // waits for the cluster).
    let quick = outcome.is_ok() || outcome == Err(ErrorKind::Capacity);
    let committed = if quick && !t.shared {
        commit(t, &mut t.lock().await.coordinator, done, group)
            .map(|(answer, pending)| Planned::Current(answer, pending))
    } else if t.shared {
        // The conditional write's round trip runs without the tenant's lock, so other groups'
        // commits go on meanwhile and the cluster batches them.
        let g = group.to_owned();
        blocking(t, move |t| {
            let prepared = t.state().coordinator.prepare_commit(done)?;
            let (pending, lost) = match prepared {
                Prepared::Write(write) => {
                    let written = write.write()?;
                    let lost = written.lost();
                    (t.state().coordinator.finish_commit(written)?, lost)
                }
                Prepared::Done(pending) => (pending, false),
                _ => return Err(ApiError::internal("unknown commit step")),
            };
            let state = t.state();
            if lost && may_replan {
                return plan(t, &state.coordinator, &g);
            }
            Ok(Planned::Current(
                target_answer(t, &state.coordinator, &g)?,
                pending,
            ))
        })
        .instrument(span.clone())
        .await
    } else {
        let g = group.to_owned();
        blocking(t, move |t| {
            commit(t, &mut t.state().coordinator, done, &g)
                .map(|(answer, pending)| Planned::Current(answer, pending))
        })
        .instrument(span.clone())
        .await
    };
    // The target is answered only once it is durable.
    let answer = match committed {
        Ok(Planned::Current(answer, pending)) => pending
            .durable()
            .await
            .map(|()| Computed::Answer(answer))
            .map_err(ApiError::from),
        Ok(Planned::Run(job)) => Ok(Computed::Again(job)),
        Err(e) => Err(e),
    };
    s.metrics.assignment(&t.name, &assignor, duration, outcome);
    span.record("duration_us", micros(duration));
    match outcome {
        Ok(fuel) => {
            span.record("outcome", "ok");
            if let Some(fuel) = fuel {
                span.record("fuel", fuel);
            }
        }
        Err(kind) => {
            span.record("outcome", kind.as_str());
        }
    }
    tracing::info!(parent: &span, committed = answer.is_ok(), "assignment");
    answer
}

/// Commits a computation and serializes the answer, under the tenant's lock; the answer may
/// be sent once the `Pending` write is durable.
fn commit(
    t: &Tenant,
    c: &mut Coordinator,
    done: CompletedJob,
    group: &str,
) -> Result<(Response, Pending), ApiError> {
    let pending = c.commit_unsynced(done)?;
    Ok((target_answer(t, c, group)?, pending))
}

async fn get_assignment(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    get_target(&t, group).await
}

async fn get_target(t: &Arc<Tenant>, group: String) -> Result<Response, ApiError> {
    // From this replica's view on a shared store too: its own commits are in it, and
    // another replica's reach it within the watch's delay. A group it does not hold yet
    // (created elsewhere within that delay) is read from the store.
    let unheld = t.shared && t.lock().await.coordinator.config(&group).is_err();
    let (answer, pending) = if unheld {
        blocking(t, move |t| {
            let mut state = t.state();
            state.coordinator.refresh_group(&group)?;
            let c = &state.coordinator;
            Ok((target_answer(t, c, &group)?, c.pending_writes()))
        })
        .await?
    } else {
        let c = &t.lock().await.coordinator;
        (target_answer(t, c, &group)?, c.pending_writes())
    };
    pending
        .durable()
        .await
        .map(|()| answer)
        .map_err(ApiError::from)
}

/// The group's committed target, as answered by the trigger and `GET …/assignment`:
/// serialized here, under the tenant's lock, because it borrows the coordinator's state.
fn target_answer(t: &Tenant, c: &Coordinator, group: &str) -> Result<Response, ApiError> {
    c.describe(group)?;
    match (c.target(group), c.topology(group)) {
        (Some(target), Some(topology)) => {
            let body = serde_json::to_vec(&CommittedTarget {
                assignment: AssignmentView::new(
                    target.members.iter().map(|(id, a)| (id.as_str(), a)),
                    topology,
                ),
                target_assignment_epoch: target.epoch,
                assignor: target.assignor.clone(),
                usage: t.settings().usage_report(&target.usage),
                computed_at_ms: millis(target.computed_at),
            })
            .map_err(|e| ApiError::internal(format!("cannot encode the target: {e}")))?;
            Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
        }
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!(
                "group `{group}` has no target assignment yet; POST /v1/groups/{group}/assign \
                 computes one"
            ),
        )),
    }
}

/// The capture of the group's last failed computation (the SDK's `.capture` format: input,
/// assignor, configuration, limits, error, fuel), for `assignor replay`.
async fn get_capture(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    let c = &t.lock().await.coordinator;
    c.describe(&group)?;
    match c.last_capture(&group) {
        Some(bytes) => Ok((
            [(header::CONTENT_TYPE, "application/octet-stream")],
            bytes.to_vec(),
        )
            .into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "RESOURCE_NOT_FOUND",
            format!(
                "group `{group}` has no failed computation captured: captures are taken when \
                     an assignment fails"
            ),
        )),
    }
}

/// `DELETE /v1/groups/{group}`: the group, its target and its capture, durably; its id (and
/// its place under the tenant's `max.groups`) is free again.
async fn delete_group(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<StatusCode, ApiError> {
    blocking(&t, move |t| {
        t.state().coordinator.delete_group(&group)?;
        tracing::info!(group = %group, "group deleted");
        Ok(StatusCode::NO_CONTENT)
    })
    .await
}

async fn describe(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Json<DescribedGroup>, ApiError> {
    let d = t.lock().await.coordinator.describe(&group)?;
    Ok(Json(describe_json(&d, &t.settings())))
}

fn describe_json(d: &GroupDescription, settings: &Settings) -> DescribedGroup {
    DescribedGroup {
        assignor_name: d.assignor_name.clone(),
        configs: GroupConfigs {
            num_standby_replicas: d.configs.num_standby_replicas,
            rack_aware_assignment_tags: d.configs.rack_aware_assignment_tags.clone(),
        },
        configured_assignor: d.configured_assignor.clone(),
        group_epoch: d.group_epoch,
        group_id: d.group_id.clone(),
        last_failure: d.last_failure.as_ref().map(|f| LastFailure {
            assignor: f.error.assignor.clone(),
            at_ms: millis(f.at),
            consecutive: f.consecutive,
            group_epoch: f.group_epoch,
            kind: f.error.kind.as_str().to_owned(),
            message: f.error.message.clone(),
            retry_at_ms: millis(f.retry_at),
        }),
        members: d.members.clone(),
        target_assignment_epoch: d.target_assignment_epoch,
        target_assignor: d.target_assignor.clone(),
        target_usage: d.target_usage.as_ref().map(|u| settings.usage_report(u)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A handler that panics, mounted behind the service's own layers, answers its request
    /// 500 with the service's error object naming the panic, and the same server (the same
    /// client's connection pool, too) goes on answering other requests.
    #[test]
    fn a_panic_answers_500_and_the_server_carries_on() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let routes = layers(
            Router::new()
                .route(
                    "/panic",
                    get(|| async { panic!("an invariant broke") as Response }),
                )
                .route("/health", get(health)),
        );
        runtime.spawn(async move { axum::serve(listener, routes).await });
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        for _ in 0..2 {
            let mut answer = agent
                .get(format!("{base}/panic"))
                .call()
                .expect("the panicking request is answered");
            assert_eq!(answer.status().as_u16(), 500);
            let body: Value =
                serde_json::from_str(&answer.body_mut().read_to_string().expect("a body"))
                    .expect("JSON");
            assert_eq!(body["error"]["code"], "UNKNOWN_SERVER_ERROR", "{body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("an invariant broke"), "{message}");
            let health = agent
                .get(format!("{base}/health"))
                .call()
                .expect("the server still answers");
            assert_eq!(health.status().as_u16(), 200);
        }
    }
}

//! The admin's routes: tenants and their limits, changed at run time, and the metrics.
//!
//! `PUT /v1/admin/tenants/{tenant}/limits` takes any of `fuel` (units, or `"none"`),
//! `memoryBytes`, `timeoutMs`, `compileTimeoutMs`, `maxAssignors`, `maxComponentBytes`,
//! `maxConcurrentAssignments`, `maxInputBytes`, `maxGroups`, `maxCaptures` and
//! `maxCaptureBytes`; the fields sent replace the current values, the others stay. Lowered
//! capture limits drop the oldest captures at once; a lowered group limit keeps the groups
//! there are, but no more are created.
//! The change is all or nothing: every upload of the tenant is reloaded under the new limits
//! first, and if one no longer loads (say its `configure` needs more memory than the new
//! limit) the change is refused with `POLICY_VIOLATION` naming it. Accepted changes are
//! stored and survive restarts, on top of the config file's values, until
//! `DELETE /v1/admin/tenants/{tenant}/limits` goes back to the file's. Calls already running
//! finish under the limits they started with; later ones get the new limits at once.
//! With replicas on one store, a change (or reset) made from limits another replica has
//! changed since this one last saw them is refused with `COORDINATOR_NOT_AVAILABLE` (503,
//! retriable, nothing changed), and this replica takes the stored limits first, so the retry
//! applies the fields sent on top of them.
//!
//! `GET /metrics` needs the admin token too: its labels name every tenant and upload, which a
//! tenant must not learn about another.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::api::{AppState, blocking, read_small_body};
use super::auth::{Caller, authenticate};
use super::error::ApiError;
use super::metrics;
use super::tenant::{Settings, Tenant};
use assignor_protocol::{LimitOverrides, TenantList, TenantReport};

/// The admin; any other caller is rejected with 401.
pub(crate) struct AdminCaller;

impl FromRequestParts<AppState> for AdminCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        match authenticate(&parts.headers, &s.tenant_hashes, s.admin_hash.as_ref()) {
            Some(Caller::Admin) => {
                tracing::Span::current().record("tenant", "(admin)");
                Ok(Self)
            }
            _ => Err(ApiError::unauthorized()),
        }
    }
}

fn tenant_report(name: &str, settings: &Settings) -> TenantReport {
    TenantReport {
        limits: (&settings.limits).into(),
        name: name.to_owned(),
        overrides: settings.overrides.clone(),
    }
}

fn find(s: &AppState, tenant: &str) -> Result<Arc<Tenant>, ApiError> {
    s.tenants
        .iter()
        .find(|t| t.name == tenant)
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "RESOURCE_NOT_FOUND",
                format!("no tenant `{tenant}`; GET /v1/admin/tenants lists them"),
            )
        })
}

/// `GET /v1/admin/tenants`: every tenant with its limits in force and the admin's overrides.
pub(crate) async fn tenants(_: AdminCaller, State(s): State<AppState>) -> Json<TenantList> {
    let tenants = s
        .tenants
        .iter()
        .map(|t| tenant_report(&t.name, &t.settings()))
        .collect();
    Json(TenantList { tenants })
}

/// `PUT /v1/admin/tenants/{tenant}/limits`: the fields sent, on top of earlier overrides.
pub(crate) async fn put_limits(
    _: AdminCaller,
    State(s): State<AppState>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<TenantReport>, ApiError> {
    let body = read_small_body(&headers, body, "the limits").await?;
    let change: LimitOverrides = super::api::parse_json(&body)?;
    let t = find(&s, &tenant)?;
    let settings = blocking(&t, move |t| {
        t.set_limits(t.settings().overrides.then(&change))
    })
    .await?;
    tracing::info!(target_tenant = %tenant, overrides = ?settings.overrides, "tenant limits changed");
    Ok(Json(tenant_report(&tenant, &settings)))
}

/// `DELETE /v1/admin/tenants/{tenant}/limits`: back to the config file's limits.
pub(crate) async fn delete_limits(
    _: AdminCaller,
    State(s): State<AppState>,
    Path(tenant): Path<String>,
) -> Result<Json<TenantReport>, ApiError> {
    let t = find(&s, &tenant)?;
    let settings = blocking(&t, |t| t.set_limits(LimitOverrides::default())).await?;
    tracing::info!(target_tenant = %tenant, "tenant limits reset to the configured ones");
    Ok(Json(tenant_report(&tenant, &settings)))
}

/// `GET /metrics`: the Prometheus metrics.
pub(crate) async fn metrics(_: AdminCaller, State(s): State<AppState>) -> Response {
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static(metrics::CONTENT_TYPE),
        )],
        s.metrics.encode(),
    )
        .into_response()
}

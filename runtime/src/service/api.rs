//! The HTTP API: routes, authentication, and handlers that hand every blocking step to
//! `spawn_blocking`.
//!
//! | method and path | does |
//! |---|---|
//! | `GET /health` | liveness, no token |
//! | `GET /v1/assignors` | the built-ins/broker-configured assignors and the tenant's uploads |
//! | `PUT /v1/assignors/{name}` | upload (or atomically replace) a component after every check |
//! | `DELETE /v1/assignors/{name}` | delete an upload no group selects |
//! | `PUT /v1/groups/{group}/config` | `{"set": {k: v}, "delete": [k]}`, all or nothing |
//! | `PUT /v1/groups/{group}` | the whole group in the input JSON: topology set, members upserted, absent members removed, `configs` applied if present |
//! | `POST /v1/groups/{group}/assign` | the trigger: computes the target if behind, answers it with usage |
//! | `GET /v1/groups/{group}/assignment` | the committed target |
//! | `GET /v1/groups/{group}` | describe |
//! | `GET /v1/admin/tenants` | admin token only: tenants and their limits |

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::OwnedSemaphorePermit;

use crate::assignor::Assignor;
use crate::coordinator::{
    ConfigOp, GroupDescription, NUM_STANDBY_REPLICAS, RACK_AWARE_ASSIGNMENT_TAGS, TargetAssignment,
};
use crate::json::{AssignmentDoc, MemberAssignmentDoc, parse_input};
use assignor_sdk::{TaskSet, Topology};

use super::Service;
use super::auth::{Caller, authenticate};
use super::error::ApiError;
use super::tenant::Tenant;

type AppState = Arc<Service>;

pub(crate) fn router(service: AppState) -> Router {
    let limit = service.max_body_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/v1/assignors", get(list_assignors))
        .route(
            "/v1/assignors/{name}",
            put(put_assignor).delete(delete_assignor),
        )
        .route("/v1/groups/{group}", put(put_group).get(describe))
        .route("/v1/groups/{group}/config", put(put_group_config))
        .route("/v1/groups/{group}/assign", post(assign))
        .route("/v1/groups/{group}/assignment", get(get_assignment))
        .route("/v1/admin/tenants", get(admin_tenants))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(log_request))
        .with_state(service)
}

/// One line per request: method, matched route (never a header, so never a token), status,
/// duration.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| request.uri().path().to_owned());
    let start = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        method = %method,
        route = %route,
        status = response.status().as_u16(),
        duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

/// The calling tenant; any other caller is rejected with 401.
struct TenantCaller(Arc<Tenant>);

impl FromRequestParts<AppState> for TenantCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        match authenticate(&parts.headers, &s.tenant_hashes, s.admin_hash.as_ref()) {
            Some(Caller::Tenant(i)) => Ok(Self(s.tenants[i].clone())),
            _ => Err(ApiError::unauthorized()),
        }
    }
}

/// Runs `f` on the blocking pool: coordinator changes fsync, loads compile.
async fn blocking<R: Send + 'static>(
    tenant: &Arc<Tenant>,
    f: impl FnOnce(&Tenant) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let tenant = tenant.clone();
    tokio::task::spawn_blocking(move || f(&tenant))
        .await
        .map_err(|e| ApiError::internal(format!("the request's worker failed: {e}")))?
}

/// One of the tenant's assignment slots, waiting at most the tenant's deadline (a running
/// call ends by then): past it, 429.
async fn permit(tenant: &Tenant) -> Result<OwnedSemaphorePermit, ApiError> {
    let wait = tenant.limits.timeout;
    match tokio::time::timeout(wait, tenant.permits.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "THROTTLING_QUOTA_EXCEEDED",
            format!(
                "all {} of this tenant's concurrent assignment slots stayed busy for {} ms; \
                 retry later",
                tenant.limits.max_concurrent_assignments,
                wait.as_millis()
            ),
        )
        .with(
            "retryAfterMs",
            u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        )),
    }
}

/// Milliseconds since the Unix epoch, for JSON.
pub(crate) fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid request body at {}: {}",
            e.path(),
            e.inner()
        ))
    })
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

async fn list_assignors(TenantCaller(t): TenantCaller) -> Result<Json<Value>, ApiError> {
    blocking(&t, |t| {
        let state = t.state();
        let registry = state.coordinator.registry();
        let default = registry.default_assignor().name().to_owned();
        let assignors: Vec<Value> = registry
            .names()
            .map(|name| {
                let upload = state.uploads.get(name);
                let mut entry = json!({
                    "name": name,
                    "kind": match registry.get(name) {
                        Some(Assignor::Component(_)) => "component",
                        _ => "built-in",
                    },
                    "uploaded": upload.is_some(),
                    "default": name == default,
                });
                if let Some(u) = upload {
                    entry["sha256"] = u.sha256.clone().into();
                    entry["bytes"] = u.bytes.into();
                }
                entry
            })
            .collect();
        Ok(Json(json!({ "assignors": assignors })))
    })
    .await
}

async fn put_assignor(
    TenantCaller(t): TenantCaller,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let permit = permit(&t).await?;
    let tenant = t.name.clone();
    let assignor = name.clone();
    let result = blocking(&t, move |t| {
        let _permit = permit;
        let checked = t.check_upload(&name, &body)?;
        let mut report = checked.report.clone();
        let replaced = t.commit_upload(&name, &body, checked)?;
        report["replaced"] = replaced.into();
        Ok((replaced, report))
    })
    .await;
    match result {
        Ok((replaced, report)) => {
            tracing::info!(tenant = %tenant, assignor = %assignor, replaced, "assignor uploaded");
            let status = if replaced {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok((status, Json(report)).into_response())
        }
        Err(e) => {
            tracing::warn!(
                tenant = %tenant,
                assignor = %assignor,
                code = e.code,
                message = %e.message,
                "assignor upload rejected"
            );
            Err(e)
        }
    }
}

async fn delete_assignor(
    TenantCaller(t): TenantCaller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let tenant = t.name.clone();
    let assignor = name.clone();
    blocking(&t, move |t| t.delete_upload(&name)).await?;
    tracing::info!(tenant = %tenant, assignor = %assignor, "assignor deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// An `IncrementalAlterConfigs`-like request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigChange {
    #[serde(default)]
    set: BTreeMap<String, Value>,
    #[serde(default)]
    delete: Vec<String>,
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

async fn put_group_config(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let change: ConfigChange = parse_json(&body)?;
    let mut ops: Vec<(String, ConfigOp)> = Vec::new();
    for (k, v) in &change.set {
        ops.push((k.clone(), ConfigOp::Set(config_text(k, v)?)));
    }
    ops.extend(change.delete.iter().map(|k| (k.clone(), ConfigOp::Delete)));
    let tenant = t.name.clone();
    blocking(&t, move |t| {
        let ops: Vec<(&str, ConfigOp)> = ops.iter().map(|(k, o)| (k.as_str(), o.clone())).collect();
        let mut state = t.state();
        let config = state.coordinator.alter_config(&group, &ops)?;
        tracing::info!(tenant = %tenant, group = %group, assignor = ?config.assignor_name, "group config altered");
        Ok(Json(json!({
            "groupId": group,
            "config": {
                crate::coordinator::ASSIGNOR_NAME: config.assignor_name,
                NUM_STANDBY_REPLICAS: config.num_standby_replicas,
                RACK_AWARE_ASSIGNMENT_TAGS: config.rack_aware_assignment_tags.map(|t| t.join(",")),
            }
        })))
    })
    .await
}

async fn put_group(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::bad_request("the group document is not UTF-8"))?;
    let (spec, topology) =
        parse_input(text).map_err(|e| ApiError::bad_request(e.to_string()).with("path", e.path))?;
    // The document's `configs` become the group's overrides only when it has them: parsing
    // fills absent configs with defaults, which must not erase settings made through /config.
    let has_configs = serde_json::from_str::<Value>(text)
        .ok()
        .is_some_and(|v| v.get("configs").is_some());
    let tenant = t.name.clone();
    blocking(&t, move |t| {
        let mut state = t.state();
        let c = &mut state.coordinator;
        if has_configs {
            let tags = spec.configs.rack_aware_assignment_tags.join(",");
            c.alter_config(
                &group,
                &[
                    (
                        NUM_STANDBY_REPLICAS,
                        ConfigOp::Set(spec.configs.num_standby_replicas.to_string()),
                    ),
                    (RACK_AWARE_ASSIGNMENT_TAGS, ConfigOp::Set(tags)),
                ],
            )?;
        }
        c.set_topology(&group, topology)?;
        let current: Vec<String> = c
            .describe(&group)
            .map(|d| d.members)
            .unwrap_or_default();
        for id in current {
            if !spec.members.iter().any(|m| m.member_id == id) {
                c.remove_member(&group, &id)?;
            }
        }
        for m in spec.members {
            c.upsert_member(&group, m)?;
        }
        let d = c.describe(&group)?;
        tracing::info!(tenant = %tenant, group = %group, epoch = d.group_epoch, members = d.members.len(), "group updated");
        Ok(Json(describe_json(&d, t)))
    })
    .await
}

async fn assign(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let g = group.clone();
    let job = blocking(&t, move |t| {
        let state = t.state();
        let c = &state.coordinator;
        if c.topology(&g).is_none() {
            c.describe(&g)?;
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "GROUP_NOT_READY",
                format!("group `{g}` has no topology yet; PUT /v1/groups/{g} with the group document first"),
            ));
        }
        Ok(c.plan(&g)?)
    })
    .await?;
    if let Some(job) = job {
        let permit = permit(&t).await?;
        let tenant = t.name.clone();
        let assignor = job.assignor_name().to_owned();
        let start = Instant::now();
        // The call itself runs without the tenant's lock: describe, configs and other
        // groups' assignments go on meanwhile.
        let done = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            job.run()
        })
        .await
        .map_err(|e| ApiError::internal(format!("the assignment's worker failed: {e}")))?;
        let result = blocking(&t, move |t| Ok(t.state().coordinator.commit(done)?)).await;
        tracing::info!(
            tenant = %tenant,
            group = %group,
            assignor = %assignor,
            ok = result.is_ok(),
            duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
            "assignment"
        );
        result?;
    }
    get_target(&t, group).await
}

async fn get_assignment(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Json<Value>, ApiError> {
    get_target(&t, group).await
}

async fn get_target(t: &Arc<Tenant>, group: String) -> Result<Json<Value>, ApiError> {
    blocking(t, move |t| {
        let state = t.state();
        let c = &state.coordinator;
        c.describe(&group)?;
        match (c.target(&group), c.topology(&group)) {
            (Some(target), Some(topology)) => Ok(Json(target_json(target, topology, t))),
            _ => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "RESOURCE_NOT_FOUND",
                format!("group `{group}` has no target assignment yet; POST /v1/groups/{group}/assign computes one"),
            )),
        }
    })
    .await
}

async fn describe(
    TenantCaller(t): TenantCaller,
    Path(group): Path<String>,
) -> Result<Json<Value>, ApiError> {
    blocking(&t, move |t| {
        let d = t.state().coordinator.describe(&group)?;
        Ok(Json(describe_json(&d, t)))
    })
    .await
}

async fn admin_tenants(
    State(s): State<AppState>,
    parts: axum::http::HeaderMap,
) -> Result<Json<Value>, ApiError> {
    if authenticate(&parts, &s.tenant_hashes, s.admin_hash.as_ref()) != Some(Caller::Admin) {
        return Err(ApiError::unauthorized());
    }
    let tenants: Vec<Value> = s
        .tenants
        .iter()
        .map(|t| {
            let l = &t.limits;
            json!({
                "name": t.name,
                "limits": {
                    "fuel": l.fuel,
                    "memoryBytes": l.memory_bytes,
                    "timeoutMs": u64::try_from(l.timeout.as_millis()).unwrap_or(u64::MAX),
                    "maxAssignors": l.max_assignors,
                    "maxComponentBytes": l.max_component_bytes,
                    "maxConcurrentAssignments": l.max_concurrent_assignments,
                },
            })
        })
        .collect();
    Ok(Json(json!({ "tenants": tenants })))
}

/// The committed target: the contract's output JSON under `assignment`, with its epoch,
/// assignor and usage.
fn target_json(target: &TargetAssignment, topology: &Topology, t: &Tenant) -> Value {
    let map = |tasks: &TaskSet| {
        let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for &task in tasks {
            let id = topology.subtopology_id(task).unwrap_or("?").to_owned();
            out.entry(id).or_default().push(task.partition);
        }
        out
    };
    let doc = AssignmentDoc {
        members: target
            .members
            .iter()
            .map(|(id, a)| {
                (
                    id.clone(),
                    MemberAssignmentDoc {
                        active_tasks: map(&a.active_tasks),
                        standby_tasks: map(&a.standby_tasks),
                    },
                )
            })
            .collect(),
    };
    json!({
        "assignment": doc,
        "targetAssignmentEpoch": target.epoch,
        "assignor": target.assignor,
        "usage": t.usage_json(&target.usage),
        "computedAtMs": millis(target.computed_at),
    })
}

fn describe_json(d: &GroupDescription, t: &Tenant) -> Value {
    json!({
        "groupId": d.group_id,
        "groupEpoch": d.group_epoch,
        "targetAssignmentEpoch": d.target_assignment_epoch,
        "assignorName": d.assignor_name,
        "configuredAssignor": d.configured_assignor,
        "configs": {
            "numStandbyReplicas": d.configs.num_standby_replicas,
            "rackAwareAssignmentTags": d.configs.rack_aware_assignment_tags,
        },
        "members": d.members,
        "targetAssignor": d.target_assignor,
        "targetUsage": d.target_usage.as_ref().map(|u| t.usage_json(u)),
        "lastFailure": d.last_failure.as_ref().map(|f| json!({
            "assignor": f.error.assignor,
            "kind": f.error.kind.as_str(),
            "message": f.error.message,
            "atMs": millis(f.at),
            "groupEpoch": f.group_epoch,
            "consecutive": f.consecutive,
            "retryAtMs": millis(f.retry_at),
        })),
    })
}

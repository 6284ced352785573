//! The admin changes tenants' limits at run time: each limit takes effect on the next call,
//! a change that an upload cannot live with is refused whole, changes survive restarts, and
//! uploads must load within the compile time limit.

use assignor_tests::guests;
use serde_json::{Value, json};

use crate::service::{
    Client, GROUP_DOC, Server, TOKEN_A, TOKEN_ADMIN, config, error_code, group_doc,
};

/// Tenant `a`'s entry in the admin's tenant list.
fn tenant_a(admin: &Client) -> Value {
    let (status, body) = admin.get("/v1/admin/tenants");
    assert_eq!(status, 200, "{body}");
    body["tenants"][0].clone()
}

fn set_limits(admin: &Client, limits: Value) -> (u16, Value) {
    admin.put("/v1/admin/tenants/a/limits", limits.to_string().as_bytes())
}

/// Reruns `group`'s assignment now: a config change clears a failure's retry backoff.
fn reassign(a: &Client, group: &str, standbys: u32) -> (u16, Value) {
    let (status, body) = a.set_config(
        group,
        json!({"streams.num.standby.replicas": standbys}),
        &[],
    );
    assert_eq!(status, 200, "{body}");
    a.post(&format!("/v1/groups/{group}/assign"))
}

/// Fuel, wall time, memory, max assignors and max component size each change at run time and
/// bind the tenant's next call or upload; a change under which an upload no longer loads is
/// refused naming it, with nothing changed; only the admin may change limits.
#[test]
fn admin_changes_limits_at_run_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let (a, admin) = (server.client(TOKEN_A), server.client(TOKEN_ADMIN));
    assert_eq!(tenant_a(&admin)["overrides"], json!({}));
    let (status, report) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 201, "{report}");
    let trial_fuel = report["trial"]["fuel"].as_u64().expect("trial fuel");
    assert_eq!(
        a.put("/v1/groups/big", group_doc(40, 1024).as_bytes()).0,
        200
    );
    a.set_config("big", json!({"streams.assignor.name": "hashmap-user"}), &[]);

    // Fuel: enough to load and to run the 3-member trial, not a 40-member group.
    let (status, body) = set_limits(&admin, json!({"fuel": trial_fuel}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limits"]["fuel"], trial_fuel);
    let (status, body) = a.post("/v1/groups/big/assign");
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (500, Some("out-of-fuel")),
        "{body}"
    );
    // Wall time: no fuel limit, a deadline of 100 ms, and an assignor that spins.
    assert_eq!(
        a.upload("loops-on-large-groups", guests::LOOPS_ON_LARGE_GROUPS)
            .0,
        201
    );
    a.set_config(
        "big",
        json!({"streams.assignor.name": "loops-on-large-groups"}),
        &[],
    );
    let (status, body) = set_limits(&admin, json!({"fuel": "none", "timeoutMs": 100}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limits"]["fuel"], Value::Null, "{body}");
    assert_eq!(body["overrides"], json!({"fuel": "none", "timeoutMs": 100}));
    let (status, body) = reassign(&a, "big", 1);
    assert_eq!(
        (status, body["error"]["kind"].as_str()),
        (500, Some("timeout")),
        "{body}"
    );

    // Memory: too little for the uploads to instantiate; refused whole.
    let before = tenant_a(&admin);
    let (status, body) = set_limits(&admin, json!({"memoryBytes": 65536, "maxAssignors": 1}));
    assert_eq!(
        (status, error_code(&body)),
        (409, "POLICY_VIOLATION"),
        "{body}"
    );
    assert_eq!(body["error"]["assignor"], "hashmap-user", "{body}");
    assert_eq!(tenant_a(&admin), before, "nothing changed");

    // Max assignors and max component size bind the next upload.
    assert_eq!(
        set_limits(&admin, json!({"timeoutMs": 5000, "maxAssignors": 2})).0,
        200
    );
    let (status, body) = a.upload("chatty", guests::CHATTY);
    assert_eq!(
        (status, error_code(&body)),
        (409, "POLICY_VIOLATION"),
        "{body}"
    );
    assert_eq!(
        set_limits(&admin, json!({"maxComponentBytes": 1000})).0,
        200
    );
    let (status, body) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(
        (status, body["error"]["check"].as_str()),
        (413, Some("size")),
        "{body}"
    );

    // Back to the file's limits: the 40-member group assigns again.
    let (status, body) = admin.delete("/v1/admin/tenants/a/limits");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["overrides"], json!({}));
    assert_eq!(body["limits"]["fuel"], assignor_runtime::DEFAULT_FUEL);
    a.set_config("big", json!({"streams.assignor.name": "hashmap-user"}), &[]);
    let (status, body) = reassign(&a, "big", 0);
    assert_eq!(status, 200, "{body}");

    // Only the admin, only real tenants, only valid values.
    assert_eq!(set_limits(&a, json!({"fuel": 1})).0, 401);
    let (status, body) = admin.put("/v1/admin/tenants/nobody/limits", b"{}");
    assert_eq!((status, error_code(&body)), (404, "RESOURCE_NOT_FOUND"));
    for bad in [
        json!({"timeoutMs": 0}),
        json!({"fuel": "lots"}),
        json!({"cpus": 2}),
    ] {
        let (status, body) = set_limits(&admin, bad.clone());
        assert_eq!(
            (status, error_code(&body)),
            (400, "INVALID_REQUEST"),
            "{bad}: {body}"
        );
    }
}

/// The admin's changes are stored: a restart applies them on top of the file's limits.
#[test]
fn limit_changes_survive_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let changed = {
        let server = Server::start(&config(dir.path()));
        let admin = server.client(TOKEN_ADMIN);
        let (status, body) = set_limits(
            &admin,
            json!({"fuel": 123456789, "maxConcurrentAssignments": 3}),
        );
        assert_eq!(status, 200, "{body}");
        tenant_a(&admin)
    };
    assert_eq!(changed["limits"]["maxConcurrentAssignments"], 3);
    let server = Server::start(&config(dir.path()));
    assert_eq!(tenant_a(&server.client(TOKEN_ADMIN)), changed);
}

/// An upload that does not validate, compile and load within the tenant's compile time limit
/// is rejected (check `load`) and changes nothing; with time enough it is accepted.
#[test]
fn uploads_must_compile_within_the_time_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let (a, admin) = (server.client(TOKEN_A), server.client(TOKEN_ADMIN));
    assert_eq!(set_limits(&admin, json!({"compileTimeoutMs": 1})).0, 200);
    let (status, body) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["check"], "load", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("compile time limit of 1 ms"), "{message}");
    assert_eq!(a.assignor_names(), ["sticky", "balanced"]);
    assert_eq!(a.put("/v1/groups/g", GROUP_DOC.as_bytes()).0, 200);
    let (status, body) = a.set_config("g", json!({"streams.assignor.name": "hashmap-user"}), &[]);
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_CONFIG"),
        "not selectable"
    );

    assert_eq!(
        set_limits(&admin, json!({"compileTimeoutMs": 60000})).0,
        200
    );
    let (status, body) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 201, "{body}");
}

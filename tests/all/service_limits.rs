//! Tenants' limits: the admin changes them at run time (each takes effect on the next call, a
//! change that an upload cannot live with is refused whole, changes survive restarts);
//! uploads must load within the compile time limit; request bodies are bounded before they
//! are read; groups over the input limits are refused with nothing stored; and what a tenant
//! keeps (groups, captures) stays bounded under a thousand hostile calls.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use assignor_service::config::ServiceConfig;
use assignor_tests::guests;
use serde_json::{Value, json};

use crate::service::{
    Client, GROUP_DOC, Server, TOKEN_A, TOKEN_ADMIN, TOKEN_B, config, config_keys, error_code,
    group_doc,
};

/// [`config`] with `extra` keys after its own (later keys win).
fn config_with(data_dir: &Path, extra: &[&str]) -> ServiceConfig {
    let mut keys = config_keys(data_dir);
    keys.extend(extra.iter().map(|k| (*k).to_owned()));
    ServiceConfig::load(None, &keys).expect("valid service config")
}

/// Bytes of every file under `dir`, recursively.
pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("a readable directory")
        .map(|e| {
            let e = e.expect("an entry");
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                dir_bytes(&e.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

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
    assert_eq!(body["limits"]["fuel"], assignor_sandbox::DEFAULT_FUEL);
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

/// A group document over the tenant's `max.input.bytes` is answered 413 naming the limit and
/// its key, whether its size is declared (refused unread, also to a client waiting for
/// `100 Continue`) or not (cut off once past the limit); any other body has the service's
/// 1 MiB limit; nothing is stored, and the tenant's next document within the limit is taken.
#[test]
fn request_bodies_are_bounded_before_they_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config_with(
        dir.path(),
        &["service.tenant.a.max.input.bytes=10000"],
    ));
    let a = server.client(TOKEN_A);
    let big = group_doc(400, 8);
    assert!(big.len() > 10_000);
    for (how, (status, body)) in [
        ("declared", a.put("/v1/groups/big", big.as_bytes())),
        (
            "declared, waiting for 100 Continue",
            a.put_expecting_continue("/v1/groups/big", big.as_bytes()),
        ),
        ("chunked", a.put_chunked("/v1/groups/big", big.as_bytes())),
    ] {
        assert_eq!(
            (status, error_code(&body)),
            (413, "MESSAGE_TOO_LARGE"),
            "{how}: {body}"
        );
        let e = &body["error"];
        assert_eq!(e["limit"], 10_000, "{how}: {body}");
        assert_eq!(
            e["limitName"], "service.tenant.a.max.input.bytes",
            "{how}: {body}"
        );
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("over the limit of 10000 bytes"),
            "{how}: {message}"
        );
    }
    let (_, body) = a.put("/v1/groups/big", big.as_bytes());
    assert_eq!(
        body["error"]["bytes"],
        big.len(),
        "a declared size is named"
    );
    assert_eq!(a.get("/v1/groups/big").0, 404, "nothing stored");

    let huge_config = json!({"set": {"streams.rack.aware.assignment.tags": "t".repeat(2 << 20)}});
    let (status, body) =
        a.put_expecting_continue("/v1/groups/big/config", huge_config.to_string().as_bytes());
    assert_eq!(
        (status, error_code(&body)),
        (413, "MESSAGE_TOO_LARGE"),
        "{body}"
    );
    assert_eq!(body["error"]["limit"], 1 << 20, "{body}");
    assert_eq!(a.get("/v1/groups/big").0, 404, "nothing stored");

    let (status, body) = a.put("/v1/groups/small", group_doc(40, 8).as_bytes());
    assert_eq!(status, 200, "{body}");
}

/// A group over an input limit (partitions, members, id length) is refused 400 naming the
/// field, its value and the limit, and nothing is stored; the service, and the other
/// tenant's groups, carry on.
#[test]
fn groups_over_input_limits_are_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config_with(
        dir.path(),
        &["group.streams.assignor.max.members=5"],
    ));
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    assert_eq!(b.put("/v1/groups/g", group_doc(3, 8).as_bytes()).0, 200);

    // 100 subtopologies of 4294967295 partitions: once enough to abort the host.
    let subtopologies: Vec<Value> = (0..100)
        .map(|i| {
            json!({"id": format!("s{i}"), "maxNumInputPartitions": u32::MAX, "isStateful": true})
        })
        .collect();
    let huge = json!({"topology": {"subtopologies": subtopologies}, "members": []});
    let start = Instant::now();
    let (status, body) = a.put("/v1/groups/huge", huge.to_string().as_bytes());
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_REQUEST"),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("maxNumInputPartitions is 4294967295")
            && message.contains("max.partitions"),
        "{message}"
    );
    assert!(start.elapsed().as_secs() < 5, "refused before any work");
    assert_eq!(a.get("/v1/groups/huge").0, 404, "nothing stored");

    let (status, body) = a.put("/v1/groups/crowd", group_doc(6, 8).as_bytes());
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("members is 6, over the limit of 5"),
        "{message}"
    );
    assert_eq!(a.get("/v1/groups/crowd").0, 404, "nothing stored");

    // The group id is the coordinator's to check: refused with the limit's fields, not echoed.
    let long = "x".repeat(2000);
    let (status, body) = a.put(&format!("/v1/groups/{long}"), GROUP_DOC.as_bytes());
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_REQUEST"),
        "{body}"
    );
    let e = &body["error"];
    assert_eq!(
        (
            &e["field"],
            &e["value"],
            &e["limit"],
            &e["limitName"],
            &e["kind"]
        ),
        (
            &json!("groupId (bytes)"),
            &json!(2000),
            &json!(1024),
            &json!("max.id.bytes"),
            &json!("input-limit")
        ),
        "{body}"
    );
    assert!(body.to_string().len() < 1200, "the id is cut: {body}");
    assert_eq!(a.get(&format!("/v1/groups/{long}")).0, 404);

    assert_eq!(a.get("/health").0, 200);
    let (status, body) = b.post("/v1/groups/g/assign");
    assert_eq!(status, 200, "the other tenant's groups work: {body}");
}

/// A tenant keeps at most `max.captures` captures (the oldest dropped first, at once when an
/// admin lowers the limit) and `max.groups` groups (one more is 409 `POLICY_VIOLATION`,
/// nothing stored, until a group is deleted).
#[test]
fn captures_and_groups_are_bounded_per_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A failing assignor cannot be uploaded (its trial fails): the broker lists it.
    let assignors = format!("group.streams.assignors=sticky,{}", guests::GUEST_ERROR);
    let keys = [
        assignors.as_str(),
        "service.tenant.a.max.groups=3",
        "service.tenant.a.max.captures=2",
    ];
    let server = Server::start(&config_with(dir.path(), &keys));
    let (a, admin) = (server.client(TOKEN_A), server.client(TOKEN_ADMIN));
    for g in ["g1", "g2", "g3"] {
        assert_eq!(
            a.put(&format!("/v1/groups/{g}"), group_doc(3, 4).as_bytes())
                .0,
            200
        );
        a.set_config(g, json!({"streams.assignor.name": "guest-error"}), &[]);
        let (status, body) = a.post(&format!("/v1/groups/{g}/assign"));
        assert_eq!(
            (status, body["error"]["kind"].as_str()),
            (500, Some("guest-error"))
        );
    }
    let captured = |a: &Client| -> Vec<u16> {
        ["g1", "g2", "g3"]
            .iter()
            .map(|g| a.status(&format!("/v1/groups/{g}/capture")))
            .collect()
    };
    assert_eq!(captured(&a), [404, 200, 200], "the oldest capture dropped");

    let (status, body) = a.put("/v1/groups/g4", group_doc(3, 4).as_bytes());
    assert_eq!(
        (status, error_code(&body)),
        (409, "POLICY_VIOLATION"),
        "{body}"
    );
    assert_eq!(body["error"]["limit"], 3, "{body}");
    assert_eq!(a.get("/v1/groups/g4").0, 404, "nothing stored");
    assert_eq!(a.delete("/v1/groups/g1").0, 204);
    assert_eq!(a.get("/v1/groups/g1").0, 404);
    assert_eq!(a.delete("/v1/groups/g1").0, 404);
    assert_eq!(a.put("/v1/groups/g4", group_doc(3, 4).as_bytes()).0, 200);

    let (status, body) = admin.put(
        "/v1/admin/tenants/a/limits",
        json!({"maxCaptures": 1}).to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limits"]["maxCaptures"], 1, "{body}");
    assert_eq!(captured(&a), [404, 404, 200], "lowered at once");
    // And after a restart, from the store.
    drop(server);
    let server = Server::start(&config_with(dir.path(), &keys));
    assert_eq!(captured(&server.client(TOKEN_A)), [404, 404, 200]);
}

/// 1,000 hostile calls (guest errors, traps, invalid outputs and runs out of fuel, four at a
/// time, in two tenants, over 16 groups) all end as typed failures, and the data directory
/// stays under 64 MiB throughout (the log compacts itself from 4 MiB on; each tenant keeps at
/// most 4 captures): it was 1.6 GB after 400 such calls when captures and failure records
/// were unbounded.
#[test]
fn hostile_calls_keep_the_data_directory_flat() {
    const CALLS: usize = 1000;
    const THREADS: usize = 4;
    const GUESTS: [(&str, &str); 4] = [
        ("guest-error", guests::GUEST_ERROR),
        ("panics", guests::PANICS),
        ("invalid-output", guests::INVALID_OUTPUT),
        ("endless-loop", guests::ENDLESS_LOOP),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    // Failing assignors cannot be uploaded (their trials fail): the broker lists them.
    let paths: Vec<&str> = GUESTS.iter().map(|(_, path)| *path).collect();
    let mut keys = vec![format!(
        "group.streams.assignors=sticky,{}",
        paths.join(",")
    )];
    for t in ["a", "b"] {
        keys.push(format!("service.tenant.{t}.max.captures=4"));
        keys.push(format!("service.tenant.{t}.fuel=2000000"));
        keys.push(format!("service.tenant.{t}.max.concurrent.assignments=2"));
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let server = Server::start(&config_with(dir.path(), &keys));
    for token in [TOKEN_A, TOKEN_B] {
        let c = server.client(token);
        for g in 0..8 {
            let (status, body) = c.put(&format!("/v1/groups/g{g}"), group_doc(50, 64).as_bytes());
            assert_eq!(status, 200, "{body}");
        }
    }
    let start = Instant::now();
    let (largest, kinds) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|w| {
                let (server, data) = (&server, dir.path());
                scope.spawn(move || {
                    let c = server.client(if w % 2 == 0 { TOKEN_A } else { TOKEN_B });
                    let mut largest = 0;
                    let mut kinds = BTreeSet::new();
                    for n in 0..CALLS / THREADS {
                        // Each worker has four groups of its own, in turn; `visit` counts its
                        // calls of one group.
                        let group = format!("g{}", (w / 2 + 2 * n) % 8);
                        let visit = n / 4;
                        let (name, _) = GUESTS[(n + visit) % GUESTS.len()];
                        // A config change clears the last failure's backoff: the call runs.
                        let (status, body) = c.set_config(
                            &group,
                            json!({"streams.assignor.name": name,
                                   "streams.num.standby.replicas": visit % 2}),
                            &[],
                        );
                        assert_eq!(status, 200, "{body}");
                        let (status, body) = c.post(&format!("/v1/groups/{group}/assign"));
                        assert_eq!(status, 500, "{name} fails: {body}");
                        assert_eq!(body["error"]["backedOff"], false, "it ran: {body}");
                        kinds.insert(body["error"]["kind"].as_str().map(str::to_owned));
                        if n % 50 == 0 {
                            largest = largest.max(dir_bytes(data));
                        }
                    }
                    (largest, kinds)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .fold((0, BTreeSet::new()), |(largest, mut kinds), (l, k)| {
                kinds.extend(k);
                (largest.max(l), kinds)
            })
    });
    let expected: BTreeSet<Option<String>> =
        ["guest-error", "trap", "invalid-output", "out-of-fuel"]
            .into_iter()
            .map(|k| Some(k.to_owned()))
            .collect();
    assert_eq!(kinds, expected, "every kind, typed");
    let end = dir_bytes(dir.path());
    println!(
        "{CALLS} hostile calls in {:.1} s; data directory at most {:.1} MiB, {:.1} MiB at the end",
        start.elapsed().as_secs_f64(),
        largest as f64 / f64::from(1 << 20),
        end as f64 / f64::from(1 << 20)
    );
    assert!(largest.max(end) < 64 << 20, "{largest} / {end} bytes");
    for token in [TOKEN_A, TOKEN_B] {
        let c = server.client(token);
        let kept = (0..8)
            .filter(|g| c.status(&format!("/v1/groups/g{g}/capture")) == 200)
            .count();
        assert_eq!(kept, 4, "max.captures captures kept");
    }
}

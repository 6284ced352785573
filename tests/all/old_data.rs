//! Data directories written by an older runtime (`tests/fixtures/data-dir-70c30f1/`, made by
//! commit 70c30f1, whose group records are postcard version 2) open in this one and keep every
//! tenant's limit overrides, upload, group config, target, failure and capture; the upload
//! still assigns; and what this runtime writes back reads again after another restart.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use assignor_coordinator::store::{RedbStore, Store as _, import};
use assignor_sdk::capture::Capture;
use serde_json::{Value, json};

use crate::service_restart::Process;

/// The fixture: its README says how it was made and what it holds.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/data-dir-70c30f1");
/// SHA-256 of the component tenant `alpha` uploaded (`loops-on-large-groups`).
const UPLOAD_SHA256: &str = "608b36db31958f8f4d65e60dc57184b4d152dd8272679bfaedad3e21a0fb8d1d";
const UPLOAD_BYTES: u64 = 138_422;

/// `assignor serve` (the tests' service runner) on a data directory, with the fixture's
/// configuration.
struct Service(Process);

impl Service {
    fn start(data_dir: &Path) -> Self {
        let properties = std::fs::read_to_string(Path::new(FIXTURE).join("server.properties"))
            .expect("the fixture's configuration");
        let mut keys: Vec<String> = properties
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(str::to_owned)
            .collect();
        keys.push(format!("service.data.dir={}", data_dir.display()));
        Self(Process::start_keys(keys))
    }

    /// A request with `token`: the status and the body (JSON, or `Null` when it is not).
    fn call(&self, token: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, bytes) = self.call_raw(token, method, path, body);
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    fn call_raw(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Vec<u8>) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}{path}", self.0.base);
        let auth = format!("Bearer {token}");
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let response = match method {
            "GET" => agent.get(&url).header("Authorization", &auth).call(),
            "POST" => agent.post(&url).header("Authorization", &auth).send_empty(),
            "PUT" => agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body.as_bytes()),
            other => panic!("no {other} here"),
        };
        let mut response = response.expect("the request reaches the service");
        let mut bytes = Vec::new();
        response
            .body_mut()
            .as_reader()
            .read_to_end(&mut bytes)
            .expect("a body");
        (response.status().as_u16(), bytes)
    }

    fn get(&self, token: &str, path: &str) -> Value {
        let (status, body) = self.call(token, "GET", path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// SIGTERM, then the graceful exit.
    fn stop(self) {
        self.0.stop_gracefully();
    }
}

/// Copies the directory tree `from` into `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("the fixture is there") {
        let entry = entry.expect("readdir");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The fixture's data directory `name`, copied to a fresh temporary directory.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    copy_tree(&Path::new(FIXTURE).join(name), &data);
    (tmp, data)
}

/// Every piece of state the fixture was made with, as this service answers it.
fn assert_fixture_state(s: &Service) {
    let tenants = s.get("admin-token", "/v1/admin/tenants");
    let overrides = |name: &str| {
        tenants["tenants"]
            .as_array()
            .expect("a list")
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("tenant {name} missing: {tenants}"))["overrides"]
            .clone()
    };
    assert_eq!(
        overrides("alpha"),
        json!({"fuel": 50_000_000, "maxCaptures": 4, "maxGroups": 50})
    );
    assert_eq!(
        overrides("beta"),
        json!({"timeoutMs": 2000, "maxGroups": 20})
    );

    let assignors = s.get("alpha-token", "/v1/assignors");
    let upload = assignors["assignors"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|a| a["name"] == "loops-on-large-groups")
        .unwrap_or_else(|| panic!("the upload is gone: {assignors}"))
        .clone();
    assert_eq!(
        (&upload["sha256"], &upload["bytes"], &upload["uploaded"]),
        (&json!(UPLOAD_SHA256), &json!(UPLOAD_BYTES), &json!(true))
    );
    let beta_assignors = s.get("beta-token", "/v1/assignors").to_string();
    assert!(
        !beta_assignors.contains("loops-on-large-groups"),
        "{beta_assignors}"
    );

    let config = |token: &str, group: &str| s.get(token, &format!("/v1/groups/{group}/config"));
    assert_eq!(
        config("alpha-token", "small")["config"],
        json!({
            "streams.assignor.name": "loops-on-large-groups",
            "streams.num.standby.replicas": 1,
            "streams.rack.aware.assignment.tags": "",
        })
    );
    assert_eq!(
        config("alpha-token", "large")["config"]["streams.assignor.name"],
        "loops-on-large-groups"
    );
    assert_eq!(
        config("beta-token", "orders")["config"],
        json!({
            "streams.assignor.name": "balanced",
            "streams.num.standby.replicas": 1,
            "streams.rack.aware.assignment.tags": "zone",
        })
    );
    assert_eq!(
        config("beta-token", "idle")["config"],
        json!({
            "streams.assignor.name": null,
            "streams.num.standby.replicas": 2,
            "streams.rack.aware.assignment.tags": null,
        })
    );

    let small = s.get("alpha-token", "/v1/groups/small/assignment");
    assert_eq!(
        (&small["targetAssignmentEpoch"], &small["assignor"]),
        (&json!(1), &json!("loops-on-large-groups"))
    );
    assert_eq!(
        small["assignment"]["members"],
        json!({
            "a1": {"activeTasks": {"0": [0, 3]}, "standbyTasks": {}},
            "a2": {"activeTasks": {"0": [1], "1": [0]}, "standbyTasks": {}},
            "a3": {"activeTasks": {"0": [2], "1": [1]}, "standbyTasks": {}},
        })
    );
    assert!(
        small["usage"]["fuel"].as_u64().is_some_and(|f| f > 0),
        "{small}"
    );
    let orders = s.get("beta-token", "/v1/groups/orders/assignment");
    assert_eq!(
        (&orders["targetAssignmentEpoch"], &orders["assignor"]),
        (&json!(1), &json!("balanced"))
    );
    let members = orders["assignment"]["members"]
        .as_object()
        .expect("members");
    assert_eq!(members.keys().collect::<Vec<_>>(), ["c1", "c2", "c3", "c4"]);
    assert_eq!(
        members
            .values()
            .map(|m| m["standbyTasks"]["0"].as_array().map_or(0, Vec::len))
            .sum::<usize>(),
        4,
        "a standby of each stateful task: {orders}"
    );

    let large = s.get("alpha-token", "/v1/groups/large");
    assert_eq!(large["members"], json!(["b1", "b2", "b3", "b4", "b5"]));
    assert_eq!(large["targetAssignmentEpoch"], Value::Null);
    let failure = &large["lastFailure"];
    assert_eq!(
        (
            &failure["kind"],
            &failure["assignor"],
            &failure["consecutive"]
        ),
        (
            &json!("out-of-fuel"),
            &json!("loops-on-large-groups"),
            &json!(1)
        ),
        "{large}"
    );
    let (status, capture) = s.call_raw("alpha-token", "GET", "/v1/groups/large/capture", None);
    assert_eq!(status, 200);
    let capture = Capture::from_bytes(&capture).expect("the capture reads");
    assert_eq!(capture.assignor, "loops-on-large-groups");
    assert_eq!(capture.component_sha256.as_deref(), Some(UPLOAD_SHA256));
    assert_eq!(capture.group.members.len(), 5);
    let captured_failure = capture.failure.expect("a failure's capture");
    assert_eq!(
        (captured_failure.kind.as_str(), captured_failure.fuel),
        ("out-of-fuel", Some(50_000_000))
    );
    let (status, _) = s.call("beta-token", "GET", "/v1/groups/large", None);
    assert_eq!(status, 404, "another tenant's group stays invisible");
}

/// A group of `members` on the fixture's topology.
fn group_doc(members: &[&str]) -> Value {
    json!({
        "topology": {"subtopologies": [
            {"id": "0", "maxNumInputPartitions": 4, "isStateful": true},
            {"id": "1", "maxNumInputPartitions": 2, "isStateful": false},
        ]},
        "members": members
            .iter()
            .map(|m| json!({"memberId": m, "processId": format!("p-{m}")}))
            .collect::<Vec<_>>(),
    })
}

/// The old groups change and assign on this runtime: the upload computes a new target, the
/// built-in too, and the failed group still fails the same way.
fn assign_again(s: &Service) {
    let (status, body) = s.call(
        "alpha-token",
        "PUT",
        "/v1/groups/small",
        Some(&group_doc(&["a1", "a2"])),
    );
    assert_eq!(status, 200, "{body}");
    let (status, target) = s.call("alpha-token", "POST", "/v1/groups/small/assign", None);
    assert_eq!(status, 200, "the upload still assigns: {target}");
    assert_eq!(
        (&target["targetAssignmentEpoch"], &target["assignor"]),
        (&json!(2), &json!("loops-on-large-groups"))
    );
    let members = target["assignment"]["members"]
        .as_object()
        .expect("members");
    assert_eq!(members.keys().collect::<Vec<_>>(), ["a1", "a2"]);

    let (status, body) = s.call(
        "beta-token",
        "PUT",
        "/v1/groups/orders",
        Some(&group_doc(&["c1", "c2", "c3"])),
    );
    assert_eq!(status, 200, "{body}");
    let (status, target) = s.call("beta-token", "POST", "/v1/groups/orders/assign", None);
    assert_eq!(status, 200, "{target}");
    assert_eq!(target["targetAssignmentEpoch"], 2);
}

/// Both fixture directories (the log, and the older one-file-per-key store, both imported into
/// the redb store and kept aside) open with everything in them; after changes on this runtime and a restart, the
/// records it rewrote read back.
#[test]
fn old_data_directories_keep_everything() {
    for fixture in ["log-store", "dir-store"] {
        let (_tmp, data) = copy_of(fixture);
        let s = Service::start(&data);
        assert_fixture_state(&s);
        assign_again(&s);
        s.stop();
        let old = if fixture == "dir-store" {
            "store"
        } else {
            "log"
        };
        assert!(
            data.join(format!("{old}.imported")).is_dir(),
            "{fixture}: the old store is kept aside"
        );
        assert!(!data.join(old).exists(), "{fixture}");

        let s = Service::start(&data);
        let small = s.get("alpha-token", "/v1/groups/small/assignment");
        assert_eq!(small["targetAssignmentEpoch"], 2, "{fixture}: {small}");
        let orders = s.get("beta-token", "/v1/groups/orders");
        assert_eq!(orders["members"], json!(["c1", "c2", "c3"]), "{fixture}");
        let large = s.get("alpha-token", "/v1/groups/large");
        assert_eq!(large["lastFailure"]["kind"], "out-of-fuel", "{fixture}");
        let idle = s.get("beta-token", "/v1/groups/idle/config");
        assert_eq!(
            idle["config"]["streams.num.standby.replicas"], 2,
            "{fixture}"
        );
        s.stop();
    }
}

/// Every record in the redb store of the data directory `data`.
fn stored(data: &Path) -> BTreeMap<String, Vec<u8>> {
    RedbStore::open(data.join("store.redb"))
        .expect("the store opens")
        .load_all()
        .expect("the store reads")
        .into_iter()
        .collect()
}

/// The import copies every record of each fixture, byte for byte, into the redb store, and is
/// idempotent: run again over the old directory (as after a crash before it was renamed aside)
/// it leaves the store as it was, and the service still has everything.
#[test]
fn import_is_whole_and_idempotent() {
    for (fixture, old) in [("log-store", "log"), ("dir-store", "store")] {
        let (_tmp, data) = copy_of(fixture);
        let read = if old == "log" {
            import::read_log
        } else {
            import::read_dir
        };
        let records = read(&data.join(old)).expect("the fixture reads");
        assert_eq!(records.len(), 8, "{fixture}: the README's table");
        let s = Service::start(&data);
        assert_fixture_state(&s);
        s.stop();
        let first = stored(&data);
        for (key, value) in &records {
            assert_eq!(first.get(key), Some(value), "{fixture}: {key}");
        }

        let kept = data.join(format!("{old}.imported"));
        std::fs::rename(&kept, data.join(old)).expect("put the old store back");
        let s = Service::start(&data);
        assert_fixture_state(&s);
        s.stop();
        assert!(kept.is_dir(), "{fixture}: kept aside again");
        assert_eq!(
            stored(&data),
            first,
            "{fixture}: a second import changed the store"
        );
    }
}

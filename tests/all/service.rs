//! `assignor serve` over real HTTP on loopback: uploads with every rejection path, group
//! configs, triggers, describe, tenant isolation, authentication, and restarts; and the
//! server and client the other `service_*` modules share.

use std::path::Path;
use std::thread;

use assignor_service::Service;
use assignor_service::config::ServiceConfig;
use assignor_tests::guests;
use serde_json::{Value, json};

pub(crate) const TOKEN_A: &str = "token-of-tenant-a";
pub(crate) const TOKEN_B: &str = "token-of-tenant-b";
pub(crate) const TOKEN_ADMIN: &str = "token-of-the-admin";
pub(crate) const GROUP_DOC: &str = include_str!("../../runtime/demo/group.json");

pub(crate) fn sha256_hex(token: &str) -> String {
    assignor_service::config::token_sha256(token)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Tenants `a` and `b`, and `tiny` whose component limit every real component exceeds.
pub(crate) fn config(data_dir: &Path) -> ServiceConfig {
    ServiceConfig::load(None, &config_keys(data_dir)).expect("valid service config")
}

/// The keys of [`config`], e.g. for a service in another process.
pub(crate) fn config_keys(data_dir: &Path) -> Vec<String> {
    vec![
        "group.streams.assignors=sticky,balanced".into(),
        // Read by the invalid-output guest's configure: which rule to break.
        "invalid=duplicate-active".into(),
        format!("service.data.dir={}", data_dir.display()),
        "service.tenants=a,b,tiny".into(),
        format!("service.tenant.a.token.sha256={}", sha256_hex(TOKEN_A)),
        format!("service.tenant.b.token.sha256={}", sha256_hex(TOKEN_B)),
        format!("service.tenant.tiny.token.sha256={}", sha256_hex("tiny")),
        "service.tenant.tiny.max.component.bytes=1000".into(),
        format!("service.admin.token.sha256={}", sha256_hex(TOKEN_ADMIN)),
    ]
}

/// A group document of `members` members (one per process, no racks or tags) and one
/// stateful subtopology of `partitions` partitions, without configs.
pub(crate) fn group_doc(members: usize, partitions: u32) -> String {
    let members: Vec<Value> = (0..members)
        .map(|i| json!({"memberId": format!("m{i}"), "processId": format!("p{i}")}))
        .collect();
    json!({
        "topology": {"subtopologies": [
            {"id": "s0", "maxNumInputPartitions": partitions, "isStateful": true}
        ]},
        "members": members,
    })
    .to_string()
}

/// A service on 127.0.0.1:0 in its own runtime thread; stopped gracefully on drop.
pub(crate) struct Server {
    pub(crate) base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(config: &ServiceConfig) -> Self {
        Self::start_with(config, tokio::runtime::Builder::new_multi_thread())
    }

    /// Starts on a runtime from `builder` (two workers), e.g. one whose threads log somewhere.
    pub(crate) fn start_with(config: &ServiceConfig, mut builder: tokio::runtime::Builder) -> Self {
        let service = Service::open(config).expect("the service opens");
        let runtime = builder
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::spawn(move || {
            runtime
                .block_on(service.serve(listener, async {
                    let _ = stopped.await;
                }))
                .expect("serves");
        });
        Self {
            base,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub(crate) fn client(&self, token: &str) -> Client {
        Client::new(&self.base, token)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            t.join().expect("the server thread ends cleanly");
        }
    }
}

/// A tenant's (or anyone's) view of the API: every call answers (status, JSON body).
pub(crate) struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Client {
    fn finish(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> (u16, Value) {
        let mut response = response.expect("the request reaches the server");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().expect("a body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        };
        (status, body)
    }

    /// A client of the service at `base` (`http://host:port`) presenting `token`.
    pub(crate) fn new(base: &str, token: &str) -> Self {
        Self {
            base: base.to_owned(),
            token: token.to_owned(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    /// Like [`Client::put`], but `None` when no answer arrives (the service is gone).
    pub(crate) fn try_put(&self, path: &str, body: &[u8]) -> Option<(u16, Value)> {
        let r = self
            .agent
            .put(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send(body);
        self.try_finish(r)
    }

    /// Like [`Client::post`], but `None` when no answer arrives (the service is gone).
    pub(crate) fn try_post(&self, path: &str) -> Option<(u16, Value)> {
        let r = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send_empty();
        self.try_finish(r)
    }

    fn try_finish(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Option<(u16, Value)> {
        let mut response = response.ok()?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().ok()?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Some((status, body))
    }

    /// A GET answering plain text (e.g. `/metrics`).
    pub(crate) fn get_text(&self, path: &str) -> (u16, String) {
        let mut response = self
            .agent
            .get(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .call()
            .expect("the request reaches the server");
        let text = response.body_mut().read_to_string().expect("a body");
        (response.status().as_u16(), text)
    }

    /// A GET answering bytes, with `headers` sent: (status, the response's headers, body).
    pub(crate) fn get_bytes(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
        let mut request = self
            .agent
            .get(format!("{}{path}", self.base))
            .header("Authorization", self.auth());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut response = request.call().expect("the request reaches the server");
        let body = response.body_mut().read_to_vec().expect("a body");
        (response.status().as_u16(), response.headers().clone(), body)
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }

    pub(crate) fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .agent
            .get(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .call();
        self.finish(r)
    }

    pub(crate) fn delete(&self, path: &str) -> (u16, Value) {
        let r = self
            .agent
            .delete(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .call();
        self.finish(r)
    }

    pub(crate) fn put(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let r = self
            .agent
            .put(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send(body);
        self.finish(r)
    }

    /// A PUT with `Expect: 100-continue`, as the service's own client sends large bodies:
    /// the body goes only if the service asks for it.
    pub(crate) fn put_expecting_continue(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let r = self
            .agent
            .put(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .header("Expect", "100-continue")
            .send(body);
        self.finish(r)
    }

    /// A PUT of `length` bytes read from `body`, declared in `Content-Length` and sent only
    /// if the service asks for it (`Expect: 100-continue`): how a test offers a body too large
    /// to hold in memory, e.g. a sparse 1 GiB file.
    pub(crate) fn put_sized(
        &self,
        path: &str,
        length: u64,
        mut body: impl std::io::Read,
    ) -> (u16, Value) {
        let r = self
            .agent
            .put(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .header("Expect", "100-continue")
            .header("Content-Length", length)
            .send(ureq::SendBody::from_reader(&mut body));
        self.finish(r)
    }

    /// A PUT whose body is sent chunked, without a `Content-Length`.
    pub(crate) fn put_chunked(&self, path: &str, body: &[u8]) -> (u16, Value) {
        let mut reader = body;
        let r = self
            .agent
            .put(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send(ureq::SendBody::from_reader(&mut reader));
        self.finish(r)
    }

    /// The status alone of a GET, for answers that are not JSON (a capture's bytes).
    pub(crate) fn status(&self, path: &str) -> u16 {
        self.agent
            .get(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .call()
            .expect("the request reaches the server")
            .status()
            .as_u16()
    }

    pub(crate) fn post(&self, path: &str) -> (u16, Value) {
        let r = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("Authorization", self.auth())
            .send_empty();
        self.finish(r)
    }

    pub(crate) fn upload(&self, name: &str, component: &str) -> (u16, Value) {
        self.put(
            &format!("/v1/assignors/{name}"),
            &std::fs::read(component).expect("the guest is built"),
        )
    }

    pub(crate) fn set_config(&self, group: &str, set: Value, delete: &[&str]) -> (u16, Value) {
        let body = json!({"set": set, "delete": delete});
        self.put(
            &format!("/v1/groups/{group}/config"),
            body.to_string().as_bytes(),
        )
    }

    pub(crate) fn assignor_names(&self) -> Vec<String> {
        let (status, body) = self.get("/v1/assignors");
        assert_eq!(status, 200, "{body}");
        body["assignors"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|a| a["name"].as_str().expect("a name").to_owned())
            .collect()
    }
}

pub(crate) fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no error code>")
}

/// Upload, select, assign, read, describe, replace and delete an assignor, end to end.
#[test]
fn upload_select_assign_describe_replace_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    assert_eq!(a.assignor_names(), ["sticky", "balanced"]);

    let (status, report) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 201, "{report}");
    assert_eq!(report["replaced"], false);
    assert_eq!(
        report["checks"].as_array().map(Vec::len),
        Some(4),
        "{report}"
    );
    assert!(
        report["trial"]["fuel"].as_u64().is_some_and(|f| f > 0),
        "{report}"
    );
    assert_eq!(a.assignor_names(), ["sticky", "balanced", "hashmap-user"]);

    let (status, body) = a.put("/v1/groups/orders", GROUP_DOC.as_bytes());
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["assignorName"], "sticky",
        "the default before any config"
    );
    let (status, body) = a.set_config(
        "orders",
        json!({"streams.assignor.name": "hashmap-user"}),
        &[],
    );
    assert_eq!(status, 200, "{body}");

    let (status, target) = a.post("/v1/groups/orders/assign");
    assert_eq!(status, 200, "{target}");
    assert_eq!(target["assignor"], "hashmap-user");
    let members = target["assignment"]["members"]
        .as_object()
        .expect("members");
    assert_eq!(members.len(), 3, "every member appears: {target}");
    assert!(members["member-a1"]["activeTasks"].is_object(), "{target}");
    assert!(target["usage"]["fuel"].as_u64().is_some_and(|f| f > 0));
    let (status, read) = a.get("/v1/groups/orders/assignment");
    assert_eq!(status, 200);
    assert_eq!(
        read, target,
        "the committed target is what the trigger answered"
    );

    let (status, d) = a.get("/v1/groups/orders");
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["assignorName"], "hashmap-user");
    assert_eq!(d["configuredAssignor"], "hashmap-user");
    assert_eq!(d["targetAssignmentEpoch"], d["groupEpoch"]);
    assert_eq!(
        d["configs"]["numStandbyReplicas"], 1,
        "the document's configs apply"
    );
    assert!(d["lastFailure"].is_null());

    let (status, report) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 200, "a replacement answers 200: {report}");
    assert_eq!(report["replaced"], true);

    let (status, body) = a.delete("/v1/assignors/hashmap-user");
    assert_eq!(status, 409, "{body}");
    assert_eq!(error_code(&body), "ASSIGNOR_IN_USE");
    assert_eq!(body["error"]["groups"], json!(["orders"]));
    let (status, _) = a.set_config("orders", json!({}), &["streams.assignor.name"]);
    assert_eq!(status, 200);
    let (status, body) = a.delete("/v1/assignors/hashmap-user");
    assert_eq!(status, 204, "{body}");
    assert_eq!(a.assignor_names(), ["sticky", "balanced"]);
    let (status, body) = a.delete("/v1/assignors/hashmap-user");
    assert_eq!((status, error_code(&body)), (404, "RESOURCE_NOT_FOUND"));
}

/// Every rejection path of an upload answers which check failed and why, and changes nothing:
/// not the list, not an assignor already uploaded under the name.
#[test]
fn rejected_uploads_say_why_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    let (status, kept) = a.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 201, "{kept}");
    let before = a.get("/v1/assignors");

    /// One bad upload: what it is, its URL name and bytes, and the answer it must get.
    struct Case {
        what: &'static str,
        name: &'static str,
        bytes: Vec<u8>,
        check: &'static str,
        says: &'static str,
    }
    let case = |what, name, bytes, check, says| Case {
        what,
        name,
        bytes,
        check,
        says,
    };
    let read = |p: &str| std::fs::read(p).expect("the guest is built");
    let cases = [
        case(
            "garbage",
            "x",
            b"hello, not wasm".to_vec(),
            "load",
            "not a WebAssembly file",
        ),
        case(
            "core module",
            "x",
            b"\0asm\x01\0\0\0".to_vec(),
            "load",
            "core WebAssembly module",
        ),
        case(
            "wrong world",
            "not-an-assignor",
            read(guests::NOT_AN_ASSIGNOR),
            "load",
            "not an assignor",
        ),
        case(
            "forbidden import",
            "forbidden-import",
            read(guests::FORBIDDEN_IMPORT),
            "load",
            "forbidden import",
        ),
        case(
            "trial traps",
            "panics",
            read(guests::PANICS),
            "trial",
            "exploded on purpose",
        ),
        case(
            "trial invalid output",
            "invalid-output",
            read(guests::INVALID_OUTPUT),
            "trial",
            "invalid-output",
        ),
        case(
            "name mismatch",
            "other-name",
            read(guests::CHATTY),
            "name",
            "its own name",
        ),
        case(
            "built-in name",
            "sticky",
            read(guests::STICKY),
            "name",
            "built-in",
        ),
        case(
            "replace with garbage",
            "hashmap-user",
            b"garbage".to_vec(),
            "load",
            "not a WebAssembly file",
        ),
    ];
    for c in cases {
        let (status, body) = a.put(&format!("/v1/assignors/{}", c.name), &c.bytes);
        let what = c.what;
        assert_eq!(status, 422, "{what}: {body}");
        assert_eq!(error_code(&body), "ASSIGNOR_REJECTED", "{what}: {body}");
        assert_eq!(body["error"]["check"], c.check, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(c.says), "{what}: {message}");
    }
    let tiny = server.client("tiny");
    let (status, body) = tiny.upload("hashmap-user", guests::HASHMAP_USER);
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["check"], "size");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("1000-byte limit")
    );
    assert_eq!(tiny.assignor_names(), ["sticky", "balanced"]);

    assert_eq!(a.get("/v1/assignors"), before, "nothing changed");
    // The store too: a restart finds only the one accepted upload.
    drop(server);
    let server = Server::start(&config(dir.path()));
    assert_eq!(server.client(TOKEN_A).get("/v1/assignors"), before);
}

/// A tenant can neither see, select, delete nor use another tenant's assignors, nor read or
/// trigger its groups: all answer exactly as for things that do not exist.
#[test]
fn tenants_are_isolated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    assert_eq!(a.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
    assert_eq!(a.put("/v1/groups/orders", GROUP_DOC.as_bytes()).0, 200);
    assert_eq!(a.post("/v1/groups/orders/assign").0, 200);

    assert_eq!(
        b.assignor_names(),
        ["sticky", "balanced"],
        "B does not see A's upload"
    );
    let (status, body) = b.delete("/v1/assignors/hashmap-user");
    assert_eq!((status, error_code(&body)), (404, "RESOURCE_NOT_FOUND"));
    for path in ["/v1/groups/orders", "/v1/groups/orders/assignment"] {
        let (status, body) = b.get(path);
        assert_eq!(
            (status, error_code(&body)),
            (404, "RESOURCE_NOT_FOUND"),
            "{path}"
        );
    }
    let (status, body) = b.post("/v1/groups/orders/assign");
    assert_eq!((status, error_code(&body)), (404, "RESOURCE_NOT_FOUND"));
    // Selecting A's assignor answers exactly as selecting one that exists nowhere.
    assert_eq!(b.put("/v1/groups/mine", GROUP_DOC.as_bytes()).0, 200);
    let (status, foreign) = b.set_config(
        "mine",
        json!({"streams.assignor.name": "hashmap-user"}),
        &[],
    );
    let (_, unknown) = b.set_config("mine", json!({"streams.assignor.name": "no-such"}), &[]);
    assert_eq!((status, error_code(&foreign)), (400, "INVALID_CONFIG"));
    assert_eq!(
        foreign["error"]["message"]
            .as_str()
            .map(|m| m.replace("hashmap-user", "no-such")),
        unknown["error"]["message"].as_str().map(str::to_owned)
    );
    // B's own upload of the same name is B's alone: replacing or deleting it leaves A's.
    assert_eq!(b.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
    assert_eq!(b.delete("/v1/assignors/hashmap-user").0, 204);
    assert_eq!(a.assignor_names(), ["sticky", "balanced", "hashmap-user"]);
    assert_eq!(a.get("/v1/groups/orders").0, 200);
    assert_eq!(b.get("/v1/groups/orders").0, 404, "B's groups are not A's");
}

/// Missing, malformed and unknown tokens answer 401; the admin token is not a tenant's;
/// /health needs no token.
#[test]
fn bad_tokens_answer_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    for token in ["", "wrong", TOKEN_ADMIN] {
        let (status, body) = server.client(token).get("/v1/assignors");
        assert_eq!(
            (status, error_code(&body)),
            (401, "AUTHENTICATION_FAILED"),
            "{token:?}"
        );
    }
    let no_header = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build();
    let agent: ureq::Agent = no_header.into();
    let response = agent
        .get(format!("{}/v1/groups/orders", server.base))
        .call()
        .expect("answers");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        server.client("").get("/health"),
        (200, json!({"status": "ok"}))
    );
    let (status, body) = server.client(TOKEN_ADMIN).get("/v1/admin/tenants");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tenants"][2]["limits"]["maxComponentBytes"], 1000);
    assert_eq!(server.client(TOKEN_A).get("/v1/admin/tenants").0, 401);
}

/// Group config changes are all or nothing with `INVALID_CONFIG`; assigning a group without a
/// topology says what to do first.
#[test]
fn group_config_errors_use_kafka_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    let (status, body) = a.set_config(
        "g",
        json!({"streams.assignor.name": "balanced", "streams.num.standby.replicas": "many"}),
        &[],
    );
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_CONFIG"),
        "{body}"
    );
    assert_eq!(body["error"]["key"], "streams.num.standby.replicas");
    assert_eq!(
        a.get("/v1/groups/g").0,
        404,
        "nothing was stored, not even the group"
    );
    let (status, body) = a.set_config("g", json!({"streams.num.standby.replicas": 2}), &[]);
    assert_eq!(status, 200, "{body}");
    let (status, body) = a.post("/v1/groups/g/assign");
    assert_eq!(
        (status, error_code(&body)),
        (409, "GROUP_NOT_READY"),
        "{body}"
    );
    let (status, body) = a.put("/v1/groups/g/config", b"{\"sett\": {}}");
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_REQUEST"),
        "{body}"
    );
    let (status, body) = a.put("/v1/groups/g", b"{\"topology\": 1}");
    assert_eq!(
        (status, error_code(&body)),
        (400, "INVALID_REQUEST"),
        "{body}"
    );
}

/// `GET …/config` answers the group's own overrides as `PUT …/config` does (`null` where the
/// broker's default applies), 404 for a group that does not exist or is another tenant's.
#[test]
fn group_config_reads_back_what_was_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    let (status, body) = a.get("/v1/groups/g/config");
    assert_eq!(
        (status, error_code(&body)),
        (404, "RESOURCE_NOT_FOUND"),
        "{body}"
    );
    let set = json!({"streams.assignor.name": "balanced", "streams.num.standby.replicas": 2});
    let (status, answer) = a.set_config("g", set, &[]);
    assert_eq!(status, 200, "{answer}");
    let (status, body) = a.get("/v1/groups/g/config");
    assert_eq!((status, &body), (200, &answer));
    assert_eq!(
        body["config"],
        json!({
            "streams.assignor.name": "balanced",
            "streams.num.standby.replicas": 2,
            "streams.rack.aware.assignment.tags": null,
        })
    );
    assert_eq!(
        a.set_config("g", json!({}), &["streams.assignor.name"]).0,
        200
    );
    assert_eq!(
        a.get("/v1/groups/g/config").1["config"]["streams.assignor.name"],
        Value::Null
    );
    assert_eq!(
        b.get("/v1/groups/g/config").0,
        404,
        "another tenant's group"
    );
}

/// Runs a service on `data_dir` that uploads an assignor, creates group `orders`, selects the
/// upload and computes a target, then stops it. Returns what it acknowledged: the assignor
/// list, the group's description and the target.
fn acknowledged_state(data_dir: &Path) -> ((u16, Value), (u16, Value), Value) {
    let server = Server::start(&config(data_dir));
    let a = server.client(TOKEN_A);
    assert_eq!(a.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
    assert_eq!(a.put("/v1/groups/orders", GROUP_DOC.as_bytes()).0, 200);
    let (status, _) = a.set_config(
        "orders",
        json!({"streams.assignor.name": "hashmap-user"}),
        &[],
    );
    assert_eq!(status, 200);
    let (status, target) = a.post("/v1/groups/orders/assign");
    assert_eq!(status, 200, "{target}");
    (a.get("/v1/assignors"), a.get("/v1/groups/orders"), target)
}

/// A restart finds every acknowledged upload, group config and target assignment.
#[test]
fn restart_keeps_uploads_configs_and_targets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (assignors, described, target) = acknowledged_state(dir.path());
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    assert_eq!(a.get("/v1/assignors"), assignors);
    assert_eq!(a.get("/v1/groups/orders"), described);
    assert_eq!(a.get("/v1/groups/orders/assignment"), (200, target.clone()));
    // The target is current: a trigger does not recompute it.
    assert_eq!(a.post("/v1/groups/orders/assign"), (200, target));
}

/// `GET /v1/assignors/{name}` answers the tenant's upload byte for byte with its SHA-256 as
/// the `ETag` (the one the list shows) and the tenant's name, 304 to a matching
/// `If-None-Match`, and 404 for another tenant, a built-in or an unknown name; after a
/// restart it still answers the stored upload.
#[test]
fn an_upload_is_served_back_with_its_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let uploaded = std::fs::read(guests::HASHMAP_USER).expect("the guest is built");
    let listed_sha256 = {
        let server = Server::start(&config(dir.path()));
        let a = server.client(TOKEN_A);
        assert_eq!(a.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
        let (_, list) = a.get("/v1/assignors");
        list["assignors"][2]["sha256"]
            .as_str()
            .expect("an upload's hash")
            .to_owned()
    };
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    let etag = format!("\"{listed_sha256}\"");
    let (status, headers, body) = a.get_bytes("/v1/assignors/hashmap-user", &[]);
    assert_eq!(status, 200);
    assert!(body == uploaded, "the bytes as uploaded");
    assert_eq!(headers["etag"], etag.as_str());
    assert_eq!(headers["content-type"], "application/wasm");
    assert_eq!(headers[assignor_service::TENANT_HEADER], "a");
    let (status, headers, body) =
        a.get_bytes("/v1/assignors/hashmap-user", &[("If-None-Match", &etag)]);
    assert_eq!((status, body.len()), (304, 0));
    assert_eq!(headers["etag"], etag.as_str());
    let (status, _, body) = a.get_bytes(
        "/v1/assignors/hashmap-user",
        &[("If-None-Match", "\"0000\"")],
    );
    assert_eq!((status, body.len()), (200, uploaded.len()), "another tag");
    for (token, name) in [
        (TOKEN_B, "hashmap-user"),
        (TOKEN_A, "sticky"),
        (TOKEN_A, "nope"),
    ] {
        let (status, _, _) = server
            .client(token)
            .get_bytes(&format!("/v1/assignors/{name}"), &[]);
        assert_eq!(status, 404, "{name} for {token}");
    }
    let (status, _, _) = server
        .client("wrong")
        .get_bytes("/v1/assignors/hashmap-user", &[]);
    assert_eq!(status, 401);
}

/// A whole-group PUT is one change: however many members and configs it carries, the group
/// epoch moves once (the coordinator persists it in one write, so a crash leaves the old
/// group or the new one), members absent from the document leave, and an unchanged document
/// changes nothing.
#[test]
fn whole_group_put_is_one_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    let (status, d) = a.put("/v1/groups/g", group_doc(5, 8).as_bytes());
    assert_eq!(status, 200, "{d}");
    assert_eq!(
        d["groupEpoch"], 1,
        "topology and five members in one change: {d}"
    );
    let (status, d) = a.set_config("g", json!({"streams.num.standby.replicas": 2}), &[]);
    assert_eq!(status, 200, "{d}");

    let mut doc: Value = serde_json::from_str(&group_doc(3, 16)).expect("JSON");
    doc["configs"] = json!({"numStandbyReplicas": 0});
    let (status, d) = a.put("/v1/groups/g", doc.to_string().as_bytes());
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["groupEpoch"], 2, "{d}");
    assert_eq!(d["members"], json!(["m0", "m1", "m2"]));
    assert_eq!(d["configs"]["numStandbyReplicas"], 0);
    let (status, same) = a.put("/v1/groups/g", doc.to_string().as_bytes());
    assert_eq!(
        (status, same),
        (200, d),
        "an unchanged document changes nothing"
    );
}

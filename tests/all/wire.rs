//! The wire contract, byte for byte: every answer of `assignor serve` and every `--json`
//! output of the `assignor` command compared with golden files in `tests/golden/`, after
//! masking what changes from run to run (times, and figures that depend on a guest's build).
//!
//! `ASSIGNOR_RECORD_GOLDEN=1` rewrites the golden files instead of comparing (for a deliberate
//! change of the contract; the diff is then the change).

use std::path::{Path, PathBuf};
use std::process::Command;

use assignor_service::config::ServiceConfig;
use assignor_tests::guests;

use crate::common::assignor_binary;
use crate::service::{GROUP_DOC, Server, TOKEN_A, TOKEN_ADMIN, group_doc, sha256_hex};

/// The directory of the golden files.
fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Numbers under these keys vary between runs (times) or between builds of a guest (its
/// size, fuel and memory): masked to `0`.
const MASKED_NUMBERS: &[&str] = &[
    "atMs",
    "retryAtMs",
    "computedAtMs",
    "wallTimeUs",
    "fuel",
    "peakMemoryBytes",
    "bytes",
];
/// Strings under these keys (a guest build's hash) are masked to `"…"`.
const MASKED_STRINGS: &[&str] = &["sha256", "component_sha256"];

/// `text` with the value after each `"key":` replaced by `masked` when `is_value` says the
/// text there starts one (and gives its length).
fn mask_values(
    text: &mut String,
    key: &str,
    masked: &str,
    is_value: impl Fn(&str) -> Option<usize>,
) {
    let pattern = format!("\"{key}\":");
    let mut from = 0;
    while let Some(found) = text[from..].find(&pattern) {
        let start = from + found + pattern.len();
        match is_value(&text[start..]) {
            Some(len) => {
                text.replace_range(start..start + len, masked);
                from = start + masked.len();
            }
            None => from = start,
        }
    }
}

/// `text` with what varies masked (see [`MASKED_NUMBERS`], [`MASKED_STRINGS`]), and the size
/// in an upload's `size: N bytes` check and the time in a failure's `no earlier than …)`:
/// every other byte is left as it was.
fn mask(text: &str) -> String {
    let mut out = text.to_owned();
    for key in MASKED_NUMBERS {
        mask_values(&mut out, key, "0", |rest| {
            let len = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            (len > 0).then_some(len)
        });
    }
    for key in MASKED_STRINGS {
        mask_values(&mut out, key, "\"…\"", |rest| {
            rest.strip_prefix('"')
                .and_then(|r| r.find('"'))
                .map(|close| close + 2)
        });
    }
    for (after, until, masked) in [("\"size: ", ' ', "N"), ("no earlier than ", ')', "T")] {
        let mut from = 0;
        while let Some(at) = out[from..].find(after) {
            let start = from + at + after.len();
            let end = start
                + out[start..]
                    .find(until)
                    .expect("the end of the masked text");
            out.replace_range(start..end, masked);
            from = start + masked.len();
        }
    }
    out
}

/// Compares `text` (masked) with the golden file `name`, or records it.
fn golden(name: &str, text: &str) {
    golden_file(
        &format!("{name}.json"),
        &mask(text),
        "the answer's bytes changed",
    );
}

/// Compares `text` with the golden file `file` in `tests/golden/` (`changed` says what a
/// difference means), or records it there under `ASSIGNOR_RECORD_GOLDEN`.
pub(crate) fn golden_file(file: &str, text: &str, changed: &str) {
    let path = golden_dir().join(file);
    if std::env::var_os("ASSIGNOR_RECORD_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("the golden directory");
        std::fs::write(&path, format!("{text}\n")).expect("recording a golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with ASSIGNOR_RECORD_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(text, expected.trim_end_matches('\n'), "{file}: {changed}");
}

/// A caller sending raw requests and keeping the raw answers.
struct Raw {
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Raw {
    fn new(base: &str, token: &str) -> Self {
        Self {
            base: base.to_owned(),
            token: token.to_owned(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
        }
    }

    /// Sends `method path` with `body`; the answer's status and text.
    fn send(&self, method: &str, path: &str, body: Option<&[u8]>) -> (u16, String) {
        let request = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {}", self.token));
        let answer = match body {
            Some(b) => self.agent.run(request.body(b.to_vec()).expect("a request")),
            None => self.agent.run(request.body(()).expect("a request")),
        };
        let mut answer = answer.expect("the service answers");
        let status = answer.status().as_u16();
        (status, answer.body_mut().read_to_string().expect("a body"))
    }

    /// [`Self::send`], checking the status and the golden file `name`.
    fn check(&self, name: &str, status: u16, method: &str, path: &str, body: Option<&[u8]>) {
        let (got, text) = self.send(method, path, body);
        assert_eq!(got, status, "{name}: {text}");
        golden(name, &text);
    }
}

/// Every answer of the service, success and error, has today's exact bytes.
#[test]
fn service_answers_are_byte_for_byte_the_contract() {
    let data = tempfile::tempdir().expect("tempdir");
    let keys = vec![
        "group.streams.assignors=sticky,balanced".into(),
        format!("service.data.dir={}", data.path().display()),
        "service.tenants=a".into(),
        format!("service.tenant.a.token.sha256={}", sha256_hex(TOKEN_A)),
        format!("service.admin.token.sha256={}", sha256_hex(TOKEN_ADMIN)),
        "service.tenant.a.max.concurrent.assignments=1".into(),
    ];
    let server = Server::start(&ServiceConfig::load(None, &keys).expect("config"));
    let a = Raw::new(&server.base, TOKEN_A);
    let admin = Raw::new(&server.base, TOKEN_ADMIN);

    a.check("health", 200, "GET", "/health", None);
    a.check("assignors-built-in", 200, "GET", "/v1/assignors", None);
    let component = std::fs::read(guests::LOOPS_ON_LARGE_GROUPS).expect("the guest is built");
    let path = "/v1/assignors/loops-on-large-groups";
    a.check("upload", 201, "PUT", path, Some(&component));
    a.check("assignors-uploaded", 200, "GET", "/v1/assignors", None);

    a.check(
        "put-group",
        200,
        "PUT",
        "/v1/groups/orders",
        Some(GROUP_DOC.as_bytes()),
    );
    a.check(
        "assign-built-in",
        200,
        "POST",
        "/v1/groups/orders/assign",
        None,
    );
    a.check("describe-built-in", 200, "GET", "/v1/groups/orders", None);

    let set = br#"{"set":{"streams.assignor.name":"loops-on-large-groups","streams.num.standby.replicas":0,"streams.rack.aware.assignment.tags":["zone","rack"]}}"#;
    a.check(
        "set-config",
        200,
        "PUT",
        "/v1/groups/orders/config",
        Some(set),
    );
    a.check("get-config", 200, "GET", "/v1/groups/orders/config", None);
    let unset =
        br#"{"delete":["streams.num.standby.replicas","streams.rack.aware.assignment.tags"]}"#;
    a.check(
        "delete-config",
        200,
        "PUT",
        "/v1/groups/orders/config",
        Some(unset),
    );

    a.check(
        "assign-component",
        200,
        "POST",
        "/v1/groups/orders/assign",
        None,
    );
    a.check(
        "assignment",
        200,
        "GET",
        "/v1/groups/orders/assignment",
        None,
    );

    admin.check("tenants", 200, "GET", "/v1/admin/tenants", None);
    let limits = br#"{"fuel":1000000,"compileTimeoutMs":20000}"#;
    admin.check(
        "put-limits",
        200,
        "PUT",
        "/v1/admin/tenants/a/limits",
        Some(limits),
    );
    let unlimited = br#"{"fuel":"none","timeoutMs":200}"#;
    admin.check(
        "put-limits-no-fuel",
        200,
        "PUT",
        "/v1/admin/tenants/a/limits",
        Some(unlimited),
    );
    admin.check(
        "delete-limits",
        200,
        "DELETE",
        "/v1/admin/tenants/a/limits",
        None,
    );
    admin.send("PUT", "/v1/admin/tenants/a/limits", Some(limits));

    let big = group_doc(8, 16);
    a.check(
        "put-group-big",
        200,
        "PUT",
        "/v1/groups/orders",
        Some(big.as_bytes()),
    );
    a.check(
        "assign-failed",
        500,
        "POST",
        "/v1/groups/orders/assign",
        None,
    );
    a.check("describe-failed", 200, "GET", "/v1/groups/orders", None);
    a.check(
        "assign-backed-off",
        500,
        "POST",
        "/v1/groups/orders/assign",
        None,
    );

    a.check("error-no-group", 404, "GET", "/v1/groups/nope", None);
    let bad = br#"{"set":{"streams.num.standby.replicas":"x"}}"#;
    a.check(
        "error-invalid-config",
        400,
        "PUT",
        "/v1/groups/orders/config",
        Some(bad),
    );
    a.check(
        "error-not-json",
        400,
        "PUT",
        "/v1/groups/orders/config",
        Some(b"{"),
    );
    let doc = br#"{"topology":{"subtopologies":[]},"members":[{"memberId":"m"}]}"#;
    a.check("error-bad-document", 400, "PUT", "/v1/groups/g2", Some(doc));
    a.check("error-in-use", 409, "DELETE", path, None);
    Raw::new(&server.base, "wrong").check("error-token", 401, "GET", "/v1/assignors", None);
    a.check("no-target", 404, "GET", "/v1/groups/fresh/assignment", None);
}

/// Runs the `assignor` binary with `args` in `dir`; its exit code and stdout.
fn assignor(dir: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(assignor_binary())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the assignor binary runs");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");
    (out.status.code().expect("an exit code"), stdout)
}

/// `assignor assign --json` and `assignor replay --json`, success and failure, print today's
/// exact bytes.
#[test]
fn cli_json_is_byte_for_byte_the_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("group.json");
    std::fs::write(&input, GROUP_DOC).expect("the input");
    let input = input.to_str().expect("a UTF-8 path");
    let (code, out) = assignor(
        dir.path(),
        &["assign", "--assignor", "sticky", "--input", input, "--json"],
    );
    assert_eq!(code, 0, "{out}");
    golden("cli-assign", out.trim_end());
    let (code, out) = assignor(
        dir.path(),
        &[
            "assign",
            "--assignor",
            guests::BALANCED,
            "--input",
            input,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    golden("cli-assign-component", out.trim_end());

    let (code, out) = assignor(
        dir.path(),
        &[
            "assign",
            "--assignor",
            guests::ENDLESS_LOOP,
            "--input",
            input,
            "--json",
            "--fuel",
            "100000",
            "--capture-dir",
            "captures",
        ],
    );
    assert_eq!(code, 1, "{out}");
    golden("cli-assign-error", out.trim_end());
    let capture = std::fs::read_dir(dir.path().join("captures"))
        .expect("the capture directory")
        .next()
        .expect("a capture")
        .expect("an entry")
        .path();
    let capture = capture.to_str().expect("a UTF-8 path");
    let (code, out) = assignor(
        dir.path(),
        &[
            "replay",
            capture,
            "--assignor",
            guests::ENDLESS_LOOP,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{out}");
    golden("cli-replay", out.trim_end());
}

/// Reads golden file `name` as `T` and writes it again: the same bytes, so the protocol type
/// declares every field of the answer, in the order it goes on the wire.
fn rewrites<T: serde::Serialize + serde::de::DeserializeOwned>(name: &str) {
    let path = golden_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("a golden file");
    let text = text.trim_end_matches('\n');
    let typed: T = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let written = serde_json::to_string(&typed).expect("serializes");
    assert_eq!(
        written, text,
        "{name}: the protocol type writes other bytes"
    );
}

/// Every golden answer reads into its protocol type and is written back byte for byte (error
/// objects through a `Value`, as the service writes them).
#[test]
fn protocol_types_write_the_golden_bytes() {
    use assignor_protocol::*;

    rewrites::<Health>("health");
    for name in ["assignors-built-in", "assignors-uploaded"] {
        rewrites::<AssignorList>(name);
    }
    rewrites::<UploadReport>("upload");
    for name in [
        "put-group",
        "describe-built-in",
        "put-group-big",
        "describe-failed",
    ] {
        rewrites::<DescribedGroup>(name);
    }
    for name in ["set-config", "get-config", "delete-config"] {
        rewrites::<GroupOverrides>(name);
    }
    for name in ["assign-built-in", "assign-component", "assignment"] {
        rewrites::<CommittedTarget>(name);
    }
    rewrites::<TenantList>("tenants");
    for name in ["put-limits", "put-limits-no-fuel", "delete-limits"] {
        rewrites::<TenantReport>(name);
    }
    for name in ["cli-assign", "cli-assign-component"] {
        rewrites::<Outcome>(name);
    }
    rewrites::<ErrorDoc>("cli-assign-error");
    for name in [
        "assign-failed",
        "assign-backed-off",
        "error-no-group",
        "error-invalid-config",
        "error-not-json",
        "error-bad-document",
        "error-in-use",
        "error-token",
        "no-target",
    ] {
        let text = std::fs::read_to_string(golden_dir().join(format!("{name}.json")))
            .expect("a golden file");
        let answer: ErrorAnswer = serde_json::from_str(&text).expect("an error answer");
        let written = serde_json::to_value(&answer)
            .expect("serializes")
            .to_string();
        assert_eq!(written, text.trim_end_matches('\n'), "{name}");
    }
}

/// What the service writes, the typed client reads whole: each answer, read into its type
/// and written again, is the JSON the service sent.
#[test]
fn the_client_reads_every_answer_whole() {
    use assignor_client::{Client, ClientError, LimitOverrides, Reply};
    use assignor_protocol::FuelLimit;

    fn whole<T: serde::Serialize>(name: &str, reply: &Reply<T>) {
        let read = serde_json::to_value(&reply.body).expect("serializes");
        assert_eq!(
            read, reply.json,
            "{name}: the client's type lost or changed a field"
        );
    }
    let data = tempfile::tempdir().expect("tempdir");
    let keys = vec![
        "group.streams.assignors=sticky,balanced".into(),
        format!("service.data.dir={}", data.path().display()),
        "service.tenants=a".into(),
        format!("service.tenant.a.token.sha256={}", sha256_hex(TOKEN_A)),
        format!("service.admin.token.sha256={}", sha256_hex(TOKEN_ADMIN)),
    ];
    let server = Server::start(&ServiceConfig::load(None, &keys).expect("config"));
    let a = Client::new(&server.base, Some(TOKEN_A)).expect("a client");
    let admin = Client::new(&server.base, Some(TOKEN_ADMIN)).expect("a client");

    let component = std::fs::read(guests::LOOPS_ON_LARGE_GROUPS).expect("the guest is built");
    whole(
        "upload",
        &a.upload("loops-on-large-groups", &component)
            .expect("upload"),
    );
    let list = a.list_assignors().expect("list");
    assert_eq!(list.body.len(), 3);
    whole("put-group", &a.put_group("orders", GROUP_DOC).expect("put"));
    whole("assign", &a.assign("orders").expect("assign"));
    whole("assignment", &a.assignment("orders").expect("assignment"));
    let set = [
        ("streams.assignor.name", "loops-on-large-groups"),
        ("streams.rack.aware.assignment.tags", "zone,rack"),
    ];
    let config = a.set_group_config("orders", &set, &[]).expect("set");
    whole("set-config", &config);
    assert_eq!(
        config.body.config.rack_aware_assignment_tags.as_deref(),
        Some("zone,rack")
    );
    whole("get-config", &a.group_config("orders").expect("config"));
    whole("tenants", &admin.tenants().expect("tenants"));
    let change = LimitOverrides {
        fuel: Some(FuelLimit::Units(1_000_000)),
        ..LimitOverrides::default()
    };
    let report = admin.set_tenant_limits("a", &change).expect("limits");
    whole("put-limits", &report);
    assert_eq!(report.body.limits.fuel, Some(1_000_000));
    assert_eq!(
        report.body.overrides, change,
        "the overrides come back as sent"
    );
    whole(
        "put-group-big",
        &a.put_group("orders", &group_doc(8, 16)).expect("put"),
    );
    let failed = a.assign("orders").expect_err("out of fuel");
    let ClientError::Refused {
        status,
        code,
        error,
        ..
    } = failed
    else {
        panic!("not a refusal: {failed}");
    };
    assert_eq!((status, code.as_str()), (500, "UNKNOWN_SERVER_ERROR"));
    assert_eq!(error["kind"], "out-of-fuel", "{error}");
    let described = a.describe("orders").expect("describe");
    whole("describe", &described);
    let failure = described
        .body
        .last_failure
        .expect("the failure is described");
    assert_eq!(failure.kind, "out-of-fuel");
    whole(
        "reset-limits",
        &admin.reset_tenant_limits("a").expect("reset"),
    );
}

//! The `assignor` command as the service's client: the real binary against `assignor serve`
//! in-process on loopback — upload, list, download, group put/set-config/get-config/assign/assignment/
//! describe, delete — with its exit codes (0 done, 1 refused, 2 bad usage or unreachable) and
//! error messages that say what to do.

use std::io::Write;
use std::process::{Command, Stdio};

use assignor_client::{Client, ClientError};
use assignor_coordinator::json::AssignmentDoc;
use assignor_service::config::ServiceConfig;
use assignor_tests::guests;
use serde_json::Value;

use crate::common::assignor_binary;

const TOKEN: &str = "token-of-tenant-a";
const GROUP_DOC: &str = include_str!("../../runtime/demo/group.json");

/// One run of the binary.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `assignor args…` with `env`, feeding `stdin`. The caller's `ASSIGNOR_*` and proxy
/// variables are dropped: loopback requests must not reach a proxy or another server.
fn assignor(args: &[&str], env: &[(&str, &str)], stdin: &str) -> Run {
    let mut command = Command::new(assignor_binary());
    for var in [
        "ASSIGNOR_SERVER",
        "ASSIGNOR_TOKEN",
        "ALL_PROXY",
        "HTTPS_PROXY",
        "HTTP_PROXY",
    ] {
        command.env_remove(var).env_remove(var.to_lowercase());
    }
    let mut child = command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the assignor binary runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin.as_bytes()).expect("writing stdin");
    drop(pipe);
    let out = child.wait_with_output().expect("the assignor binary exits");
    Run {
        code: out.status.code().expect("an exit code"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

/// A service with tenant `a` on 127.0.0.1:0 (the service tests' server), with its own data
/// directory; stopped on drop, before the directory goes.
struct Server {
    url: String,
    _server: crate::service::Server,
    _data: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let data = tempfile::tempdir().expect("tempdir");
        let hash = crate::service::sha256_hex(TOKEN);
        let config = ServiceConfig::load(
            None,
            &[
                "group.streams.assignors=sticky,balanced".into(),
                format!("service.data.dir={}", data.path().display()),
                "service.tenants=a".into(),
                format!("service.tenant.a.token.sha256={hash}"),
            ],
        )
        .expect("valid service config");
        let server = crate::service::Server::start(&config);
        Self {
            url: server.base.clone(),
            _server: server,
            _data: data,
        }
    }

    /// Runs `assignor args… --server URL --token TOKEN`.
    fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "")
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        let args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--server", &self.url, "--token", TOKEN])
            .collect();
        assignor(&args, &[], stdin)
    }
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {run}"))
}

fn assert_ok(run: &Run) {
    assert_eq!(run.code, 0, "{run}");
}

/// Upload, list, put a group from stdin, select the upload, assign, read the target,
/// describe, refuse to delete it while selected, then delete it, and delete the group: every
/// step through the binary, readable by default and the service's JSON with `--json`.
#[test]
fn cli_drives_the_service_end_to_end() {
    let server = Server::start();

    let up = server.run(&["upload", "hashmap-user", guests::HASHMAP_USER]);
    assert_ok(&up);
    assert!(up.stdout.starts_with("uploaded `hashmap-user`"), "{up}");
    assert_eq!(up.stdout.matches("  ✓ ").count(), 4, "every check: {up}");
    assert!(
        up.stderr.contains("hashmap-user (trial)") && up.stderr.contains(" / 1000000000"),
        "the trial's usage beside its limits on stderr: {up}"
    );

    let list = server.run(&["list"]);
    assert_ok(&list);
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with("hashmap-user "))
        .unwrap_or_else(|| panic!("a row for the upload: {list}"));
    assert!(
        row.contains("component") && row.contains("sha256"),
        "{list}"
    );
    let names: Vec<Value> = json(&server.run(&["list", "--json"]))["assignors"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|a| a["name"].clone())
        .collect();
    assert_eq!(names, ["sticky", "balanced", "hashmap-user"]);

    let put = server.run_with_stdin(&["group", "put", "orders", "-"], GROUP_DOC);
    assert_ok(&put);
    assert!(put.stdout.contains("members (3)"), "{put}");

    // The server and token from the environment, as a shell profile would set them.
    let set = assignor(
        &[
            "group",
            "set-config",
            "orders",
            "streams.assignor.name=hashmap-user",
        ],
        &[("ASSIGNOR_SERVER", &server.url), ("ASSIGNOR_TOKEN", TOKEN)],
        "",
    );
    assert_ok(&set);
    assert!(
        set.stdout.contains("streams.assignor.name") && set.stdout.contains("hashmap-user"),
        "{set}"
    );
    let config = server.run(&["group", "get-config", "orders"]);
    assert_ok(&config);
    assert!(
        config
            .stdout
            .lines()
            .any(|l| l.contains("streams.assignor.name") && l.ends_with("hashmap-user")),
        "{config}"
    );

    let assign = server.run(&["group", "assign", "orders"]);
    assert_ok(&assign);
    let doc: AssignmentDoc = serde_json::from_str(&assign.stdout)
        .unwrap_or_else(|e| panic!("stdout is the output JSON ({e}): {assign}"));
    assert_eq!(doc.members.len(), 3, "every member appears: {assign}");
    assert!(
        assign.stderr.contains("hashmap-user") && assign.stderr.contains("fuel"),
        "who computed it and its usage on stderr: {assign}"
    );
    let target = json(&server.run(&["group", "assignment", "orders", "--json"]));
    assert_eq!(target["assignor"], "hashmap-user");
    assert_eq!(
        serde_json::to_value(&doc).expect("serialises"),
        target["assignment"],
        "the committed target is what the trigger answered"
    );

    let describe = server.run(&["group", "describe", "orders"]);
    assert_ok(&describe);
    for line in [
        "target epoch       1 (up to date)",
        "next assignor      hashmap-user",
    ] {
        assert!(describe.stdout.contains(line), "{line:?}: {describe}");
    }

    let refused = server.run(&["delete", "hashmap-user"]);
    assert_eq!(refused.code, 1, "{refused}");
    assert!(
        refused.stderr.contains("ASSIGNOR_IN_USE") && refused.stderr.contains("orders"),
        "names the groups that select it: {refused}"
    );
    assert_ok(&server.run(&[
        "group",
        "set-config",
        "orders",
        "--delete",
        "streams.assignor.name",
    ]));
    let deleted = server.run(&["delete", "hashmap-user"]);
    assert_ok(&deleted);
    assert_eq!(deleted.stdout, "deleted `hashmap-user`\n");
    let gone = server.run(&["delete", "hashmap-user"]);
    assert_eq!(gone.code, 1, "{gone}");
    assert!(gone.stderr.contains("RESOURCE_NOT_FOUND"), "{gone}");

    let deleted = server.run(&["group", "delete", "orders"]);
    assert_ok(&deleted);
    assert_eq!(deleted.stdout, "deleted group `orders`\n");
    let gone = server.run(&["group", "describe", "orders"]);
    assert_eq!(gone.code, 1, "{gone}");
    assert!(gone.stderr.contains("RESOURCE_NOT_FOUND"), "{gone}");
}

/// A rejected upload exits 1 naming the failed check and listing those passed before it;
/// with `--json`, stdout carries the service's error object.
#[test]
fn rejected_upload_names_the_check() {
    let server = Server::start();
    let run = server.run(&["upload", "balanced", guests::BALANCED]);
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stderr.contains("ASSIGNOR_REJECTED") && run.stderr.contains("name of a built-in"),
        "{run}"
    );
    assert!(
        run.stderr.contains("checks passed before it:\n  ✓ size"),
        "{run}"
    );
    let run = server.run(&["upload", "balanced", guests::BALANCED, "--json"]);
    assert_eq!(run.code, 1, "{run}");
    let error = &json(&run)["error"];
    assert_eq!(
        (&error["code"], &error["check"]),
        (&"ASSIGNOR_REJECTED".into(), &"name".into())
    );
    let names = json(&server.run(&["list", "--json"]))["assignors"].clone();
    assert_eq!(
        names.as_array().map(Vec::len),
        Some(2),
        "nothing stored: {names}"
    );
}

/// A wrong token exits 1 and says to check the token, without printing it; no token at all
/// (another server than the default gets no demo token) says how to pass one.
#[test]
fn rejected_token_exits_1_and_says_check_the_token() {
    let server = Server::start();
    let secret = "wrong-secret-token-value";
    let run = assignor(
        &["list", "--server", &server.url, "--token", secret],
        &[],
        "",
    );
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("check the token"), "{run}");
    assert!(
        !run.stderr.contains(secret) && !run.stdout.contains(secret),
        "token printed: {run}"
    );
    let run = assignor(&["list", "--server", &server.url], &[], "");
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stderr.contains("pass --token or set ASSIGNOR_TOKEN"),
        "{run}"
    );
}

/// A server that is not there exits 2 and asks whether it is running; so does an https URL
/// (this client speaks plain HTTP) and a group id the service does not know answers 404
/// with exit 1.
#[test]
fn unreachable_server_exits_2_and_asks_if_it_is_running() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let run = assignor(&["group", "describe", "orders", "--server", &url], &[], "");
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("is it running"), "{run}");
    let run = assignor(&["list", "--server", "https://127.0.0.1:7878"], &[], "");
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("plain HTTP only"), "{run}");

    let server = Server::start();
    let run = server.run(&["group", "describe", "no-such-group"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("no group `no-such-group`"), "{run}");
}

/// A malformed KEY=VALUE, or no change at all, exits 2 before anything is sent.
#[test]
fn bad_key_value_exits_2() {
    let unused = "http://127.0.0.1:9";
    let run = assignor(
        &[
            "group",
            "set-config",
            "orders",
            "streams.assignor.name",
            "--server",
            unused,
        ],
        &[],
        "",
    );
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("expected KEY=VALUE"), "{run}");
    let run = assignor(
        &["group", "set-config", "orders", "--server", unused],
        &[],
        "",
    );
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("nothing to change"), "{run}");
}

/// An upload over the tenant's size limit, large enough that the service refuses it before
/// reading it and closes the connection, is reported with the service's own answer (413,
/// `ASSIGNOR_REJECTED`, the size check and the limit) by the library client and by
/// `assignor upload` (exit 1), not as an unreachable service.
#[test]
fn oversized_upload_reports_the_services_refusal() {
    let server = Server::start();
    // Over the default 8 MiB `max.component.bytes`, and over what socket buffers hold.
    let bytes = vec![0u8; 9 << 20];
    let client = Client::new(&server.url, Some(TOKEN)).expect("valid URL");
    match client.upload("big", &bytes) {
        Err(ClientError::Refused {
            status: 413,
            code,
            message,
            error,
        }) => {
            assert_eq!(code, "ASSIGNOR_REJECTED");
            assert_eq!(error["check"], "size", "{error}");
            assert!(message.contains("is 9437184 bytes"), "{message}");
            assert!(message.contains("8388608-byte limit"), "{message}");
        }
        other => panic!("expected the service's 413, got {other:?}"),
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("big.wasm");
    std::fs::write(&file, &bytes).expect("written");
    let run = server.run(&["upload", "big", file.to_str().expect("UTF-8 path")]);
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stderr.contains("ASSIGNOR_REJECTED") && run.stderr.contains("HTTP 413"),
        "{run}"
    );
    assert!(!run.stderr.contains("cannot reach"), "{run}");
}

/// The library client types the service's answers and keeps their JSON; its errors carry the
/// service's extra fields (the groups that hold an assignor) and tell 401 from a refusal.
#[test]
fn library_client_types_answers_and_errors() {
    let server = Server::start();
    let client = Client::new(&server.url, Some(TOKEN)).expect("valid URL");
    let bytes = std::fs::read(guests::HASHMAP_USER).expect("the guest is built");
    let upload = client.upload("hashmap-user", &bytes).expect("uploads");
    assert_eq!(upload.body.checks.len(), 4);
    assert_eq!(upload.json["sha256"], upload.body.sha256.as_str());
    assert!(upload.body.trial.fuel.is_some_and(|f| f > 0));

    let described = client.put_group("orders", GROUP_DOC).expect("group stored");
    assert_eq!(described.body.members.len(), 3);
    client
        .set_group_config("orders", &[("streams.assignor.name", "hashmap-user")], &[])
        .expect("selects the upload");
    let target = client.assign("orders").expect("assigns");
    assert_eq!(target.body.assignor, "hashmap-user");
    assert_eq!(
        client.assignment("orders").expect("committed").body,
        target.body
    );

    match client.delete_assignor("hashmap-user") {
        Err(ClientError::Refused {
            status: 409,
            code,
            error,
            ..
        }) => {
            assert_eq!(code, "ASSIGNOR_IN_USE");
            assert_eq!(error["groups"], serde_json::json!(["orders"]));
        }
        other => panic!("expected a 409 refusal, got {other:?}"),
    }
    let stranger = Client::new(&server.url, Some("not-a-token")).expect("valid URL");
    assert!(matches!(
        stranger.list_assignors(),
        Err(ClientError::Unauthorized { .. })
    ));
}

/// `download` writes the tenant's upload byte for byte as uploaded, with the hash the upload
/// reported; a built-in is no upload (404, exit 1) and leaves no file behind.
#[test]
fn download_writes_the_upload_as_uploaded() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(guests::HASHMAP_USER).expect("the guest is built");
    let up = json(&server.run(&["upload", "hashmap-user", guests::HASHMAP_USER, "--json"]));
    let sha256 = up["sha256"].as_str().expect("the upload's hash");

    let file = dir.path().join("got.wasm");
    let got = server.run(&[
        "download",
        "hashmap-user",
        "-o",
        file.to_str().expect("UTF-8"),
    ]);
    assert_ok(&got);
    assert!(
        got.stdout.starts_with(&format!("wrote {}", file.display()))
            && got.stdout.contains(&sha256[..12]),
        "{got}"
    );
    assert_eq!(std::fs::read(&file).expect("written"), bytes);
    let again = json(&server.run(&[
        "download",
        "hashmap-user",
        "-o",
        file.to_str().expect("UTF-8"),
        "--json",
    ]));
    assert_eq!(again["sha256"], sha256);
    assert_eq!(again["bytes"], bytes.len());

    let built_in = dir.path().join("sticky.wasm");
    let refused = server.run(&[
        "download",
        "sticky",
        "-o",
        built_in.to_str().expect("UTF-8"),
    ]);
    assert_eq!(refused.code, 1, "{refused}");
    assert!(refused.stderr.contains("404"), "{refused}");
    assert!(!built_in.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("listed").count(),
        1,
        "no partial file left"
    );
}

/// The library client's `download` returns only bytes that hash to the answer's `ETag`: a
/// stand-in server whose bytes differ, or which sends no hash, is a protocol error naming
/// what was wrong.
#[test]
fn download_refuses_bytes_that_do_not_match_their_hash() {
    use std::io::{BufRead, BufReader};
    let zeros = "0".repeat(64);
    let answers = [
        (
            format!("HTTP/1.1 200 OK\r\nETag: \"{zeros}\"\r\nContent-Length: 4\r\n\r\nwasm"),
            "hash to",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwasm".to_owned(),
            "not a quoted SHA-256",
        ),
    ];
    for (answer, says) in answers {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let stand_in = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("one request");
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            while reader.read_line(&mut line).expect("the request") > 2 {
                line.clear();
            }
            reader
                .into_inner()
                .write_all(answer.as_bytes())
                .expect("answered");
        });
        let client = Client::new(&url, Some(TOKEN)).expect("valid URL");
        match client.download("x") {
            Err(e @ ClientError::Protocol { .. }) => {
                assert!(e.to_string().contains(says), "{e}")
            }
            other => panic!("expected a protocol error, got {other:?}"),
        }
        stand_in.join().expect("the stand-in server");
    }
}

/// A failed assignment in the service is captured: `group capture` downloads it (404 before
/// any failure), and `replay` with the uploaded component reproduces the error and the fuel.
#[test]
fn failed_assignment_is_captured_and_replays() {
    let server = Server::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("orders.capture");
    let file = file.to_str().expect("UTF-8 path");

    let up = server.run(&[
        "upload",
        "loops-on-large-groups",
        guests::LOOPS_ON_LARGE_GROUPS,
    ]);
    assert_ok(&up);
    // Four members: the guest passes the three-member upload trial and loops on more.
    let mut doc: Value = serde_json::from_str(GROUP_DOC).expect("JSON");
    let members = doc["members"].as_array_mut().expect("members");
    let mut extra = members[0].clone();
    extra["memberId"] = "member-d1".into();
    extra["processId"] = "process-d".into();
    extra["activeTasks"] = serde_json::json!({});
    extra["standbyTasks"] = serde_json::json!({});
    members.push(extra);
    assert_ok(&server.run_with_stdin(&["group", "put", "orders", "-"], &doc.to_string()));

    let none = server.run(&["group", "capture", "orders", "--output", file]);
    assert_eq!(none.code, 1, "{none}");
    assert!(
        none.stderr.contains("no failed computation captured"),
        "{none}"
    );

    assert_ok(&server.run(&[
        "group",
        "set-config",
        "orders",
        "streams.assignor.name=loops-on-large-groups",
    ]));
    let failed = server.run(&["group", "assign", "orders", "--json"]);
    assert_eq!(failed.code, 1, "{failed}");
    assert_eq!(json(&failed)["error"]["kind"], "out-of-fuel", "{failed}");

    let got = server.run(&["group", "capture", "orders", "--output", file]);
    assert_ok(&got);
    assert!(got.stdout.contains("assignor replay"), "{got}");
    let replay = assignor(
        &[
            "replay",
            file,
            "--assignor",
            guests::LOOPS_ON_LARGE_GROUPS,
            "--json",
        ],
        &[],
        "",
    );
    assert_ok(&replay);
    let v = json(&replay);
    assert_eq!(v["reproduced"], true, "{replay}");
    assert_eq!(v["captured"]["failure"]["kind"], "out-of-fuel");
    assert_eq!(
        v["replayed"]["error"]["fuel"],
        v["captured"]["failure"]["fuel"]
    );
}

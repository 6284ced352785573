//! A blocking client for the `assignor serve` HTTP API, used by the `assignor` command's
//! `upload`, `list`, `delete` and `group` subcommands and usable by any Rust tool.
//!
//! ```no_run
//! use assignor_runtime::client::{Client, DEFAULT_SERVER};
//!
//! # fn main() -> Result<(), assignor_runtime::client::ClientError> {
//! let client = Client::new(DEFAULT_SERVER, Some("demo-token"))?;
//! let component = std::fs::read("my_assignor.wasm").expect("the component");
//! let upload = client.upload("my-assignor", &component)?;
//! println!("passed: {:?}", upload.body.checks);
//! client.set_group_config("orders", &[("streams.assignor.name", "my-assignor")], &[])?;
//! let target = client.assign("orders")?;
//! println!("epoch {} by {}", target.body.target_assignment_epoch, target.body.assignor);
//! # Ok(()) }
//! ```
//!
//! It speaks plain HTTP only: `ureq` is built without TLS, which keeps the binary small and
//! matches the service, which listens on loopback by default and serves plain HTTP. Reach a
//! remote service through an SSH tunnel or a TLS-terminating proxy on the local machine.
//! Proxies from `HTTP_PROXY`/`NO_PROXY` are honoured, as curl would.
//!
//! Answers are typed, but every typed answer keeps the JSON it came from ([`Reply::json`]):
//! the types ignore fields they do not know, so a newer service still works with this client
//! and `--json` output still shows everything the service said.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use ureq::http::{HeaderValue, Method, Request};

use crate::json::AssignmentDoc;
use crate::{Limits, Usage};

/// Where `assignor serve` listens without `--listen`.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7878";
/// How long a connection attempt may take: 5 s, plenty on loopback or a LAN, short enough
/// that a wrong address fails before anyone wonders.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a whole request may take: 120 s. The service bounds every call it makes (an
/// upload's compile and trial, an assignment's deadline and its wait for a slot), so this
/// only stops a client that would otherwise wait forever on a stuck server.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest answer read: 256 MiB, far above the target assignment of a 1000-member,
/// 16384-task group (a few MiB of JSON).
pub const MAX_ANSWER_BYTES: u64 = 256 << 20;
/// Bodies from this size on (64 KiB) are sent with `Expect: 100-continue`: the service
/// answers a body over its limit (or a bad token) from the headers alone and closes the
/// connection, and a client already writing a large body would see only a broken pipe
/// instead of that answer. Smaller bodies fit in the socket's buffers, so their answer is
/// read either way.
const EXPECT_CONTINUE_BYTES: usize = 64 << 10;

/// Why a request did not succeed. The message says what went wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server URL cannot be used by this client.
    #[error("cannot use server URL {server:?}: {reason}")]
    BadServer {
        /// The URL as given.
        server: String,
        /// What is wrong with it and what to write instead.
        reason: &'static str,
    },
    /// The token cannot be sent as a header (a control character such as a newline, often
    /// from a file read with its line end).
    #[error(
        "the token cannot be sent: it holds a character HTTP headers cannot carry; check the \
         token"
    )]
    BadToken,
    /// No answer: connection refused, unknown host, timeout.
    #[error(
        "cannot reach the assignor service at {server} ({reason}); is it running there \
         (`assignor serve`), and is that its address?"
    )]
    Unreachable {
        /// The server URL.
        server: String,
        /// The transport's reason.
        reason: String,
    },
    /// The service did not accept the token (401).
    #[error("the assignor service at {server} rejected the token: {message}; check the token")]
    Unauthorized {
        /// The server URL.
        server: String,
        /// The service's message.
        message: String,
    },
    /// The service refused or failed the operation: any other error answer, with the
    /// service's own message (which names what to do).
    #[error("{}", refusal_text(*status, code, message))]
    Refused {
        /// The HTTP status: 400 bad request or `INVALID_CONFIG`, 404 no such assignor or
        /// group for this tenant, 409 in use, not ready or over a tenant limit, 413 a body
        /// over its limit, 422 upload rejected, 429 throttled, 500 the assignment failed (the
        /// previous target is kept), 503 no capacity right now or the service is stopping
        /// (nothing changed: retry).
        status: u16,
        /// The service's error code (Kafka's name where one applies), e.g.
        /// `RESOURCE_NOT_FOUND`.
        code: String,
        /// The service's message.
        message: String,
        /// The whole error object, with any extra fields (`check` and `passed` of a rejected
        /// upload, `groups` of an assignor in use, `kind` and `retryAtMs` of a failed
        /// assignment).
        error: Value,
    },
    /// The answer is not what this API sends.
    #[error(
        "unexpected answer from {server} to {request}: {reason}; is that address an assignor \
         service of a matching version?"
    )]
    Protocol {
        /// The server URL.
        server: String,
        /// The request, as `METHOD /path`.
        request: String,
        /// What was wrong with the answer.
        reason: String,
    },
}

/// The service's message, with its code in front unless the message already starts with it
/// (coordinator errors carry their Kafka code in their text).
fn refusal_text(status: u16, code: &str, message: &str) -> String {
    if message.starts_with(code) {
        format!("{message} (HTTP {status})")
    } else {
        format!("{code}: {message} (HTTP {status})")
    }
}

/// A typed answer and the JSON it was read from.
#[derive(Debug, Clone)]
pub struct Reply<T> {
    /// The answer, typed.
    pub body: T,
    /// The service's JSON, as sent.
    pub json: Value,
}

/// One entry of [`Client::list_assignors`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssignorEntry {
    /// The name groups select it by.
    pub name: String,
    /// `built-in` or `component`.
    pub kind: String,
    /// Whether it is one of this tenant's uploads.
    pub uploaded: bool,
    /// Whether groups without `streams.assignor.name` use it.
    pub default: bool,
    /// An upload's content hash.
    pub sha256: Option<String>,
    /// An upload's size.
    pub bytes: Option<u64>,
}

/// A call's resource use beside the limits it ran under, as the service reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// Fuel consumed; `None` for a native built-in.
    pub fuel: Option<u64>,
    /// Peak linear memory, in bytes; `None` for a native built-in.
    pub peak_memory_bytes: Option<u64>,
    /// Wall time of the whole call, in microseconds.
    pub wall_time_us: u64,
    /// Bytes copied into the guest.
    pub input_bytes: Option<u64>,
    /// Bytes the guest returned.
    pub output_bytes: Option<u64>,
    /// The limits of the call.
    pub limits: UsageLimits,
}

/// The limits a call ran under.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageLimits {
    /// Fuel per call; `None` when unlimited.
    pub fuel: Option<u64>,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline, in milliseconds.
    pub timeout_ms: u64,
    /// Largest output, in bytes.
    pub max_output_bytes: u64,
}

impl UsageReport {
    /// The figures as the runtime's [`Usage`], for the same reports a local call prints.
    pub fn usage(&self) -> Usage {
        Usage {
            fuel: self.fuel,
            peak_memory_bytes: self.peak_memory_bytes.map(saturating_usize),
            wall_time: Duration::from_micros(self.wall_time_us),
            input_bytes: self.input_bytes.map(saturating_usize),
            output_bytes: self.output_bytes.map(saturating_usize),
        }
    }

    /// The limits as the runtime's [`Limits`] (the fields the service reports; the rest keep
    /// their defaults).
    pub fn limits(&self) -> Limits {
        let l = &self.limits;
        Limits::default()
            .fuel(l.fuel)
            .memory_bytes(saturating_usize(l.memory_bytes))
            .timeout(Duration::from_millis(l.timeout_ms))
            .max_output_bytes(saturating_usize(l.max_output_bytes))
    }
}

fn saturating_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The answer to [`Client::upload`]: every check passed and the trial's usage.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadReport {
    /// The name it was stored under.
    pub assignor: String,
    /// Its content hash.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// The checks it passed, in order.
    pub checks: Vec<String>,
    /// The trial assignment's usage under the tenant's limits.
    pub trial: UsageReport,
    /// Whether it replaced an earlier upload of the name.
    pub replaced: bool,
}

/// The answer to [`Client::set_group_config`]: the group's config overrides after the change.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupOverrides {
    /// The group.
    pub group_id: String,
    /// Config key → value, `null` where the group uses the broker's value.
    pub config: BTreeMap<String, Value>,
}

/// A group as [`Client::describe`] (and [`Client::put_group`]) report it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupDescription {
    /// The group.
    pub group_id: String,
    /// The group epoch.
    pub group_epoch: u32,
    /// The target assignment's epoch; `None` before the first assignment.
    pub target_assignment_epoch: Option<u32>,
    /// The assignor the next computation uses.
    pub assignor_name: String,
    /// `streams.assignor.name` as configured; differs from `assignor_name` when the group
    /// falls back to the default.
    pub configured_assignor: Option<String>,
    /// The assignment configs the next computation uses.
    pub configs: GroupConfigs,
    /// Member ids, sorted.
    pub members: Vec<String>,
    /// The assignor that computed the current target.
    pub target_assignor: Option<String>,
    /// The usage of that computation.
    pub target_usage: Option<UsageReport>,
    /// The last failure, while none has succeeded since.
    pub last_failure: Option<LastFailure>,
}

/// The resolved assignment configs of a group.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupConfigs {
    /// Standby replicas per stateful task.
    pub num_standby_replicas: u32,
    /// Client tags the rack-aware assignor balances over.
    pub rack_aware_assignment_tags: Vec<String>,
}

/// A group's last failed assignment.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastFailure {
    /// The assignor that failed.
    pub assignor: String,
    /// The error kind, e.g. `out-of-fuel`.
    pub kind: String,
    /// What happened.
    pub message: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The group epoch it was computing for.
    pub group_epoch: u32,
    /// Failures in a row.
    pub consecutive: u32,
    /// No retry before this, in milliseconds since the Unix epoch.
    pub retry_at_ms: u64,
}

/// A group's committed target assignment.
#[derive(Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetAssignment {
    /// The assignment, in the output JSON contract.
    pub assignment: AssignmentDoc,
    /// Its epoch.
    pub target_assignment_epoch: u32,
    /// The assignor that computed it.
    pub assignor: String,
    /// That computation's usage.
    pub usage: UsageReport,
    /// When it was computed, in milliseconds since the Unix epoch.
    pub computed_at_ms: u64,
}

/// A connection to one service as one tenant.
pub struct Client {
    server: String,
    /// `Bearer <token>`, marked sensitive.
    authorization: Option<HeaderValue>,
    agent: ureq::Agent,
}

/// Never shows the token: clients end up in logs and panic messages.
impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server)
            .field("token", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of the service at `server` (`http://HOST:PORT`), sending `token` as a bearer
    /// token when there is one. Nothing is sent yet.
    pub fn new(server: &str, token: Option<&str>) -> Result<Self, ClientError> {
        let bad = |reason| ClientError::BadServer {
            server: server.to_owned(),
            reason,
        };
        if server.starts_with("https://") {
            return Err(bad(
                "this client speaks plain HTTP only (built without TLS); the service serves \
                 plain HTTP, so write http://, or tunnel a remote one to localhost",
            ));
        }
        let Some(rest) = server.strip_prefix("http://") else {
            return Err(bad("write http://HOST:PORT, e.g. http://127.0.0.1:7878"));
        };
        if rest.trim_end_matches('/').is_empty() {
            return Err(bad("no host; write http://HOST:PORT"));
        }
        let agent = ureq::Agent::config_builder()
            // Error answers carry the service's JSON reason: read them like any answer.
            .http_status_as_error(false)
            .timeout_connect(Some(DEFAULT_CONNECT_TIMEOUT))
            .timeout_global(Some(DEFAULT_TIMEOUT))
            .build()
            .into();
        let authorization = token
            .map(|t| {
                let mut value = HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| ClientError::BadToken)?;
                value.set_sensitive(true);
                Ok(value)
            })
            .transpose()?;
        Ok(Self {
            server: server.trim_end_matches('/').to_owned(),
            authorization,
            agent,
        })
    }

    /// The server URL, without a trailing slash.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The built-ins (or broker-configured assignors) and this tenant's uploads, default
    /// first.
    pub fn list_assignors(&self) -> Result<Reply<Vec<AssignorEntry>>, ClientError> {
        #[derive(Deserialize)]
        struct List {
            assignors: Vec<AssignorEntry>,
        }
        let path = "/v1/assignors".to_owned();
        let json = self.call(Method::GET, path.clone(), None)?;
        let list: List = self.typed(&Method::GET, &path, &json)?;
        Ok(Reply {
            body: list.assignors,
            json,
        })
    }

    /// Uploads (or atomically replaces) a component under `name`, which must equal its
    /// `name()`. The service checks it completely before storing anything; a rejection is
    /// [`ClientError::Refused`] with the failed `check` and the checks `passed` before it.
    pub fn upload(&self, name: &str, component: &[u8]) -> Result<Reply<UploadReport>, ClientError> {
        let path = format!("/v1/assignors/{}", segment(name));
        self.typed_call(Method::PUT, path, Some(component))
    }

    /// Deletes an upload; refused (409 `ASSIGNOR_IN_USE`, naming the groups) while a group
    /// selects it.
    pub fn delete_assignor(&self, name: &str) -> Result<(), ClientError> {
        let path = format!("/v1/assignors/{}", segment(name));
        self.call(Method::DELETE, path, None).map(drop)
    }

    /// Sets and deletes group config keys, all or nothing (`INVALID_CONFIG` names the first
    /// bad change). Creates the group if it is new.
    pub fn set_group_config(
        &self,
        group: &str,
        set: &[(&str, &str)],
        delete: &[&str],
    ) -> Result<Reply<GroupOverrides>, ClientError> {
        let set: BTreeMap<&str, &str> = set.iter().copied().collect();
        let body = json!({ "set": set, "delete": delete });
        let path = format!("/v1/groups/{}/config", segment(group));
        self.typed_call(Method::PUT, path, Some(body.to_string().as_bytes()))
    }

    /// Replaces the whole group with a document in the input JSON contract: topology,
    /// members (absent ones leave), and `configs` when present.
    pub fn put_group(
        &self,
        group: &str,
        document: &str,
    ) -> Result<Reply<GroupDescription>, ClientError> {
        let path = format!("/v1/groups/{}", segment(group));
        self.typed_call(Method::PUT, path, Some(document.as_bytes()))
    }

    /// Deletes a group: its state, target assignment and capture. Frees its place under the
    /// tenant's `max.groups`.
    pub fn delete_group(&self, group: &str) -> Result<(), ClientError> {
        let path = format!("/v1/groups/{}", segment(group));
        self.call(Method::DELETE, path, None).map(drop)
    }

    /// Triggers an assignment: computes the target if the group moved on since the last one
    /// and answers the committed target. A failed assignment is [`ClientError::Refused`]
    /// (500, with `kind` and `retryAtMs`); the previous target stays.
    pub fn assign(&self, group: &str) -> Result<Reply<TargetAssignment>, ClientError> {
        let path = format!("/v1/groups/{}/assign", segment(group));
        self.typed_call(Method::POST, path, None)
    }

    /// The committed target assignment.
    pub fn assignment(&self, group: &str) -> Result<Reply<TargetAssignment>, ClientError> {
        let path = format!("/v1/groups/{}/assignment", segment(group));
        self.typed_call(Method::GET, path, None)
    }

    /// Describes a group: epochs, the assignor for the next computation, configs, members,
    /// the last failure.
    pub fn describe(&self, group: &str) -> Result<Reply<GroupDescription>, ClientError> {
        let path = format!("/v1/groups/{}", segment(group));
        self.typed_call(Method::GET, path, None)
    }

    /// The capture of the group's last failed computation (the SDK's `.capture` bytes, for
    /// `assignor replay`); 404 `RESOURCE_NOT_FOUND` when none failed.
    pub fn capture(&self, group: &str) -> Result<Vec<u8>, ClientError> {
        let path = format!("/v1/groups/{}/capture", segment(group));
        self.exchange(&Method::GET, &path, None)
    }

    fn typed_call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        body: Option<&[u8]>,
    ) -> Result<Reply<T>, ClientError> {
        let json = self.call(method.clone(), path.clone(), body)?;
        let body = self.typed(&method, &path, &json)?;
        Ok(Reply { body, json })
    }

    fn typed<T: DeserializeOwned>(
        &self,
        method: &Method,
        path: &str,
        json: &Value,
    ) -> Result<T, ClientError> {
        T::deserialize(json).map_err(|e| self.protocol(method, path, e.to_string()))
    }

    fn protocol(&self, method: &Method, path: &str, reason: String) -> ClientError {
        ClientError::Protocol {
            server: self.server.clone(),
            request: format!("{method} {path}"),
            reason,
        }
    }

    /// Sends one request; a success answers its JSON (`null` for an empty body), an error
    /// answer becomes the matching [`ClientError`].
    fn call(
        &self,
        method: Method,
        path: String,
        body: Option<&[u8]>,
    ) -> Result<Value, ClientError> {
        let bytes = self.exchange(&method, &path, body)?;
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|_| {
            self.protocol(
                &method,
                &path,
                format!(
                    "a success answer whose body is not JSON: {}",
                    excerpt(&String::from_utf8_lossy(&bytes))
                ),
            )
        })
    }

    /// Sends one request; a success answers its body as bytes, an error answer becomes the
    /// matching [`ClientError`].
    fn exchange(
        &self,
        method: &Method,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Vec<u8>, ClientError> {
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.server));
        if let Some(value) = &self.authorization {
            request = request.header("Authorization", value.clone());
        }
        if body.is_some_and(|b| b.len() >= EXPECT_CONTINUE_BYTES) {
            request = request.header("Expect", "100-continue");
        }
        let built = match body {
            Some(bytes) => request.body(bytes).map(|r| self.agent.run(r)),
            None => request.body(()).map(|r| self.agent.run(r)),
        };
        let mut response = built
            .map_err(|_| ClientError::BadServer {
                server: self.server.clone(),
                reason: "not a valid URL; write http://HOST:PORT",
            })?
            .map_err(|e| match e {
                ureq::Error::BadUri(_) => ClientError::BadServer {
                    server: self.server.clone(),
                    reason: "not a valid URL; write http://HOST:PORT",
                },
                // A server that closed the connection while the body was on its way (one that
                // ignores `Expect: 100-continue`, or a proxy) most likely refused it.
                ureq::Error::Io(io)
                    if body.is_some()
                        && matches!(
                            io.kind(),
                            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                        ) =>
                {
                    ClientError::Unreachable {
                        server: self.server.clone(),
                        reason: format!(
                            "the connection closed while the {}-byte request body was being \
                             sent, before any answer; a service closes it early when it \
                             refuses a body, e.g. one over a size limit ({io})",
                            body.map_or(0, <[u8]>::len)
                        ),
                    }
                }
                e => ClientError::Unreachable {
                    server: self.server.clone(),
                    reason: e.to_string(),
                },
            })?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|e| self.protocol(method, path, format!("the answer broke off: {e}")))?;
        if (200..300).contains(&status) {
            return Ok(bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        let json: Option<Value> = serde_json::from_str(&text).ok();
        // Bodies over the service's largest upload limit are cut off before any handler runs,
        // with a plain-text answer.
        if status == 413 && json.is_none() {
            return Err(ClientError::Refused {
                status,
                code: "PAYLOAD_TOO_LARGE".to_owned(),
                message: "the request body is over the service's size limit (its tenants' \
                          `max.component.bytes`); send a smaller component"
                    .to_owned(),
                error: Value::Null,
            });
        }
        let error = json.as_ref().map(|j| &j["error"]);
        let (Some(code), Some(message)) = (
            error.and_then(|e| e["code"].as_str()),
            error.and_then(|e| e["message"].as_str()),
        ) else {
            return Err(self.protocol(
                method,
                path,
                format!(
                    "HTTP {status} without the service's error object: {}",
                    excerpt(&text)
                ),
            ));
        };
        if status == 401 {
            return Err(ClientError::Unauthorized {
                server: self.server.clone(),
                message: message.to_owned(),
            });
        }
        Err(ClientError::Refused {
            status,
            code: code.to_owned(),
            message: message.to_owned(),
            error: error.cloned().unwrap_or_default(),
        })
    }
}

/// The start of an unexpected answer, enough to recognise what answered instead.
fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None if text.is_empty() => "(empty body)".to_owned(),
        None => format!("{text:?}"),
    }
}

/// A name as one URL path segment: unreserved characters stay, every other byte is
/// percent-encoded (the service decodes it), so a group id with `/`, `?` or spaces still
/// names one resource.
fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names with reserved characters stay one path segment.
    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("orders-app_1.v2~x"), "orders-app_1.v2~x");
        assert_eq!(segment("a/b c?d"), "a%2Fb%20c%3Fd");
        assert_eq!(segment("é"), "%C3%A9");
    }

    /// Only plain `http://HOST…` URLs are accepted, each refusal saying what to write.
    #[test]
    fn server_urls_are_checked() {
        for (url, says) in [
            ("https://example.com", "plain HTTP only"),
            ("127.0.0.1:7878", "write http://HOST:PORT"),
            ("http://", "no host"),
        ] {
            let e = Client::new(url, None).expect_err(url).to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
        let c = Client::new("http://127.0.0.1:7878/", Some("secret")).expect("valid");
        assert_eq!(c.server(), "http://127.0.0.1:7878");
        assert!(
            !format!("{c:?}").contains("secret"),
            "the token is redacted"
        );
        let e = Client::new("http://127.0.0.1:7878", Some("secret\n")).expect_err("newline");
        assert!(matches!(e, ClientError::BadToken), "{e}");
    }

    /// A refusal shows the code once, whether or not the message starts with it.
    #[test]
    fn refusals_show_the_code_once() {
        assert_eq!(
            refusal_text(404, "RESOURCE_NOT_FOUND", "no group `x`"),
            "RESOURCE_NOT_FOUND: no group `x` (HTTP 404)"
        );
        assert_eq!(
            refusal_text(400, "INVALID_CONFIG", "INVALID_CONFIG: group `x`: bad"),
            "INVALID_CONFIG: group `x`: bad (HTTP 400)"
        );
    }
}

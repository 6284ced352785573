//! A blocking client for the `assignor serve` HTTP API, used by the `assignor` command's
//! `upload`, `list`, `delete` and `group` subcommands and usable by any Rust tool.
//!
//! ```no_run
//! use assignor_client::{Client, DEFAULT_SERVER};
//!
//! # fn main() -> Result<(), assignor_client::ClientError> {
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
//! Answers are typed with the [`protocol`](assignor_protocol)'s types, the very ones the service
//! writes them with, and every typed answer keeps the JSON it came from ([`Reply::json`]):
//! the types ignore fields they do not know, so a newer service still works with this client
//! and `--json` output still shows everything the service said.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize as _;
use serde::de::DeserializeOwned;
use serde_json::Value;
use ureq::http::{HeaderValue, Method, Request};

pub use assignor_protocol::{
    AssignorEntry, CommittedTarget, ConfigOverrides, DescribedGroup, GroupConfigs, GroupOverrides,
    LastFailure, LimitOverrides, TenantList, TenantReport, UploadReport, UsageReport,
};
use assignor_protocol::{AssignorList, ConfigChange, ErrorAnswer};

/// Where `assignor serve` listens without `--listen`.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7878";
/// How long a connection attempt may take: 5 s, plenty on loopback or a LAN, short enough
/// that a wrong address fails before anyone wonders.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a whole request may take: 120 s. The service bounds every call it makes (an
/// upload's compile and trial, an assignment's deadline and its wait for a slot), so this
/// only stops a client that would otherwise wait forever on a stuck server. (Not a call's
/// deadline, which the service sets per tenant: 5 s by default.)
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
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
#[non_exhaustive]
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
            .timeout_global(Some(DEFAULT_REQUEST_TIMEOUT))
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
        let path = "/v1/assignors".to_owned();
        let json = self.call(Method::GET, path.clone(), None)?;
        let list: AssignorList = self.typed(&Method::GET, &path, &json)?;
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
        let change = ConfigChange {
            delete: delete.iter().map(|&k| k.to_owned()).collect(),
            set: set
                .iter()
                .map(|&(k, v)| (k.to_owned(), Value::from(v)))
                .collect::<BTreeMap<_, _>>(),
        };
        let body = serde_json::to_vec(&change).expect("a config change always serializes");
        let path = format!("/v1/groups/{}/config", segment(group));
        self.typed_call(Method::PUT, path, Some(&body))
    }

    /// The group's own config overrides (`null` where the broker's value applies).
    pub fn group_config(&self, group: &str) -> Result<Reply<GroupOverrides>, ClientError> {
        let path = format!("/v1/groups/{}/config", segment(group));
        self.typed_call(Method::GET, path, None)
    }

    /// Replaces the whole group with a document in the input JSON contract: topology,
    /// members (absent ones leave), and `configs` when present.
    pub fn put_group(
        &self,
        group: &str,
        document: &str,
    ) -> Result<Reply<DescribedGroup>, ClientError> {
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
    pub fn assign(&self, group: &str) -> Result<Reply<CommittedTarget>, ClientError> {
        let path = format!("/v1/groups/{}/assign", segment(group));
        self.typed_call(Method::POST, path, None)
    }

    /// The committed target assignment.
    pub fn assignment(&self, group: &str) -> Result<Reply<CommittedTarget>, ClientError> {
        let path = format!("/v1/groups/{}/assignment", segment(group));
        self.typed_call(Method::GET, path, None)
    }

    /// Describes a group: epochs, the assignor for the next computation, configs, members,
    /// the last failure.
    pub fn describe(&self, group: &str) -> Result<Reply<DescribedGroup>, ClientError> {
        let path = format!("/v1/groups/{}", segment(group));
        self.typed_call(Method::GET, path, None)
    }

    /// This tenant's upload `name`, byte for byte as uploaded, with its SHA-256 (hex). The
    /// service sends the hash as the answer's `ETag`; bytes that do not hash to it (a transfer
    /// cut short or altered on the way, or something else answering) are
    /// [`ClientError::Protocol`], never returned. Built-ins and other tenants' uploads are 404
    /// `RESOURCE_NOT_FOUND`.
    pub fn download(&self, name: &str) -> Result<Download, ClientError> {
        use sha2::{Digest as _, Sha256};
        let path = format!("/v1/assignors/{}", segment(name));
        let (component, etag) = self.exchange_tagged(&Method::GET, &path, None)?;
        let sha256 = etag
            .as_deref()
            .and_then(|tag| tag.strip_prefix('"')?.strip_suffix('"'))
            .filter(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_ascii_lowercase)
            .ok_or_else(|| {
                self.protocol(
                    &Method::GET,
                    &path,
                    format!(
                        "the answer's ETag is not a quoted SHA-256 (got {}); is this an \
                         assignor service?",
                        etag.as_deref().map_or("none".to_owned(), excerpt)
                    ),
                )
            })?;
        let actual = hex(&Sha256::digest(&component));
        if actual != sha256 {
            return Err(self.protocol(
                &Method::GET,
                &path,
                format!(
                    "the {} bytes received hash to {actual}, not to the ETag's {sha256}: the \
                     transfer was cut short or altered; download it again",
                    component.len()
                ),
            ));
        }
        Ok(Download { component, sha256 })
    }

    /// The capture of the group's last failed computation (the SDK's `.capture` bytes, for
    /// `assignor replay`); 404 `RESOURCE_NOT_FOUND` when none failed.
    pub fn capture(&self, group: &str) -> Result<Vec<u8>, ClientError> {
        let path = format!("/v1/groups/{}/capture", segment(group));
        self.exchange(&Method::GET, &path, None)
    }

    /// Admin token only: every tenant with its limits in force and the admin's overrides.
    pub fn tenants(&self) -> Result<Reply<TenantList>, ClientError> {
        self.typed_call(Method::GET, "/v1/admin/tenants".to_owned(), None)
    }

    /// Admin token only: changes some of `tenant`'s limits (the fields set in `change`, on
    /// top of earlier overrides), all or nothing: refused if an upload no longer loads.
    pub fn set_tenant_limits(
        &self,
        tenant: &str,
        change: &LimitOverrides,
    ) -> Result<Reply<TenantReport>, ClientError> {
        let body = serde_json::to_vec(change).expect("overrides always serialize");
        let path = format!("/v1/admin/tenants/{}/limits", segment(tenant));
        self.typed_call(Method::PUT, path, Some(&body))
    }

    /// Admin token only: `tenant`'s limits back to the config file's.
    pub fn reset_tenant_limits(&self, tenant: &str) -> Result<Reply<TenantReport>, ClientError> {
        let path = format!("/v1/admin/tenants/{}/limits", segment(tenant));
        self.typed_call(Method::DELETE, path, None)
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
        self.exchange_tagged(method, path, body)
            .map(|(bytes, _)| bytes)
    }

    /// [`exchange`](Self::exchange), with a success's `ETag` header when it has a readable one.
    fn exchange_tagged(
        &self,
        method: &Method,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(Vec<u8>, Option<String>), ClientError> {
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
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = response
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_vec()
            .map_err(|e| self.protocol(method, path, format!("the answer broke off: {e}")))?;
        if (200..300).contains(&status) {
            return Ok((bytes, etag));
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
        let answer = json.and_then(|j| {
            let whole = j.get("error").cloned()?;
            ErrorAnswer::deserialize(j).ok().map(|a| (a.error, whole))
        });
        let Some((error, whole)) = answer else {
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
                message: error.message,
            });
        }
        Err(ClientError::Refused {
            status,
            code: error.code,
            message: error.message,
            error: whole,
        })
    }
}

/// An upload as [`Client::download`] got it: checked against its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Download {
    /// The component, byte for byte as uploaded.
    pub component: Vec<u8>,
    /// Its SHA-256, lowercase hex: what the upload's report and the assignor list show.
    pub sha256: String,
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

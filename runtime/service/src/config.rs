//! The service's configuration: the `service.*` keys of the same `server.properties` file the
//! broker keys live in, so one file configures both. Tokens are never configured in clear,
//! only their SHA-256, so the file (and a leaked copy of it) grants nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use assignor_coordinator::config::{BrokerConfig, ConfigError};
use assignor_coordinator::{DEFAULT_MAX_CAPTURE_BYTES, DEFAULT_MAX_CAPTURES, StateLimits};
use assignor_protocol::LimitOverrides;
use assignor_sandbox::wire::{millis, size};
use assignor_sandbox::{
    DEFAULT_FUEL, DEFAULT_MAX_INPUT_BYTES, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT,
};

/// `service.listen`: the address the HTTP API listens on.
pub const LISTEN: &str = "service.listen";
/// `service.data.dir`: where uploads, groups and the compiled cache are kept.
pub const DATA_DIR: &str = "service.data.dir";
/// `service.store`: where the service keeps its state: `embedded` (the default: a redb
/// database in the data directory) or an etcd cluster, `etcd://HOST:PORT[,HOST:PORT…]`.
pub const STORE: &str = "service.store";
/// `service.admin.token.sha256`: SHA-256 (hex) of the admin token; unset means no admin.
pub const ADMIN_TOKEN_SHA256: &str = "service.admin.token.sha256";
/// `service.tenants`: the tenant names, comma-separated.
pub const TENANTS: &str = "service.tenants";
/// Prefix of the per-tenant keys: `service.tenant.<name>.token.sha256` (required) and the
/// limits `.fuel`, `.memory.bytes`, `.timeout.ms`, `.compile.timeout.ms`, `.max.assignors`,
/// `.max.component.bytes`, `.max.concurrent.assignments`, `.max.input.bytes`,
/// `.max.groups`, `.max.captures`, `.max.capture.bytes`.
pub const TENANT_PREFIX: &str = "service.tenant.";

/// Default of [`LISTEN`]: loopback only, so a default start exposes nothing to the network.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";
/// Default of [`DATA_DIR`], relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "assignor-data";
/// Default of a tenant's `max.assignors`: uploaded assignors it may keep at once.
pub const DEFAULT_MAX_ASSIGNORS: usize = 16;
/// Default of a tenant's `max.component.bytes`: 8 MiB (a release-built Rust assignor is
/// ~100 KB; the runtime's own cap is higher for operator-listed components).
pub const DEFAULT_MAX_COMPONENT_BYTES: usize = 8 << 20;
/// Default of a tenant's `max.concurrent.assignments`: half the machine's cores, at least 1,
/// so a tenant whose assignor spins until its deadline leaves the other half to everyone
/// else (on 2 cores, a hostile tenant given both slowed another tenant's assignments ~2-3x).
pub fn default_max_concurrent_assignments() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Default of a tenant's `max.groups`: 1,000 streams groups, far more than one application
/// team runs, few enough that a tenant's groups cannot fill the disk (each group document is
/// at most its `max.input.bytes`). The coordinator's own default is higher
/// ([`DEFAULT_MAX_GROUPS`](assignor_coordinator::DEFAULT_MAX_GROUPS)).
pub const DEFAULT_MAX_GROUPS: usize = 1_000;

/// Default of a tenant's `compile.timeout.ms` when the broker sets no
/// `group.streams.assignor.compile.timeout.ms`: the runtime's
/// [`DEFAULT_COMPILE_TIMEOUT`](assignor_sandbox::DEFAULT_COMPILE_TIMEOUT), 10 s for an upload to be
/// validated, compiled and loaded (`name()`, `configure`). A ~100 KB component takes well under
/// a second. The compile runs in a child process killed at this limit, so a component that
/// takes longer is rejected and its compile stops occupying a core.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = assignor_sandbox::DEFAULT_COMPILE_TIMEOUT;

/// The embedded demo's tenant.
pub const DEMO_TENANT: &str = "demo";
/// The embedded demo's token. Public by design: the demo listens on loopback only, and a
/// real deployment configures its own tenants and token hashes.
pub const DEMO_TOKEN: &str = "demo-token";

/// What one tenant may use. Fuel, memory and wall time apply to every sandboxed call of the
/// tenant (uploads' trials included); they default to the broker's `group.streams.assignor.*`
/// values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantLimits {
    /// Fuel per call; `None` leaves only the deadline. Default: the broker's, else
    /// [`DEFAULT_FUEL`].
    pub fuel: Option<u64>,
    /// Linear memory per call. Default: the broker's, else [`DEFAULT_MEMORY_BYTES`].
    pub memory_bytes: usize,
    /// Wall-clock deadline per call. Default: the broker's, else [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// Time an upload has to be validated, compiled and loaded; the compile of any component
    /// of the tenant (an upload's, the broker's) is killed past it. Default: the broker's,
    /// else [`DEFAULT_COMPILE_TIMEOUT`].
    pub compile_timeout: Duration,
    /// Uploaded assignors kept at once. Default [`DEFAULT_MAX_ASSIGNORS`].
    pub max_assignors: usize,
    /// Largest component accepted. Default [`DEFAULT_MAX_COMPONENT_BYTES`].
    pub max_component_bytes: usize,
    /// Assignments (and upload trials) running at once; more wait for a slot up to the
    /// tenant's deadline, then answer 429. Default
    /// [`default_max_concurrent_assignments`].
    pub max_concurrent_assignments: usize,
    /// Largest group document (`PUT /v1/groups/{g}`) accepted, checked before it is read
    /// (413 past it). Default: the broker's `group.streams.assignor.max.input.bytes`, else
    /// [`DEFAULT_MAX_INPUT_BYTES`].
    pub max_input_bytes: usize,
    /// Groups kept at once; creating one more answers 409 `POLICY_VIOLATION`. Each keeps at
    /// most one failure record, so this bounds those too. Default [`DEFAULT_MAX_GROUPS`].
    pub max_groups: usize,
    /// Captures of failed computations kept at once (one per group at most); the oldest is
    /// dropped for a new one. Default [`DEFAULT_MAX_CAPTURES`].
    pub max_captures: usize,
    /// Bytes of captures kept, all together; the oldest are dropped for a new one, and one
    /// larger than this alone is not kept. Default [`DEFAULT_MAX_CAPTURE_BYTES`].
    pub max_capture_bytes: usize,
}

impl TenantLimits {
    /// The coordinator's bounds on what it keeps for this tenant.
    pub fn state_limits(&self) -> StateLimits {
        StateLimits::default()
            .max_groups(self.max_groups)
            .max_captures(self.max_captures)
            .max_capture_bytes(self.max_capture_bytes)
    }
}

impl Default for TenantLimits {
    fn default() -> Self {
        Self {
            fuel: Some(DEFAULT_FUEL),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: DEFAULT_TIMEOUT,
            compile_timeout: DEFAULT_COMPILE_TIMEOUT,
            max_assignors: DEFAULT_MAX_ASSIGNORS,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            max_concurrent_assignments: default_max_concurrent_assignments(),
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            max_groups: DEFAULT_MAX_GROUPS,
            max_captures: DEFAULT_MAX_CAPTURES,
            max_capture_bytes: DEFAULT_MAX_CAPTURE_BYTES,
        }
    }
}

impl TenantLimits {
    /// These limits with an admin's `overrides` applied; a value its config key would refuse
    /// is refused here too, naming the field.
    pub fn with_overrides(&self, overrides: &LimitOverrides) -> Result<Self, String> {
        let at_least_one = |field: &str, v: u64| {
            if v == 0 {
                Err(format!("{field} must be at least 1"))
            } else {
                Ok(v)
            }
        };
        let o = overrides;
        let mut limits = self.clone();
        if let Some(fuel) = o.fuel {
            limits.fuel = fuel.units();
        }
        if let Some(v) = o.memory_bytes {
            limits.memory_bytes = size(v);
        }
        if let Some(v) = o.timeout_ms {
            limits.timeout = Duration::from_millis(at_least_one("timeoutMs", v)?);
        }
        if let Some(v) = o.compile_timeout_ms {
            limits.compile_timeout = Duration::from_millis(at_least_one("compileTimeoutMs", v)?);
        }
        if let Some(v) = o.max_assignors {
            limits.max_assignors = size(v);
        }
        if let Some(v) = o.max_component_bytes {
            limits.max_component_bytes = size(v);
        }
        if let Some(v) = o.max_concurrent_assignments {
            limits.max_concurrent_assignments = size(at_least_one("maxConcurrentAssignments", v)?);
        }
        if let Some(v) = o.max_input_bytes {
            limits.max_input_bytes = size(v);
        }
        if let Some(v) = o.max_groups {
            limits.max_groups = size(v);
        }
        if let Some(v) = o.max_captures {
            limits.max_captures = size(v);
        }
        if let Some(v) = o.max_capture_bytes {
            limits.max_capture_bytes = size(v);
        }
        Ok(limits)
    }
}

/// The limits as the service reports them.
impl From<&TenantLimits> for assignor_protocol::TenantLimitsReport {
    fn from(l: &TenantLimits) -> Self {
        Self {
            compile_timeout_ms: millis(l.compile_timeout),
            fuel: l.fuel,
            max_assignors: l.max_assignors as u64,
            max_capture_bytes: l.max_capture_bytes as u64,
            max_captures: l.max_captures as u64,
            max_component_bytes: l.max_component_bytes as u64,
            max_concurrent_assignments: l.max_concurrent_assignments as u64,
            max_groups: l.max_groups as u64,
            max_input_bytes: l.max_input_bytes as u64,
            memory_bytes: l.memory_bytes as u64,
            timeout_ms: millis(l.timeout),
        }
    }
}

/// One tenant: a name (its namespace) and the hash of its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantConfig {
    /// The tenant's name: 1 to 64 of `a-z`, `0-9`, `-`, `_`.
    pub name: String,
    /// SHA-256 of its bearer token.
    pub token_sha256: [u8; 32],
    /// Its limits.
    pub limits: TenantLimits,
}

/// Where the service keeps its state ([`STORE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreConfig {
    /// The embedded [`RedbStore`](assignor_coordinator::store::RedbStore), `store.redb` in
    /// the data directory: one machine, no other process.
    Embedded,
    /// An etcd cluster ([`EtcdStore`](assignor_store_etcd::EtcdStore)): its members' client
    /// endpoints, `http://host:port`.
    Etcd {
        /// One per member listed.
        endpoints: Vec<String>,
    },
}

impl StoreConfig {
    /// Parses a [`STORE`] value: `embedded`, or `etcd://HOST:PORT[,HOST:PORT…]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text == "embedded" {
            Ok(Self::Embedded)
        } else if text.starts_with("etcd://") {
            assignor_store_etcd::parse_url(text)
                .map(|endpoints| Self::Etcd { endpoints })
                .map_err(|e| e.to_string())
        } else {
            Err(
                "expected `embedded` (the default: redb in the data directory) or \
                 etcd://HOST:PORT[,HOST:PORT...]"
                    .into(),
            )
        }
    }
}

/// The whole service configuration.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// [`LISTEN`].
    pub listen: SocketAddr,
    /// [`DATA_DIR`]: the compiled cache, and the embedded store unless [`STORE`] names
    /// another.
    pub data_dir: PathBuf,
    /// [`STORE`].
    pub store: StoreConfig,
    /// [`ADMIN_TOKEN_SHA256`].
    pub admin_token_sha256: Option<[u8; 32]>,
    /// [`TENANTS`] with their keys, in the listed order.
    pub tenants: Vec<TenantConfig>,
    /// The broker keys (`group.streams.*` and the rest), without any `service.*` key: those
    /// hold token hashes and must never reach a component's `configure`.
    pub broker: BrokerConfig,
}

/// SHA-256 of a token, as configured in the `*.token.sha256` keys.
pub fn token_sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ServiceConfig {
    /// Reads `file` and `overrides` exactly as the broker config is read, then splits off the
    /// `service.*` keys.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let all = BrokerConfig::load(file, overrides)?;
        let base_dir = all.base_dir.clone();
        let (service, broker): (BTreeMap<_, _>, BTreeMap<_, _>) = all
            .originals()
            .clone()
            .into_iter()
            .partition(|(k, _)| k.starts_with("service."));
        let mut broker = BrokerConfig::from_properties(broker)?;
        broker.base_dir = base_dir;
        Self::from_service_properties(&service, broker)
    }

    /// The embedded default of `assignor serve` without `--config`: [`DEFAULT_LISTEN`],
    /// [`DEFAULT_DATA_DIR`], every sample assignor (all three are built-ins: `sticky`, the
    /// default, `balanced` and `rack-aware`), and one tenant
    /// [`DEMO_TENANT`] whose token is [`DEMO_TOKEN`], with default limits; no admin.
    pub fn demo(overrides: &[String]) -> Result<Self, ConfigError> {
        let mut all = vec![
            format!(
                "{}=sticky,balanced,rack-aware",
                assignor_coordinator::config::ASSIGNORS
            ),
            format!("{TENANTS}={DEMO_TENANT}"),
            format!(
                "{TENANT_PREFIX}{DEMO_TENANT}.token.sha256={}",
                hex(&token_sha256(DEMO_TOKEN))
            ),
        ];
        all.extend(overrides.iter().cloned());
        Self::load(None, &all)
    }

    fn from_service_properties(
        props: &BTreeMap<String, String>,
        broker: BrokerConfig,
    ) -> Result<Self, ConfigError> {
        let value_err = |key: &'static str, value: &str, message: String| ConfigError::Value {
            key,
            value: value.to_owned(),
            message,
        };
        let get = |key: &str| props.get(key).map(String::as_str);
        let listen_text = get(LISTEN).unwrap_or(DEFAULT_LISTEN);
        let listen = listen_text.parse().map_err(|_| {
            value_err(
                LISTEN,
                listen_text,
                "not a socket address; write IP:PORT, e.g. 127.0.0.1:7878".into(),
            )
        })?;
        let data_dir = PathBuf::from(get(DATA_DIR).unwrap_or(DEFAULT_DATA_DIR));
        let store = get(STORE)
            .map(|v| StoreConfig::parse(v).map_err(|m| value_err(STORE, v, m)))
            .transpose()?
            .unwrap_or(StoreConfig::Embedded);
        let admin_token_sha256 = get(ADMIN_TOKEN_SHA256)
            .map(|v| parse_hash(v).map_err(|m| value_err(ADMIN_TOKEN_SHA256, v, m)))
            .transpose()?;
        let names = get(TENANTS)
            .map(assignor_coordinator::config::parse_list)
            .unwrap_or_default();
        let defaults = TenantLimits {
            fuel: broker.limits.get_fuel(),
            memory_bytes: broker.limits.get_memory_bytes(),
            timeout: broker.limits.get_timeout(),
            compile_timeout: broker.limits.get_compile_timeout(),
            max_input_bytes: broker.limits.get_max_input_bytes(),
            ..TenantLimits::default()
        };
        let mut tenants: Vec<TenantConfig> = Vec::with_capacity(names.len());
        for name in names {
            if !valid_tenant_name(&name) {
                return Err(value_err(
                    TENANTS,
                    &name,
                    "a tenant name is 1 to 64 of a-z, 0-9, `-` and `_`".into(),
                ));
            }
            if tenants.iter().any(|t| t.name == name) {
                return Err(value_err(TENANTS, &name, "tenant listed twice".into()));
            }
            let key = |suffix: &str| format!("{TENANT_PREFIX}{name}.{suffix}");
            let tenant_value = |suffix: &str, message: String| ConfigError::Value {
                key: TENANT_PREFIX,
                value: format!("{}={}", key(suffix), get(&key(suffix)).unwrap_or("")),
                message,
            };
            let token_sha256 = match get(&key("token.sha256")) {
                Some(v) => parse_hash(v).map_err(|m| tenant_value("token.sha256", m))?,
                None => {
                    return Err(tenant_value(
                        "token.sha256",
                        format!(
                            "tenant `{name}` has no token hash; set {} to the SHA-256 (hex) of \
                             its token, e.g. from `printf %s TOKEN | sha256sum`",
                            key("token.sha256")
                        ),
                    ));
                }
            };
            let number = |suffix: &str| -> Result<Option<u64>, ConfigError> {
                get(&key(suffix))
                    .map(|v| {
                        v.trim()
                            .parse::<u64>()
                            .map_err(|_| tenant_value(suffix, "not a non-negative integer".into()))
                    })
                    .transpose()
            };
            let mut limits = defaults.clone();
            match get(&key("fuel")) {
                Some("none") => limits.fuel = None,
                _ => {
                    if let Some(f) = number("fuel")? {
                        limits.fuel = Some(f);
                    }
                }
            }
            if let Some(v) = number("memory.bytes")? {
                limits.memory_bytes = v as usize;
            }
            if let Some(v) = number("timeout.ms")? {
                if v == 0 {
                    return Err(tenant_value("timeout.ms", "must be at least 1".into()));
                }
                limits.timeout = Duration::from_millis(v);
            }
            if let Some(v) = number("compile.timeout.ms")? {
                if v == 0 {
                    return Err(tenant_value(
                        "compile.timeout.ms",
                        "must be at least 1".into(),
                    ));
                }
                limits.compile_timeout = Duration::from_millis(v);
            }
            if let Some(v) = number("max.assignors")? {
                limits.max_assignors = v as usize;
            }
            if let Some(v) = number("max.component.bytes")? {
                limits.max_component_bytes = v as usize;
            }
            if let Some(v) = number("max.concurrent.assignments")? {
                if v == 0 {
                    return Err(tenant_value(
                        "max.concurrent.assignments",
                        "must be at least 1".into(),
                    ));
                }
                limits.max_concurrent_assignments = v as usize;
            }
            if let Some(v) = number("max.input.bytes")? {
                limits.max_input_bytes = v as usize;
            }
            if let Some(v) = number("max.groups")? {
                limits.max_groups = v as usize;
            }
            if let Some(v) = number("max.captures")? {
                limits.max_captures = v as usize;
            }
            if let Some(v) = number("max.capture.bytes")? {
                limits.max_capture_bytes = v as usize;
            }
            tenants.push(TenantConfig {
                name,
                token_sha256,
                limits,
            });
        }
        Ok(Self {
            listen,
            data_dir,
            store,
            admin_token_sha256,
            tenants,
            broker,
        })
    }
}

fn valid_tenant_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn parse_hash(text: &str) -> Result<[u8; 32], String> {
    let text = text.trim();
    let bad = || "expected 64 hex digits (a SHA-256), e.g. from `printf %s TOKEN | sha256sum`";
    // Every byte a hex digit before any is parsed: slicing pairs of bytes needs ASCII, and
    // `from_str_radix` would also take a sign.
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad().into());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad().to_owned())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `service.store` defaults to the embedded store, takes an etcd URL's members, and
    /// refuses a wrong URL or kind with an error naming the key, the value and the right form.
    #[test]
    fn store_is_embedded_or_an_etcd_url() {
        let store = |keys: &[&str]| {
            let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            ServiceConfig::demo(&keys).map(|c| c.store)
        };
        assert_eq!(store(&[]).unwrap(), StoreConfig::Embedded);
        assert_eq!(
            store(&["service.store=embedded"]).unwrap(),
            StoreConfig::Embedded
        );
        assert_eq!(
            store(&["service.store=etcd://127.0.0.1:2379,127.0.0.1:22379"]).unwrap(),
            StoreConfig::Etcd {
                endpoints: vec![
                    "http://127.0.0.1:2379".into(),
                    "http://127.0.0.1:22379".into()
                ]
            }
        );
        for (value, says) in [
            ("redis://127.0.0.1:6379", "expected `embedded`"),
            ("etcd://127.0.0.1", "has no :PORT"),
            ("etcd://127.0.0.1:2379,", "has no :PORT"),
            ("etcd://", "names no member"),
        ] {
            let message = store(&[&format!("service.store={value}")])
                .unwrap_err()
                .to_string();
            assert!(message.contains("service.store"), "{message}");
            assert!(message.contains(value), "{message}");
            assert!(message.contains(says), "{value}: {message}");
            assert!(message.contains("etcd://HOST:PORT"), "{message}");
        }
    }

    /// The embedded demo has one tenant whose hash matches the documented token, and no
    /// `service.*` key reaches the broker originals handed to components.
    #[test]
    fn demo_config_hashes_its_token_and_hides_service_keys() {
        let c = ServiceConfig::demo(&[]).expect("valid");
        assert_eq!(c.tenants.len(), 1);
        assert_eq!(c.tenants[0].token_sha256, token_sha256(DEMO_TOKEN));
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(c.broker.assignors, ["sticky", "balanced", "rack-aware"]);
        assert!(
            c.broker
                .originals()
                .keys()
                .all(|k| !k.starts_with("service."))
        );
    }

    /// Per-tenant limits override the broker's call limits, which are the defaults; the
    /// body, group and capture limits default to their documented values.
    #[test]
    fn tenant_limits_override_broker_defaults() {
        let hash = hex(&token_sha256("t"));
        let c = ServiceConfig::load(
            None,
            &[
                "group.streams.assignor.fuel=123".into(),
                "service.tenants=a,b".into(),
                format!("service.tenant.a.token.sha256={hash}"),
                format!("service.tenant.b.token.sha256={hash}"),
                "service.tenant.b.fuel=none".into(),
                "service.tenant.b.max.concurrent.assignments=5".into(),
                "service.tenant.b.compile.timeout.ms=250".into(),
                "service.tenant.b.max.input.bytes=1000".into(),
                "service.tenant.b.max.groups=3".into(),
                "service.tenant.b.max.captures=2".into(),
                "service.tenant.b.max.capture.bytes=5000".into(),
            ],
        )
        .expect("valid");
        let b = &c.tenants[1].limits;
        assert_eq!(
            (
                b.max_input_bytes,
                b.max_groups,
                b.max_captures,
                b.max_capture_bytes
            ),
            (1000, 3, 2, 5000)
        );
        let a = &c.tenants[0].limits;
        assert_eq!(
            (
                a.max_input_bytes,
                a.max_groups,
                a.max_captures,
                a.max_capture_bytes
            ),
            (
                DEFAULT_MAX_INPUT_BYTES,
                DEFAULT_MAX_GROUPS,
                DEFAULT_MAX_CAPTURES,
                DEFAULT_MAX_CAPTURE_BYTES
            )
        );
        assert_eq!(c.tenants[0].limits.fuel, Some(123));
        assert_eq!(c.tenants[1].limits.fuel, None);
        assert_eq!(c.tenants[1].limits.max_concurrent_assignments, 5);
        assert_eq!(c.tenants[1].limits.max_assignors, DEFAULT_MAX_ASSIGNORS);
        assert_eq!(
            c.tenants[1].limits.compile_timeout,
            Duration::from_millis(250)
        );
        assert_eq!(c.tenants[0].limits.compile_timeout, DEFAULT_COMPILE_TIMEOUT);
    }

    /// A tenant without a token hash, or with a malformed one, is refused with the key named.
    #[test]
    fn tenant_without_valid_token_hash_is_refused() {
        let e = ServiceConfig::load(None, &["service.tenants=a".into()]).unwrap_err();
        assert!(
            e.to_string().contains("service.tenant.a.token.sha256"),
            "{e}"
        );
        let e = ServiceConfig::load(
            None,
            &[
                "service.tenants=a".into(),
                "service.tenant.a.token.sha256=xyz".into(),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("64 hex digits"), "{e}");
    }

    /// A token hash of 64 bytes that are not all hex digits is refused as one, whether a
    /// character spans two digits' places (it panicked, found by the `server_properties` fuzz
    /// target) or digits carry a sign (`u8::from_str_radix` takes `+f`).
    #[test]
    fn token_hash_of_other_characters_is_refused() {
        let hex = "ab".repeat(32);
        for hash in [
            format!("8\u{201a}{}", &hex[4..]),
            format!("+f{}", &hex[2..]),
        ] {
            assert_eq!(hash.len(), 64);
            let e = ServiceConfig::load(
                None,
                &[
                    "service.tenants=a".into(),
                    format!("service.tenant.a.token.sha256={hash}"),
                ],
            )
            .unwrap_err();
            assert!(e.to_string().contains("64 hex digits"), "{e}");
        }
    }
}

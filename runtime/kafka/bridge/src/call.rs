//! What the exports do, in plain Rust: load a component under the limits a broker's
//! properties give, and run one call on the flat form. The JNI layer (`exports`) only moves
//! arrays and turns [`Failure`]s into Java exceptions.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use assignor_sandbox::{ComponentAssignor, ErrorKind, Limits, Runtime, TaskAssignorError, Usage};

use crate::flat::{self, Strings};

/// The prefix every limit key shares; an entry's own limit key puts its prefix in its place.
const LIMIT_PREFIX: &str = "group.streams.assignor.";

/// The broker properties a component's `configure` sees: the streams group keys only. The
/// broker's originals also hold credentials (`*.password`, SASL JAAS configs) that an
/// assignor has no business with.
const CONFIG_PREFIX: &str = "group.streams.";

/// Under an entry's prefix, the keys handed to its component with this part stripped:
/// `<prefix>config.invalid=x` reaches `configure` as `invalid=x`.
const OWN_CONFIG: &str = "config.";

/// The kind of a failure of the bridge itself (a malformed flat form, a caught panic): a bug
/// to report, never the assignor's fault.
pub const INTERNAL: &str = "internal";

/// A failed load or call, as the Java side's `SandboxFailure` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The error kind's wire name (`out-of-fuel`, …) or [`INTERNAL`].
    pub kind: String,
    /// The assignor's name, or the file it was loaded from when it has none yet.
    pub assignor: String,
    /// What went wrong, with the causes below it.
    pub message: String,
    /// Fuel the call consumed before it failed, when the sandbox measured it.
    pub fuel: Option<u64>,
}

impl From<TaskAssignorError> for Failure {
    fn from(e: TaskAssignorError) -> Self {
        // The message says it in the author's terms; the root cause (wasmtime's trap, an I/O
        // error) is kept for the operator, its first line only: wasmtime's errors carry a
        // whole wasm backtrace, which would make every failure a multi-line broker log entry.
        let mut message = e.message.clone();
        let mut root = None;
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            root = Some(c);
            cause = c.source();
        }
        if let Some(root) = root {
            let root = root.to_string();
            message.push_str("; caused by: ");
            message.push_str(root.lines().next().unwrap_or_default());
        }
        Self {
            kind: e.kind.as_str().to_owned(),
            assignor: e.assignor,
            message,
            fuel: e.fuel,
        }
    }
}

impl Failure {
    /// A failure of the bridge itself, for `assignor`.
    pub fn internal(assignor: &str, message: impl Into<String>) -> Self {
        Self {
            kind: INTERNAL.to_owned(),
            assignor: assignor.to_owned(),
            message: message.into(),
            fuel: None,
        }
    }
}

/// The runtimes made so far, one per distinct limits and trap setting, kept for the life of
/// the process: every component under the same limits shares one engine, instance pool and
/// compiled-component cache (so reloading a component, or hot-swapping back to a version
/// seen before, does not compile it again), and a broker has one or a few such settings.
static RUNTIMES: Mutex<Vec<(Limits, bool, Runtime)>> = Mutex::new(Vec::new());

fn runtime(limits: Limits, signals_based_traps: bool) -> Result<Runtime, String> {
    // A poisoned lock only means another load panicked (and was caught) while holding it;
    // the list itself is never left half-updated.
    let mut runtimes = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, runtime)) = runtimes
        .iter()
        .find(|(l, s, _)| *l == limits && *s == signals_based_traps)
    {
        return Ok(runtime.clone());
    }
    let runtime = Runtime::builder(limits.clone())
        .signals_based_traps(signals_based_traps)
        .build()
        .map_err(|e| format!("cannot create the sandbox runtime: {e:#}"))?;
    runtimes.push((limits, signals_based_traps, runtime.clone()));
    Ok(runtime)
}

/// The limits for the entry whose keys start with `prefix` (e.g.
/// `group.streams.assignor.wasm.2.`): each limit key `group.streams.assignor.<name>` is read
/// as `<prefix><name>` first, then as itself, so entries share the broker-wide limits and
/// may override any of them.
pub fn limits(properties: &BTreeMap<String, String>, prefix: &str) -> Result<Limits, String> {
    Limits::from_properties(|key| {
        let own = format!("{prefix}{}", key.strip_prefix(LIMIT_PREFIX).unwrap_or(key));
        properties
            .get(&own)
            .or_else(|| properties.get(key))
            .map(String::as_str)
    })
    .map_err(|e| e.to_string())
}

/// Where a version of a component comes from: the entry's file, or bytes the plugin pulled
/// from `assignor serve` (named by `origin` until the component's own name is known).
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// A component file.
    File(&'a str),
    /// A component's bytes, and what to call them in errors.
    Bytes {
        /// The component.
        bytes: &'a [u8],
        /// Where they came from (an upload at a service URL).
        origin: &'a str,
    },
}

impl Source<'_> {
    fn origin(&self) -> &str {
        match self {
            Self::File(path) => path,
            Self::Bytes { origin, .. } => origin,
        }
    }
}

/// Loads the component from `source` for the entry with `prefix`, under its limits,
/// configured with the broker's `group.streams.*` properties and the entry's own
/// `<prefix>config.*` keys (stripped of that prefix; they win over a broker key of the same
/// name). The plugin leaves its service tokens out of `properties`.
pub fn load(
    source: Source<'_>,
    properties: &BTreeMap<String, String>,
    prefix: &str,
    signals_based_traps: bool,
) -> Result<ComponentAssignor, Failure> {
    let origin = source.origin();
    let fail = |message: String| Failure {
        kind: "load".to_owned(),
        assignor: origin.to_owned(),
        message,
        fuel: None,
    };
    let limits = limits(properties, prefix).map_err(fail)?;
    let runtime = runtime(limits, signals_based_traps).map_err(fail)?;
    let own = format!("{prefix}{OWN_CONFIG}");
    let mut config: BTreeMap<String, String> = properties
        .iter()
        .filter(|(k, _)| k.starts_with(CONFIG_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    config.extend(properties.iter().filter_map(|(k, v)| {
        k.strip_prefix(&own)
            .map(|short| (short.to_owned(), v.clone()))
    }));
    let assignor = match source {
        Source::File(path) => runtime.load_file(path, &config)?,
        Source::Bytes { bytes, origin } => runtime.load(bytes, origin, &config)?,
    };
    tracing::info!(assignor = assignor.name(), sha256 = %assignor.sha256(), origin, "loaded");
    Ok(assignor)
}

/// The limits the plugin checks its input against before the work, in the order of
/// `NativeComponent.inputLimits`: members, subtopologies, partitions per subtopology, tasks,
/// id bytes, flat-form bytes (a group's), and component bytes (a version pulled from a
/// service, checked before it is downloaded).
pub fn input_limits(assignor: &ComponentAssignor) -> [i64; 7] {
    let l = assignor.limits();
    let long = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    [
        long(l.get_max_members()),
        long(l.get_max_subtopologies()),
        i64::from(l.get_max_partitions()),
        long(l.get_max_tasks()),
        long(l.get_max_id_bytes()),
        long(l.get_max_input_bytes()),
        long(l.get_max_component_bytes()),
    ]
}

/// The size of a flat group in bytes, as checked against `max.input.bytes`: its arrays as
/// the JVM holds them.
pub fn flat_bytes(strings: Strings<'_>, ints: &[i32], longs: &[i64]) -> usize {
    strings.bytes.len() + 4 * (strings.ends.len() + ints.len()) + 8 * longs.len()
}

/// One call's result: the assignment's flat form, the sandbox's usage report, and the time
/// the whole native side took (decoding and encoding included).
#[derive(Debug)]
pub struct Assigned {
    /// The assignment, flat.
    pub assignment: Vec<i32>,
    /// What the sandbox call used; its wall time is the call as a Rust embedder sees it.
    pub usage: Usage,
    /// Decoding, the sandbox call and encoding together.
    pub native_time: Duration,
}

/// Decodes the flat group, runs the sandbox call and encodes its assignment.
pub fn assign(
    assignor: &ComponentAssignor,
    strings: Strings<'_>,
    ints: &[i32],
    longs: &[i64],
) -> Result<Assigned, Failure> {
    let start = Instant::now();
    // The plugin checked the same before encoding; checked again here, before decoding,
    // because the arrays come from Java code this library cannot vouch for.
    let bytes = flat_bytes(strings, ints, longs);
    let max = assignor.limits().get_max_input_bytes();
    if bytes > max {
        return Err(Failure {
            kind: ErrorKind::InputLimit.as_str().to_owned(),
            assignor: assignor.name().to_owned(),
            message: format!(
                "the flat group is {bytes} bytes, over the limit of {max} (max.input.bytes); \
                 shrink the group or raise the limit"
            ),
            fuel: None,
        });
    }
    let (group, topology) = flat::decode(strings, ints, longs).map_err(|m| {
        Failure::internal(
            assignor.name(),
            format!("the plugin sent a malformed group: {m}"),
        )
    })?;
    let (assignment, usage) = assignor.assign(&group, &topology)?;
    let assignment = flat::encode(&assignment);
    Ok(Assigned {
        assignment,
        usage,
        native_time: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry's own limit key wins over the broker-wide one, which wins over the default.
    #[test]
    fn entry_limits_override_broker_limits() {
        let props: BTreeMap<String, String> = [
            ("group.streams.assignor.fuel", "1000"),
            ("group.streams.assignor.timeout.ms", "700"),
            ("group.streams.assignor.wasm.2.fuel", "none"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let own = limits(&props, "group.streams.assignor.wasm.2.").expect("valid");
        assert_eq!(own.get_fuel(), None);
        assert_eq!(own.get_timeout(), Duration::from_millis(700));
        let shared = limits(&props, "group.streams.assignor.wasm.").expect("valid");
        assert_eq!(shared.get_fuel(), Some(1000));
        assert_eq!(
            shared.get_memory_bytes(),
            assignor_sandbox::DEFAULT_MEMORY_BYTES
        );
    }

    /// A bad limit value fails the load as `load`, naming the key; a missing file names it;
    /// bytes that are not a component fail naming their origin.
    #[test]
    fn load_failures_name_the_cause() {
        let props = BTreeMap::from([(
            "group.streams.assignor.memory.bytes".to_owned(),
            "lots".to_owned(),
        )]);
        let e = load(
            Source::File("x.wasm"),
            &props,
            "group.streams.assignor.wasm.",
            false,
        )
        .unwrap_err();
        assert_eq!((e.kind.as_str(), e.assignor.as_str()), ("load", "x.wasm"));
        assert!(
            e.message
                .starts_with("group.streams.assignor.memory.bytes="),
            "{e:?}"
        );
        let e = load(
            Source::File("/nonexistent.wasm"),
            &BTreeMap::new(),
            "group.streams.assignor.wasm.",
            false,
        )
        .unwrap_err();
        assert!(
            e.message.contains("cannot read the component file"),
            "{e:?}"
        );
        let e = load(
            Source::Bytes {
                bytes: b"not a component",
                origin: "upload `swap`",
            },
            &BTreeMap::new(),
            "group.streams.assignor.wasm.",
            false,
        )
        .unwrap_err();
        assert_eq!(
            (e.kind.as_str(), e.assignor.as_str()),
            ("load", "upload `swap`")
        );
    }
}

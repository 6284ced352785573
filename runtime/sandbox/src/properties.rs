//! The broker configuration keys of the [`Limits`], and how their values are parsed: the one
//! definition that every embedder reading a `server.properties`-style configuration uses (the
//! coordinator's `BrokerConfig`, the Kafka broker plugin's bridge), so a key means the same
//! everywhere.

use std::time::Duration;

use crate::limits::Limits;

/// `group.streams.assignor.fuel`: fuel per sandboxed call, or `none` to rely on the deadline.
pub const FUEL: &str = "group.streams.assignor.fuel";
/// `group.streams.assignor.memory.bytes`: linear memory per sandboxed call.
pub const MEMORY_BYTES: &str = "group.streams.assignor.memory.bytes";
/// `group.streams.assignor.timeout.ms`: wall-clock deadline per sandboxed call.
pub const TIMEOUT_MS: &str = "group.streams.assignor.timeout.ms";
/// `group.streams.assignor.compile.timeout.ms`: longest a component's compilation may take
/// (in a child process, killed past it).
pub const COMPILE_TIMEOUT_MS: &str = "group.streams.assignor.compile.timeout.ms";
/// `group.streams.assignor.max.output.bytes`: largest assignment a component may return.
pub const MAX_OUTPUT_BYTES: &str = "group.streams.assignor.max.output.bytes";

/// A limit property whose value the limits cannot take: the key, the value and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}={value:?}: {message}")]
#[non_exhaustive]
pub struct PropertyError {
    /// The key, as [`LIMIT_KEYS`] spells it.
    pub key: &'static str,
    /// The value given.
    pub value: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

/// How one key's value is read into the limits and shown back.
#[derive(Clone, Copy)]
enum Kind {
    /// A count or size; values beyond the platform's `usize` (or the limit's `u32`) saturate.
    Size(fn(Limits, u64) -> Limits, fn(&Limits) -> u64),
    /// Milliseconds, at least 1: a zero deadline would fail every call.
    Millis(fn(Limits, Duration) -> Limits, fn(&Limits) -> Duration),
    /// Fuel: a count, or `none` for no fuel limit.
    Fuel,
}

/// Every limit key in the order they are read (and an error reported): fuel, memory, the two
/// deadlines, then the size and count limits, `group.streams.assignor.<name>` where `<name>`
/// is the limit's name in errors (e.g. `max.partitions`).
const PROPERTIES: &[(&str, Kind)] = &[
    (FUEL, Kind::Fuel),
    (
        MEMORY_BYTES,
        Kind::Size(
            |l, v| l.memory_bytes(saturate(v)),
            |l| l.get_memory_bytes() as u64,
        ),
    ),
    (
        TIMEOUT_MS,
        Kind::Millis(Limits::timeout, Limits::get_timeout),
    ),
    (
        COMPILE_TIMEOUT_MS,
        Kind::Millis(Limits::compile_timeout, Limits::get_compile_timeout),
    ),
    (
        MAX_OUTPUT_BYTES,
        Kind::Size(
            |l, v| l.max_output_bytes(saturate(v)),
            |l| l.get_max_output_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.stderr.bytes",
        Kind::Size(
            |l, v| l.max_stderr_bytes(saturate(v)),
            |l| l.get_max_stderr_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.message.bytes",
        Kind::Size(
            |l, v| l.max_message_bytes(saturate(v)),
            |l| l.get_max_message_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.component.bytes",
        Kind::Size(
            |l, v| l.max_component_bytes(saturate(v)),
            |l| l.get_max_component_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.function.bytes",
        Kind::Size(
            |l, v| l.max_function_bytes(saturate(v)),
            |l| l.get_max_function_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.code.bytes",
        Kind::Size(
            |l, v| l.max_code_bytes(saturate(v)),
            |l| l.get_max_code_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.compiled.bytes",
        Kind::Size(
            |l, v| l.max_compiled_bytes(saturate(v)),
            |l| l.get_max_compiled_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.members",
        Kind::Size(
            |l, v| l.max_members(saturate(v)),
            |l| l.get_max_members() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.subtopologies",
        Kind::Size(
            |l, v| l.max_subtopologies(saturate(v)),
            |l| l.get_max_subtopologies() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.partitions",
        Kind::Size(
            |l, v| l.max_partitions(u32::try_from(v).unwrap_or(u32::MAX)),
            |l| u64::from(l.get_max_partitions()),
        ),
    ),
    (
        "group.streams.assignor.max.tasks",
        Kind::Size(
            |l, v| l.max_tasks(saturate(v)),
            |l| l.get_max_tasks() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.input.bytes",
        Kind::Size(
            |l, v| l.max_input_bytes(saturate(v)),
            |l| l.get_max_input_bytes() as u64,
        ),
    ),
    (
        "group.streams.assignor.max.id.bytes",
        Kind::Size(
            |l, v| l.max_id_bytes(saturate(v)),
            |l| l.get_max_id_bytes() as u64,
        ),
    ),
];

/// Every limit key, in the order [`Limits::from_properties`] reads them.
pub const LIMIT_KEYS: [&str; PROPERTIES.len()] = {
    let mut keys = [""; PROPERTIES.len()];
    let mut i = 0;
    while i < PROPERTIES.len() {
        keys[i] = PROPERTIES[i].0;
        i += 1;
    }
    keys
};

fn saturate(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

impl Limits {
    /// The default limits with every limit key `get` has a value for applied, in the order
    /// of [`LIMIT_KEYS`]; keys that are not limit keys are never asked for. The first value
    /// the limits cannot take is the error.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use assignor_sandbox::{Limits, properties};
    ///
    /// let config = BTreeMap::from([(properties::FUEL, "none"), ("other.key", "x")]);
    /// let limits = Limits::from_properties(|key| config.get(key).copied()).unwrap();
    /// assert_eq!(limits.get_fuel(), None);
    /// ```
    pub fn from_properties<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Self, PropertyError> {
        let mut limits = Limits::default();
        for &(key, kind) in PROPERTIES {
            if let Some(value) = get(key) {
                limits = set(limits, key, kind, value)?;
            }
        }
        Ok(limits)
    }

    /// Every limit key with its value in these limits, as the properties would spell it
    /// (`none` for no fuel limit): on [`Limits::default`], the documented defaults.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        PROPERTIES
            .iter()
            .map(|&(key, kind)| {
                let value = match kind {
                    Kind::Size(_, get) => get(self).to_string(),
                    Kind::Millis(_, get) => get(self).as_millis().to_string(),
                    Kind::Fuel => self
                        .get_fuel()
                        .map_or_else(|| "none".to_owned(), |f| f.to_string()),
                };
                (key, value)
            })
            .collect()
    }
}

fn set(
    limits: Limits,
    key: &'static str,
    kind: Kind,
    value: &str,
) -> Result<Limits, PropertyError> {
    let error = |message: &str| PropertyError {
        key,
        value: value.to_owned(),
        message: message.to_owned(),
    };
    let number = || {
        value
            .trim()
            .parse::<u64>()
            .map_err(|_| error("expected a non-negative integer"))
    };
    Ok(match kind {
        Kind::Fuel if value.trim() == "none" => limits.fuel(None),
        Kind::Fuel => limits.fuel(Some(number()?)),
        Kind::Size(set, _) => set(limits, number()?),
        Kind::Millis(set, _) => match number()? {
            0 => return Err(error("must be at least 1")),
            ms => set(limits, Duration::from_millis(ms)),
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Every key reads back the value it was given, and a value that is not a number is an
    /// error naming the key.
    #[test]
    fn every_key_round_trips() {
        for (i, key) in LIMIT_KEYS.iter().enumerate() {
            let value = (1000 + i).to_string();
            let limits =
                Limits::from_properties(|k| (k == *key).then_some(value.as_str())).expect(key);
            let read = limits.properties();
            assert_eq!(read[i], (*key, value.clone()), "{key}");
            let e = Limits::from_properties(|k| (k == *key).then_some("lots")).unwrap_err();
            assert!(e.to_string().starts_with(key), "{e}");
        }
    }

    /// The defaults are listed under their keys; `none` disables fuel; zero deadlines and
    /// negative numbers are refused.
    #[test]
    fn defaults_and_special_values() {
        let defaults: BTreeMap<_, _> = Limits::default().properties().into_iter().collect();
        assert_eq!(defaults[FUEL], crate::DEFAULT_FUEL.to_string());
        assert_eq!(defaults["group.streams.assignor.max.partitions"], "100000");
        let one = |k: &'static str, v: &'static str| {
            Limits::from_properties(move |key| (key == k).then_some(v))
        };
        assert_eq!(one(FUEL, "none").unwrap().get_fuel(), None);
        assert_eq!(
            one(TIMEOUT_MS, "0").unwrap_err().to_string(),
            "group.streams.assignor.timeout.ms=\"0\": must be at least 1"
        );
        assert!(one(COMPILE_TIMEOUT_MS, "0").is_err());
        assert!(one(MEMORY_BYTES, "-1").is_err());
    }
}

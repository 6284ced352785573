//! The broker's static configuration, with Kafka's key names, read from a `server.properties`
//! style file and overridable on the command line.
//!
//! Properties rather than TOML because this is the format Kafka operators already keep their
//! broker config in: the same file (or a copy of its `group.streams.*` lines) works here, and
//! every key keeps its Kafka spelling.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assignor_sandbox::Limits;
use assignor_sandbox::properties::PropertyError;

/// `group.streams.assignors`: the ordered assignor list; the first entry is the default.
pub const ASSIGNORS: &str = "group.streams.assignors";
/// `group.streams.num.standby.replicas`: standby replicas for groups that do not override it.
pub const NUM_STANDBY_REPLICAS: &str = "group.streams.num.standby.replicas";
/// `group.streams.max.standby.replicas`: the most standby replicas a group may ask for, in
/// [`NUM_STANDBY_REPLICAS`] or in its own `streams.num.standby.replicas`.
pub const MAX_STANDBY_REPLICAS: &str = "group.streams.max.standby.replicas";
/// `group.streams.rack.aware.assignment.tags`: client tag keys standbys are spread over.
pub const RACK_AWARE_ASSIGNMENT_TAGS: &str = "group.streams.rack.aware.assignment.tags";
// The limit keys and their parsing are the sandbox's, shared with the Kafka broker plugin's
// bridge, so that a key means the same in both.
pub use assignor_sandbox::properties::{
    COMPILE_TIMEOUT_MS, FUEL, LIMIT_KEYS, MAX_OUTPUT_BYTES, MEMORY_BYTES, TIMEOUT_MS,
};

/// The default of [`ASSIGNORS`]: Kafka's, the built-in sticky assignor alone.
pub const DEFAULT_ASSIGNORS: &[&str] = &["sticky"];
/// The default of [`NUM_STANDBY_REPLICAS`], Kafka's: no standbys.
pub const DEFAULT_NUM_STANDBY_REPLICAS: u32 = 0;
/// The default of [`MAX_STANDBY_REPLICAS`], Kafka's: 2.
pub const DEFAULT_MAX_STANDBY_REPLICAS: u32 = 2;

/// A configuration that cannot be used; says which file, line or key, and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid properties syntax.
    #[error("config file {path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What and where, from the parser.
        message: String,
    },
    /// A command-line override is not `key=value`.
    #[error("override `{0}` is not of the form key=value")]
    Override(String),
    /// A known key has a value it cannot take.
    #[error("{key}={value:?}: {message}")]
    Value {
        /// The key.
        key: &'static str,
        /// The value given.
        value: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// The resolved broker configuration.
///
/// Every key, including ones this runtime does not know, is kept in
/// [`originals`](Self::originals) and handed to each component's `configure`, as Kafka hands
/// `config.originals()` to a `Configurable` assignor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    originals: BTreeMap<String, String>,
    /// [`ASSIGNORS`], in order; never empty.
    pub assignors: Vec<String>,
    /// [`NUM_STANDBY_REPLICAS`]; at most [`max_standby_replicas`](Self::max_standby_replicas).
    pub num_standby_replicas: u32,
    /// [`MAX_STANDBY_REPLICAS`]: as in Kafka, it bounds the broker's default and every group's
    /// own count, so that no group can make an assignor place (and size its work by) more
    /// copies of each task than the operator allows.
    pub max_standby_replicas: u32,
    /// [`RACK_AWARE_ASSIGNMENT_TAGS`].
    pub rack_aware_assignment_tags: Vec<String>,
    /// Per-call limits: [`FUEL`], [`MEMORY_BYTES`], [`TIMEOUT_MS`], [`COMPILE_TIMEOUT_MS`],
    /// [`MAX_OUTPUT_BYTES`] and the other `group.streams.assignor.max.*` size and count limits
    /// (see [`BrokerConfig::defaults`]) over [`Limits::default`].
    pub limits: Limits,
    /// Where relative component paths in [`ASSIGNORS`] are resolved: the config file's
    /// directory, else the working directory.
    pub base_dir: PathBuf,
    /// Not a key: the program runtimes built for this config compile components with (see
    /// [`RuntimeBuilder::compiler`](assignor_sandbox::RuntimeBuilder::compiler)), `None` to compile in
    /// process. The `assignor` command sets its own executable.
    pub compiler: Option<PathBuf>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::from_properties(BTreeMap::new()).expect("the defaults are valid")
    }
}

impl BrokerConfig {
    /// Reads `file` (if any), applies `overrides` (`key=value`, later ones win) and resolves
    /// the result.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut properties = match file {
            Some(path) => read_properties(path)?,
            None => BTreeMap::new(),
        };
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .ok_or_else(|| ConfigError::Override(o.clone()))?;
            properties.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        let mut config = Self::from_properties(properties)?;
        if let Some(dir) = file.and_then(Path::parent) {
            config.base_dir = dir.to_owned();
        }
        Ok(config)
    }

    /// Resolves already-parsed properties; unset keys take their documented defaults.
    pub fn from_properties(originals: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let get = |key: &str| originals.get(key).map(String::as_str);
        let assignors = match get(ASSIGNORS) {
            None => DEFAULT_ASSIGNORS.iter().map(|s| (*s).to_owned()).collect(),
            Some(v) => {
                let list = parse_list(v);
                if list.is_empty() {
                    return Err(ConfigError::Value {
                        key: ASSIGNORS,
                        value: v.to_owned(),
                        message: "the list is empty; name at least one assignor (the first is \
                                  the default), e.g. `sticky`"
                            .into(),
                    });
                }
                list
            }
        };
        let max_standby_replicas = match get(MAX_STANDBY_REPLICAS) {
            None => DEFAULT_MAX_STANDBY_REPLICAS,
            Some(v) => parse_number(MAX_STANDBY_REPLICAS, v)?,
        };
        let num_standby_replicas = match get(NUM_STANDBY_REPLICAS) {
            None => DEFAULT_NUM_STANDBY_REPLICAS,
            Some(v) => {
                let n = parse_number(NUM_STANDBY_REPLICAS, v)?;
                if n > max_standby_replicas {
                    return Err(ConfigError::Value {
                        key: NUM_STANDBY_REPLICAS,
                        value: v.to_owned(),
                        message: format!(
                            "must be at most {MAX_STANDBY_REPLICAS} ({max_standby_replicas}); \
                             lower it or raise {MAX_STANDBY_REPLICAS}"
                        ),
                    });
                }
                n
            }
        };
        let rack_aware_assignment_tags = get(RACK_AWARE_ASSIGNMENT_TAGS)
            .map(parse_list)
            .unwrap_or_default();
        let limits = Limits::from_properties(get).map_err(ConfigError::from)?;
        Ok(Self {
            originals,
            assignors,
            num_standby_replicas,
            max_standby_replicas,
            rack_aware_assignment_tags,
            limits,
            base_dir: PathBuf::from("."),
            compiler: None,
        })
    }

    /// Every property as given, for components' `configure`.
    pub fn originals(&self) -> &BTreeMap<String, String> {
        &self.originals
    }

    /// The documented defaults of the keys this runtime reads, for `--help` and the README.
    pub fn defaults() -> Vec<(&'static str, String)> {
        let mut defaults = vec![
            (ASSIGNORS, DEFAULT_ASSIGNORS.join(",")),
            (
                NUM_STANDBY_REPLICAS,
                DEFAULT_NUM_STANDBY_REPLICAS.to_string(),
            ),
            (
                MAX_STANDBY_REPLICAS,
                DEFAULT_MAX_STANDBY_REPLICAS.to_string(),
            ),
            (RACK_AWARE_ASSIGNMENT_TAGS, String::new()),
        ];
        defaults.extend(Limits::default().properties());
        defaults
    }
}

impl From<PropertyError> for ConfigError {
    fn from(e: PropertyError) -> Self {
        Self::Value {
            key: e.key,
            value: e.value,
            message: e.message,
        }
    }
}

fn read_properties(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    // Decoded here as `java_properties::read` would (windows-1252 unless a byte-order mark says
    // UTF-8 or UTF-16), and handed to it as UTF-8: java-properties 2.0.0 panics ("Must not use
    // a decoder that has finished") when its input ends inside a character, which a byte-order
    // mark makes possible and complete UTF-8 never does. The UTF-8 goes behind a byte-order
    // mark of its own, so the one the parser strips is ours, never a U+FEFF of the file's.
    let (text, _, _) = encoding_rs::WINDOWS_1252.decode(&bytes);
    let utf8 = format!("\u{FEFF}{text}");
    let mut map = BTreeMap::new();
    java_properties::PropertiesIter::new_with_encoding(utf8.as_bytes(), encoding_rs::UTF_8)
        .read_into(|key, value| {
            map.insert(key, value);
        })
        .map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(map)
}

/// Kafka's `LIST` type: comma-separated, entries trimmed, empty entries dropped.
pub fn parse_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_number<T: std::str::FromStr>(key: &'static str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError::Value {
        key,
        value: value.to_owned(),
        message: "expected a non-negative integer".into(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every limit key is read into the limits, a bad value is an error naming the key, and
    /// every key's default is listed.
    #[test]
    fn limit_keys_are_read() {
        for (i, key) in LIMIT_KEYS.iter().enumerate() {
            let value = (1000 + i).to_string();
            let c = BrokerConfig::from_properties(props(&[(key, &value)])).expect(key);
            assert_eq!(c.limits.properties()[i], (*key, value), "{key}");
            let e = BrokerConfig::from_properties(props(&[(key, "lots")])).unwrap_err();
            assert!(e.to_string().starts_with(key), "{e}");
        }
        let defaults = BrokerConfig::defaults();
        assert!(defaults.contains(&("group.streams.assignor.max.partitions", "100000".into())));
        assert_eq!(defaults.len(), 4 + LIMIT_KEYS.len());
    }

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Unset keys take Kafka's defaults: `[sticky]`, no standbys, no tags, default limits.
    #[test]
    fn defaults_match_kafka() {
        let c = BrokerConfig::default();
        assert_eq!(c.assignors, ["sticky"]);
        assert_eq!(c.num_standby_replicas, 0);
        assert_eq!(c.max_standby_replicas, 2);
        assert!(c.rack_aware_assignment_tags.is_empty());
        assert_eq!(c.limits, Limits::default());
    }

    /// A file in server.properties syntax is read, overrides win, and every key (known or
    /// not) is kept for `configure`.
    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "# broker\ngroup.streams.assignors = mine.wasm, sticky\n\
             group.streams.num.standby.replicas: 1\n\
             group.streams.rack.aware.assignment.tags=zone,\\\n  cluster\n\
             group.streams.assignor.fuel=none\nmy.assignor.knob=7\n\
             group.streams.assignor.compile.timeout.ms=2500\n",
        )
        .expect("write");
        let c = BrokerConfig::load(
            Some(&path),
            &["group.streams.num.standby.replicas=2".into()],
        )
        .expect("valid");
        assert_eq!(c.assignors, ["mine.wasm", "sticky"]);
        assert_eq!(c.num_standby_replicas, 2);
        assert_eq!(c.rack_aware_assignment_tags, ["zone", "cluster"]);
        assert_eq!(c.limits.get_fuel(), None);
        assert_eq!(c.limits.get_compile_timeout(), Duration::from_millis(2500));
        assert_eq!(c.originals()["my.assignor.knob"], "7");
        assert_eq!(c.base_dir, dir.path());
    }

    /// A file whose byte-order mark switches decoding to UTF-16 or UTF-8 and whose last
    /// character is then cut short is read, the partial character as U+FFFD, instead of
    /// panicking in the properties parser (found by the `server_properties` fuzz target); a
    /// U+FEFF after the byte-order mark stays part of the key, as it always was.
    #[test]
    fn partial_character_after_a_byte_order_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("server.properties");
        let cases: [(&[u8], &str, &str); 3] = [
            (b"\xfe\xffk", "\u{FFFD}", ""),
            (b"\xef\xbb\xbfk=\xc3", "k", "\u{FFFD}"),
            (b"\xef\xbb\xbf\xef\xbb\xbfk=v", "\u{FEFF}k", "v"),
        ];
        for (bytes, key, value) in cases {
            std::fs::write(&path, bytes).expect("write");
            let c = BrokerConfig::load(Some(&path), &[]).expect("readable");
            assert_eq!(c.originals().get(key).map(String::as_str), Some(value));
        }
    }

    /// Bad values, an empty assignor list, a malformed override and a missing file are errors
    /// naming the key, the argument or the file.
    #[test]
    fn bad_input_is_named() {
        let err = |p: &[(&str, &str)]| {
            BrokerConfig::from_properties(props(p))
                .expect_err("invalid")
                .to_string()
        };
        assert_eq!(
            err(&[(NUM_STANDBY_REPLICAS, "-1")]),
            "group.streams.num.standby.replicas=\"-1\": expected a non-negative integer"
        );
        assert_eq!(
            err(&[(NUM_STANDBY_REPLICAS, "3")]),
            "group.streams.num.standby.replicas=\"3\": must be at most \
             group.streams.max.standby.replicas (2); lower it or raise \
             group.streams.max.standby.replicas"
        );
        assert!(
            BrokerConfig::from_properties(props(&[
                (NUM_STANDBY_REPLICAS, "3"),
                (MAX_STANDBY_REPLICAS, "3")
            ]))
            .is_ok()
        );
        assert!(err(&[(ASSIGNORS, " , ")]).contains("the list is empty"));
        assert!(err(&[(TIMEOUT_MS, "0")]).contains("must be at least 1"));
        assert!(err(&[(COMPILE_TIMEOUT_MS, "0")]).contains("must be at least 1"));
        assert!(err(&[(FUEL, "lots")]).starts_with("group.streams.assignor.fuel="));
        let o = BrokerConfig::load(None, &["novalue".into()]).expect_err("override");
        assert_eq!(
            o.to_string(),
            "override `novalue` is not of the form key=value"
        );
        let missing = BrokerConfig::load(Some(Path::new("/nonexistent/x.properties")), &[])
            .expect_err("missing");
        assert!(
            missing
                .to_string()
                .starts_with("cannot read the config file /nonexistent/x.properties")
        );
    }
}

//! The assignor registry, built once at startup from `group.streams.assignors` (KIP-1357
//! "Assignor loading and startup validation"), with components in place of Java classes.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::assignor::Assignor;
use crate::builtin::BUILTIN_NAMES;
use crate::config::{ASSIGNORS, BrokerConfig};
use assignor_sandbox::Runtime;
use assignor_sandbox::TaskAssignorError;

/// Kafka's public class name of the built-in sticky assignor; KIP-1357 makes it an accepted
/// spelling of `sticky` in `group.streams.assignors`, so a Kafka config works unchanged.
pub const KAFKA_STICKY_CLASS: &str =
    "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor";

/// Why the registry could not be built; names the `group.streams.assignors` entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The entry is neither a built-in name nor a component file.
    #[error(
        "{ASSIGNORS} entry `{entry}`: not a built-in assignor ({builtins}) and not a component \
         file (a path ending in .wasm)"
    )]
    Unknown {
        /// The entry.
        entry: String,
        /// The built-in names, for the message.
        builtins: String,
    },
    /// The same entry is listed twice.
    #[error("{ASSIGNORS} entry `{entry}` is listed twice; remove the duplicate")]
    DuplicateEntry {
        /// The entry.
        entry: String,
    },
    /// The component could not be read or loaded, or its `configure` failed.
    #[error("{ASSIGNORS} entry `{entry}`: {source}")]
    Load {
        /// The entry.
        entry: String,
        /// The load error (kind `load`, or the limit a load-time call hit).
        source: TaskAssignorError,
    },
    /// The assignor's `name()` is already taken.
    #[error(
        "{ASSIGNORS} entry `{entry}`: its name `{name}` collides with {taken_by}; every \
         assignor needs a distinct name"
    )]
    NameCollision {
        /// The entry.
        entry: String,
        /// The name it reported.
        name: String,
        /// The built-in or earlier entry holding the name.
        taken_by: String,
    },
}

/// Every available assignor, keyed by `name()`, in configuration order; the first is the
/// default for groups without `streams.assignor.name`.
#[derive(Debug, Clone)]
pub struct Registry {
    assignors: Vec<Assignor>,
    by_name: HashMap<String, usize>,
}

impl Registry {
    /// Builds the registry from `config`, fail-fast: the first bad entry stops it, and nothing
    /// half-built is returned. Components are loaded with `runtime` and configured once with
    /// the broker config's originals; relative paths resolve against `config.base_dir`.
    pub fn build(runtime: &Runtime, config: &BrokerConfig) -> Result<Self, RegistryError> {
        let mut assignors: Vec<Assignor> = Vec::with_capacity(config.assignors.len());
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut seen_entries: Vec<(String, PathBuf)> = Vec::new();
        for entry in &config.assignors {
            let builtin = if entry == KAFKA_STICKY_CLASS {
                Some("sticky")
            } else {
                BUILTIN_NAMES.iter().copied().find(|b| b == entry)
            };
            let identity = match builtin {
                Some(name) => PathBuf::from(format!("builtin:{name}")),
                None if entry.ends_with(".wasm") => {
                    let path = config.base_dir.join(entry);
                    std::fs::canonicalize(&path).unwrap_or(path)
                }
                None => {
                    return Err(RegistryError::Unknown {
                        entry: entry.clone(),
                        builtins: BUILTIN_NAMES.join(", "),
                    });
                }
            };
            if seen_entries.iter().any(|(_, id)| *id == identity) {
                return Err(RegistryError::DuplicateEntry {
                    entry: entry.clone(),
                });
            }
            seen_entries.push((entry.clone(), identity.clone()));
            let load = |source| RegistryError::Load {
                entry: entry.clone(),
                source,
            };
            let assignor = match builtin {
                Some(name) => Assignor::builtin(name, config.originals())
                    .map_err(load)?
                    .with_limits(&config.limits),
                None => {
                    let component = runtime
                        .load_file(&identity, config.originals())
                        .map_err(load)?;
                    Assignor::Component(component.into())
                }
            };
            let name = assignor.name().to_owned();
            let taken_by = if let Some(&i) = by_name.get(&name) {
                Some(format!("entry `{}`", seen_entries[i].0))
            } else if builtin.is_none() && BUILTIN_NAMES.contains(&name.as_str()) {
                Some(format!("the built-in assignor `{name}`"))
            } else {
                None
            };
            if let Some(taken_by) = taken_by {
                return Err(RegistryError::NameCollision {
                    entry: entry.clone(),
                    name,
                    taken_by,
                });
            }
            tracing::info!(assignor = %name, entry = %entry, "assignor registered");
            by_name.insert(name, assignors.len());
            assignors.push(assignor);
        }
        Ok(Self { assignors, by_name })
    }

    /// The assignor for groups that do not choose one: the first entry.
    pub fn default_assignor(&self) -> &Assignor {
        &self.assignors[0]
    }

    /// The assignor registered as `name`.
    pub fn get(&self, name: &str) -> Option<&Assignor> {
        self.by_name.get(name).map(|&i| &self.assignors[i])
    }

    /// The registered names, in configuration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.assignors.iter().map(Assignor::name)
    }

    /// Registers `assignor` under its `name()` after the configured entries, or replaces the
    /// assignor already registered under that name in place (keeping its position, so
    /// replacing the default keeps it the default). Returns the replaced assignor.
    ///
    /// This is how a service adds uploaded assignors at run time; the caller decides which
    /// names may be taken (e.g. never a built-in's).
    pub fn insert(&mut self, assignor: Assignor) -> Option<Assignor> {
        match self.by_name.get(assignor.name()) {
            Some(&i) => Some(std::mem::replace(&mut self.assignors[i], assignor)),
            None => {
                self.by_name
                    .insert(assignor.name().to_owned(), self.assignors.len());
                self.assignors.push(assignor);
                None
            }
        }
    }

    /// Unregisters `name` and returns its assignor; `None` if it is not registered or is the
    /// default (the first entry), which a registry always keeps. Groups configured with a
    /// removed name fall back to the default, as KIP-1357 says for an unknown name.
    pub fn remove(&mut self, name: &str) -> Option<Assignor> {
        let i = *self.by_name.get(name)?;
        if i == 0 {
            return None;
        }
        let removed = self.assignors.remove(i);
        self.by_name.remove(name);
        for index in self.by_name.values_mut() {
            if *index > i {
                *index -= 1;
            }
        }
        Some(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(entries: &str) -> Registry {
        let config =
            BrokerConfig::load(None, &[format!("{ASSIGNORS}={entries}")]).expect("valid config");
        let runtime = Runtime::new(assignor_sandbox::Limits::default()).expect("engine");
        Registry::build(&runtime, &config).expect("registry")
    }

    fn builtin(name: &str) -> Assignor {
        Assignor::builtin(name, &Default::default()).expect("built-in")
    }

    /// Inserting a new name appends it; inserting a registered name replaces it in place.
    #[test]
    fn insert_appends_or_replaces_in_place() {
        let mut r = registry("sticky");
        assert!(r.insert(builtin("balanced")).is_none());
        assert_eq!(r.names().collect::<Vec<_>>(), ["sticky", "balanced"]);
        let old = r.insert(builtin("sticky")).expect("replaced");
        assert_eq!(old.name(), "sticky");
        assert_eq!(r.names().collect::<Vec<_>>(), ["sticky", "balanced"]);
        assert_eq!(r.default_assignor().name(), "sticky");
        assert_eq!(r.get("balanced").map(Assignor::name), Some("balanced"));
    }

    /// Removing keeps lookups of the remaining names right and never removes the default.
    #[test]
    fn remove_reindexes_and_keeps_the_default() {
        let mut r = registry("balanced,sticky");
        assert!(r.remove("balanced").is_none(), "the default stays");
        assert!(r.remove("nope").is_none());
        assert_eq!(
            r.remove("sticky").map(|a| a.name().to_owned()).as_deref(),
            Some("sticky")
        );
        assert!(r.get("sticky").is_none());
        assert!(r.insert(builtin("sticky")).is_none());
        assert_eq!(r.get("sticky").map(Assignor::name), Some("sticky"));
        assert_eq!(r.get("balanced").map(Assignor::name), Some("balanced"));
    }
}

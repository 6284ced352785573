//! [`Assignor`]: a built-in or a component behind one call that validates and reports usage.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use std::collections::BTreeMap;

use assignor_sdk::{GroupAssignment, GroupSpec, TaskAssignor, Topology};

use crate::builtin::{BUILTIN_NAMES, builtin};
use assignor_sandbox::ComponentAssignor;
use assignor_sandbox::Limits;
use assignor_sandbox::Usage;
use assignor_sandbox::{ErrorKind, TaskAssignorError};

/// An assignor the runtime can call: native built-in or sandboxed component.
#[derive(Clone)]
#[non_exhaustive]
pub enum Assignor {
    /// Compiled into the runtime, called natively.
    BuiltIn {
        /// The configured assignor.
        assignor: Arc<dyn TaskAssignor>,
        /// The configuration it was given (kept for captures of failed calls).
        config: Arc<BTreeMap<String, String>>,
        /// The input limits a group is checked against before it runs (the other limits are
        /// the sandbox's and do not apply to native code).
        limits: Arc<Limits>,
    },
    /// A WebAssembly component, called in a fresh sandbox.
    Component(Arc<ComponentAssignor>),
}

impl std::fmt::Debug for Assignor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::BuiltIn { assignor, .. } => {
                f.debug_tuple("BuiltIn").field(&assignor.name()).finish()
            }
            Self::Component(c) => f.debug_tuple("Component").field(c).finish(),
        }
    }
}

impl Assignor {
    /// The built-in assignor `name`, configured with `config`. An unknown name or a rejected
    /// configuration is a `load` error.
    pub fn builtin(
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<Self, TaskAssignorError> {
        let Some(mut assignor) = builtin(name) else {
            return Err(TaskAssignorError::new(
                name,
                ErrorKind::Load,
                format!(
                    "no built-in assignor has this name (built-ins: {})",
                    BUILTIN_NAMES.join(", ")
                ),
            ));
        };
        assignor.configure(config).map_err(|message| {
            TaskAssignorError::new(
                name,
                ErrorKind::Load,
                format!("configure rejected the configuration: {message}"),
            )
        })?;
        Ok(Self::BuiltIn {
            assignor: Arc::from(assignor),
            config: Arc::new(config.clone()),
            limits: Arc::new(Limits::default()),
        })
    }

    /// The same assignor, checking groups against `limits`' input limits before a built-in
    /// runs (a component keeps its runtime's limits). [`Assignor::builtin`] starts from
    /// [`Limits::default`].
    pub fn with_limits(self, limits: &Limits) -> Self {
        match self {
            Self::BuiltIn {
                assignor, config, ..
            } => Self::BuiltIn {
                assignor,
                config,
                limits: Arc::new(limits.clone()),
            },
            component => component,
        }
    }

    /// The assignor's name.
    pub fn name(&self) -> &str {
        match self {
            Self::BuiltIn { assignor, .. } => assignor.name(),
            Self::Component(c) => c.name(),
        }
    }

    /// The configuration `configure` was given.
    pub fn config(&self) -> BTreeMap<String, String> {
        match self {
            Self::BuiltIn { config, .. } => config.as_ref().clone(),
            Self::Component(c) => c.config(),
        }
    }

    /// Computes and validates an assignment; any failure is a [`TaskAssignorError`].
    pub fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        let result = match self {
            Self::Component(c) => c.assign(group, topology),
            Self::BuiltIn {
                assignor, limits, ..
            } => limits
                .check_group(group, topology)
                .map_err(|e| {
                    TaskAssignorError::new(assignor.name(), ErrorKind::InputLimit, e.to_string())
                })
                .and_then(|()| assign_native(assignor.as_ref(), group, topology)),
        };
        Self::report(self.name(), group, result)
    }

    /// Logs a call's outcome and passes it on.
    pub(crate) fn report(
        name: &str,
        group: &GroupSpec,
        result: Result<(GroupAssignment, Usage), TaskAssignorError>,
    ) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
        match &result {
            Ok((_, usage)) => tracing::debug!(
                assignor = %name,
                members = group.members.len(),
                fuel = usage.fuel,
                wall_time_us = usage.wall_time.as_micros() as u64,
                "assignment computed"
            ),
            Err(e) => tracing::warn!(
                assignor = %name,
                members = group.members.len(),
                kind = %e.kind,
                message = %e.message,
                "assignment failed"
            ),
        }
        result
    }
}

fn assign_native(
    assignor: &dyn TaskAssignor,
    group: &GroupSpec,
    topology: &Topology,
) -> Result<(GroupAssignment, Usage), TaskAssignorError> {
    let name = assignor.name();
    let start = Instant::now();
    // A panicking built-in is a bug, but it must not take the coordinator down with it.
    let assignment =
        match panic::catch_unwind(AssertUnwindSafe(|| assignor.assign(group, topology))) {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                return Err(TaskAssignorError::new(
                    name,
                    ErrorKind::GuestError,
                    e.message(),
                ));
            }
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic payload".into());
                return Err(TaskAssignorError::new(
                    name,
                    ErrorKind::Trap,
                    format!("the built-in assignor panicked: {message}"),
                ));
            }
        };
    assignor_sdk::validate(group, topology, &assignment)
        .map_err(|m| TaskAssignorError::new(name, ErrorKind::InvalidOutput, m))?;
    Ok((
        assignment,
        Usage {
            wall_time: start.elapsed(),
            ..Usage::default()
        },
    ))
}

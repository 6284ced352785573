//! Per-call resource limits for sandboxed assignors.

use std::time::Duration;

/// Default fuel per call: one billion units, about a quarter of a second of guest compute on
/// these machines (an endless loop stops in ~0.25 s) and far more than a well-behaved assignor
/// needs for 1000 members and 16384 tasks (see the README's figures).
pub const DEFAULT_FUEL: u64 = 1_000_000_000;
/// Default linear memory per instance, summed over its memories: 256 MiB.
pub const DEFAULT_MEMORY_BYTES: usize = 256 << 20;
/// Default wasm stack: 1 MiB, wasmtime's own default.
pub const DEFAULT_WASM_STACK_BYTES: usize = 1 << 20;
/// Default wall-clock deadline per call, the backstop when fuel is disabled or slow host work
/// (copying a huge input) dominates: 5 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default cap on the assignment a guest may return, in canonical-ABI bytes (12 bytes per
/// member/task entry): 16 MiB, about 1.4 million entries.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 << 20;
/// Default cap on captured guest stdout/stderr: the last 16 KiB are kept.
pub const DEFAULT_MAX_STDERR_BYTES: usize = 16 << 10;
/// Default number of calls one runtime runs at once: 256. Instances come from a pool of this
/// many pre-reserved slots, which makes a fresh instance per call cheap.
pub const DEFAULT_MAX_CONCURRENT_CALLS: u32 = 256;
/// Default cap on a component's size at load: 32 MiB (a release-built Rust assignor is
/// ~100 KB).
pub const DEFAULT_MAX_COMPONENT_BYTES: usize = 32 << 20;

/// Default cap on a group's members: 100,000 (Kafka's own assignor is tested to 10,000).
pub const DEFAULT_MAX_MEMBERS: usize = 100_000;
/// Default cap on a topology's subtopologies: 10,000.
pub const DEFAULT_MAX_SUBTOPOLOGIES: usize = 10_000;
/// Default cap on one subtopology's `maxNumInputPartitions`: 100,000 (a Kafka topic with more
/// partitions than this is not run in practice).
pub const DEFAULT_MAX_PARTITIONS: u32 = 100_000;
/// Default cap on a topology's tasks, summed over its subtopologies: 1,000,000. The host
/// allocates a few bytes per task to validate an output, so this bounds that work.
pub const DEFAULT_MAX_TASKS: usize = 1_000_000;
/// Default cap on an input document (the JSON a CLI reads, a request body a service parses):
/// 64 MiB, about 60 times the standard 1000-member group.
pub const DEFAULT_MAX_INPUT_BYTES: usize = 64 << 20;
/// Default cap on any id or name in a group (member, process, instance, rack, client tag key
/// or value, subtopology, topic, rack-aware tag): 1 KiB. Kafka's own ids are UUIDs and topic
/// names of at most 249 bytes.
pub const DEFAULT_MAX_ID_BYTES: usize = 1 << 10;
/// Default cap on a guest's error message (an `assign-error`, a rejected `configure`) kept by
/// the host: 4 KiB; the rest is dropped where it enters the host, with a note of how much.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 10;

/// Default cap on one function body in a component, checked before compiling: 256 KiB.
/// Cranelift's time grows faster than linearly in a function's size (measured on a loaded
/// 2-core machine: 256 KiB of straight-line code 0.28 s, 1 MiB 1.9 s, 2 MiB 3.1 s), so one
/// huge body is what makes a compilation slow; the largest in the release-built sample
/// assignors is 19 KiB.
pub const DEFAULT_MAX_FUNCTION_BYTES: usize = 256 << 10;
/// Default cap on all function bodies of a component together, checked before compiling:
/// 4 MiB, about 3 s of compilation on a loaded 2-core machine (16 MiB took 13 s). The sample
/// assignors have 140–400 KiB.
pub const DEFAULT_MAX_CODE_BYTES: usize = 4 << 20;

/// Default cap on a component's compiled code (the native image wasmtime makes, and what the
/// on-disk cache stores), checked after compiling and when a cached artifact is loaded:
/// 64 MiB. Wasmtime has no limit during compilation; the code limits bound its input, and
/// this bounds what is kept in memory and on disk per component. Measured (compiled / input):
/// the sample assignors 664 KiB / 184 KiB, 1.1 MiB / 319 KiB and 1.6 MiB / 465 KiB (about
/// 3.5×); 4 MiB of code at the code limits 5.3 MiB (straight-line arithmetic), 14.1 MiB
/// (direct calls) and 48.5 MiB (`call_indirect`, 11.6×, the worst found), so the default
/// refuses nothing the code limits accept.
pub const DEFAULT_MAX_COMPILED_BYTES: usize = 64 << 20;

/// Default wall-clock limit on compiling one component out of process (see
/// [`RuntimeBuilder::compiler`](crate::RuntimeBuilder::compiler)): 10 s. Measured on a loaded
/// 2-core machine: the sample assignors compile in under 1 s, 4 MiB of straight-line code in
/// ~4 s, while 4 MiB of direct calls takes 32 s and of `call_indirect` 390 s, all within the
/// code limits; the limit, not the code limits, is what bounds those.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(10);

/// Limits applied to every sandboxed call, built with setters over documented defaults.
///
/// ```
/// use std::time::Duration;
/// use assignor_sandbox::Limits;
///
/// let limits = Limits::default()
///     .fuel(Some(500_000_000))
///     .memory_bytes(64 << 20)
///     .timeout(Duration::from_millis(500));
/// assert_eq!(limits.get_memory_bytes(), 64 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    fuel: Option<u64>,
    memory_bytes: usize,
    wasm_stack_bytes: usize,
    timeout: Duration,
    max_output_bytes: usize,
    max_stderr_bytes: usize,
    max_component_bytes: usize,
    max_concurrent_calls: u32,
    max_members: usize,
    max_subtopologies: usize,
    max_partitions: u32,
    max_tasks: usize,
    max_input_bytes: usize,
    max_id_bytes: usize,
    max_message_bytes: usize,
    max_function_bytes: usize,
    max_code_bytes: usize,
    max_compiled_bytes: usize,
    compile_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: Some(DEFAULT_FUEL),
            memory_bytes: DEFAULT_MEMORY_BYTES,
            wasm_stack_bytes: DEFAULT_WASM_STACK_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_members: DEFAULT_MAX_MEMBERS,
            max_subtopologies: DEFAULT_MAX_SUBTOPOLOGIES,
            max_partitions: DEFAULT_MAX_PARTITIONS,
            max_tasks: DEFAULT_MAX_TASKS,
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            max_id_bytes: DEFAULT_MAX_ID_BYTES,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_function_bytes: DEFAULT_MAX_FUNCTION_BYTES,
            max_code_bytes: DEFAULT_MAX_CODE_BYTES,
            max_compiled_bytes: DEFAULT_MAX_COMPILED_BYTES,
            compile_timeout: DEFAULT_COMPILE_TIMEOUT,
        }
    }
}

impl Limits {
    /// Fuel per call (instantiation, `configure` and `assign` together); `None` disables the
    /// fuel limit and leaves the wall-clock deadline as the only bound on compute. Fuel is
    /// deterministic: the same input consumes the same fuel. Default [`DEFAULT_FUEL`].
    pub fn fuel(mut self, fuel: Option<u64>) -> Self {
        self.fuel = fuel;
        self
    }

    /// Linear memory per instance in bytes, summed over the instance's memories; growth past
    /// it fails and the call reports `memory-limit`. Default [`DEFAULT_MEMORY_BYTES`].
    pub fn memory_bytes(mut self, bytes: usize) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Maximum wasm stack in bytes. Wasmtime fixes it per engine, so it takes effect when a
    /// [`Runtime`](crate::Runtime) is created from these limits. Default
    /// [`DEFAULT_WASM_STACK_BYTES`].
    pub fn wasm_stack_bytes(mut self, bytes: usize) -> Self {
        self.wasm_stack_bytes = bytes;
        self
    }

    /// Wall-clock deadline per call, checked every [`YIELD_FUEL`](crate::YIELD_FUEL) units of
    /// fuel in wasm code and at once while the guest waits in a host function. Default
    /// [`DEFAULT_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Largest assignment a guest may return, in canonical-ABI bytes. Default
    /// [`DEFAULT_MAX_OUTPUT_BYTES`].
    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// How much of the guest's stdout/stderr is kept (the tail). Default
    /// [`DEFAULT_MAX_STDERR_BYTES`].
    pub fn max_stderr_bytes(mut self, bytes: usize) -> Self {
        self.max_stderr_bytes = bytes;
        self
    }

    /// Largest component accepted at load, in bytes. Default [`DEFAULT_MAX_COMPONENT_BYTES`].
    pub fn max_component_bytes(mut self, bytes: usize) -> Self {
        self.max_component_bytes = bytes;
        self
    }

    /// How many calls a runtime runs at once (its instance pool size); a call beyond it fails
    /// at once rather than waiting. Fixed when a [`Runtime`](crate::Runtime) is created.
    /// Default [`DEFAULT_MAX_CONCURRENT_CALLS`].
    pub fn max_concurrent_calls(mut self, calls: u32) -> Self {
        self.max_concurrent_calls = calls;
        self
    }

    /// Most members a group may have; a larger group is refused before any work (error kind
    /// `input-limit`). Default [`DEFAULT_MAX_MEMBERS`].
    pub fn max_members(mut self, members: usize) -> Self {
        self.max_members = members;
        self
    }

    /// Most subtopologies a topology may have. Default [`DEFAULT_MAX_SUBTOPOLOGIES`].
    pub fn max_subtopologies(mut self, subtopologies: usize) -> Self {
        self.max_subtopologies = subtopologies;
        self
    }

    /// Largest `maxNumInputPartitions` of one subtopology. Default [`DEFAULT_MAX_PARTITIONS`].
    pub fn max_partitions(mut self, partitions: u32) -> Self {
        self.max_partitions = partitions;
        self
    }

    /// Most tasks a topology may have, over all its subtopologies. Default
    /// [`DEFAULT_MAX_TASKS`].
    pub fn max_tasks(mut self, tasks: usize) -> Self {
        self.max_tasks = tasks;
        self
    }

    /// Largest input document read or parsed (JSON input, request body), checked before it
    /// is read whole. Default [`DEFAULT_MAX_INPUT_BYTES`].
    pub fn max_input_bytes(mut self, bytes: usize) -> Self {
        self.max_input_bytes = bytes;
        self
    }

    /// Longest id or name in a group. Default [`DEFAULT_MAX_ID_BYTES`].
    pub fn max_id_bytes(mut self, bytes: usize) -> Self {
        self.max_id_bytes = bytes;
        self
    }

    /// How much of a guest's error message the host keeps. Default
    /// [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }

    /// Largest function body a component may have, checked before it is compiled (a larger
    /// one is a `load` error). Default [`DEFAULT_MAX_FUNCTION_BYTES`].
    pub fn max_function_bytes(mut self, bytes: usize) -> Self {
        self.max_function_bytes = bytes;
        self
    }

    /// Most code (all function bodies) a component may have, checked before it is compiled.
    /// Default [`DEFAULT_MAX_CODE_BYTES`].
    pub fn max_code_bytes(mut self, bytes: usize) -> Self {
        self.max_code_bytes = bytes;
        self
    }

    /// Largest compiled code (the native image) a component may have, checked after it is
    /// compiled and before it is cached, and again when it is loaded from the on-disk cache;
    /// a larger one is a `load` error. Default [`DEFAULT_MAX_COMPILED_BYTES`].
    pub fn max_compiled_bytes(mut self, bytes: usize) -> Self {
        self.max_compiled_bytes = bytes;
        self
    }

    /// Longest a component's compilation may take when it compiles in a child process (a
    /// runtime built with [`RuntimeBuilder::compiler`](crate::RuntimeBuilder::compiler)); past
    /// it the child is killed, which frees its cores at once, and the load fails naming
    /// `compile.timeout.ms`. The time covers the child's whole life: its start, the compile
    /// and handing back the compiled code. A runtime compiling in process cannot stop a
    /// compilation, so there only the code limits bound it. Default
    /// [`DEFAULT_COMPILE_TIMEOUT`].
    pub fn compile_timeout(mut self, timeout: Duration) -> Self {
        self.compile_timeout = timeout;
        self
    }

    /// The compile time limit.
    pub fn get_compile_timeout(&self) -> Duration {
        self.compile_timeout
    }

    /// The function body limit in bytes.
    pub fn get_max_function_bytes(&self) -> usize {
        self.max_function_bytes
    }

    /// The code limit in bytes.
    pub fn get_max_code_bytes(&self) -> usize {
        self.max_code_bytes
    }

    /// The compiled code limit in bytes.
    pub fn get_max_compiled_bytes(&self) -> usize {
        self.max_compiled_bytes
    }

    /// The member limit.
    pub fn get_max_members(&self) -> usize {
        self.max_members
    }

    /// The subtopology limit.
    pub fn get_max_subtopologies(&self) -> usize {
        self.max_subtopologies
    }

    /// The per-subtopology partition limit.
    pub fn get_max_partitions(&self) -> u32 {
        self.max_partitions
    }

    /// The task limit.
    pub fn get_max_tasks(&self) -> usize {
        self.max_tasks
    }

    /// The input document limit in bytes.
    pub fn get_max_input_bytes(&self) -> usize {
        self.max_input_bytes
    }

    /// The id length limit in bytes.
    pub fn get_max_id_bytes(&self) -> usize {
        self.max_id_bytes
    }

    /// The guest message limit in bytes.
    pub fn get_max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// The fuel limit, `None` when disabled.
    pub fn get_fuel(&self) -> Option<u64> {
        self.fuel
    }

    /// The memory limit in bytes.
    pub fn get_memory_bytes(&self) -> usize {
        self.memory_bytes
    }

    /// The wasm stack limit in bytes.
    pub fn get_wasm_stack_bytes(&self) -> usize {
        self.wasm_stack_bytes
    }

    /// The wall-clock deadline.
    pub fn get_timeout(&self) -> Duration {
        self.timeout
    }

    /// The output limit in bytes.
    pub fn get_max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// The captured-output limit in bytes.
    pub fn get_max_stderr_bytes(&self) -> usize {
        self.max_stderr_bytes
    }

    /// The component size limit in bytes.
    pub fn get_max_component_bytes(&self) -> usize {
        self.max_component_bytes
    }

    /// The concurrent call limit.
    pub fn get_max_concurrent_calls(&self) -> u32 {
        self.max_concurrent_calls
    }
}

/// A group over one of the input limits: which field, its value, the limit and the limit's
/// name in the [`Limits`] builder (the broker key is `group.streams.assignor.<name>` with dots).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{field} is {value}, over the limit of {limit} ({name}); shrink the group or raise the limit"
)]
#[non_exhaustive]
pub struct InputLimitError {
    /// Path of the field, e.g. `topology.subtopologies[3].maxNumInputPartitions`.
    pub field: String,
    /// What the group has.
    pub value: u64,
    /// What the limit allows.
    pub limit: u64,
    /// The limit's name, e.g. `max.partitions`.
    pub name: &'static str,
}

impl InputLimitError {
    pub(crate) fn new(
        field: impl Into<String>,
        value: u64,
        limit: u64,
        name: &'static str,
    ) -> Self {
        Self {
            field: field.into(),
            value,
            limit,
            name,
        }
    }
}

impl Limits {
    /// Checks a group's counts and ids against the input limits before anything is sized
    /// from them: members, subtopologies, partitions per subtopology, total tasks, id length.
    /// Linear in the group (ids are measured, never copied).
    pub fn check_group(
        &self,
        group: &assignor_sdk::GroupSpec,
        topology: &assignor_sdk::Topology,
    ) -> Result<(), InputLimitError> {
        self.check_counts(
            group.members.len(),
            topology.subtopologies.len(),
            topology
                .subtopologies
                .iter()
                .map(|s| s.max_num_input_partitions),
        )?;
        let id = |field: &dyn Fn() -> String, s: &str| self.check_id(field, s);
        for (i, s) in topology.subtopologies.iter().enumerate() {
            id(&|| format!("topology.subtopologies[{i}].id"), &s.id)?;
            for (t, topic) in s.source_topics.iter().enumerate() {
                id(
                    &|| format!("topology.subtopologies[{i}].sourceTopics[{t}].name"),
                    &topic.name,
                )?;
            }
        }
        for (i, r) in topology.racks.iter().enumerate() {
            id(&|| format!("topology.racks[{i}]"), r)?;
        }
        for (i, tag) in group.configs.rack_aware_assignment_tags.iter().enumerate() {
            id(&|| format!("configs.rackAwareAssignmentTags[{i}]"), tag)?;
        }
        for (i, m) in group.members.iter().enumerate() {
            id(&|| format!("members[{i}].memberId"), &m.member_id)?;
            id(&|| format!("members[{i}].processId"), &m.process_id)?;
            if let Some(instance) = &m.instance_id {
                id(&|| format!("members[{i}].instanceId"), instance)?;
            }
            if let Some(rack) = &m.rack_id {
                id(&|| format!("members[{i}].rackId"), rack)?;
            }
            for (k, v) in &m.client_tags {
                id(&|| format!("members[{i}].clientTags"), k)?;
                id(&|| format!("members[{i}].clientTags[{k:?}]"), v)?;
            }
        }
        Ok(())
    }

    /// The count limits alone, from the counts: members, subtopologies and each subtopology's
    /// partitions (in order), their sum against the task limit.
    pub fn check_counts(
        &self,
        members: usize,
        subtopologies: usize,
        partitions: impl IntoIterator<Item = u32>,
    ) -> Result<(), InputLimitError> {
        if members > self.max_members {
            return Err(InputLimitError::new(
                "members",
                members as u64,
                self.max_members as u64,
                "max.members",
            ));
        }
        if subtopologies > self.max_subtopologies {
            return Err(InputLimitError::new(
                "topology.subtopologies",
                subtopologies as u64,
                self.max_subtopologies as u64,
                "max.subtopologies",
            ));
        }
        let mut tasks = 0u64;
        for (i, p) in partitions.into_iter().enumerate() {
            if p > self.max_partitions {
                return Err(InputLimitError::new(
                    format!("topology.subtopologies[{i}].maxNumInputPartitions"),
                    u64::from(p),
                    u64::from(self.max_partitions),
                    "max.partitions",
                ));
            }
            tasks += u64::from(p);
        }
        if tasks > self.max_tasks as u64 {
            return Err(InputLimitError::new(
                "topology (tasks over all subtopologies)",
                tasks,
                self.max_tasks as u64,
                "max.tasks",
            ));
        }
        Ok(())
    }

    /// One id against the id limit; `field` is only formatted when it fails.
    pub fn check_id(&self, field: &dyn Fn() -> String, id: &str) -> Result<(), InputLimitError> {
        if id.len() > self.max_id_bytes {
            return Err(InputLimitError::new(
                field(),
                id.len() as u64,
                self.max_id_bytes as u64,
                "max.id.bytes",
            )
            .in_bytes());
        }
        Ok(())
    }
}

impl InputLimitError {
    /// The same error, its value counted in bytes (said so in the field).
    fn in_bytes(mut self) -> Self {
        self.field.push_str(" (bytes)");
        self
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with a note of how many bytes
/// were dropped: how guest strings and echoed ids enter messages, so a hostile string never
/// makes a message larger than its limit.
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes dropped)", &text[..end], text.len() - end).into()
}

/// A byte count as people read it in a limit message: `512 bytes`, `64 KiB`, `16 MiB`,
/// `1.5 GiB` (binary units, one decimal where it is not whole).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use assignor_sdk::{GroupSpec, Member, Subtopology, Topology};

    use super::*;

    fn topology(partitions: &[u32]) -> Topology {
        Topology {
            subtopologies: partitions
                .iter()
                .enumerate()
                .map(|(i, &n)| Subtopology {
                    id: format!("s{i}"),
                    max_num_input_partitions: n,
                    ..Subtopology::default()
                })
                .collect(),
            racks: Vec::new(),
        }
    }

    /// Each count limit names its field, the value and the limit; the sum of partitions is
    /// checked without overflow even at `u32::MAX` per subtopology.
    #[test]
    fn counts_are_checked_by_name() {
        let limits = Limits::default().max_partitions(u32::MAX).max_tasks(10);
        let e = limits
            .check_group(&GroupSpec::default(), &topology(&[u32::MAX; 100]))
            .unwrap_err();
        assert_eq!(e.name, "max.tasks");
        assert_eq!(e.value, 100 * u64::from(u32::MAX));
        let e = Limits::default()
            .check_group(&GroupSpec::default(), &topology(&[4, u32::MAX]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "topology.subtopologies[1].maxNumInputPartitions is 4294967295, over the limit of \
             100000 (max.partitions); shrink the group or raise the limit"
        );
        let group = GroupSpec {
            members: vec![Member::default(); 3],
            ..GroupSpec::default()
        };
        let e = Limits::default()
            .max_members(2)
            .check_group(&group, &topology(&[1]))
            .unwrap_err();
        assert_eq!((e.field.as_str(), e.value, e.limit), ("members", 3, 2));
        Limits::default()
            .check_group(&group, &topology(&[1024; 16]))
            .expect("within limits");
    }

    /// An id over the id limit is named by path and its length, never echoed.
    #[test]
    fn long_ids_are_refused_without_echo() {
        let group = GroupSpec {
            members: vec![Member {
                member_id: "m".repeat(5000),
                ..Member::default()
            }],
            ..GroupSpec::default()
        };
        let e = Limits::default()
            .check_group(&group, &topology(&[1]))
            .unwrap_err();
        assert_eq!(e.field, "members[0].memberId (bytes)");
        assert_eq!((e.value, e.limit), (5000, 1024));
        assert!(e.to_string().len() < 200, "{e}");
    }

    /// Byte counts read in binary units.
    #[test]
    fn bytes_read_as_people_say_them() {
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(16 << 20), "16 MiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
        assert_eq!(bytes(0x1000_0000), "256 MiB");
    }

    /// `cut` keeps short text, cuts long text at a char boundary and says how much it dropped.
    #[test]
    fn cut_bounds_text() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("ééé", 3), "é… (4 bytes dropped)");
    }
}

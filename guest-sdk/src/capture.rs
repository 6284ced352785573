//! Captured calls (feature `capture`): the exact input of an assignment that failed, with the
//! assignor, its configuration, the limits and the failure, in a compact binary file.
//!
//! The runtime writes one whenever a call fails (the `assignor assign` command, the
//! coordinator, the service); `assignor replay FILE` reruns it; a test loads it with
//! [`Capture::read`] and feeds [`Capture::group`] and [`Capture::topology`] to the assignor
//! natively, to debug the failure where a debugger works.
//!
//! The file is a magic tag, a format version (little-endian `u32`) and the capture:
//!
//! - version 2, written since the model's records existed: a CBOR map keyed by small
//!   integers, its group and topology in the model's stored encoding ([`crate::records`]), so
//!   a field added to the model or to a capture is read by older and newer SDKs alike. A
//!   1000-member, 16384-task group takes about 100 KB, as in version 1 (the records' task
//!   sets are as compact as postcard's varints; the coordinator's records doc has the
//!   measurements).
//! - version 1, still read: the [`Capture`] in postcard, positional; its limits are frozen in
//!   `v1`, its group and topology decoded with today's types. The test `reads_version_1` holds a committed version-1 file: the day the model's
//!   types change, it fails, and that change must freeze the version-1 shapes beside it (as
//!   the coordinator's `records::legacy` does for its version-1 groups).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use minicbor::{Decode, Encode};

use crate::records::{MemberRecord, TopologyRecord};
use crate::{AssignmentConfigs, CallLimits, GroupSpec, Topology};

/// The first bytes of every capture file.
pub const MAGIC: &[u8; 16] = b"assignor-capture";
/// The format version this SDK writes; it reads this one and version 1.
pub const FORMAT_VERSION: u32 = 2;

/// One assignment call, as the runtime made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The assignor's name (its `name()`, or a built-in's name).
    pub assignor: String,
    /// SHA-256 of the component, hex; `None` for a built-in.
    pub component_sha256: Option<String>,
    /// The configuration `configure` was given.
    pub config: BTreeMap<String, String>,
    /// The sandbox limits the call ran under; `None` for a built-in (run natively).
    pub limits: Option<CallLimits>,
    /// The group, current assignment included.
    pub group: GroupSpec,
    /// The topology.
    pub topology: Topology,
    /// How the call failed; `None` for a call captured on purpose although it succeeded.
    pub failure: Option<CapturedFailure>,
}

/// How a captured call failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CapturedFailure {
    /// The runtime's error kind, e.g. `out-of-fuel`, `trap`, `invalid-output`.
    pub kind: String,
    /// The runtime's message.
    pub message: String,
    /// Fuel consumed before the failure, where the sandbox measured it. Deterministic for
    /// every kind but `timeout`.
    pub fuel: Option<u64>,
}

/// Why bytes are not a capture this SDK can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureError {
    /// The bytes do not start with [`MAGIC`].
    NotACapture,
    /// A capture of another format version.
    Version(u32),
    /// The payload does not decode.
    Corrupt(String),
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotACapture => f.write_str(
                "not a capture file (captures are written by the assignor runtime when a call \
                 fails)",
            ),
            Self::Version(v) => write!(
                f,
                "capture format version {v}; this SDK reads versions 1 to {FORMAT_VERSION} \
                 (a newer runtime wrote it: replay it with that runtime)"
            ),
            Self::Corrupt(why) => write!(f, "the capture is damaged: {why}"),
        }
    }
}

impl std::error::Error for CaptureError {}

/// Version 1: the capture as postcard wrote it, positional. Its limits are frozen here, since
/// [`CallLimits`] is also a JSON shape with its own field order; the group and topology are
/// today's types (see the module doc).
mod v1 {
    use std::collections::BTreeMap;

    use crate::{CallLimits, GroupSpec, Topology};

    use super::CapturedFailure;

    #[derive(serde::Deserialize)]
    pub(super) struct Capture {
        assignor: String,
        component_sha256: Option<String>,
        config: BTreeMap<String, String>,
        limits: Option<Limits>,
        group: GroupSpec,
        topology: Topology,
        failure: Option<CapturedFailure>,
    }

    #[derive(serde::Deserialize)]
    struct Limits {
        fuel: Option<u64>,
        memory_bytes: u64,
        wasm_stack_bytes: u64,
        timeout_ms: u64,
        max_output_bytes: u64,
    }

    impl Capture {
        pub(super) fn into_capture(self) -> super::Capture {
            super::Capture {
                assignor: self.assignor,
                component_sha256: self.component_sha256,
                config: self.config,
                limits: self.limits.map(|l| CallLimits {
                    fuel: l.fuel,
                    max_output_bytes: l.max_output_bytes,
                    memory_bytes: l.memory_bytes,
                    timeout_ms: l.timeout_ms,
                    wasm_stack_bytes: Some(l.wasm_stack_bytes),
                }),
                group: self.group,
                topology: self.topology,
                failure: self.failure,
            }
        }
    }
}

/// A capture as stored (format version 2); see the module doc.
#[derive(Encode, Decode)]
#[cbor(map)]
struct CaptureRecord<'a> {
    #[n(0)]
    assignor: Cow<'a, str>,
    #[n(1)]
    component_sha256: Option<Cow<'a, str>>,
    #[n(2)]
    config: Cow<'a, BTreeMap<String, String>>,
    #[n(3)]
    limits: Option<LimitsRecord>,
    #[n(4)]
    members: Vec<MemberRecord<'a>>,
    #[n(5)]
    num_standby_replicas: u32,
    #[n(6)]
    rack_aware_assignment_tags: Cow<'a, [String]>,
    #[n(7)]
    topology: TopologyRecord<'a>,
    #[n(8)]
    failure: Option<FailureRecord<'a>>,
}

#[derive(Encode, Decode)]
#[cbor(map)]
struct LimitsRecord {
    #[n(0)]
    fuel: Option<u64>,
    #[n(1)]
    memory_bytes: u64,
    #[n(2)]
    wasm_stack_bytes: Option<u64>,
    #[n(3)]
    timeout_ms: u64,
    #[n(4)]
    max_output_bytes: u64,
}

#[derive(Encode, Decode)]
#[cbor(map)]
struct FailureRecord<'a> {
    #[n(0)]
    kind: Cow<'a, str>,
    #[n(1)]
    message: Cow<'a, str>,
    #[n(2)]
    fuel: Option<u64>,
}

impl<'a> CaptureRecord<'a> {
    fn of(c: &'a Capture) -> Self {
        Self {
            assignor: Cow::Borrowed(&c.assignor),
            component_sha256: c.component_sha256.as_deref().map(Cow::Borrowed),
            config: Cow::Borrowed(&c.config),
            limits: c.limits.map(|l| LimitsRecord {
                fuel: l.fuel,
                memory_bytes: l.memory_bytes,
                wasm_stack_bytes: l.wasm_stack_bytes,
                timeout_ms: l.timeout_ms,
                max_output_bytes: l.max_output_bytes,
            }),
            members: c.group.members.iter().map(MemberRecord::of).collect(),
            num_standby_replicas: c.group.configs.num_standby_replicas,
            rack_aware_assignment_tags: Cow::Borrowed(&c.group.configs.rack_aware_assignment_tags),
            topology: TopologyRecord::of(&c.topology),
            failure: c.failure.as_ref().map(|f| FailureRecord {
                kind: Cow::Borrowed(&f.kind),
                message: Cow::Borrowed(&f.message),
                fuel: f.fuel,
            }),
        }
    }

    fn into_capture(self) -> Capture {
        Capture {
            assignor: self.assignor.into_owned(),
            component_sha256: self.component_sha256.map(Cow::into_owned),
            config: self.config.into_owned(),
            limits: self.limits.map(|l| CallLimits {
                fuel: l.fuel,
                memory_bytes: l.memory_bytes,
                wasm_stack_bytes: l.wasm_stack_bytes,
                timeout_ms: l.timeout_ms,
                max_output_bytes: l.max_output_bytes,
            }),
            group: GroupSpec {
                members: self
                    .members
                    .into_iter()
                    .map(MemberRecord::into_member)
                    .collect(),
                configs: AssignmentConfigs {
                    num_standby_replicas: self.num_standby_replicas,
                    rack_aware_assignment_tags: self.rack_aware_assignment_tags.into_owned(),
                },
            },
            topology: self.topology.into_topology(),
            failure: self.failure.map(|f| CapturedFailure {
                kind: f.kind.into_owned(),
                message: f.message.into_owned(),
                fuel: f.fuel,
            }),
        }
    }
}

impl Capture {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        minicbor::encode(CaptureRecord::of(self), &mut out).expect("writing to a Vec cannot fail");
        out
    }

    /// Decodes a capture file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CaptureError> {
        let rest = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or(CaptureError::NotACapture)?;
        let (version, payload) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| CaptureError::Corrupt("no format version".into()))?;
        match u32::from_le_bytes(*version) {
            FORMAT_VERSION => minicbor::decode::<CaptureRecord<'_>>(payload)
                .map(CaptureRecord::into_capture)
                .map_err(|e| CaptureError::Corrupt(e.to_string())),
            1 => postcard::from_bytes::<v1::Capture>(payload)
                .map(v1::Capture::into_capture)
                .map_err(|e| CaptureError::Corrupt(e.to_string())),
            other => Err(CaptureError::Version(other)),
        }
    }

    /// Reads a capture file; the error names the file.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, String> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Member, Subtopology, TaskId};

    fn sample() -> Capture {
        let mut member = Member {
            member_id: "m1".into(),
            process_id: "p1".into(),
            ..Member::default()
        };
        member.active_tasks.insert(TaskId::new(0, 1));
        Capture {
            assignor: "sticky".into(),
            component_sha256: Some("ab".repeat(32)),
            config: BTreeMap::from([("k".to_owned(), "v".to_owned())]),
            limits: Some(CallLimits {
                fuel: Some(1_000),
                max_output_bytes: 1 << 10,
                memory_bytes: 1 << 20,
                timeout_ms: 100,
                wasm_stack_bytes: Some(1 << 16),
            }),
            group: GroupSpec {
                members: vec![member],
                ..GroupSpec::default()
            },
            topology: Topology {
                subtopologies: vec![Subtopology {
                    id: "s0".into(),
                    max_num_input_partitions: 2,
                    is_stateful: true,
                    source_topics: Vec::new(),
                }],
                ..Topology::default()
            },
            failure: Some(CapturedFailure {
                kind: "out-of-fuel".into(),
                message: "ran out".into(),
                fuel: Some(1_000),
            }),
        }
    }

    /// A capture survives the round trip through its bytes unchanged.
    #[test]
    fn round_trips() {
        let c = sample();
        assert_eq!(Capture::from_bytes(&c.to_bytes()), Ok(c));
    }

    /// Foreign bytes, another version and a cut-off payload are each told apart.
    #[test]
    fn rejects_what_it_cannot_read() {
        assert_eq!(
            Capture::from_bytes(b"\0asm\x0d\0\x01\0"),
            Err(CaptureError::NotACapture)
        );
        let mut other = MAGIC.to_vec();
        other.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(Capture::from_bytes(&other), Err(CaptureError::Version(7)));
        let bytes = sample().to_bytes();
        assert!(matches!(
            Capture::from_bytes(&bytes[..bytes.len() - 3]),
            Err(CaptureError::Corrupt(_))
        ));
    }

    /// A version-1 capture (postcard, written by the runtime of commit 70c30f1 and kept in
    /// `tests/fixtures/`) still reads, every field in place.
    #[test]
    fn reads_version_1() {
        let c = Capture::from_bytes(include_bytes!("../tests/fixtures/version-1.capture"))
            .expect("a version-1 capture reads");
        assert_eq!(c.assignor, "loops-on-large-groups");
        assert_eq!(c.group.members.len(), 5);
        assert!(c.limits.is_some_and(|l| l.fuel == Some(50_000_000)));
        let failure = c.failure.as_ref().expect("a failure's capture");
        assert_eq!(
            (failure.kind.as_str(), failure.fuel),
            ("out-of-fuel", Some(50_000_000))
        );
        // Written again, it is a current capture holding the same call.
        assert_eq!(Capture::from_bytes(&c.to_bytes()), Ok(c));
    }

    /// A capture with a field this SDK does not know (a newer runtime's) still reads: the key
    /// is skipped, not an error.
    #[test]
    fn skips_fields_it_does_not_know() {
        let c = sample();
        let mut bytes = c.to_bytes();
        let header = MAGIC.len() + 4;
        // The record is a CBOR map of at most 23 entries: one header byte 0xa0 + count.
        let count = bytes[header] - 0xa0;
        bytes[header] = 0xa0 + count + 1;
        let mut e = minicbor::Encoder::new(Vec::new());
        e.u32(100)
            .and_then(|e| e.str("from the future"))
            .expect("writes");
        bytes.extend(e.into_writer());
        assert_eq!(Capture::from_bytes(&bytes), Ok(c));
    }
}

//! Captured calls (feature `capture`): the exact input of an assignment that failed, with the
//! assignor, its configuration, the limits and the failure, in a compact binary file.
//!
//! The runtime writes one whenever a call fails (the `assignor assign` command, the
//! coordinator, the service); `assignor replay FILE` reruns it; a test loads it with
//! [`Capture::read`] and feeds [`Capture::group`] and [`Capture::topology`] to the assignor
//! natively, to debug the failure where a debugger works.
//!
//! The file is a magic tag, a format version and the [`Capture`] in postcard: a
//! 1000-member, 16384-task group takes about 100 KB.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::{GroupSpec, Topology};

/// The first bytes of every capture file.
pub const MAGIC: &[u8; 16] = b"assignor-capture";
/// The format version this SDK writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// One assignment call, as the runtime made it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Capture {
    /// The assignor's name (its `name()`, or a built-in's name).
    pub assignor: String,
    /// SHA-256 of the component, hex; `None` for a built-in.
    pub component_sha256: Option<String>,
    /// The configuration `configure` was given.
    pub config: BTreeMap<String, String>,
    /// The sandbox limits the call ran under; `None` for a built-in (run natively).
    pub limits: Option<CapturedLimits>,
    /// The group, current assignment included.
    pub group: GroupSpec,
    /// The topology.
    pub topology: Topology,
    /// How the call failed; `None` for a call captured on purpose although it succeeded.
    pub failure: Option<CapturedFailure>,
}

/// The sandbox limits of a captured call, in plain units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CapturedLimits {
    /// Fuel per call; `None`: unlimited.
    pub fuel: Option<u64>,
    /// Linear memory per instance, bytes.
    pub memory_bytes: u64,
    /// Wasm stack, bytes.
    pub wasm_stack_bytes: u64,
    /// Wall-clock deadline, milliseconds.
    pub timeout_ms: u64,
    /// Largest output, bytes.
    pub max_output_bytes: u64,
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
                "capture format version {v}; this SDK reads version {FORMAT_VERSION} (use a \
                 matching assignor runtime)"
            ),
            Self::Corrupt(why) => write!(f, "the capture is damaged: {why}"),
        }
    }
}

impl std::error::Error for CaptureError {}

impl Capture {
    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        postcard::to_extend(self, out).expect("a capture always serializes")
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
            FORMAT_VERSION => {
                postcard::from_bytes(payload).map_err(|e| CaptureError::Corrupt(e.to_string()))
            }
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
            limits: Some(CapturedLimits {
                fuel: Some(1_000),
                memory_bytes: 1 << 20,
                wasm_stack_bytes: 1 << 16,
                timeout_ms: 100,
                max_output_bytes: 1 << 10,
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
}

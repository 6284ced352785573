//! Test guest that writes 1 MiB of text to stderr before returning a valid round-robin
//! assignment: the runtime must keep only the tail of a guest's output, not buffer it all.

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// The number of bytes written before "chatty done".
const BYTES: usize = 1 << 20;

/// Talks a lot on stderr, then assigns round-robin.
#[derive(Debug, Default)]
pub struct Chatty;

impl TaskAssignor for Chatty {
    fn name(&self) -> &str {
        "chatty"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        // 64-byte lines: "chatty line 0000001 " and padding, plus the newline.
        let padding = "x".repeat(64 - 20 - 1);
        for line in 0..BYTES / 64 {
            eprintln!("chatty line {line:07} {padding}");
        }
        eprintln!("chatty done");

        let mut out = GroupAssignment::empty_for(group);
        let n = out.members.len();
        if n == 0 {
            return Ok(out);
        }
        for (i, task) in topology.tasks().enumerate() {
            out.members[i % n].active_tasks.insert(task);
        }
        Ok(out)
    }
}

assignor_sdk::export!(Chatty);

//! Test guest that links std networking, so that its component imports `wasi:sockets/*`, an
//! interface outside the assignor world's allowance: the runtime must refuse it at load.
//!
//! The socket call sits behind the configuration `connect=yes`, which no test sets; it is
//! there only so that the import is linked in.

use std::collections::BTreeMap;
use std::net::TcpStream;

use assignor_sdk::{AssignError, GroupAssignment, GroupSpec, TaskAssignor, Topology};

/// Would open a TCP connection if configured to.
#[derive(Debug, Default)]
pub struct ForbiddenImport {
    connect: bool,
}

impl TaskAssignor for ForbiddenImport {
    fn name(&self) -> &str {
        "forbidden-import"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        self.connect = config.get("connect").is_some_and(|v| v == "yes");
        Ok(())
    }

    fn assign(&self, group: &GroupSpec, _: &Topology) -> Result<GroupAssignment, AssignError> {
        if self.connect {
            TcpStream::connect("127.0.0.1:9")
                .map_err(|e| AssignError::new(format!("connect failed: {e}")))?;
        }
        Ok(GroupAssignment::empty_for(group))
    }
}

assignor_sdk::export!(ForbiddenImport);

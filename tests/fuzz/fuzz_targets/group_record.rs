//! The coordinator's stored group records (`group/<id>` in the store), decoded on every start:
//! arbitrary bytes never panic, hang or over-allocate `Coordinator::open`. A group it loads
//! describes and plans; a small one also computes its target, as the first trigger after a
//! restart would, with the built-in assignors; and the record the coordinator then stores
//! reloads as the same group.

#![no_main]

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use assignor_coordinator::store::{MemoryStore, Store};
use assignor_coordinator::{Coordinator, CoordinatorError};
use assignor_fuzz::{broker_config, registry};
use libfuzzer_sys::fuzz_target;

/// Groups up to this many tasks (and members) are also assigned: enough for every rule of the
/// built-ins, and quick, so the fuzzer's time goes to decoding.
const MAX_ASSIGNED_TASKS: u64 = 64;
const MAX_ASSIGNED_MEMBERS: usize = 8;

/// A fixed clock, so that a stored failure's backoff decides the same way on every run.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn open(store: &Arc<MemoryStore>) -> Result<Coordinator, CoordinatorError> {
    Ok(Coordinator::open(registry(), &broker_config(), store.clone())?.with_clock(now))
}

fuzz_target!(|data: &[u8]| {
    let store = Arc::new(MemoryStore::new());
    store.put("group/g", data).expect("memory takes any value");
    let Ok(mut coordinator) = open(&store) else {
        return;
    };
    let described = coordinator.describe("g").expect("a loaded group describes");
    // A backed-off failure is an answer too; the plan itself must not panic.
    let planned = coordinator.plan("g");
    let tasks: u64 = coordinator.topology("g").map_or(0, |t| {
        t.subtopologies
            .iter()
            .map(|s| u64::from(s.max_num_input_partitions))
            .sum()
    });
    if matches!(planned, Ok(Some(_)))
        && tasks <= MAX_ASSIGNED_TASKS
        && described.members.len() <= MAX_ASSIGNED_MEMBERS
    {
        // A failed assignment is recorded on the group, which is what is checked below.
        let _ = coordinator.compute_target("g");
    }
    let reopened = open(&store).expect("a record the coordinator wrote reloads");
    assert_eq!(
        reopened
            .describe("g")
            .expect("the reloaded group describes"),
        coordinator.describe("g").expect("the group describes"),
    );
    assert_eq!(reopened.target("g"), coordinator.target("g"));
    assert_eq!(reopened.topology("g"), coordinator.topology("g"));
});

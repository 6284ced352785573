//! The group input JSON (`assignor assign --input`, the service's `PUT /v1/groups/{g}`):
//! arbitrary text never panics, hangs or over-allocates the parser, and what it accepts keeps
//! the promises `parse_input_with` documents: unique member and subtopology ids, every task a
//! member reports exists in the topology, and the group is within the limits it was given.
//! Each text is parsed under the default limits and under tight ones, which exercise every
//! limit's refusal at the sizes a fuzzer reaches; the tight parse accepts only what the
//! default one accepts, and reads it the same way.

#![no_main]

use std::collections::HashSet;

use assignor_coordinator::json::{parse_input, parse_input_with};
use assignor_sandbox::Limits;
use assignor_sdk::{GroupSpec, Topology};
use libfuzzer_sys::fuzz_target;

fn tight() -> Limits {
    Limits::default()
        .max_input_bytes(2048)
        .max_members(4)
        .max_subtopologies(3)
        .max_partitions(16)
        .max_tasks(24)
        .max_id_bytes(12)
}

fuzz_target!(|data: &[u8]| {
    // The service refuses a body that is not UTF-8 before parsing; the CLI reads a string.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let default = parse_input(text);
    if let Ok((group, topology)) = &default {
        check_consistent(group, topology);
    }
    let limits = tight();
    if let Ok(parsed) = parse_input_with(text, &limits) {
        check_within(&parsed.0, &parsed.1, &limits);
        assert_eq!(
            default.as_ref().ok(),
            Some(&parsed),
            "tighter limits read it differently"
        );
    }
});

fn check_consistent(group: &GroupSpec, topology: &Topology) {
    let mut ids = HashSet::new();
    assert!(
        topology.subtopologies.iter().all(|s| ids.insert(&s.id)),
        "duplicate subtopology id accepted"
    );
    let mut ids = HashSet::new();
    assert!(
        group.members.iter().all(|m| ids.insert(&m.member_id)),
        "duplicate member id accepted"
    );
    for m in &group.members {
        let reported = m
            .active_tasks
            .iter()
            .chain(&m.standby_tasks)
            .chain(&m.warmup_tasks)
            .chain(m.task_offsets.keys())
            .chain(m.task_end_offsets.keys());
        for &task in reported {
            assert!(
                topology.contains(task),
                "reported task {task} not in the topology"
            );
        }
    }
    for s in &topology.subtopologies {
        for topic in &s.source_topics {
            assert!(topic.partition_racks.len() <= s.max_num_input_partitions as usize);
            for &rack in topic.partition_racks.iter().flatten() {
                assert!(
                    (rack as usize) < topology.racks.len(),
                    "rack index out of range"
                );
            }
        }
    }
}

fn check_within(group: &GroupSpec, topology: &Topology, limits: &Limits) {
    assert!(group.members.len() <= limits.get_max_members());
    assert!(topology.subtopologies.len() <= limits.get_max_subtopologies());
    let partitions = topology
        .subtopologies
        .iter()
        .map(|s| s.max_num_input_partitions);
    assert!(partitions.clone().all(|p| p <= limits.get_max_partitions()));
    assert!(partitions.map(|p| p as usize).sum::<usize>() <= limits.get_max_tasks());
    let max_id = limits.get_max_id_bytes();
    let ids = group
        .members
        .iter()
        .flat_map(|m| [&m.member_id, &m.process_id])
        .chain(topology.subtopologies.iter().map(|s| &s.id));
    for id in ids {
        assert!(id.len() <= max_id, "an id of {} bytes accepted", id.len());
    }
}

//! Output validation, `assignor_sdk::validate`, which the runtime applies to every result: on
//! any (group, topology, assignment) it never panics, and what it accepts satisfies the rules
//! it stands for: one entry per member, every task known, every task active on exactly one
//! member, standbys only for stateful subtopologies and never on the process of the same
//! task's active.
//!
//! Inputs are small by construction (see `assignor_fuzz`); the assignment is a valid one,
//! perturbed, with now and then an entry too many or too few.

#![no_main]

use arbitrary::Unstructured;
use assignor_fuzz::{Placement, check_rules, group, topology};
use assignor_sdk::{GroupAssignment, GroupSpec, MemberAssignment, Topology, validate};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok((group, topology, assignment)) = input(&mut u) else {
        return;
    };
    if validate(&group, &topology, &assignment).is_ok() {
        check_rules(&group, &topology, &assignment);
    }
});

fn input(u: &mut Unstructured<'_>) -> arbitrary::Result<(GroupSpec, Topology, GroupAssignment)> {
    let topology = topology(u)?;
    let group = group(u)?;
    let mut placement = Placement::valid(u, &group, &topology)?;
    placement.perturb(u, &topology)?;
    let mut assignment = placement.assignment();
    match u.int_in_range(0..=15u8)? {
        0 => assignment.members.push(MemberAssignment::default()),
        1 => drop(assignment.members.pop()),
        _ => {}
    }
    Ok((group, topology, assignment))
}

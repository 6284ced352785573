//! The runtime's lifting of a guest's output (`assignor_sandbox::fuzz_output`: the parallel
//! lists of member, subtopology and partition indices a component returns, for actives and
//! standbys), which a hostile guest controls entirely, followed by `validate`, as the runtime
//! runs them on every result. Neither ever panics, hangs or over-allocates on any lists
//! against any group. Lifting accepts only aligned lists and yields exactly the listed
//! (member, task) entries, none dropped or merged; what validation then accepts obeys its
//! rules.
//!
//! Lists are a valid assignment's, perturbed: entries for unknown members or tasks,
//! duplicated, removed, and now and then one list shorter than the others.

#![no_main]

use arbitrary::Unstructured;
use assignor_fuzz::{Placement, check_rules, group, task, topology};
use assignor_sdk::{GroupSpec, TaskId, Topology, validate};
use libfuzzer_sys::fuzz_target;

/// Per list kind (active, standby): member, subtopology and partition indices.
type Lists = [Vec<u32>; 3];

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok((group, topology, active, standby)) = input(&mut u) else {
        return;
    };
    let aligned = [&active, &standby]
        .iter()
        .all(|lists| lists.iter().all(|l| l.len() == lists[0].len()));
    let expected = [entries(&active), entries(&standby)];
    let Ok(assignment) = assignor_sandbox::fuzz_output(active, standby, &group, &topology) else {
        return;
    };
    assert!(aligned, "lists of different lengths accepted");
    let lifted = |standby: bool| -> Vec<(u32, TaskId)> {
        let mut entries: Vec<_> = (0u32..)
            .zip(&assignment.members)
            .flat_map(|(i, m)| {
                let tasks = if standby {
                    &m.standby_tasks
                } else {
                    &m.active_tasks
                };
                tasks.iter().map(move |&t| (i, t))
            })
            .collect();
        entries.sort_unstable();
        entries
    };
    assert_eq!(lifted(false), expected[0], "actives differ from the lists");
    assert_eq!(lifted(true), expected[1], "standbys differ from the lists");
    if validate(&group, &topology, &assignment).is_ok() {
        check_rules(&group, &topology, &assignment);
    }
});

fn input(u: &mut Unstructured<'_>) -> arbitrary::Result<(GroupSpec, Topology, Lists, Lists)> {
    let topology = topology(u)?;
    let group = group(u)?;
    let members = group.members.len();
    let placement = Placement::valid(u, &group, &topology)?;
    let mut active = Lists::default();
    let mut standby = Lists::default();
    for (m, (a, s)) in (0u32..).zip(&placement.members) {
        for t in a {
            push(&mut active, m, *t);
        }
        for t in s {
            push(&mut standby, m, *t);
        }
    }
    for _ in 0..u.int_in_range(0..=assignor_fuzz::MAX_PERTURBATIONS)? {
        let lists = if u.arbitrary()? {
            &mut standby
        } else {
            &mut active
        };
        let len = lists.iter().map(Vec::len).min().expect("three lists");
        match u.int_in_range(0..=3u8)? {
            // An entry, possibly for a member one past the last or an unknown task.
            0 => {
                let member = u.int_in_range(0..=u32::try_from(members).expect("a handful"))?;
                push(lists, member, task(u, &topology)?);
            }
            // An entry twice.
            1 if len > 0 => {
                let at = u.choose_index(len)?;
                let entry = lists.each_ref().map(|l| l[at]);
                for (list, value) in lists.iter_mut().zip(entry) {
                    list.push(value);
                }
            }
            // An entry removed.
            2 if len > 0 => {
                let at = u.choose_index(len)?;
                for list in lists.iter_mut() {
                    list.remove(at);
                }
            }
            // One list shorter than the others.
            3 => {
                let which = u.choose_index(3)?;
                lists[which].pop();
            }
            _ => {}
        }
    }
    Ok((group, topology, active, standby))
}

fn push(lists: &mut Lists, member: u32, task: TaskId) {
    lists[0].push(member);
    lists[1].push(task.subtopology);
    lists[2].push(task.partition);
}

/// The (member, task) entries the lists name, sorted, duplicates kept (compared only when
/// the lists are aligned).
fn entries(lists: &Lists) -> Vec<(u32, TaskId)> {
    let [members, subtopologies, partitions] = lists;
    let mut entries: Vec<_> = members
        .iter()
        .zip(subtopologies)
        .zip(partitions)
        .map(|((&m, &s), &p)| (m, TaskId::new(s, p)))
        .collect();
    entries.sort_unstable();
    entries
}

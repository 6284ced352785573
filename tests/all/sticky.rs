//! The `sticky` assignor, one source run two ways: the runtime's native built-in and the
//! sample component in the sandbox give identical output on the same inputs.

use std::collections::BTreeMap;

use assignor_runtime::{Assignor, Limits};
use assignor_sdk::{AssignmentConfigs, GroupSpec, Member, Subtopology, TaskId, TaskSet, Topology};
use assignor_tests::guests;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::common::{example, load, runtime};

/// A random group: 1–30 members on 1–10 processes, 1–5 subtopologies (some stateless) of
/// 1–24 partitions, 0–2 standbys, optional zone tags, and a random current assignment that
/// may be stale or conflicting (tasks held twice, tasks of partitions that no longer exist).
fn group() -> impl Strategy<Value = (GroupSpec, Topology)> {
    (
        1usize..=30,
        1usize..=10,
        prop::collection::vec((1u32..=24, any::<bool>()), 1..=5),
        0u32..=2,
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(members, processes, subs, standbys, tagged, seed)| {
            let topology = Topology {
                subtopologies: subs
                    .iter()
                    .enumerate()
                    .map(|(i, &(partitions, stateful))| Subtopology {
                        id: format!("s{i}"),
                        max_num_input_partitions: partitions,
                        is_stateful: stateful,
                        source_topics: Vec::new(),
                    })
                    .collect(),
                racks: Vec::new(),
            };
            // A small xorshift stream: the strategy's seed fixes every choice below.
            let mut state = seed | 1;
            let mut next = move |n: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % n.max(1)
            };
            let tasks: Vec<TaskId> = topology.tasks().collect();
            let members = (0..members)
                .map(|m| {
                    let mut pick = |odds: u64| -> TaskSet {
                        let stale = (next(4) == 0).then_some(TaskId::new(0, 99));
                        tasks
                            .iter()
                            .copied()
                            .filter(|_| next(odds) == 0)
                            .chain(stale)
                            .collect()
                    };
                    let active_tasks = pick(members as u64);
                    let standby_tasks: TaskSet = pick(members as u64 * 2)
                        .into_iter()
                        .filter(|t| !active_tasks.contains(t))
                        .collect();
                    let zone = next(3);
                    Member {
                        member_id: format!("m{m:02}"),
                        process_id: format!("p{}", next(processes as u64)),
                        client_tags: if tagged {
                            BTreeMap::from([("zone".to_owned(), format!("z{zone}"))])
                        } else {
                            BTreeMap::new()
                        },
                        active_tasks,
                        standby_tasks,
                        ..Member::default()
                    }
                })
                .collect();
            let group = GroupSpec {
                members,
                configs: AssignmentConfigs {
                    num_standby_replicas: standbys,
                    rack_aware_assignment_tags: if tagged {
                        vec!["zone".to_owned()]
                    } else {
                        Vec::new()
                    },
                },
            };
            (group, topology)
        })
}

/// On random groups the built-in and the sandboxed component return the same assignment,
/// and both pass validation.
#[test]
fn builtin_and_component_agree() {
    let rt = runtime(Limits::default());
    let component = Assignor::Component(load(&rt, guests::STICKY, &[]).into());
    let native = Assignor::builtin("sticky", &BTreeMap::new()).expect("built-in");
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&group(), |(group, topology)| {
            let (a, _) = native.assign(&group, &topology).expect("native");
            let (b, usage) = component.assign(&group, &topology).expect("sandboxed");
            prop_assert_eq!(a, b);
            prop_assert!(usage.fuel.is_some());
            Ok(())
        })
        .expect("identical outputs");
}

/// The example group of the JSON contract: identical output both ways.
#[test]
fn example_agrees() {
    let rt = runtime(Limits::default());
    let component = load(&rt, guests::STICKY, &[]);
    let native = Assignor::builtin("sticky", &BTreeMap::new()).expect("built-in");
    let (group, topology) = example();
    let (a, _) = native.assign(&group, &topology).expect("native");
    let (b, _) = component.assign(&group, &topology).expect("sandboxed");
    assert_eq!(a, b);
}

/// The `rack-aware` built-in takes Kafka's `rack.aware.assignment.*` keys from the broker
/// config, rejects a bad strategy at registry build, and on the example group (racks for
/// every member and partition) returns a valid assignment.
#[test]
fn rack_aware_builtin_is_configured_from_the_broker() {
    let config = |strategy: &str| {
        BTreeMap::from([(
            "rack.aware.assignment.strategy".to_owned(),
            strategy.to_owned(),
        )])
    };
    let e = Assignor::builtin("rack-aware", &config("MIN")).expect_err("bad strategy");
    assert!(e.message.contains("rack.aware.assignment.strategy"), "{e}");
    let assignor = Assignor::builtin("rack-aware", &config("balance_subtopology")).expect("ok");
    let (group, topology) = example();
    assignor.assign(&group, &topology).expect("valid");
}

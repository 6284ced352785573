//! The standard scenario suite `assignor check` runs: Kafka's edge cases, churn against a
//! current assignment, and production sizes. Authors can run the same cases in `cargo test`.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::{GroupSpec, Topology};

use super::Scenario;
use super::strategy::{GroupBounds, groups};

/// One named input.
#[derive(Debug, Clone)]
pub struct Case {
    /// A short stable name, e.g. `standbys-three-processes`.
    pub name: String,
    /// The group, current assignment included.
    pub group: GroupSpec,
    /// Its topology.
    pub topology: Topology,
}

impl Case {
    fn new(name: &str, (group, topology): (GroupSpec, Topology)) -> Self {
        Self {
            name: name.to_owned(),
            group,
            topology,
        }
    }
}

/// The members × tasks of the production-size cases (1 standby, half the subtopologies
/// stateful): the sizes the project's benchmarks use.
pub const SIZES: [(usize, u32); 3] = [(10, 128), (100, 2048), (1000, 16384)];

/// Kafka's edge cases and churn, then the [`SIZES`], cold. Every case is small enough to run
/// in milliseconds except the last size.
pub fn standard() -> Vec<Case> {
    let mut cases = vec![
        Case::new(
            "single-member",
            Scenario::new()
                .stateful("s0", 4)
                .standbys(1)
                .member("a", "p1", |m| m)
                .build(),
        ),
        Case::new(
            "tasks-equal-members",
            Scenario::new()
                .stateless("s0", 3)
                .members("m", 3, 1)
                .build(),
        ),
        Case::new(
            "more-members-than-tasks",
            Scenario::new().stateful("s0", 2).members("m", 5, 1).build(),
        ),
        Case::new(
            "standbys-three-processes",
            Scenario::new()
                .stateful("s0", 3)
                .standbys(2)
                .members("m", 3, 1)
                .build(),
        ),
        Case::new(
            "process-capacity",
            Scenario::new()
                .stateless("s0", 9)
                .member("a1", "big", |m| m)
                .member("a2", "big", |m| m)
                .member("b1", "small", |m| m)
                .build(),
        ),
        Case::new(
            "scale-out",
            Scenario::new()
                .stateful("s0", 8)
                .stateless("s1", 4)
                .standbys(1)
                .member("a", "p1", |m| {
                    m.active("s0", [0, 1, 2, 3]).standby("s0", [4])
                })
                .member("b", "p2", |m| {
                    m.active("s0", [4, 5, 6, 7]).standby("s0", [0])
                })
                .member("c", "p3", |m| m.active("s1", [0, 1, 2, 3]))
                .member("d", "p4", |m| m)
                .member("e", "p5", |m| m)
                .build(),
        ),
        Case::new(
            "member-left",
            Scenario::new()
                .stateful("s0", 6)
                .standbys(1)
                .member("a", "p1", |m| m.active("s0", [0, 1]).standby("s0", [2, 3]))
                .member("b", "p2", |m| m.active("s0", [2, 3]).standby("s0", [0, 1]))
                .build(),
        ),
        Case::new(
            "cold-start-offsets",
            Scenario::new()
                .stateful("s0", 4)
                .member("a", "p1", |m| m.offset("s0", 0, 100).offset("s0", 1, 90))
                .member("b", "p2", |m| m.offset("s0", 2, 100).offset("s0", 3, 90))
                .build(),
        ),
        Case::new(
            "client-tags",
            Scenario::new()
                .stateful("s0", 6)
                .standbys(2)
                .tags(["zone"])
                .member("a", "p1", |m| m.tag("zone", "z1"))
                .member("b", "p2", |m| m.tag("zone", "z1"))
                .member("c", "p3", |m| m.tag("zone", "z2"))
                .member("d", "p4", |m| m.tag("zone", "z2"))
                .member("e", "p5", |m| m.tag("zone", "z3"))
                .member("f", "p6", |m| m.tag("zone", "z3"))
                .build(),
        ),
        Case::new(
            "stateful-and-stateless",
            Scenario::new()
                .stateful("s0", 5)
                .stateless("s1", 7)
                .standbys(1)
                .members("m", 4, 2)
                .build(),
        ),
    ];
    for (members, tasks) in SIZES {
        cases.push(sized(members, tasks));
    }
    cases
}

/// `members` members (two per process) and `tasks` tasks over subtopologies of 64
/// partitions (fewer when `tasks` is smaller), alternately stateful and stateless, 1 standby.
pub fn sized(members: usize, tasks: u32) -> Case {
    let per_subtopology = tasks.min(64);
    let mut scenario = Scenario::new().standbys(1);
    for i in 0..tasks.div_ceil(per_subtopology) {
        let partitions = per_subtopology.min(tasks - i * per_subtopology);
        let id = format!("s{i}");
        scenario = if i % 2 == 0 {
            scenario.stateful(&id, partitions)
        } else {
            scenario.stateless(&id, partitions)
        };
    }
    Case::new(
        &format!("{members}-members-{tasks}-tasks"),
        scenario.members("m", members, 2).build(),
    )
}

/// `count` random groups within `bounds`, the same for the same `seed`: the strategy of
/// [`groups`], sampled without a test runner's shrinking.
pub fn random(bounds: GroupBounds, seed: u64, count: usize) -> Vec<Case> {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = groups(bounds);
    (0..count)
        .map(|i| {
            let tree = strategy
                .new_tree(&mut runner)
                .expect("the group strategy never rejects");
            Case::new(&format!("random-{seed}-{i}"), tree.current())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard cases have distinct names and the sizes they claim.
    #[test]
    fn standard_cases_are_named_and_sized() {
        let cases = standard();
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), cases.len());
        let big = cases.last().expect("has cases");
        assert_eq!(big.group.members.len(), 1000);
        assert_eq!(big.topology.tasks().count(), 16384);
    }

    /// Random cases depend on the seed alone.
    #[test]
    fn random_cases_are_reproducible() {
        let a = random(GroupBounds::default(), 7, 3);
        let b = random(GroupBounds::default(), 7, 3);
        let c = random(GroupBounds::default(), 8, 3);
        let groups = |cases: &[Case]| cases.iter().map(|c| c.group.clone()).collect::<Vec<_>>();
        assert_eq!(groups(&a), groups(&b));
        assert_ne!(groups(&a), groups(&c));
    }
}

//! Convergence in the spirit of Kafka Streams' `TaskAssignorConvergenceTest`: random sequences
//! of members joining and leaving, each output fed back as the current assignment.

mod common;

use common::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// After every join or leave the assignment is valid, balanced in actives and a fixed point.
    #[test]
    fn every_event_leaves_a_valid_fixed_point(
        processes in 1usize..=8,
        subtopologies in prop::collection::vec((1u32..=12, any::<bool>()), 1..=3),
        standbys in 0u32..=2,
        events in prop::collection::vec((any::<bool>(), any::<u16>()), 1..=12),
    ) {
        let topology = topology(&subtopologies);
        let mut group = group(members_on(&vec![1; processes]), standbys);
        let mut joined = 0;
        for (join, pick) in events {
            if join || group.members.len() == 1 {
                let p = pick as usize % (processes + 2);
                group.members.push(member(&format!("j{joined}"), &format!("p{p}")));
                joined += 1;
            } else {
                group.members.remove(pick as usize % group.members.len());
            }
            let a = assign(&group, &topology);
            prop_assert!(spread(&actives(&a)) <= 1);
            assert_fixed_point(&group, &topology, &a);
            group = with_current(&group, &a);
        }
    }
}

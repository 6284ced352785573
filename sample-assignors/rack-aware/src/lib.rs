//! The `rack-aware` task assignor (KIP-925): the sticky assignment, then a min-cost flow that
//! moves active tasks next to their input partitions' replicas without upsetting balance.
//!
//! This crate is a library the runtime uses as a built-in; `component/` is the component
//! (`cargo build -p rack-aware-assignor-component --release --target wasm32-wasip2`). It
//! builds on `sticky-assignor`, a library too: only the thin component crates export.
//!
//! # Algorithm
//!
//! 1. **Sticky first.** [`StickyAssignor`] computes the balanced, minimally moving assignment
//!    (actives and standbys), as [`STICKY_PASS`]: with tag load slack `none`, so every task's
//!    copies cover as many `rackAwareAssignmentTags` values as sticky can give them whatever
//!    that costs in load (sticky's own default bounds the load instead). Its per-member
//!    counts of stateful and of stateless actives are the capacities the optimisation must
//!    keep, so balance stays exactly what sticky made it (within one per kind and in total).
//! 2. **Applicability.** Rack-aware assignment applies only when every member has a `rackId`,
//!    every task has at least one input partition (from [`Subtopology::source_topics`]) and
//!    every such partition lists the racks of its replicas. Otherwise — and with strategy
//!    `none` — the sticky assignment is returned unchanged; [`Outcome::decision`] says why.
//!    (Kafka warns in its log; a guest has no log, so the decision is returned instead.)
//! 3. **Actives by min-cost flow**, stateful and stateless separately. The cost of task `t` on
//!    member `m` is `traffic_cost ×` (input partitions of `t` with no replica in `m`'s rack)
//!    `+ non_overlap_cost` if `m` is not the member sticky chose. Kafka's graph is source →
//!    task → client → sink; here it is solved on **racks**: source → class of interchangeable
//!    tasks (same sticky rack, same cross-rack count per rack) → rack (capacity: the sum of
//!    its members' capacities) → sink. A task that stays in its sticky rack stays on its
//!    sticky member (that member's capacity counts the task, so there is room), and the
//!    tasks entering a rack are dealt round its members with room.
//!
//!    *Why this is exact.* Any member-level assignment costs at least its rack projection
//!    (traffic depends only on the rack; a task that leaves its sticky member pays the
//!    non-overlap cost at member level but only pays it at rack level if it also left the
//!    rack), and the distribution step realises every rack-level solution at member level at
//!    exactly its rack-level cost. So the rack-level optimum is the member-level optimum.
//!
//!    Costs are scaled by `T + 1` plus one per task leaving its sticky rack, so among
//!    optimal assignments the one moving fewest tasks wins: when every rack costs the same
//!    (every partition replicated in every rack) nothing moves, and an optimal input is a
//!    fixed point (the optimum relative to sticky is also optimal relative to itself, by the
//!    triangle inequality on moved tasks).
//! 4. **`balance_subtopology`.** Each subtopology's tasks are first given per-member quotas
//!    of `⌊n/M⌋` or `⌈n/M⌉` (skew at most one) that add up to the member's capacity, the
//!    extras going to members that held more of that subtopology; then each subtopology is
//!    solved as above with those quotas. Here the rack reduction is exact for traffic but a
//!    task may also move within its rack when its sticky member's quota is smaller than what
//!    sticky gave it.
//! 5. **Standbys.** When actives moved, sticky runs again with the optimised actives as the
//!    current assignment (it keeps a balanced current assignment in full), so standbys obey
//!    every sticky rule — balance, never on a process holding the task, tag diversity with
//!    `rackAwareAssignmentTags`. Then pairwise swaps between members in different racks cut
//!    the standbys' cross-rack partitions (Kafka's standby optimisation is also swaps), each
//!    keeping both members' counts; with tags only members with identical tag values swap.
//!    Swaps can leave room sticky's levelling would use, so sticky checks the result: if it
//!    keeps it as is, that is the output. If not, sticky's placement is swapped again, but
//!    only if it reads strictly fewer partitions across racks than the round started from;
//!    otherwise the round's start (a placement sticky keeps) is the output. Because every
//!    accepted round lowers that count, rounds never cycle (they used to: swaps and
//!    re-levelling can alternate without end, and stopping such a cycle at a round limit is
//!    not a fixed point). Rounds are capped at 16 and swap passes at 32 to bound the time;
//!    over 400,000 random groups no call needed more than 6 of either. Below the caps the
//!    output is one the same rounds return unchanged, which makes it a fixed point.
//!    The input has no changelog replicas, so a standby's traffic is measured on its input
//!    partitions, like its active's. Swaps are a local search, not an optimum.
//!
//! # Guarantees
//!
//! - Valid, with every member's stateful and stateless active counts equal to sticky's
//!   (balance within one, as sticky promises); standbys as many as sticky's, placed by sticky
//!   around the new actives (its balance rules), then swapped count for count.
//! - Actives: minimum total cost under the model above among all assignments with those
//!   counts (`min_traffic`), so cross-rack partitions never exceed sticky's.
//! - `balance_subtopology`: every subtopology's per-member count differs by at most one.
//! - Full tag diversity: with `rackAwareAssignmentTags`, standbys are placed by sticky with
//!   tag load slack `none` (diversity before load, the harness's `tag-diversity` rule) and
//!   swapped only between members with identical tag values, so uneven zones can load their
//!   members unevenly, as sticky's crate documentation describes for slack `none`.
//! - Identical to [`STICKY_PASS`] (sticky with tag load slack `none`; without tags, sticky's
//!   default) when racks make no difference or rack information is missing.
//! - Fixed point: assigning again with the output as the current assignment changes nothing
//!   (the optimum relative to sticky stays optimal relative to itself; standby rounds stop
//!   on a placement sticky keeps and from which no round improves).
//! - Standby cross-rack partitions can rise when actives move (standbys follow the new
//!   actives' processes); the swaps then bring them down again.
//!
//! # Configuration
//!
//! Kafka's names, passed through [`TaskAssignor::configure`]; other keys are ignored.
//!
//! - `rack.aware.assignment.strategy`: `none`, `min_traffic` or `balance_subtopology`.
//!   Default **`min_traffic`**, where Kafka's default is `none`: choosing this assignor is
//!   already the opt-in, it changes nothing without full rack information, and it never
//!   costs balance.
//! - `rack.aware.assignment.traffic_cost`: default 10.
//! - `rack.aware.assignment.non_overlap_cost`: default 1.
//!
//! Costs are integers from 0 to [`MAX_COST`].
//!
//! # Complexity
//!
//! With `T` tasks, `M` members, `R` racks and `C ≤ T` task classes (at most `R` times the
//! distinct cross-rack profiles; a handful in practice): indexing `O(T·R)` (profiles
//! interned by hash, ranked once), sorting tasks into classes `O(T log T)`, the flow
//! `O(A · C·R log C)` for `A` augmenting paths (each saturates a class or rack edge), dealing
//! `O(T + M)`. The sticky pass runs again when actives move and once per standby swap round.
//! A swap pass over `S` standbys is `O(S·R²)` to index plus `O(S·R·80)` partner checks (it
//! looks at 64 standbys of the target rack that lose nothing by moving, then 16 others), at
//! most 32 passes per round.
//!
//! `cargo bench -p assignor-tests --bench rack_aware` (`gen.py` groups with one standby, three
//! racks, two source topics per subtopology with replicas skewed towards one rack; criterion
//! medians on a 2-core machine at load ~3): 100 members / 2048 tasks cold 1.8 ms natively,
//! 6.6 ms sandboxed; 1000 members / 16384 tasks cold 17.5 ms natively, 60 ms sandboxed (278 M
//! fuel, 6.3 MB peak memory), and 7.2 ms / 19 ms (109 M fuel) when its previous output is the
//! current assignment. Cross-rack input partitions at 1000 members: actives 18320 under
//! sticky → 7124, standbys 18290 → 7263.
//!
//! # Layout
//!
//! - `flow`: the min-cost-flow solver (successive shortest paths with potentials).
//! - `racks`: member racks, per-task cross-rack partition counts and their profiles, or why
//!   they are missing.
//! - `active`: the rack-level flow for actives, subtopology quotas, and dealing within racks.
//! - `standby`: pairwise standby swaps.

#![deny(missing_docs)]

mod active;
mod flow;
mod racks;
mod standby;

use std::collections::BTreeMap;

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, Subtopology, TaskAssignor, TaskId, TaskSet, Topology,
};
use sticky_assignor::StickyAssignor;

use crate::racks::Racks;

/// The sticky assignor every pass of this one runs: sticky's defaults but tag load slack
/// `none`, so standbys put tag diversity before load (see the crate documentation).
pub const STICKY_PASS: StickyAssignor = StickyAssignor::new().with_tag_load_slack(None);

/// Rounds of standby swaps, each followed by a sticky pass that may re-level them.
const STANDBY_ROUNDS: usize = 16;

/// The largest accepted traffic or non-overlap cost (keeps the scaled flow costs in `i64`).
pub const MAX_COST: u32 = 1_000_000;
/// Default `rack.aware.assignment.traffic_cost` (Kafka's).
pub const DEFAULT_TRAFFIC_COST: u32 = 10;
/// Default `rack.aware.assignment.non_overlap_cost` (Kafka's).
pub const DEFAULT_NON_OVERLAP_COST: u32 = 1;

/// `rack.aware.assignment.strategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Strategy {
    /// `none`: the sticky assignment as is.
    None,
    /// `min_traffic`: minimum cost, per-member balance as sticky made it.
    #[default]
    MinTraffic,
    /// `balance_subtopology`: minimum cost with every subtopology's skew at most one.
    BalanceSubtopology,
}

/// The sticky assignment with actives (and standbys) moved to cut cross-rack traffic; see the
/// crate documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RackAwareAssignor {
    /// `rack.aware.assignment.strategy`.
    pub strategy: Strategy,
    /// `rack.aware.assignment.traffic_cost`: cost per input partition read across racks.
    pub traffic_cost: u32,
    /// `rack.aware.assignment.non_overlap_cost`: cost of moving a task off the member the
    /// sticky assignment chose.
    pub non_overlap_cost: u32,
}

impl Default for RackAwareAssignor {
    fn default() -> Self {
        Self {
            strategy: Strategy::MinTraffic,
            traffic_cost: DEFAULT_TRAFFIC_COST,
            non_overlap_cost: DEFAULT_NON_OVERLAP_COST,
        }
    }
}

/// Whether the rack-aware optimisation ran, and if not why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The optimisation ran.
    Optimised,
    /// Strategy `none`.
    Disabled,
    /// The group has no members.
    NoMembers,
    /// This member has no `rackId`.
    MemberWithoutRack(String),
    /// This task (`<subtopology id>_<partition>`) has no input partition with rack information.
    TaskWithoutPartitions(String),
    /// This partition (`<topic>-<partition>`) lists no replica racks.
    PartitionWithoutRacks(String),
}

/// An assignment and what the optimisation did to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The assignment.
    pub assignment: GroupAssignment,
    /// Whether rack-aware optimisation applied.
    pub decision: Decision,
    /// Cross-rack input partitions of the actives: sticky's, then ours ((0, 0) when the
    /// optimisation did not apply).
    pub active_cross_rack: (u64, u64),
    /// Cross-rack input partitions of the standbys: sticky's, then ours ((0, 0) when the
    /// optimisation did not apply).
    pub standby_cross_rack: (u64, u64),
}

impl RackAwareAssignor {
    /// Assigns like [`TaskAssignor::assign`] and reports the decision and the cross-rack
    /// partitions before and after.
    pub fn assign_with_outcome(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<Outcome, AssignError> {
        let sticky = STICKY_PASS.assign(group, topology)?;
        let unchanged = |decision| Outcome {
            assignment: sticky.clone(),
            decision,
            active_cross_rack: (0, 0),
            standby_cross_rack: (0, 0),
        };
        if group.members.is_empty() {
            return Ok(unchanged(Decision::NoMembers));
        }
        if self.strategy == Strategy::None {
            return Ok(unchanged(Decision::Disabled));
        }
        let racks = match Racks::new(group, topology) {
            Ok(racks) => racks,
            Err(decision) => return Ok(unchanged(decision)),
        };
        let dense = Dense::new(topology);
        let owner = dense.owners(&sticky);
        let mut members_by_id: Vec<u32> = (0..group.members.len() as u32).collect();
        members_by_id.sort_by(|&a, &b| {
            group.members[a as usize]
                .member_id
                .cmp(&group.members[b as usize].member_id)
        });
        let mut members_by_rack = vec![Vec::new(); racks.count];
        for &m in &members_by_id {
            members_by_rack[racks.member_rack[m as usize] as usize].push(m);
        }
        let input = active::Input {
            racks: &racks,
            owner: &owner,
            subtopologies: &dense.subtopologies,
            members_by_rack: &members_by_rack,
            members_by_id: &members_by_id,
        };
        let new_owner = active::optimise(&input, self);

        let with_current = |a: &GroupAssignment| {
            let mut current = group.clone();
            for (m, out) in current.members.iter_mut().zip(&a.members) {
                m.active_tasks = out.active_tasks.clone();
                m.standby_tasks = out.standby_tasks.clone();
            }
            current
        };
        let mut assignment = if new_owner == owner {
            sticky.clone()
        } else {
            // Sticky keeps a balanced current assignment in full and places standbys around it.
            let mut moved = sticky.clone();
            let sets = dense.sets(&new_owner, group.members.len());
            for (m, set) in moved.members.iter_mut().zip(sets) {
                m.active_tasks = set;
            }
            STICKY_PASS.assign(&with_current(&moved), topology)?
        };
        // Rounds of swaps, each checked by sticky. A round whose result sticky keeps is the
        // output; one where sticky re-levels is accepted only if sticky's placement reads
        // strictly fewer partitions across racks than the round's start, so rounds cannot
        // cycle, and otherwise the start stands. Either way the output is one this loop
        // returns unchanged when it comes back as the current assignment (a fixed point).
        let mut cost = dense.standby_cost(&racks, &assignment);
        for _ in 0..STANDBY_ROUNDS {
            let mut holders = dense.holders(&assignment);
            if standby::improve(group, &racks, &dense.owners(&assignment), &mut holders) == 0 {
                break;
            }
            let mut swapped = assignment.clone();
            let mut standbys = vec![Vec::new(); group.members.len()];
            for (t, &task) in dense.tasks.iter().enumerate() {
                for &m in holders.of(t) {
                    standbys[m as usize].push(task);
                }
            }
            for (m, s) in swapped.members.iter_mut().zip(standbys) {
                m.standby_tasks = s.into_iter().collect();
            }
            // Swaps can free room that sticky's levelling would use.
            let kept = STICKY_PASS.assign(&with_current(&swapped), topology)?;
            if kept == swapped {
                assignment = swapped;
                break;
            }
            let kept_cost = dense.standby_cost(&racks, &kept);
            if kept_cost >= cost {
                break;
            }
            assignment = kept;
            cost = kept_cost;
        }
        let standby_after = dense.standby_cost(&racks, &assignment);
        let standby_sticky = dense.standby_cost(&racks, &sticky);
        Ok(Outcome {
            active_cross_rack: (
                dense.active_cost(&racks, &owner),
                dense.active_cost(&racks, &dense.owners(&assignment)),
            ),
            standby_cross_rack: (standby_sticky, standby_after),
            assignment,
            decision: Decision::Optimised,
        })
    }
}

impl TaskAssignor for RackAwareAssignor {
    fn name(&self) -> &str {
        "rack-aware"
    }

    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        const STRATEGY: &str = "rack.aware.assignment.strategy";
        if let Some(v) = config.get(STRATEGY) {
            self.strategy = match v.trim() {
                "none" => Strategy::None,
                "min_traffic" => Strategy::MinTraffic,
                "balance_subtopology" => Strategy::BalanceSubtopology,
                _ => {
                    return Err(format!(
                        "invalid value \"{v}\" for {STRATEGY}: expected one of none, \
                         min_traffic, balance_subtopology"
                    ));
                }
            };
        }
        let cost = |key: &str, default: u32| -> Result<u32, String> {
            let Some(v) = config.get(key) else {
                return Ok(default);
            };
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|&c| c <= MAX_COST)
                .ok_or_else(|| {
                    format!(
                        "invalid value \"{v}\" for {key}: expected an integer from 0 to {MAX_COST}"
                    )
                })
        };
        self.traffic_cost = cost("rack.aware.assignment.traffic_cost", DEFAULT_TRAFFIC_COST)?;
        self.non_overlap_cost = cost(
            "rack.aware.assignment.non_overlap_cost",
            DEFAULT_NON_OVERLAP_COST,
        )?;
        Ok(())
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        self.assign_with_outcome(group, topology)
            .map(|o| o.assignment)
    }
}

/// Tasks numbered densely in [`Topology::tasks`] order.
struct Dense {
    tasks: Vec<TaskId>,
    /// Per subtopology index: (first dense task, task count, stateful).
    subtopologies: Vec<(u32, u32, bool)>,
}

impl Dense {
    fn new(topology: &Topology) -> Self {
        let mut start = 0;
        let subtopologies = topology
            .subtopologies
            .iter()
            .map(|s: &Subtopology| {
                let entry = (start, s.max_num_input_partitions, s.is_stateful);
                start += s.max_num_input_partitions;
                entry
            })
            .collect();
        Self {
            tasks: topology.tasks().collect(),
            subtopologies,
        }
    }

    fn index(&self, t: TaskId) -> usize {
        (self.subtopologies[t.subtopology as usize].0 + t.partition) as usize
    }

    /// Per dense task, its active member (a valid assignment has one for every task).
    fn owners(&self, a: &GroupAssignment) -> Vec<u32> {
        let mut owner = vec![0u32; self.tasks.len()];
        for (m, ma) in (0u32..).zip(&a.members) {
            for &t in &ma.active_tasks {
                owner[self.index(t)] = m;
            }
        }
        owner
    }

    /// Per dense task, the members holding it as standby, in member order.
    fn holders(&self, a: &GroupAssignment) -> Holders {
        let mut start = vec![0u32; self.tasks.len() + 1];
        for ma in &a.members {
            for &t in &ma.standby_tasks {
                start[self.index(t) + 1] += 1;
            }
        }
        for t in 0..self.tasks.len() {
            start[t + 1] += start[t];
        }
        let mut next = start.clone();
        let mut members = vec![0u32; start[self.tasks.len()] as usize];
        for (m, ma) in (0u32..).zip(&a.members) {
            for &t in &ma.standby_tasks {
                let slot = &mut next[self.index(t)];
                members[*slot as usize] = m;
                *slot += 1;
            }
        }
        Holders { start, members }
    }

    /// Members' active sets for `owner`.
    fn sets(&self, owner: &[u32], members: usize) -> Vec<TaskSet> {
        let mut sets = vec![Vec::new(); members];
        for (&t, &o) in self.tasks.iter().zip(owner) {
            sets[o as usize].push(t);
        }
        sets.into_iter().map(TaskSet::from_iter).collect()
    }

    fn active_cost(&self, racks: &Racks, owner: &[u32]) -> u64 {
        (0..self.tasks.len())
            .map(|t| u64::from(racks.miss(t, racks.member_rack[owner[t] as usize])))
            .sum()
    }

    fn standby_cost(&self, racks: &Racks, a: &GroupAssignment) -> u64 {
        (0..)
            .zip(&a.members)
            .flat_map(|(m, ma)| ma.standby_tasks.iter().map(move |&t| (t, m)))
            .map(|(t, m): (TaskId, usize)| {
                u64::from(racks.miss(self.index(t), racks.member_rack[m]))
            })
            .sum()
    }
}

/// Per dense task, the members holding it as standby, in one allocation rather than one per
/// task: task `t`'s holders are `members[start[t]..start[t + 1]]`.
struct Holders {
    start: Vec<u32>,
    members: Vec<u32>,
}

impl Holders {
    /// The number of tasks.
    fn tasks(&self) -> usize {
        self.start.len() - 1
    }

    /// Task `t`'s holders.
    fn of(&self, t: usize) -> &[u32] {
        &self.members[self.start[t] as usize..self.start[t + 1] as usize]
    }

    /// Task `t`'s holders, to change in place.
    fn of_mut(&mut self, t: usize) -> &mut [u32] {
        &mut self.members[self.start[t] as usize..self.start[t + 1] as usize]
    }
}

/// The public cross-rack measure: input partitions of actives (first) and standbys (second)
/// with no replica in their member's rack; `None` when rack information is incomplete.
pub fn cross_rack_partitions(
    group: &GroupSpec,
    topology: &Topology,
    assignment: &GroupAssignment,
) -> Option<(u64, u64)> {
    let racks = Racks::new(group, topology).ok()?;
    let dense = Dense::new(topology);
    Some((
        dense.active_cost(&racks, &dense.owners(assignment)),
        dense.standby_cost(&racks, assignment),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configured(pairs: &[(&str, &str)]) -> Result<RackAwareAssignor, String> {
        let config = pairs
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut a = RackAwareAssignor::default();
        a.configure(&config).map(|()| a)
    }

    /// Kafka's names configure the assignor; unknown keys are ignored; defaults stand.
    #[test]
    fn configure_reads_kafka_names() {
        let a = configured(&[
            ("rack.aware.assignment.strategy", "balance_subtopology"),
            ("rack.aware.assignment.traffic_cost", "20"),
            ("group.streams.assignors", "rack-aware"),
        ])
        .expect("valid");
        assert_eq!(a.strategy, Strategy::BalanceSubtopology);
        assert_eq!((a.traffic_cost, a.non_overlap_cost), (20, 1));
        assert_eq!(
            configured(&[]).expect("empty"),
            RackAwareAssignor::default()
        );
        let none = configured(&[("rack.aware.assignment.strategy", "none")]).expect("none");
        assert_eq!(none.strategy, Strategy::None);
    }

    /// Bad values fail with a message naming the key, the value and what is accepted.
    #[test]
    fn configure_rejects_bad_values() {
        let e = configured(&[("rack.aware.assignment.strategy", "MIN")]).expect_err("bad");
        assert_eq!(
            e,
            "invalid value \"MIN\" for rack.aware.assignment.strategy: expected one of none, \
             min_traffic, balance_subtopology"
        );
        let keys = [
            "rack.aware.assignment.traffic_cost",
            "rack.aware.assignment.non_overlap_cost",
        ];
        for key in keys {
            for v in ["-1", "ten", "1000001", ""] {
                let e = configured(&[(key, v)]).expect_err(v);
                assert_eq!(
                    e,
                    format!(
                        "invalid value \"{v}\" for {key}: expected an integer from 0 to 1000000"
                    )
                );
            }
        }
    }
}

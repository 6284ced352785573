//! The `sticky` task assignor: Kafka's server-side sticky assignor as the floor, with tighter
//! balance, provably minimal movement, a fixed point and rack-aware standbys.
//!
//! The runtime uses [`StickyAssignor`] as its built-in `sticky`; built for `wasm32-wasip2`
//! (`cargo build -p sticky-assignor --release --target wasm32-wasip2`) the same source is a
//! component, so the two can be compared output for output.
//!
//! # Algorithm
//!
//! The input is indexed once (members sorted by id, processes by id, tasks dense). Current
//! tasks the topology no longer has are ignored; a task two members claim as active belongs to
//! the one with the smaller member id.
//!
//! **Actives**, stateful and stateless separately (each kind of `n` tasks over `M` members):
//!
//! 1. *Targets.* Every member gets `⌊n/M⌋` of the kind and `n mod M` members one more. The
//!    extras go to members that held more than `⌊n/M⌋` of the kind (the most first), and are
//!    arranged so that no member gets the extra of both kinds while another gets neither: each
//!    kind's counts and the total counts all differ by at most one between members.
//! 2. *Keep.* Each current owner keeps its tasks up to its target.
//! 3. *Release.* A member above its target gives up the excess: first what it holds beyond
//!    its fair share `⌈n_s/M⌉` of a subtopology; then, per subtopology, a quota — what the
//!    members below target lack of its floor `⌊n_s/M⌋`, less the unowned tasks — drawn from
//!    members above the floor (sweeps that drain the quotas evenly, then one exchange per
//!    task the sweeps missed); then the rest from the subtopologies where it holds the most.
//! 4. *Warm state.* An unowned stateful task goes to the first member with local state for it
//!    that is still below target: current standbys and warm-ups first, then members that only
//!    report offsets for it, highest offset first (Kafka's order; this is how a cold start or a
//!    member restarting under a new id follows its state on disk).
//! 5. *Deal.* The rest are dealt subtopology by subtopology round a ring of the members still
//!    below target, ordered so that consecutive members sit on different processes, preferring
//!    a member below its floor of the subtopology, then below its fair share, then the one
//!    with the most room to spare beyond the floors of the subtopologies still to deal.
//!
//! **Standbys**, `min(numStandbyReplicas, processes − 1)` per stateful task:
//!
//! 1. *Targets.* A process can hold at most one standby of every stateful task not active on
//!    it (its *cap*), and any per-process counts within the caps that add up can be placed (a
//!    max-flow cut argument: with `R ≤ P − 1` replicas, a set of `j ≤ R` processes can never
//!    need more than the caps already allow). So the standbys fill members up to a common
//!    level of actives plus standbys — the lowest every member can be topped up to, counting
//!    each process only up to its cap — and a process stopped by its cap spreads its cap
//!    evenly over its own members; members with more tasks now keep the higher counts.
//! 2. *Keep.* Per task, in order: the previous active owner, current standbys and warm-ups,
//!    members reporting offsets — each while below its target and on a process that does not
//!    hold the task yet. With `rackAwareAssignmentTags`, the candidate adding the most new tag
//!    values goes first, and one adding none is kept only if every tag already shows every value
//!    the group offers.
//! 3. *Fill.* The rest go task by task to the *tightest* process with room that holds no copy
//!    yet (rack-aware: among those adding the most new tag values): the one whose room plus
//!    the tasks still to fill that it cannot take is largest, and there to its least loaded
//!    member below target. A process whose room equals the tasks still able to use it must
//!    take each of them; taking those first meets every target whenever the caps allow
//!    (without keeps this is exact: at most `R` processes can be that tight at once).
//! 4. *Repair.* Without tags, if kept standbys made the fill miss a target, chains of moves
//!    found by breadth-first search over processes (a standby moves to a process holding no
//!    copy of its task) carry the excess to processes below their members' targets; such a
//!    chain exists whenever the caps allow the targets.
//! 5. *Level.* Where targets are still missed (with tags, diversity first), within each
//!    process a member two above another hands it a standby (always valid: the process
//!    already holds that copy).
//!
//! # Guarantees
//!
//! - Everything Kafka's sticky assignor guarantees: every task active exactly once; sticky to
//!   the previous owner, then to standbys and offsets; a process's share proportional to its
//!   members; a standby never on a process holding the task as active or as another standby,
//!   fewer standbys when there are too few processes.
//! - **Balance.** Active counts per member differ by at most one, and so do stateful and
//!   stateless active counts separately. Without tags, actives plus standbys differ by at most
//!   one exactly when some standby placement around the actives allows it. The condition:
//!   with `N` actives and standbys over `M` members, `L = ⌊N/M⌋`, `S` stateful tasks and
//!   `a_p` of them active on process `p`, every member must reach `L` and `N mod M` of them
//!   `L + 1`; a process can take at most `S − a_p` standbys, so one whose members need more
//!   than that to reach `L` (or that leaves too few of the `L + 1` places) makes within one
//!   impossible. It happens when a process's members outnumber the tasks it may copy — three
//!   processes with two replicas put a copy of every task on every process, so a lone member
//!   on its process carries all of them. Actives are placed first (minimum movement and
//!   stickiness win), so the condition is on the actives as placed. Then the standbys still
//!   fill to the lowest common level the caps allow, and members of one process end within
//!   one of each other. With tags, tag diversity ranks above this bound.
//! - **Minimum movement.** The actives that change owner are exactly the orphaned tasks plus
//!   each surviving owner's excess over its target — the fewest any assignment within these
//!   balance bounds can move. With a single kind of task this is the textbook bound (the
//!   members that held the most keep the higher counts); with both kinds the extras are also
//!   arranged to move the fewest.
//! - **Fixed point.** Feeding an output back as the current assignment gives the same output.
//!   Actives: a balanced current assignment is kept in full. Standbys: the pass reruns on its
//!   own output until that output keeps all of itself (none when, without tags, every member
//!   ends at its standby target — then a keep pass provably keeps everything; otherwise one
//!   extra keep pass when nothing was forced; at most eight full rounds, two in practice
//!   without tags, at most five seen with them) — past that cap the result would not be a
//!   fixed point, which no test has hit.
//! - **Per-subtopology spread.** A cold start deals each subtopology round the ring (skew at most
//!   one). Afterwards only the tasks that must move are chosen and dealt for spread: released
//!   above the fair share first, then per-subtopology quotas so the members below target can
//!   each reach every floor, then from the most over-represented subtopologies; dealt floors
//!   first, keeping room for later floors. 100→110 members on 8 × 256 tasks ends with skew at
//!   most one in every subtopology (Kafka's code left 7 at 1000→1100). Still a heuristic: the
//!   quotas are met greedily with one-step repairs, not by a full flow, so a quota that needs a
//!   longer chain of exchanges can be missed (skew two in that subtopology).
//! - **Rack-aware standbys.** With `rackAwareAssignmentTags`, each standby goes where it adds
//!   the most tag values not yet covered by the task's active and earlier standbys, so a task
//!   covers as many distinct values of each tag as the members offer. Diversity ranks above the
//!   standby balance bound here (an operator who sets the tags asks for resilience first);
//!   when the tags cannot be satisfied placement falls back to the plain rules.
//!
//! # Decisions where requirements conflict
//!
//! - *Process capacity vs. per-member balance.* Per-member balance wins; since every member of a
//!   process counts, a process still gets a share proportional to its members (Kafka's
//!   capacity), and a lone member on its process is never asked to carry two members' worth.
//! - *Stateful/stateless balance vs. movement.* Both kinds are balanced on their own, so moving
//!   a task of one kind never makes up for the other; movement is minimal subject to that.
//! - *Warm state vs. spread.* A task goes to a warm member below target even if that member
//!   already holds its fair share of the subtopology (Kafka's priority: restore less).
//!
//! # Complexity
//!
//! With `T` tasks, `M` members, `P` processes, `R` standbys per task and `C` tag classes
//! (distinct combinations of tag values; 1 without tags): indexing sorts members and buckets
//! the current standby candidates and offsets by task (each task's few candidates sorted),
//! `O(M log M + E log k)` for `E` reported task entries, at most `k` per task; actives
//! are `O(T log S + M·S)`, plus for the release quotas sweeps of `O(G·S)` each (`G` members
//! above target; a sweep releases up to `G` tasks) and `O(G²·S)` per quota task the sweeps
//! miss (a handful in the cases measured); standbys take `O(T·R·C·R)` queue steps of `O(1)`
//! (each skips at most the `R + 1` processes holding the task; `O(P)` when every process
//! with room holds it, which without tags only kept standbys cause), plus `O(T·R)` per
//! repair chain (none on the benchmark groups; a few where keeps get in the way). Without
//! tags that is `O(T·R² + E log k + T log S + M·S)` — near `O(T log T)`; dealing compares at
//! most 32 members per task.
//!
//! # Layout
//!
//! - `group`: the input indexed into dense integers, with each task's ranked warm members.
//! - `active`: targets, keep, release, warm state and dealing for active tasks.
//! - `standby`: targets, keep, fill and repair for standby tasks, with tag coverage.
//! - `queue`: member loads in per-process heaps, processes in per-class arrays sorted by
//!   tightness: what the standby fill draws from.

#![deny(missing_docs)]

mod active;
mod group;
mod queue;
mod standby;

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, MemberAssignment, TaskAssignor, TaskId, TaskSet,
    Topology,
};

use crate::group::{Group, NONE};

/// Kafka's sticky assignor behaviour with balance bounds, minimum movement, a fixed point and
/// rack-aware standbys (see the crate documentation).
#[derive(Debug, Default)]
pub struct StickyAssignor;

impl TaskAssignor for StickyAssignor {
    fn name(&self) -> &str {
        "sticky"
    }

    fn assign(
        &self,
        group: &GroupSpec,
        topology: &Topology,
    ) -> Result<GroupAssignment, AssignError> {
        if group.members.is_empty() {
            return Ok(GroupAssignment::default());
        }
        let g = Group::new(group, topology);
        let owner = active::assign(&g);
        let standbys = standby::assign(&g, &owner, group.configs.num_standby_replicas);

        // Tasks are visited in order, so every member's lists come out sorted; counting first
        // sizes each list exactly.
        let m = g.members();
        let (mut active_count, mut standby_count) = (vec![0usize; m], vec![0usize; m]);
        for &o in &owner {
            active_count[o as usize] += 1;
        }
        for &s in standbys.slots.iter().filter(|&&s| s != NONE) {
            standby_count[s as usize] += 1;
        }
        let lists = |count: Vec<usize>| -> Vec<Vec<TaskId>> {
            count.into_iter().map(Vec::with_capacity).collect()
        };
        let (mut actives, mut standby_lists) = (lists(active_count), lists(standby_count));
        for (t, &task) in g.task_ids.iter().enumerate() {
            actives[owner[t] as usize].push(task);
            if standbys.per_task > 0 {
                for &s in &standbys.slots[t * standbys.per_task..][..standbys.per_task] {
                    if s != NONE {
                        standby_lists[s as usize].push(task);
                    }
                }
            }
        }
        let mut assignment = GroupAssignment::empty_for(group);
        for ((a, s), &i) in actives.into_iter().zip(standby_lists).zip(&g.input_index) {
            // Taken over as they are: already in order, each task once.
            let set = |tasks| TaskSet::from_unique(tasks).expect("each task listed once");
            assignment.members[i] = MemberAssignment {
                active_tasks: set(a),
                standby_tasks: set(s),
            };
        }
        Ok(assignment)
    }
}

#[cfg(feature = "component")]
assignor_sdk::export!(StickyAssignor);

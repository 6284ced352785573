//! The `sticky` task assignor: Kafka's server-side sticky assignor as the floor, with tighter
//! balance, provably minimal movement, a fixed point and rack-aware standbys.
//!
//! The runtime uses [`StickyAssignor`](struct@StickyAssignor) as its built-in `sticky`;
//! `component/` makes the same code a component (`cargo build -p sticky-assignor-component
//! --release --target wasm32-wasip2`), so the two can be compared output for output.
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
//!    kind's counts and the total counts all differ by at most one between members. Which of
//!    the other members get the remaining extras moves nothing, so stateful extras go first
//!    to members that need one to take over orphaned tasks they are caught up on (each
//!    orphan, least lag first, claims its best caught-up holder that could take it).
//! 2. *Keep.* Each current owner keeps its tasks up to its target.
//! 3. *Release.* A member above its target gives up the excess: first what it holds beyond
//!    its fair share `⌈n_s/M⌉` of a subtopology; then, per subtopology, a quota — what the
//!    members below target lack of its floor `⌊n_s/M⌋`, less the unowned tasks — drawn from
//!    members above the floor (sweeps that drain the quotas evenly, then one exchange per
//!    task the sweeps missed); then the rest from the subtopologies where it holds the most.
//! 4. *Warm state.* Unowned stateful tasks go to members with local state for them (current
//!    standbys, warm-ups, reported offsets) that are below target, below their fair share of
//!    the task's subtopology, and — when already at its floor — take it only from the
//!    subtopology's surplus beyond what the members below target lack of their floors and
//!    from their own room beyond their floors (so dealing can still give every member every
//!    floor). A
//!    member's *lag* on a task is the task's end (the highest end offset or offset any member
//!    reports for it) less the member's offset; a current standby reporting no offset has lag
//!    0, a warm-up reporting none is at offset 0. It is *caught up* within
//!    `group.streams.acceptable.recovery.lag` (Kafka's `acceptable.recovery.lag`). First every
//!    (task, caught-up holder) pair, least lag first (so a caught-up standby is promoted
//!    before anyone takes over a task it is merely near on); then, per task still without a
//!    caught-up owner, a breadth-first search for a chain of caught-up tasks of its
//!    subtopology each moving to another caught-up holder, ending at one with room; then
//!    lagging holders, least lag first. This is how a cold start or a member restarting under
//!    a new id follows its state on disk.
//! 5. *Deal.* The rest are dealt subtopology by subtopology round a ring of the members still
//!    below target, ordered so that consecutive members sit on different processes, preferring
//!    a member below its floor of the subtopology, then below its fair share, then the one
//!    with the most room to spare beyond the floors of the subtopologies still to deal. Each
//!    task goes to the first member round the ring as good as the best the ring has (usually
//!    the next or one of the next few; late in a large cold start the few members with room
//!    to spare are far apart, and taking another would cost a later floor).
//! 6. *Exchange.* Two stateful tasks of one subtopology that both moved trade owners wherever
//!    that puts more of them on caught-up processes (no count changes). Here a process is
//!    caught up if any of its members is: they share one state directory.
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
//!    the group offers. With tags and a tag load slack `k` (step 4), in that order again, each
//!    while below its target plus `k` whatever its tag values: step 5 leaves every output as
//!    diverse as single moves within the bound can make it, so keeping it all is what makes it
//!    a fixed point.
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
//!    With tags and a *tag load slack* `k` (`group.streams.sticky.tag.load.slack`), the fill
//!    takes the most new tag values only on members below their target plus `k`, else the
//!    next most; a copy that no member within that bound may take (each sits on a process
//!    already holding the task) goes above it. Then the same chains carry every standby above
//!    a member's target plus `k` to members below that, and bring members left more than `k`
//!    below their target up from members above theirs. Both kinds of chain always exist: the
//!    targets themselves are a placement within the caps. Chains whose every move leaves its
//!    task at least as many tag values are tried first; only the rest trade diversity.
//! 5. *Improve.* With tags and a slack `k`, a standby moves to a process of another tag class
//!    where its task shows more tag values, while that process's members are not all at their
//!    target plus `k` and its own process keeps its members' targets less `k` (the members
//!    furthest from those bounds give and take), until no such move is left; each adds a
//!    value, so this ends.
//! 6. *Level.* Where targets are still missed (with tags, diversity first), within each
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
//!   one of each other. With tags, every member ends within the tag load slack (by
//!   default one task) of this untagged placement's range; with slack `none`, tag diversity
//!   ranks above this bound (see *Rack-aware standbys*).
//! - **Minimum movement.** The actives that change owner are exactly the orphaned tasks plus
//!   each surviving owner's excess over its target — the fewest any assignment within these
//!   balance bounds can move. With a single kind of task this is the textbook bound (the
//!   members that held the most keep the higher counts); with both kinds the extras are also
//!   arranged to move the fewest.
//! - **Fixed point.** Feeding an output back as the current assignment gives the same output.
//!   Actives: a balanced current assignment is kept in full. Standbys: the pass reruns on its
//!   own output until that output keeps all of itself (none when, without tags, every member
//!   ends at its standby target — then a keep pass provably keeps everything; otherwise one
//!   extra keep pass when nothing was forced) or, with tags and a slack, until a rerun
//!   reproduces its input (everything is kept then, but the targets follow the counts, and
//!   the bound and step 5 follow the targets). At most eight full rounds: two in practice
//!   without tags, at most five seen with them, with or without a slack (with one mostly two
//!   or three, over 20,000 random groups of up to 80 members, three standbys and three tags,
//!   and 1000 members in uneven zones). Past that cap the result would not be a fixed point,
//!   which no test has hit.
//! - **Per-subtopology spread.** A cold start deals each subtopology round the ring (skew at most
//!   one; the standard cold 1000-member input, 16 × 1024 tasks, ends at one, Kafka's at one).
//!   Afterwards only the tasks that must move are chosen and dealt for spread: released
//!   above the fair share first, then per-subtopology quotas so the members below target can
//!   each reach every floor, then from the most over-represented subtopologies; warm state
//!   taken only within the fair share and the floors' surplus; dealt floors first, keeping
//!   room for later floors. 100→110 members on 8 × 256 tasks ends with skew at most one in
//!   every subtopology (Kafka's code left 7 at 1000→1100), and so does every round of 5 %
//!   churn at 1000 members (`tests/quality.rs`; Kafka 1–3). Still a heuristic: the quotas are
//!   met greedily with one-step repairs, not by a full flow, so a quota that needs a longer
//!   chain of exchanges can be missed (skew two in that subtopology).
//! - **Caught-up placement.** Stickiness first: an active stays with its previous owner. Of
//!   the rest, no two stateful actives of one subtopology that moved could trade owners and
//!   put more on caught-up processes (the harness-style `caught-up-placement` rule of the
//!   tests). Without the spread limits (one subtopology, equal targets) the number on
//!   caught-up processes is the largest the targets allow (a maximum b-matching); an orphan
//!   whose caught-up standby sits on a member that may take one more goes there.
//! - **Rack-aware standbys.** With `rackAwareAssignmentTags`, each standby goes where it adds
//!   the most tag values not yet covered by the task's active and earlier standbys, within a
//!   *tag load slack* `k` (`group.streams.sticky.tag.load.slack`, default
//!   [`DEFAULT_TAG_LOAD_SLACK`] = 1). With slack `k`, on every input, every member ends with
//!   a standby count within `k` of its standby target (step 1 of *Standbys*, computed as
//!   without tags, which the untagged placement meets), so its actives plus standbys lie
//!   within `k` of the range `lo..=hi` the untagged placement of the same group gives: by
//!   default no member carries more than one task above the untagged placement's most loaded
//!   member or one below its least loaded, so the total spread is at most the untagged
//!   spread plus 2 (and the untagged spread is at most one whenever the caps allow it, see
//!   *Balance*). Diversity is traded only for copies the fill could not place within the
//!   bound, and there first by moves that cost no tag value (step 4); within the bound it is
//!   a local optimum — no single move of a standby within the bound adds a tag value (step
//!   5) — not a global one (properties `default_tag_load_slack_bounds_load` and
//!   `tag_load_slack_bounds_load`). Slack `0` is exactly the untagged balance. Slack `none`
//!   is the opt-out: diversity ranks above the standby balance bound (what the harness's
//!   `tag-diversity` rule asks; `rack-aware` runs its sticky passes so), and uneven zones
//!   load their members unevenly.
//!
//!   Zones of 5, 3 and 1 single-member processes, two standbys, 25 stateful tasks, tag
//!   `zone` (`tests/quality.rs`; in brackets, after a second process joins the small zone):
//!   `none`, total spread 21 (9) with 25 (25) of 25 tasks in three zones, the lone member
//!   holding a copy of nearly every task; `0`, spread 1 (1) with 8 (11); `1`, spread 2 (3)
//!   with 9 (17); `2`, spread 4 (5) with 11 (20). Over the property generators' groups with
//!   tags and standbys (571 of up to 64 members on up to 16 processes; 1000 crowded ones on
//!   4 to 7), the share of stateful tasks whose copies cover every tag value they could:
//!   `none` 91.3 % and 88.6 %, `0` 72.3 % and 59.4 %, `1` 90.3 % and 71.0 %, `2` 93.0 % and
//!   76.5 %; mean total spread 2.04 and 5.73, 1.10 and 2.16, 1.70 and 3.04, 1.95 and 3.67.
//!   The default is 1 because that is where the trade turns: from `0` to `1` diversity gains
//!   18 and 12 points (and 6 of 25 tasks in the joined zone group) for at most one task per
//!   member; from `1` to `2`, 3 and 5 points for a second. On the mixed groups `1` keeps
//!   nearly all the diversity `none` reaches, while `none` leaves some member outside the
//!   untagged range in 31 % and 52 % of the groups (by 7 tasks or more in 12 and 140).
//!
//! # Configuration
//!
//! Broker keys, read by `configure` from the broker config (Kafka's `config.originals()`):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `group.streams.acceptable.recovery.lag` | `10000` | lag up to which a member counts as caught up on a task ([`ACCEPTABLE_RECOVERY_LAG`]) |
//! | `group.streams.sticky.tag.load.slack` | `1` | how far, either way, a member's standby count may stray from its untagged target for tag diversity, so its actives plus standbys stay within that of the untagged placement's range; `0`: the untagged balance; `none`: no bound, diversity first ([`TAG_LOAD_SLACK`]) |
//!
//! # Decisions where requirements conflict
//!
//! - *Process capacity vs. per-member balance.* Per-member balance wins; since every member of a
//!   process counts, a process still gets a share proportional to its members (Kafka's
//!   capacity), and a lone member on its process is never asked to carry two members' worth.
//! - *Stateful/stateless balance vs. movement.* Both kinds are balanced on their own, so moving
//!   a task of one kind never makes up for the other; movement is minimal subject to that.
//! - *Warm state vs. spread.* Spread wins: a task goes to a warm member only while that member
//!   is below its fair share of the subtopology and leaves every member its floors; within
//!   those, the least lag wins. (It used to be the other way round, which cost skew two under
//!   churn at 1000 members.)
//! - *Warm state vs. movement.* Movement wins: an active stays with its previous owner even if
//!   another process is more caught up (Kafka's rule too).
//!
//! # Complexity
//!
//! With `T` tasks, `M` members, `P` processes, `R` standbys per task and `C` tag classes
//! (distinct combinations of tag values; 1 without tags): indexing sorts members, buckets
//! the current standby candidates by task (a task's few candidates sorted only where offsets
//! or warm-ups rank some of them: current standbys come in rank order) and sorts the `F`
//! reported offsets (merging each member's sorted run), `O(M log M + E log k + F log F)` for
//! `E` reported task entries, at most `k` per task; actives
//! are `O(T log S + M·S)`, plus for the release quotas sweeps of `O(G·S)` each (`G` members
//! above target; a sweep releases up to `G` tasks) and `O(G²·S)` per quota task the sweeps
//! miss (a handful in the cases measured); standbys take `O(T·R·C·R)` queue steps of `O(1)`
//! (each skips at most the `R + 1` processes holding the task; `O(P)` when every process
//! with room holds it, which without tags only kept standbys cause), plus `O(T·R)` per
//! repair chain (none on the benchmark groups; a few where keeps get in the way; with tags
//! and a slack, a chain limited to moves that keep tag values may try every process for each
//! standby, `O(T·R·P)`, and each improve pass is `O(T·R·(R + C))` plus `O(log P)` per move,
//! repeated while a pass moves something). Without tags that is
//! `O(T·R² + E log k + F log F + T log S + M·S)` — near `O(T log T)`; dealing looks round
//! the ring only as far as the first member as good as the best it has, usually a few
//! members, the whole ring (`O(M)`) for a few hundred tasks of a cold 1000-member start. Warm state sorts its `W` (task,
//! holder) pairs, `O(W log W)`, and searches `O(W)` per task left without a caught-up owner
//! (a member whose search failed is not searched again for that subtopology); the exchange
//! pass is `O(W·D)` for its first round (`D` the tasks a member took); a later round
//! searches again only the tasks a trade changed a partner of, `O(W)` for the rest, and
//! rounds end when nothing trades (one round with trades on every group measured).
//!
//! # Layout
//!
//! - `group`: the input indexed into dense integers, with each task's ranked warm members.
//! - `active`: targets, keep, release, warm state and dealing for active tasks.
//! - `standby`: targets, keep, fill and repair for standby tasks, with tag coverage.
//! - `queue`: member loads in per-process heaps, each tag class's processes a stretch of one
//!   array sorted by tightness: what the standby fill draws from.

#![deny(missing_docs)]

mod active;
mod group;
mod queue;
mod standby;

use std::collections::BTreeMap;

use assignor_sdk::{
    AssignError, GroupAssignment, GroupSpec, MemberAssignment, TaskAssignor, TaskId, TaskSet,
    Topology,
};

use crate::group::{Group, NONE};

/// The broker key of the lag up to which a member counts as caught up on a task (Kafka
/// Streams' `acceptable.recovery.lag`), read by [`TaskAssignor::configure`].
pub const ACCEPTABLE_RECOVERY_LAG: &str = "group.streams.acceptable.recovery.lag";
/// The default of [`ACCEPTABLE_RECOVERY_LAG`], Kafka's: 10,000 offsets.
pub const DEFAULT_ACCEPTABLE_RECOVERY_LAG: u64 = 10_000;
/// The broker key of how far, either way, a member's standby count may stray from its
/// untagged target so that tasks cover more `rackAwareAssignmentTags` values (an integer, or
/// `none`: no bound), read by [`TaskAssignor::configure`].
pub const TAG_LOAD_SLACK: &str = "group.streams.sticky.tag.load.slack";
/// The default of [`TAG_LOAD_SLACK`]: 1. With rack-aware tags, every member's standby count
/// ends within one of its untagged target, so its actives plus standbys lie within one of the
/// range the untagged placement gives (no member more than one task above its most loaded
/// member or below its least loaded), and tasks cover as many tag values as single moves
/// within that bound can give them. Chosen by measurement (see *Rack-aware standbys* in the
/// crate documentation): one task of slack buys most of the diversity that unbounded load
/// does. `None` (`none`) is the opt-out, diversity before load (what the harness's
/// `tag-diversity` rule asks).
pub const DEFAULT_TAG_LOAD_SLACK: Option<u32> = Some(1);

/// Kafka's sticky assignor behaviour with balance bounds, minimum movement, a fixed point and
/// rack-aware standbys (see the crate documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StickyAssignor {
    acceptable_recovery_lag: u64,
    tag_load_slack: Option<u32>,
}

impl StickyAssignor {
    /// The assignor with every default.
    pub const fn new() -> Self {
        Self {
            acceptable_recovery_lag: DEFAULT_ACCEPTABLE_RECOVERY_LAG,
            tag_load_slack: DEFAULT_TAG_LOAD_SLACK,
        }
    }

    /// The assignor with `lag` as [`ACCEPTABLE_RECOVERY_LAG`].
    pub const fn with_acceptable_recovery_lag(mut self, lag: u64) -> Self {
        self.acceptable_recovery_lag = lag;
        self
    }

    /// The assignor with `slack` as [`TAG_LOAD_SLACK`] (`None`: no bound).
    pub const fn with_tag_load_slack(mut self, slack: Option<u32>) -> Self {
        self.tag_load_slack = slack;
        self
    }
}

impl Default for StickyAssignor {
    fn default() -> Self {
        Self::new()
    }
}

impl TaskAssignor for StickyAssignor {
    fn name(&self) -> &str {
        "sticky"
    }

    /// Reads [`ACCEPTABLE_RECOVERY_LAG`] (a non-negative integer) and [`TAG_LOAD_SLACK`] (a
    /// non-negative integer or `none`); other keys are not this assignor's and are ignored.
    fn configure(&mut self, config: &BTreeMap<String, String>) -> Result<(), String> {
        let invalid = |key: &str, v: &str, expected: &str| {
            format!("invalid value \"{v}\" for {key}: expected {expected}")
        };
        if let Some(v) = config.get(ACCEPTABLE_RECOVERY_LAG) {
            self.acceptable_recovery_lag = v.trim().parse().map_err(|_| {
                invalid(ACCEPTABLE_RECOVERY_LAG, v, "an integer from 0 to 2^64 - 1")
            })?;
        }
        if let Some(v) = config.get(TAG_LOAD_SLACK) {
            self.tag_load_slack = match v.trim() {
                "none" => None,
                n => Some(n.parse().map_err(|_| {
                    invalid(TAG_LOAD_SLACK, v, "`none` or an integer from 0 to 2^32 - 1")
                })?),
            };
        }
        Ok(())
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
        let owner = active::assign(&g, self.acceptable_recovery_lag);
        let standbys = standby::assign(
            &g,
            &owner,
            group.configs.num_standby_replicas,
            self.tag_load_slack,
        );

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
        // Zipped rather than indexed, and the standby count tested once rather than per task:
        // no bounds checks or branch per task (about 0.2M instructions per 1000-member call).
        let tasks = g.task_ids.iter().zip(&owner);
        if standbys.per_task == 0 {
            for (&task, &o) in tasks {
                actives[o as usize].push(task);
            }
        } else {
            for ((&task, &o), slots) in tasks.zip(standbys.slots.chunks_exact(standbys.per_task)) {
                actives[o as usize].push(task);
                for &s in slots.iter().filter(|&&s| s != NONE) {
                    standby_lists[s as usize].push(task);
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

//! [`Group`]: the input, indexed once so the passes work on dense integers.
//!
//! Members are known by their *rank* (position when sorted by member id), processes by their
//! position when sorted by process id, tasks by their position in [`Topology::tasks`]. Ordering
//! by ids rather than input position makes the result independent of the order in which the
//! coordinator lists members.

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;

use assignor_sdk::{GroupSpec, TaskId, Topology};

/// "Nobody": an absent member, owner or process.
pub(crate) const NONE: u32 = u32::MAX;

/// The indexed input.
pub(crate) struct Group {
    /// Members, by rank: their position in the input.
    pub input_index: Vec<usize>,
    /// Members, by rank: their process.
    pub process: Vec<u32>,
    /// The number of distinct processes.
    pub process_count: usize,
    /// Member ranks in dealing order: the first member of every process, then the second of
    /// every process, and so on, so that consecutive members sit on different processes.
    pub ring: Vec<u32>,
    /// Per subtopology index: its first dense task.
    pub subtopology_start: Vec<u32>,
    /// Per subtopology index: whether it is stateful.
    pub subtopology_stateful: Vec<bool>,
    /// Dense task → task id.
    pub task_ids: Vec<TaskId>,
    /// Dense task → the member that currently owns it as active, or [`NONE`]. When two members
    /// claim one task, the lower rank keeps the claim.
    pub prev_owner: Vec<u32>,
    /// Members with local state for each stateful task, best first.
    pub candidates: Candidates,
    /// Reported offsets of stateful tasks: (dense task, rank, offset), sorted.
    pub offsets: Vec<(u32, u32, i64)>,
    /// Members, by rank: how many valid standbys they currently hold.
    pub prev_standbys: Vec<u32>,
    /// Per process: its value id for each rack-aware tag (`None` if the process lacks the tag).
    pub tags: Vec<Vec<Option<u32>>>,
    /// Per rack-aware tag: how many distinct values the processes offer.
    pub tag_values: Vec<u32>,
    /// Per process: its members, by rank (`process_members[process_start[p]..][..]`).
    process_members: Vec<u32>,
    process_start: Vec<u32>,
}

impl Group {
    /// Indexes `group` against `topology`, dropping current tasks the topology no longer has.
    pub fn new(group: &GroupSpec, topology: &Topology) -> Self {
        let members = &group.members;
        let mut input_index: Vec<usize> = (0..members.len()).collect();
        input_index.sort_by(|&a, &b| cmp_ids(&members[a].member_id, &members[b].member_id));

        // Processes numbered in id order: sort the members by process id, count the changes.
        let mut by_process_id: Vec<usize> = (0..members.len()).collect();
        by_process_id.sort_by(|&a, &b| cmp_ids(&members[a].process_id, &members[b].process_id));
        let mut process_of = vec![0u32; members.len()];
        let mut process_count = 0;
        for (k, &i) in by_process_id.iter().enumerate() {
            if k == 0
                || cmp_ids(
                    &members[i].process_id,
                    &members[by_process_id[k - 1]].process_id,
                )
                .is_ne()
            {
                process_count += 1;
            }
            process_of[i] = process_count as u32 - 1;
        }
        let process: Vec<u32> = input_index.iter().map(|&i| process_of[i]).collect();

        // Each process's members by rank, in one flat list: a counting sort (a list per
        // process cost an allocation each).
        let mut process_start = vec![0u32; process_count + 1];
        for &p in &process {
            process_start[p as usize + 1] += 1;
        }
        for p in 0..process_count {
            process_start[p + 1] += process_start[p];
        }
        let mut process_members = vec![0u32; members.len()];
        let mut at = process_start.clone();
        for (rank, &p) in (0u32..).zip(&process) {
            process_members[at[p as usize] as usize] = rank;
            at[p as usize] += 1;
        }
        let of_process =
            |p: usize| &process_members[process_start[p] as usize..process_start[p + 1] as usize];
        let rounds = (0..process_count)
            .map(|p| of_process(p).len())
            .max()
            .unwrap_or(0);
        let ring = (0..rounds)
            .flat_map(|round| {
                (0..process_count).filter_map(move |p| of_process(p).get(round).copied())
            })
            .collect();

        let mut subtopology_start = Vec::with_capacity(topology.subtopologies.len());
        let mut total = 0u32;
        for s in &topology.subtopologies {
            subtopology_start.push(total);
            total += s.max_num_input_partitions;
        }
        let subtopology_stateful: Vec<bool> = topology
            .subtopologies
            .iter()
            .map(|s| s.is_stateful)
            .collect();
        let mut task_ids: Vec<TaskId> = Vec::with_capacity(total as usize);
        for (s, sub) in (0u32..).zip(&topology.subtopologies) {
            task_ids.extend((0..sub.max_num_input_partitions).map(|p| TaskId::new(s, p)));
        }
        // Per subtopology: (first dense task, task count, stateful) side by side, so that a
        // reported task costs one lookup (tens of thousands of them at 1000 members).
        let subtopologies: Vec<(u32, u32, bool)> = (subtopology_start.iter())
            .zip(&topology.subtopologies)
            .map(|(&start, s)| (start, s.max_num_input_partitions, s.is_stateful))
            .collect();
        let indexed = |t: &TaskId| -> Option<(u32, bool)> {
            let &(start, n, stateful) = subtopologies.get(t.subtopology as usize)?;
            (t.partition < n).then_some((start + t.partition, stateful))
        };
        let dense = |t: &TaskId| indexed(t).map(|(d, _)| d);
        let stateful = |t: &TaskId| indexed(t).and_then(|(d, stateful)| stateful.then_some(d));

        // How far each task's changelog is known to reach: the highest end offset or offset
        // any member reports for it (none reported: 0).
        let mut end = Vec::new();
        if members
            .iter()
            .any(|m| !m.task_offsets.is_empty() || !m.task_end_offsets.is_empty())
        {
            end = vec![0i64; task_ids.len()];
            for m in members {
                for (t, &off) in m.task_end_offsets.iter().chain(&m.task_offsets) {
                    if let Some(d) = dense(t) {
                        end[d as usize] = end[d as usize].max(off);
                    }
                }
            }
        }
        // A member's lag on a task: how far its reported offset is behind the end; a current
        // standby reporting none is kept current by its member (lag 0), anything else
        // reporting none is at Kafka's default offset 0.
        let lag = |d: u32, offset: Option<i64>| -> u64 {
            let end = end.get(d as usize).copied().unwrap_or(0);
            u64::try_from(end.saturating_sub(offset.unwrap_or(0))).unwrap_or(0)
        };
        let mut prev_owner = vec![NONE; task_ids.len()];
        let mut prev_standbys = vec![0u32; members.len()];
        // The candidates, counted per task on the way in (so indexing them needs no counting
        // pass over them). Most are current standbys reporting no offset, which only their
        // rank orders (lag 0): those as (task, rank), 8 bytes rather than a `Candidate`'s 32,
        // and in rank order per task as members come, so they need no sort either.
        let (mut standbys, mut warmups, mut reported) = (0, 0, 0);
        for m in members {
            standbys += m.standby_tasks.len();
            warmups += m.warmup_tasks.len();
            reported += m.task_offsets.len();
        }
        let mut plain = Vec::with_capacity(standbys);
        let mut rich: Vec<Candidate> = Vec::with_capacity(warmups + reported);
        let mut count = counts(standbys + warmups + reported, task_ids.len());
        let mut offsets = Vec::with_capacity(reported);
        for (rank, &i) in (0u32..).zip(&input_index) {
            let m = &members[i];
            for t in m.active_tasks.iter() {
                if let Some(d) = dense(t)
                    && prev_owner[d as usize] == NONE
                {
                    prev_owner[d as usize] = rank;
                }
            }
            if !m.standby_tasks.is_empty() {
                // `stateful` checks the topology and the kind in one lookup.
                let standbys = m
                    .standby_tasks
                    .iter()
                    .filter_map(|t| Some((t, stateful(t)?)));
                let held = plain.len() + rich.len();
                if m.task_offsets.is_empty() {
                    // No offsets (the usual case): no lookup per standby.
                    for (_, d) in standbys {
                        count[d as usize] += 1;
                        plain.push((d, rank));
                    }
                } else {
                    for (t, d) in standbys {
                        count[d as usize] += 1;
                        match m.task_offsets.get(t) {
                            Some(&off) => {
                                rich.push((d, false, Reverse(off), rank, lag(d, Some(off))));
                            }
                            None => plain.push((d, rank)),
                        }
                    }
                }
                prev_standbys[rank as usize] = (plain.len() + rich.len() - held) as u32;
            }
            let offset = |t: &TaskId| m.task_offsets.get(t).copied();
            let mut push = |c: Candidate| {
                count[c.0 as usize] += 1;
                rich.push(c);
            };
            // A warm-up is a standby being caught up: it counts as one for stickiness.
            for t in m.warmup_tasks.iter() {
                if let Some(d) = stateful(t)
                    && !m.standby_tasks.contains(t)
                {
                    let off = offset(t);
                    push((d, false, Reverse(off.unwrap_or(0)), rank, lag(d, off)));
                }
            }
            // Offsets alone mean state on local disk, e.g. after a restart under a new member id.
            for (t, &off) in &m.task_offsets {
                let Some(d) = stateful(t) else {
                    continue;
                };
                offsets.push((d, rank, off));
                if !m.standby_tasks.contains(t) && !m.warmup_tasks.contains(t) {
                    push((d, true, Reverse(off), rank, lag(d, Some(off))));
                }
            }
        }
        // Members come in rank order, so a stable sort by task sorts by (task, rank). A sort of
        // the few reported offsets (a run per member, merged) costs less than bucketing them
        // over every task.
        offsets.sort_by_key(|o| o.0);
        let candidates = Candidates::index(plain, rich, count);

        let (tags, tag_values) = tag_values(group, &input_index, &process, process_count);
        Self {
            input_index,
            process,
            process_count,
            ring,
            subtopology_start,
            subtopology_stateful,
            task_ids,
            prev_owner,
            candidates,
            offsets,
            prev_standbys,
            tags,
            tag_values,
            process_members,
            process_start,
        }
    }

    /// The members of process `p`, by rank.
    pub fn members_of(&self, p: u32) -> &[u32] {
        let p = p as usize;
        &self.process_members[self.process_start[p] as usize..self.process_start[p + 1] as usize]
    }

    /// The number of members.
    pub fn members(&self) -> usize {
        self.input_index.len()
    }

    /// The number of tasks.
    pub fn tasks(&self) -> usize {
        self.task_ids.len()
    }

    /// Whether dense task `t` belongs to a stateful subtopology.
    pub fn is_stateful(&self, t: u32) -> bool {
        self.subtopology_stateful[self.task_ids[t as usize].subtopology as usize]
    }

    /// The dense tasks of subtopology `s`.
    pub fn subtopology_tasks(&self, s: usize) -> std::ops::Range<u32> {
        let start = self.subtopology_start[s];
        let end = self
            .subtopology_start
            .get(s + 1)
            .copied()
            .unwrap_or(self.tasks() as u32);
        start..end
    }

    /// The offset member `rank` reports for dense task `t`, 0 if none (Kafka's default).
    pub fn offset(&self, t: u32, rank: u32) -> i64 {
        self.offsets
            .binary_search_by(|&(d, r, _)| (d, r).cmp(&(t, rank)))
            .map_or(0, |i| self.offsets[i].2)
    }
}

/// A member with local state for a task: (dense task, only reports offsets, offset, rank,
/// lag), ordered the way Kafka ranks them (the lag rides along: ranks are unique per task).
pub(crate) type Candidate = (u32, bool, Reverse<i64>, u32, u64);

/// A count per task and one more for the prefix sums to end on, for up to `candidates`
/// candidates of `tasks` dense tasks; none when there are none to count (most cold starts).
fn counts(candidates: usize, tasks: usize) -> Vec<u32> {
    if candidates > 0 {
        vec![0; tasks + 1]
    } else {
        Vec::new()
    }
}

/// Per stateful task, the members with local state for it, best first: current standbys and
/// warm-ups, then members that only report offsets; within each, highest offset first.
pub(crate) struct Candidates {
    start: Vec<u32>,
    members: Vec<u32>,
    lags: Vec<u64>,
}

impl Candidates {
    /// Indexes `candidates` for `tasks` dense tasks.
    pub fn new(candidates: Vec<Candidate>, tasks: usize) -> Self {
        let mut count = counts(candidates.len(), tasks);
        for c in &candidates {
            count[c.0 as usize] += 1;
        }
        Self::index(Vec::new(), candidates, count)
    }

    /// Indexes candidates counted per task (`start`, a count per dense task and a 0) as they
    /// were collected: `plain` ones as (task, rank), ordered by rank alone (no offset, lag 0)
    /// and coming in rank order per task, and the `rich` rest in any order.
    fn index(plain: Vec<(u32, u32)>, rich: Vec<Candidate>, mut start: Vec<u32>) -> Self {
        let len = plain.len() + rich.len();
        if len == 0 {
            return Self {
                start: Vec::new(),
                members: Vec::new(),
                lags: Vec::new(),
            };
        }
        // Only a task with more than one candidate, one of them rich, needs sorting into
        // Kafka's order (the candidates of a task are distinct, so the order is total): plain
        // ones come in rank order, which a stable placement keeps.
        let mut several: Vec<u32> = (rich.iter().map(|c| c.0))
            .filter(|&t| start[t as usize] > 1)
            .collect();
        several.sort_unstable();
        several.dedup();
        // Grouped by task as a stable counting sort, filled from the back so that each task's
        // count ends at its first index, writing each candidate's member and lag straight to
        // their place (gathering them afterwards through a permutation cost a second random
        // read of every candidate).
        let mut sum = 0;
        for n in &mut start {
            sum += *n;
            *n = sum;
        }
        let mut members = vec![0u32; len];
        let mut lags = vec![0u64; len];
        for &(t, rank) in plain.iter().rev() {
            let at = &mut start[t as usize];
            *at -= 1;
            members[*at as usize] = rank;
        }
        // Where each rich candidate went, for the tasks to sort ([`NONE`]: a plain one).
        let mut rich_at = vec![NONE; if several.is_empty() { 0 } else { len }];
        for (i, c) in (0u32..).zip(&rich) {
            let at = &mut start[c.0 as usize];
            *at -= 1;
            let at = *at as usize;
            (members[at], lags[at]) = (c.3, c.4);
            if let Some(r) = rich_at.get_mut(at) {
                *r = i;
            }
        }
        let mut sorted: Vec<Candidate> = Vec::new();
        for &t in &several {
            let range = start[t as usize] as usize..start[t as usize + 1] as usize;
            sorted.clear();
            sorted.extend(range.clone().map(|at| match rich_at[at] {
                NONE => (t, false, Reverse(0), members[at], 0),
                i => rich[i as usize],
            }));
            sorted.sort_unstable();
            for (at, c) in range.zip(&sorted) {
                (members[at], lags[at]) = (c.3, c.4);
            }
        }
        Self {
            start,
            members,
            lags,
        }
    }

    /// Whether no task has any.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The range of dense task `t`'s candidates in `members` and `lags`.
    fn range(&self, t: u32) -> std::ops::Range<usize> {
        range(&self.start, t)
    }

    /// The candidates for dense task `t`, best first.
    pub fn of(&self, t: u32) -> &[u32] {
        self.lists().of(t)
    }

    /// [`Candidates::of`] for a loop over the tasks: the lists as slices a loop keeps in
    /// locals (read through `&self`, the vectors were loaded from memory again per task).
    pub fn lists(&self) -> Lists<'_> {
        Lists {
            start: &self.start,
            members: &self.members,
        }
    }

    /// The lags of [`Candidates::of`]`(t)`, in the same order.
    pub fn lags_of(&self, t: u32) -> &[u64] {
        &self.lags[self.range(t)]
    }

    /// [`Candidates::of`]`(t)` with their lags, in one lookup.
    pub fn with_lags(&self, t: u32) -> impl Iterator<Item = (u32, u64)> + use<'_> {
        let range = self.range(t);
        (self.members[range.clone()].iter().copied()).zip(self.lags[range].iter().copied())
    }
}

/// The candidates of every dense task, best first, as plain slices (see
/// [`Candidates::lists`]).
#[derive(Clone, Copy)]
pub(crate) struct Lists<'a> {
    start: &'a [u32],
    members: &'a [u32],
}

impl<'a> Lists<'a> {
    /// The candidates for dense task `t`, best first.
    pub fn of(self, t: u32) -> &'a [u32] {
        &self.members[range(self.start, t)]
    }
}

/// The range of dense task `t`'s candidates given their `start`s (empty when no task has any:
/// then `start` is too, and one bounds check covers both cases).
fn range(start: &[u32], t: u32) -> std::ops::Range<usize> {
    match start.get(t as usize..t as usize + 2) {
        Some(&[from, to]) => from as usize..to as usize,
        _ => 0..0,
    }
}

/// `a.cmp(b)` for member and process ids (the order of their bytes). In wasm, `str::cmp` and
/// `==` call wasi-libc's `memcmp`, a loop over single bytes: the ~3,000 id comparisons
/// indexing a 1000-member group took 1.57 M instructions there (6 % of the sandboxed call's
/// guest code), so there ids are compared eight bytes at a time (0.26 M fuel less). Natively
/// libc's `memcmp` is faster than that loop (+0.25 M instructions), so it stays.
fn cmp_ids(a: &str, b: &str) -> Ordering {
    if cfg!(target_family = "wasm") {
        cmp_by_words(a.as_bytes(), b.as_bytes())
    } else {
        a.cmp(b)
    }
}

/// `a.cmp(b)`, eight bytes at a time.
fn cmp_by_words(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut x, mut y) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    let word = |c: &[u8]| u64::from_be_bytes(c.try_into().expect("a chunk of eight bytes"));
    for (c, d) in (&mut x).zip(&mut y) {
        let (c, d) = (word(c), word(d));
        if c != d {
            return c.cmp(&d);
        }
    }
    // The remainders are as long as each other: both ids were cut to `n` bytes.
    big_endian(x.remainder())
        .cmp(&big_endian(y.remainder()))
        .then(a.len().cmp(&b.len()))
}

/// Fewer than eight bytes as a big-endian word, padded with zeros on the right, so that words
/// compare as the bytes do.
fn big_endian(bytes: &[u8]) -> u64 {
    (0..)
        .zip(bytes)
        .fold(0, |w, (i, &b)| w | u64::from(b) << (56 - 8 * i))
}

/// Per process, its value id for each rack-aware tag; per tag, how many distinct values there
/// are. A process takes the tags of its lowest-ranked member (tags belong to the process).
fn tag_values(
    group: &GroupSpec,
    input_index: &[usize],
    process: &[u32],
    process_count: usize,
) -> (Vec<Vec<Option<u32>>>, Vec<u32>) {
    let keys = &group.configs.rack_aware_assignment_tags;
    if keys.is_empty() {
        return (vec![Vec::new(); process_count], Vec::new());
    }
    let mut first_member = vec![usize::MAX; process_count];
    for (&i, &p) in input_index.iter().zip(process) {
        if first_member[p as usize] == usize::MAX {
            first_member[p as usize] = i;
        }
    }
    let mut ids: Vec<BTreeMap<&str, u32>> = vec![BTreeMap::new(); keys.len()];
    for &i in &first_member {
        for (k, key) in keys.iter().enumerate() {
            if let Some(v) = group.members[i].client_tags.get(key) {
                let next = ids[k].len() as u32;
                ids[k].entry(v.as_str()).or_insert(next);
            }
        }
    }
    let tags = first_member
        .iter()
        .map(|&i| {
            keys.iter()
                .zip(&ids)
                .map(|(key, ids)| {
                    group.members[i]
                        .client_tags
                        .get(key)
                        .map(|v| ids[v.as_str()])
                })
                .collect()
        })
        .collect();
    (tags, ids.iter().map(|m| m.len() as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids compared a word at a time (as in wasm) order as `str::cmp` orders them: across
    /// word boundaries, after common prefixes, between prefixes and longer ids, and with the
    /// extreme byte values at either end.
    #[test]
    fn ids_compare_by_words_as_by_bytes() {
        let mut ids: Vec<Vec<u8>> = vec![Vec::new(), b"member-00012".to_vec()];
        ids.push(b"member-00012-new".to_vec());
        for len in 1..=20 {
            for byte in [0u8, 1, b'a', 0x7f, 0x80, 0xff] {
                let mut last = vec![b'm'; len];
                last[len - 1] = byte;
                let mut first = vec![b'm'; len];
                first[0] = byte;
                ids.extend([vec![b'm'; len], last, first]);
            }
        }
        for a in &ids {
            for b in &ids {
                assert_eq!(cmp_by_words(a, b), a.cmp(b), "{a:?} against {b:?}");
            }
        }
    }
}

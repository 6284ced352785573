//! Active tasks: per-member targets, then keep, release, hand to warm state, deal the rest.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::group::{Group, NONE};

/// The active owner of every dense task; a member whose lag on a task is at most
/// `acceptable_lag` is caught up on it.
pub(crate) fn assign(g: &Group, acceptable_lag: u64) -> Vec<u32> {
    let m = g.members();
    let mut owner = g.prev_owner.clone();
    let mut prev = [vec![0u32; m], vec![0u32; m]]; // [stateful, stateless] previous counts
    let mut total = [0u32; 2];
    // Orphaned stateful tasks some member is caught up on, with the least lag: found in the
    // same pass (no reported state, no orphan to claim for).
    let mut orphans: Vec<(u64, u32)> = Vec::new();
    let find_orphans = !g.candidates.is_empty();
    // The stateful tasks without an owner, in order, for the warm-state placement and the
    // exchange (only with local state to place them by): found in the same pass too.
    let mut unowned: Vec<u32> = Vec::new();
    // Subtopology by subtopology: the kind is looked up once per subtopology, not per task.
    for s in 0..g.subtopology_start.len() {
        let kind = usize::from(!g.subtopology_stateful[s]);
        let range = g.subtopology_tasks(s);
        total[kind] += range.len() as u32;
        let orphaned = find_orphans && kind == 0;
        let counts = prev[kind].as_mut_slice();
        let mut count = |t: u32, o: u32| {
            // [`NONE`] is past every member: one bounds check tells an owner from none.
            if let Some(count) = counts.get_mut(o as usize) {
                *count += 1;
            } else if orphaned {
                unowned.push(t);
                if let Some(&lag) = g.candidates.lags_of(t).iter().min()
                    && lag <= acceptable_lag
                {
                    orphans.push((lag, t));
                }
            }
        };
        let mut t = range.start;
        each_owner(
            &g.prev_owner[range.start as usize..range.end as usize],
            |o| {
                count(t, o);
                t += 1;
            },
        );
    }
    // Which members that held no more than the floor of stateful tasks get the extras moves
    // nothing (they keep all they held either way), so those go first to members that need
    // one to take over orphaned tasks they are caught up on: each orphan, the least lag first,
    // claims its best caught-up holder that could still take it with an extra.
    let floor = total[0] / m as u32;
    let mut claims = vec![0u32; m];
    orphans.sort_unstable();
    for &(_, t) in &orphans {
        // The first of the least lag among those that could take it.
        let best = g
            .candidates
            .with_lags(t)
            .filter(|&(r, lag)| {
                lag <= acceptable_lag && prev[0][r as usize] + claims[r as usize] <= floor
            })
            .min_by_key(|&(_, lag)| lag);
        if let Some((r, _)) = best {
            claims[r as usize] += 1;
        }
    }
    let warm: Vec<bool> = (0..m).map(|r| prev[0][r] + claims[r] > floor).collect();
    let targets = targets(m, total, &prev, &warm);
    // Per kind: what each member lacks of its target.
    let mut deficits = [0, 1].map(|k| {
        (0..m)
            .map(|r| targets[k][r] - prev[k][r].min(targets[k][r]))
            .collect::<Vec<u32>>()
    });
    let below = BelowTarget::new(g, &owner, &prev, &deficits);
    // A kind without tasks has nothing to release, place or deal (its passes over the members
    // alone cost ~65K wasm instructions at 1000 members).
    for kind in (0..2).filter(|&k| total[k] > 0) {
        let stateful = kind == 0;
        // What the release frees joins the unowned stateful tasks, which only warm state and
        // the exchange read (only when some member is above target).
        let before = unowned.len();
        release(
            g,
            &mut owner,
            stateful,
            &prev[kind],
            &targets[kind],
            (stateful && find_orphans).then_some(&mut unowned),
        );
        if unowned.len() > before {
            unowned.sort_unstable();
        }
        let open: &[u32] = if stateful { &unowned } else { &[] };
        let mut deficit = std::mem::take(&mut deficits[kind]);
        // `open`: (no member above target takes a task, so none goes back to its previous
        // owner) exactly the tasks the exchange may trade, and those of them warm state placed
        // are what dealing counts beyond the kept tasks.
        if stateful {
            to_warm_state(g, &mut owner, open, &below, &mut deficit, acceptable_lag);
        }
        deal(g, &mut owner, stateful, deficit, &below, open);
        if stateful {
            exchange_to_caught_up(g, &mut owner, open, acceptable_lag);
        }
    }
    owner
}

/// Per subtopology, the members below their target of its kind that own tasks of it (so they
/// keep all they held), with how many: what the warm-state placement and dealing count of the
/// members with room, found in one pass over the tasks instead of a pass over them each.
struct BelowTarget {
    /// (member, tasks of the subtopology it owns), subtopology by subtopology.
    owners: Vec<(u32, u32)>,
    /// Per subtopology: where its owners end in `owners`.
    ends: Vec<u32>,
    /// Per kind: how many members are below target.
    lacking: [u32; 2],
}

impl BelowTarget {
    /// Counts the owners in `owner` with a `deficit` of the task's kind (`prev`: what they
    /// held).
    fn new(g: &Group, owner: &[u32], prev: &[Vec<u32>; 2], deficit: &[Vec<u32>; 2]) -> Self {
        // What those members held bounds the entries: one allocation, and no pass when they
        // held nothing.
        let (mut held, mut lacking) = (0u32, [0u32; 2]);
        for k in 0..2 {
            for (&p, &d) in prev[k].iter().zip(&deficit[k]) {
                if d > 0 {
                    held += p;
                    lacking[k] += 1;
                }
            }
        }
        let mut owners: Vec<(u32, u32)> = Vec::with_capacity(held as usize);
        let mut ends = Vec::with_capacity(g.subtopology_start.len());
        // Per member: 1 + where its entry is in `owners` (one before the subtopology's first
        // entry is an earlier subtopology's).
        let mut at = vec![0u32; if held > 0 { g.members() } else { 0 }];
        for s in 0..g.subtopology_start.len() {
            // A slice: through the `Vec` its pointer was loaded again after every push.
            let deficit = deficit[usize::from(!g.subtopology_stateful[s])].as_slice();
            let range = g.subtopology_tasks(s);
            let first = owners.len() as u32;
            if held > 0 {
                let count = |o: u32| {
                    // [`NONE`] is past every member, so has no deficit.
                    if deficit.get(o as usize).is_some_and(|&d| d > 0) {
                        let a = &mut at[o as usize];
                        if *a > first {
                            owners[*a as usize - 1].1 += 1;
                        } else {
                            owners.push((o, 1));
                            *a = owners.len() as u32;
                        }
                    }
                };
                each_owner(&owner[range.start as usize..range.end as usize], count);
            }
            ends.push(owners.len() as u32);
        }
        Self {
            owners,
            ends,
            lacking,
        }
    }

    /// The members below target owning tasks of subtopology `s`, with how many.
    fn of(&self, s: usize) -> &[(u32, u32)] {
        let from = if s == 0 { 0 } else { self.ends[s - 1] as usize };
        &self.owners[from..self.ends[s] as usize]
    }
}

/// Calls `f` with each of `owners` in order, four a step: in wasm a loop's own count and test
/// per task were a third of a pass over the owners (75K fuel per 1000-member churn call in
/// [`BelowTarget::new`] alone).
#[inline(always)]
fn each_owner(owners: &[u32], mut f: impl FnMut(u32)) {
    let fours = owners.chunks_exact(4);
    let rest = fours.remainder();
    for four in fours {
        for &o in four {
            f(o);
        }
    }
    for &o in rest {
        f(o);
    }
}

/// Trades owners of two stateful tasks of one subtopology that both moved, wherever that puts
/// more of them on caught-up processes: the counts stay as they are, so balance, spread and
/// movement do too. Catches what the warm-state placement left to dealing (a holder it kept
/// at its floor for the spread, which dealing then gave another task of that subtopology).
/// Each trade adds a caught-up placement, so the rounds end. `moved_tasks`: the stateful
/// tasks that changed owner, in order.
// Not inlined: natively ~50K instructions fewer per 1000-member churn call (and 16K on
// previous) than inlined into `assign`; the same fuel.
#[inline(never)]
fn exchange_to_caught_up(g: &Group, owner: &mut [u32], moved_tasks: &[u32], acceptable_lag: u64) {
    if g.candidates.is_empty() {
        return;
    }
    let caught_up = |r: u32, t: u32| {
        let p = g.process[r as usize];
        g.candidates
            .with_lags(t)
            .any(|(c, lag)| lag <= acceptable_lag && g.process[c as usize] == p)
    };
    // Every task this pass looks at is stateful: it starts from `moved_tasks`.
    let moved = |owner: &[u32], t: u32| owner[t as usize] != g.prev_owner[t as usize];
    // Only a moved task away from its state with a caught-up holder can gain by a trade: a
    // caught-up holder, and none on its owner's process, in one scan of its candidates.
    let away = |owner: &[u32], t: u32| {
        let o = owner[t as usize];
        let mut held = false;
        for (c, lag) in g.candidates.with_lags(t) {
            if lag <= acceptable_lag {
                if g.process[c as usize] == g.process[o as usize] {
                    return false;
                }
                held = true;
            }
        }
        held
    };
    // Each with its owner when it was found moved and away (both depend on the owner alone,
    // so a task whose owner is still that one needs no second look), and when its search
    // last failed (see below; [`NONE`]: search).
    let mut work: Vec<(u32, u32, u32)> = moved_tasks
        .iter()
        .copied()
        .filter(|&t| away(owner, t))
        .map(|t| (t, owner[t as usize], NONE))
        .collect();
    if work.is_empty() {
        return;
    }
    // Per member: the stateful tasks it took this round, in task order, in one flat list
    // (member `c`'s at `start[c]..start[c + 1]`; a trade swaps two entries, so no list
    // changes length, and a list per member cost an allocation each).
    let mut start = vec![0u32; g.members() + 1];
    for &t in moved_tasks {
        start[owner[t as usize] as usize + 1] += 1;
    }
    for c in 0..g.members() {
        start[c + 1] += start[c];
    }
    // Per member and per process: which subtopologies its lists hold, as a filter (bit
    // `s mod 64`), so that a search passes over a partner, or a process of partners (most of
    // them took nothing), without a task of the subtopology at a glance. A trade swaps two
    // tasks of one subtopology, so the filters stay true.
    let bit = |t: u32| 1u64 << (g.task_ids[t as usize].subtopology % 64);
    let mut kinds = vec![0u64; g.members()];
    let mut process_kinds = vec![0u64; g.process_count];
    let mut took = vec![0u32; moved_tasks.len()];
    let mut end = start.clone();
    for &t in moved_tasks {
        let o = owner[t as usize] as usize;
        took[end[o] as usize] = t;
        end[o] += 1;
        kinds[o] |= bit(t);
        process_kinds[g.process[o] as usize] |= bit(t);
    }
    let list = |c: u32| start[c as usize] as usize..start[c as usize + 1] as usize;
    // The members a task's search looks at: those on a process with a caught-up holder.
    let partners = |t: u32| Partners {
        g,
        holders: g.candidates.with_lags(t),
        acceptable_lag,
    };
    // A search's outcome depends only on the task's owner and its partners' lists, and a
    // trade changes the lists of its two members alone: so a task whose search found nothing
    // is searched again only once a trade has changed one of its partners' lists (`changed`,
    // per process, since partners come a process at a time: stamped with the trade's number)
    // after its failure (kept with the task in `work`). Later rounds then cost a look at each
    // task's few partner processes instead of a scan of their lists.
    let mut trades = 0u32;
    let mut changed = vec![0u32; g.process_count];
    // Rounds over the tasks away from their state, in task order, while some trade happens:
    // a trade can open one for a task that found none, or leave its partner away.
    loop {
        let mut next = Vec::new();
        for i in 0..work.len() {
            let (t, found, since) = work[i];
            let o = owner[t as usize];
            if o != found && !away(owner, t) {
                continue;
            }
            if since != NONE && !partners(t).any(|p| changed[p as usize] > since) {
                continue;
            }
            let s = g.task_ids[t as usize].subtopology;
            let kind = bit(t);
            let trade = partners(t).find_map(
                |p| process_kinds[p as usize] & kind != 0,
                |c| {
                    if kinds[c as usize] & kind == 0 {
                        return None;
                    }
                    // `u` still moved: one traded back to its previous owner stays there.
                    let at = took[list(c)].iter().position(|&u| {
                        g.task_ids[u as usize].subtopology == s
                            && moved(owner, u)
                            && (caught_up(o, u) || !caught_up(c, u))
                    })?;
                    Some((c, list(c).start + at))
                },
            );
            let Some((c, at)) = trade else {
                work[i].2 = trades;
                continue;
            };
            let u = took[at];
            took[at] = t;
            let i = took[list(o)]
                .iter()
                .position(|&x| x == t)
                .expect("a moved task is in its owner's list");
            took[list(o).start + i] = u;
            owner[t as usize] = c;
            owner[u as usize] = o;
            trades += 1;
            changed[g.process[c as usize] as usize] = trades;
            changed[g.process[o as usize] as usize] = trades;
            // Its owner changed: looked at again, and searched afresh.
            if let Ok(j) = work.binary_search_by_key(&u, |w| w.0) {
                work[j].2 = NONE;
            }
            next.push(u);
        }
        if next.is_empty() {
            return;
        }
        // `work` is in task order and `next` holds the few tasks traded away: merging them
        // costs less than sorting the two together.
        // A plain loop: a merge of two peekable iterators cost ~35 wasm instructions more a
        // task (55K fuel per 1000-member churn call).
        next.sort_unstable();
        let mut merged: Vec<(u32, u32, u32)> = Vec::with_capacity(work.len() + next.len());
        let keep = |merged: &mut Vec<(u32, u32, u32)>, (t, found, since): (u32, u32, u32)| {
            let o = owner[t as usize];
            if merged.last().is_none_or(|&(last, _, _)| last != t)
                && (o == found || (moved(owner, t) && away(owner, t)))
            {
                merged.push((t, o, since));
            }
        };
        let mut b = 0;
        for &w in &work {
            while let Some(&u) = next.get(b)
                && u < w.0
            {
                keep(&mut merged, (u, NONE, NONE));
                b += 1;
            }
            keep(&mut merged, w);
        }
        for &u in &next[b..] {
            keep(&mut merged, (u, NONE, NONE));
        }
        work = merged;
    }
}

/// The members on the processes of a task's caught-up holders, as loops a closure runs in
/// (`flat_map` compiled to an iterator whose every step was a call in wasm).
struct Partners<'a, I> {
    g: &'a Group,
    holders: I,
    acceptable_lag: u64,
}

impl<I: Iterator<Item = (u32, u64)>> Partners<'_, I> {
    /// The first `f` gives of a partner, in order, looking only at the partners on processes
    /// `process` passes.
    fn find_map<T>(
        self,
        process: impl Fn(u32) -> bool,
        mut f: impl FnMut(u32) -> Option<T>,
    ) -> Option<T> {
        for (c, lag) in self.holders {
            let p = self.g.process[c as usize];
            if lag <= self.acceptable_lag && process(p) {
                for &r in self.g.members_of(p) {
                    if let Some(x) = f(r) {
                        return Some(x);
                    }
                }
            }
        }
        None
    }

    /// Whether `f` holds for a partner's process.
    fn any(self, f: impl Fn(u32) -> bool) -> bool {
        for (c, lag) in self.holders {
            if lag <= self.acceptable_lag && f(self.g.process[c as usize]) {
                return true;
            }
        }
        false
    }
}

/// Per kind (stateful, stateless), each member's target active count.
///
/// Each kind gives every member `⌊n/M⌋` and `n mod M` members one more. Which members get the
/// extra one is chosen so that (a) a member's stateful plus stateless count stays within one
/// of every other member's, and (b) as many members as possible keep a task they would
/// otherwise give up: an extra goes first to a member that held more than `⌊n/M⌋` of the kind,
/// the one that held the most first. Movement is then the fewest any balanced assignment
/// needs, whichever of the others get the rest (they keep all they held either way): of those,
/// the stateful extras go first to the members that need one to take over the orphaned tasks
/// they are caught up on (`warm`).
fn targets(m: usize, total: [u32; 2], prev: &[Vec<u32>; 2], warm: &[bool]) -> [Vec<u32>; 2] {
    let q = total.map(|n| n / m as u32);
    let extra = total.map(|n| n as usize % m);
    let gains: [Vec<bool>; 2] = [0, 1].map(|k| prev[k].iter().map(|&p| p > q[k]).collect());
    // Preference for an extra: gains first, then (stateful, among the others) the most warm
    // state to take over, then the most held, then rank.
    // The counting sort's buckets, one allocation for both kinds.
    let mut start: Vec<u32> = Vec::new();
    let mut sort = |k: usize| {
        // A stable counting sort of the members in rank order by (class, most held first):
        // no count exceeds the tasks of the kind, so the buckets are bounded by the input, and
        // it costs a fraction of a comparison sort (two sorts of 1000 packed keys were
        // 0.2M instructions per call).
        let most = prev[k].iter().copied().max().unwrap_or(0) as usize;
        let width = most + 1;
        let bucket = |r: usize| {
            let class = if gains[k][r] {
                0
            } else if k == 0 && warm[r] {
                1
            } else {
                2
            };
            class * width + most - prev[k][r] as usize
        };
        start.clear();
        start.resize(3 * width + 1, 0);
        for r in 0..m {
            start[bucket(r) + 1] += 1;
        }
        let mut sum = 0;
        for n in &mut start {
            sum += *n;
            *n = sum;
        }
        let mut order = vec![0u32; m];
        for r in 0..m {
            let at = &mut start[bucket(r)];
            order[*at as usize] = r as u32;
            *at += 1;
        }
        order
    };
    // With tasks of one kind only (or none) there is nothing to keep apart: the extras go down
    // that kind's order, gains first, just as `disjoint` would pick them, and neither the
    // other kind's order nor the pick is needed.
    if let Some(k) = (0..2).find(|&k| total[1 - k] == 0) {
        let mut targets = q.map(|q| vec![q; m]);
        for &r in &sort(k)[..extra[k]] {
            targets[k][r as usize] += 1;
        }
        return targets;
    }
    let order = [sort(0), sort(1)];
    // Totals stay within one if the members with an extra of one kind and those with an extra
    // of the other are disjoint (when the extras fit) or together cover everyone (when they
    // do not): the second case is the first for the members *without* an extra.
    let with_extra = if extra[0] + extra[1] <= m {
        disjoint(extra, &gains, &order)
    } else {
        let lacking = [m - extra[0], m - extra[1]];
        let loses = gains
            .clone()
            .map(|g| g.iter().map(|&x| !x).collect::<Vec<_>>());
        let reversed = order.clone().map(|mut o| {
            o.reverse();
            o
        });
        disjoint(lacking, &loses, &reversed).map(|w| w.iter().map(|&x| !x).collect())
    };
    [0, 1].map(|k| with_extra[k].iter().map(|&e| q[k] + u32::from(e)).collect())
}

/// Picks `want[k]` members for each of two kinds, no member for both, maximising the number
/// picked for a kind among the members that `good[k]` marks. Members are tried in `order[k]`.
///
/// Optimal: members good for one kind only go to that kind first, then members good for both
/// fill what is left of either, then the rest fill up.
fn disjoint(want: [usize; 2], good: &[Vec<bool>; 2], order: &[Vec<u32>; 2]) -> [Vec<bool>; 2] {
    let m = good[0].len();
    let mut picked = [vec![false; m], vec![false; m]];
    let mut left = want;
    let taken = |picked: &[Vec<bool>; 2], r: usize| picked[0][r] || picked[1][r];
    for k in 0..2 {
        for &r in &order[k] {
            let r = r as usize;
            if left[k] > 0 && good[k][r] && !good[1 - k][r] {
                picked[k][r] = true;
                left[k] -= 1;
            }
        }
    }
    for &r in &order[0] {
        let r = r as usize;
        if good[0][r] && good[1][r] && (left[0] > 0 || left[1] > 0) {
            let k = usize::from(left[1] > left[0]);
            picked[k][r] = true;
            left[k] -= 1;
        }
    }
    for k in 0..2 {
        for &r in &order[k] {
            let r = r as usize;
            if left[k] > 0 && !taken(&picked, r) {
                picked[k][r] = true;
                left[k] -= 1;
            }
        }
    }
    picked
}

/// Members above their target give up their excess, in three steps that keep each
/// subtopology's spread (every member between `⌊n_s/M⌋` and `⌈n_s/M⌉` of it) wherever the
/// moves that must happen anyway allow it:
///
/// 1. each gives up what it holds beyond the fair share `⌈n_s/M⌉` of a subtopology;
/// 2. per subtopology, a quota: the members below target must reach its floor `⌊n_s/M⌋`, so
///    that many (less the tasks nobody owns) are released from members above the floor, one
///    per member per sweep;
/// 3. the rest from the subtopologies where they hold the most beyond the fair share, ties to
///    the subtopology released least so far, so that what is handed out covers the
///    subtopologies evenly.
///
/// The tasks given up are added to `released`, if given.
fn release(
    g: &Group,
    owner: &mut [u32],
    stateful: bool,
    prev: &[u32],
    target: &[u32],
    released: Option<&mut Vec<u32>>,
) {
    let m = g.members();
    let subtopologies = g.subtopology_start.len();
    let givers: Vec<usize> = (0..m).filter(|&r| prev[r] > target[r]).collect();
    if givers.is_empty() {
        return;
    }
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); m];
    for t in 0..g.tasks() as u32 {
        let o = owner[t as usize];
        if o != NONE && g.is_stateful(t) == stateful && prev[o as usize] > target[o as usize] {
            held[o as usize].push(t);
        }
    }
    let size = |s: usize| g.subtopology_tasks(s).len() as u32;
    let (floor, fair) = (
        |s: usize| size(s) / m as u32,
        |s: usize| size(s).div_ceil(m as u32),
    );
    let excess: Vec<u32> = (0..m).map(|r| prev[r].saturating_sub(target[r])).collect();
    let mut runs: Vec<Vec<(usize, usize, u32)>> = vec![Vec::new(); m];
    for &r in &givers {
        for (i, &t) in held[r].iter().enumerate() {
            let s = g.task_ids[t as usize].subtopology as usize;
            match runs[r].last_mut() {
                Some(run) if run.0 == s => run.2 += 1,
                _ => runs[r].push((s, i, 1)),
            }
        }
    }
    let mut state = Release {
        held,
        runs,
        excess,
        released: vec![0u32; subtopologies],
    };
    // 1 and 3: from the runs most above the fair share; in step 1 only while above it.
    let by_excess = |state: &mut Release, above_fair_only: bool, owner: &mut [u32]| {
        // (how far above the fair share, released least so far, lowest subtopology)
        let key = |s: usize, len: u32, released: &[u32]| {
            (
                i64::from(len) - i64::from(fair(s)),
                Reverse(released[s]),
                Reverse(s),
            )
        };
        for &r in &givers {
            let runs = &state.runs[r];
            let mut heap: BinaryHeap<_> = (0..runs.len())
                .filter(|&i| runs[i].2 > 0)
                .map(|i| (key(runs[i].0, runs[i].2, &state.released), i))
                .collect();
            while state.excess[r] > 0 {
                let Some((k, i)) = heap.pop() else { break };
                if above_fair_only && k.0 <= 0 {
                    break;
                }
                state.give(r, i, owner);
                let (s, _, len) = state.runs[r][i];
                if len > 0 {
                    heap.push((key(s, len, &state.released), i));
                }
            }
        }
    };
    by_excess(&mut state, true, owner);
    // 2: per-subtopology quotas for the members below target.
    let takers = (0..m).filter(|&r| prev[r] < target[r]).count() as i64;
    let mut count = vec![0u32; m];
    let mut quota = vec![0i64; subtopologies];
    for s in (0..subtopologies).filter(|&s| g.subtopology_stateful[s] == stateful) {
        let range = g.subtopology_tasks(s);
        let f = floor(s);
        let (mut covered, mut unowned) = (0i64, 0i64);
        for t in range.clone() {
            match owner[t as usize] {
                NONE => unowned += 1,
                o if prev[o as usize] < target[o as usize] => {
                    count[o as usize] += 1;
                    covered += i64::from(count[o as usize] <= f);
                }
                _ => {}
            }
        }
        for t in range {
            if owner[t as usize] != NONE {
                count[owner[t as usize] as usize] = 0;
            }
        }
        quota[s] = takers * i64::from(f) - covered - unowned;
    }
    let mut given: Vec<Vec<u32>> = state.runs.iter().map(|r| vec![0; r.len()]).collect();
    // Sweeps over the members above target, each giving one task to the subtopology with the
    // most quota left among those it holds above the floor, so every quota drains evenly.
    while quota.iter().any(|&q| q > 0) {
        let mut progress = false;
        for &r in &givers {
            if state.excess[r] == 0 {
                continue;
            }
            let pick = (0..state.runs[r].len())
                .filter(|&i| {
                    let (s, _, len) = state.runs[r][i];
                    quota[s] > 0 && len > floor(s)
                })
                .max_by_key(|&i| (quota[state.runs[r][i].0], Reverse(i)));
            if let Some(i) = pick {
                quota[state.runs[r][i].0] -= 1;
                state.give(r, i, owner);
                given[r][i] += 1;
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    // Repair what the sweeps missed with one exchange each: a member that can give from `s`
    // but has no excess left takes back a task it gave to another quota `s1`, gives one of
    // `s` instead, and a member with excess left gives one of `s1`.
    for (s, quota) in quota.iter_mut().enumerate() {
        while *quota > 0 {
            let run_of = |state: &Release, r: usize, s: usize| {
                state.runs[r]
                    .binary_search_by_key(&s, |run| run.0)
                    .ok()
                    .filter(|&i| state.runs[r][i].2 > floor(s))
            };
            let exchange = givers.iter().find_map(|&r1| {
                let i0 = run_of(&state, r1, s)?;
                (0..given[r1].len())
                    .filter(|&j| given[r1][j] > 0)
                    .find_map(|j| {
                        let s1 = state.runs[r1][j].0;
                        givers
                            .iter()
                            .filter(|&&r2| r2 != r1 && state.excess[r2] > 0)
                            .find_map(|&r2| Some((r2, run_of(&state, r2, s1)?)))
                            .map(|(r2, i2)| (r1, i0, j, r2, i2))
                    })
            });
            let Some((r1, i0, j, r2, i2)) = exchange else {
                break;
            };
            state.take_back(r1, j, owner);
            given[r1][j] -= 1;
            state.give(r1, i0, owner);
            given[r1][i0] += 1;
            state.give(r2, i2, owner);
            given[r2][i2] += 1;
            *quota -= 1;
        }
    }
    by_excess(&mut state, false, owner);
    let Some(released) = released else {
        return;
    };
    // Each run's released tasks follow the ones it still holds.
    for &r in &givers {
        let runs = &state.runs[r];
        for (i, &(_, first, len)) in runs.iter().enumerate() {
            let end = runs.get(i + 1).map_or(state.held[r].len(), |run| run.1);
            released.extend_from_slice(&state.held[r][first + len as usize..end]);
        }
    }
}

/// The members above target while they release: their tasks of the kind, as runs per
/// subtopology, and what they and each subtopology have released.
struct Release {
    held: Vec<Vec<u32>>,
    /// Per member: (subtopology, first index in `held`, length still held), by subtopology.
    runs: Vec<Vec<(usize, usize, u32)>>,
    excess: Vec<u32>,
    released: Vec<u32>,
}

impl Release {
    /// Member `r` gives up the last task it still holds of its run `i`.
    fn give(&mut self, r: usize, i: usize, owner: &mut [u32]) {
        let (s, first, len) = &mut self.runs[r][i];
        *len -= 1;
        owner[self.held[r][*first + *len as usize] as usize] = NONE;
        self.released[*s] += 1;
        self.excess[r] -= 1;
    }

    /// Member `r` takes back the task it last gave up of its run `i`.
    fn take_back(&mut self, r: usize, i: usize, owner: &mut [u32]) {
        let (s, first, len) = &mut self.runs[r][i];
        owner[self.held[r][*first + *len as usize] as usize] = r as u32;
        *len += 1;
        self.released[*s] -= 1;
        self.excess[r] += 1;
    }
}

/// Unowned stateful tasks go to members with local state for them while those are below
/// target and below their fair share `⌈n_s/M⌉` of the task's subtopology (so warm state never
/// costs spread: skew stays within one), the least lag first. (Process-mates, which share the
/// state directory, are left to the exchange pass: listing every mate here doubled the work.)
///
/// 1. Every (task, holder) pair whose holder is caught up (lag at most `acceptable_lag`), the
///    least lag first, then the task's candidate order: the task goes there if the holder
///    has room. So a caught-up standby (lag 0 when it reports no offset) is promoted before
///    anyone takes over a task it is only near on.
/// 2. Then, for each task still without a caught-up owner, a breadth-first search for an
///    augmenting path: caught-up tasks each moving on to another caught-up holder with room
///    in their subtopology, ending at a member with room. A member from which a search found
///    no room is not searched again, which bounds the work to about one pass over the pairs;
///    once no holder has room left, no search is started.
/// 3. The rest go to lagging holders, the least lag first, while they have room.
///
/// `unowned`: the stateful tasks without an owner, in order; `below`: the members below
/// target and what they own.
// Not inlined: natively ~20K instructions fewer per 1000-member churn call (and 16K on
// previous) than inlined into `assign`; the same fuel.
#[inline(never)]
fn to_warm_state(
    g: &Group,
    owner: &mut [u32],
    unowned: &[u32],
    below: &BelowTarget,
    deficit: &mut [u32],
    acceptable_lag: u64,
) {
    if g.candidates.is_empty() || unowned.is_empty() {
        return;
    }
    // The holders with room, numbered as they first come (`index`: a member's number, [`NONE`]
    // for the others; `members`: a holder's member), so that everything below is sized by the
    // few members involved rather than by all of them.
    let mut index = vec![NONE; g.members()];
    let mut members: Vec<u32> = Vec::new();
    // Per (holder, subtopology) it may take a task of, a slot: (holder, subtopology), numbered
    // as they first come. The tasks come in dense order, so a holder's pairs of one
    // subtopology come one after another (`latest`: per holder, its last slot and that slot's
    // subtopology) and the slots come by subtopology. (A map over members × subtopologies
    // could be huge, and a sorted list of the slots cost a search per lookup.)
    let mut slots: Vec<(u32, u32)> = Vec::new();
    let mut latest: Vec<(u32, u32)> = Vec::new();
    // Per unowned stateful task: its holders with room, best first, as (lag, holder, slot), in
    // one flat list.
    let mut start: Vec<u32> = Vec::new();
    let mut tasks: Vec<u32> = Vec::new();
    let mut holders: Vec<(u64, u32, u32)> = Vec::new();
    for &t in unowned {
        // A holder without room neither takes a task nor (having taken none) passes one on.
        let from = holders.len();
        for (r, lag) in g.candidates.with_lags(t) {
            if deficit[r as usize] > 0 {
                let h = &mut index[r as usize];
                if *h == NONE {
                    *h = members.len() as u32;
                    members.push(r);
                    latest.push((NONE, NONE));
                }
                let h = *h;
                let s = g.task_ids[t as usize].subtopology;
                let last = &mut latest[h as usize];
                if last.0 != s {
                    *last = (s, slots.len() as u32);
                    slots.push((h, s));
                }
                holders.push((lag, h, last.1));
            }
        }
        if holders.len() == from {
            continue;
        }
        // Stable: equal lags keep the candidate order.
        holders[from..].sort_by_key(|h| h.0);
        start.push(from as u32);
        tasks.push(t);
    }
    if tasks.is_empty() {
        return;
    }
    start.push(holders.len() as u32);
    let of = |i: usize| &holders[start[i] as usize..start[i + 1] as usize];
    let caught_up = |i: usize| of(i).iter().take_while(|h| h.0 <= acceptable_lag);
    let subtopology = |i: u32| g.task_ids[tasks[i as usize] as usize].subtopology as usize;
    // Per subtopology: its floor `⌊n_s/M⌋` and fair share `⌈n_s/M⌉`, looked up per pair
    // instead of divided out.
    let shares: Vec<(u32, u32)> = (0..g.subtopology_start.len())
        .map(|s| {
            let (n, m) = (g.subtopology_tasks(s).len() as u32, g.members() as u32);
            (n / m, n.div_ceil(m))
        })
        .collect();
    let (floor, fair) = (|s: usize| shares[s].0, |s: usize| shares[s].1);
    let n = members.len();
    let mut room = Room {
        count: vec![0; slots.len()],
        surplus: vec![0; g.subtopology_start.len()],
        // Room beyond the floors, counted up from `-Σ floors` below.
        spare: members
            .iter()
            .map(|&r| i64::from(deficit[r as usize]))
            .collect(),
        deficit: members.iter().map(|&r| deficit[r as usize]).collect(),
        open: n,
    };
    // Per subtopology: its unowned tasks beyond what the members below target still lack of
    // its floor `⌊n_s/M⌋`. A holder already at the floor takes one only from this surplus and
    // from its own room beyond its floors, or dealing could not give every member every
    // floor (skew two). Counted off the members below target and what they own of it (the
    // unowned tasks are in order: a subtopology's are found by two searches), and with them
    // the slots' counts (per holder: the tasks of the subtopology being counted it owns,
    // stamped with the subtopology).
    let lacking = i64::from(below.lacking[0]);
    let mut floors = 0i64;
    let mut owns = vec![(NONE, 0u32); n];
    let mut next_slot = 0;
    for (s, surplus) in room.surplus.iter_mut().enumerate() {
        if !g.subtopology_stateful[s] {
            continue;
        }
        let range = g.subtopology_tasks(s);
        let f = floor(s);
        let open = unowned.partition_point(|&t| t < range.end)
            - unowned.partition_point(|&t| t < range.start);
        let mut have = 0i64;
        for &(o, c) in below.of(s) {
            let within = i64::from(c.min(f));
            have += within;
            let h = index[o as usize];
            if h != NONE {
                room.spare[h as usize] += within;
                owns[h as usize] = (s as u32, c);
            }
        }
        *surplus = open as i64 - (lacking * i64::from(f) - have);
        floors += i64::from(f);
        while let Some(&(h, at)) = slots.get(next_slot)
            && at as usize == s
        {
            let (at, c) = owns[h as usize];
            room.count[next_slot] = if at as usize == s { c } else { 0 };
            next_slot += 1;
        }
    }
    room.spare.iter_mut().for_each(|x| *x -= floors);
    // Whether the holder of slot `k` may take a task of its subtopology: room, below the fair
    // share, and at the floor only from the surplus and its own spare room.
    let allowed = |room: &Room, k: u32| {
        let (h, s) = (slots[k as usize].0 as usize, slots[k as usize].1 as usize);
        let c = room.count[k as usize];
        room.deficit[h] > 0
            && c < fair(s)
            && (c < floor(s) || (room.surplus[s] > 0 && room.spare[h] > 0))
    };
    // The holder of slot `k` takes a task of its subtopology.
    let take = |room: &mut Room, k: u32| {
        let (h, s) = (slots[k as usize].0 as usize, slots[k as usize].1 as usize);
        room.count[k as usize] += 1;
        room.deficit[h] -= 1;
        room.open -= usize::from(room.deficit[h] == 0);
        if room.count[k as usize] > floor(s) {
            room.surplus[s] -= 1;
            room.spare[h] -= 1;
        }
    };
    // Pairs by lag, then task, then candidate order: step 1 takes the caught-up ones, step 3
    // the rest. Collected in (task, candidate) order, so a stable sort by lag orders them, and
    // none is needed when the lags already are (current standbys all have lag 0).
    let mut pairs: Vec<(u64, u32, u32)> = Vec::with_capacity(holders.len());
    for i in 0..tasks.len() {
        pairs.extend(of(i).iter().map(|&(lag, _, k)| (lag, i as u32, k)));
    }
    if !pairs.is_sorted_by_key(|p| p.0) {
        pairs.sort_by_key(|p| p.0);
    }
    let split = pairs.partition_point(|p| p.0 <= acceptable_lag);
    let mut placed = vec![false; tasks.len()];
    // Per holder: the tasks (by index) it took in step 1 or 2, which a path may move on, in
    // one flat list (holder `h`'s at `took_start[h]..`, `took_len[h]` long): a holder never
    // has more than it lacked.
    let mut took_start = Vec::with_capacity(n);
    let mut sum = 0;
    for &d in &room.deficit {
        took_start.push(sum);
        sum += d as usize;
    }
    let mut took = vec![0u32; sum];
    let mut took_len = vec![0usize; n];
    let push = |took: &mut [u32], took_len: &mut [usize], h: u32, i: u32| {
        let len = &mut took_len[h as usize];
        took[took_start[h as usize] + *len] = i;
        *len += 1;
    };
    for &(_, i, k) in &pairs[..split] {
        if !placed[i as usize] && allowed(&room, k) {
            placed[i as usize] = true;
            take(&mut room, k);
            push(&mut took, &mut took_len, slots[k as usize].0, i);
        }
    }
    // Step 2: breadth-first over holders (queued by their slot of the subtopology), along
    // tasks of the one subtopology (so only the last holder's counts change); `via[h]`:
    // (previous holder, task index) on the path. Per slot: whether a search found no room
    // from it.
    let mut dead = vec![false; slots.len()];
    let mut via: Vec<Option<(u32, u32)>> = vec![None; n];
    let mut queue: Vec<u32> = Vec::new();
    for i in 0..tasks.len() as u32 {
        // With no holder left with room, no search can end anywhere.
        if room.open == 0 {
            break;
        }
        if placed[i as usize] {
            continue;
        }
        let s = subtopology(i);
        queue.clear();
        for &(_, h, k) in caught_up(i as usize) {
            if !dead[k as usize] && via[h as usize].is_none() {
                via[h as usize] = Some((NONE, i));
                queue.push(k);
            }
        }
        let mut head = 0;
        let mut found = None;
        while head < queue.len() {
            let k = queue[head];
            head += 1;
            if allowed(&room, k) {
                found = Some(k);
                break;
            }
            let h = slots[k as usize].0;
            let list = took_start[h as usize]..took_start[h as usize] + took_len[h as usize];
            for &j in took[list].iter().filter(|&&j| subtopology(j) == s) {
                for &(_, q, kq) in caught_up(j as usize) {
                    if q != h && !dead[kq as usize] && via[q as usize].is_none() {
                        via[q as usize] = Some((h, j));
                        queue.push(kq);
                    }
                }
            }
        }
        match found {
            // No holder reached can ever take a task of `s` again: room only shrinks.
            None => queue.iter().for_each(|&k| dead[k as usize] = true),
            Some(k) => {
                placed[i as usize] = true;
                take(&mut room, k);
                // Walk back: each holder on the path takes the task that leads to it, and the
                // holder before gives that task up (the counts of `s` stay as they were).
                let mut h = slots[k as usize].0;
                while let Some((from, j)) = via[h as usize] {
                    push(&mut took, &mut took_len, h, j);
                    if from == NONE {
                        break;
                    }
                    let (first, len) = (took_start[from as usize], &mut took_len[from as usize]);
                    let list = &mut took[first..first + *len];
                    let at = list.iter().position(|&x| x == j).expect("on the path");
                    list.swap(at, *len - 1);
                    *len -= 1;
                    h = from;
                }
            }
        }
        queue
            .iter()
            .for_each(|&k| via[slots[k as usize].0 as usize] = None);
    }
    for (h, &r) in members.iter().enumerate() {
        let first = took_start[h];
        for &i in &took[first..first + took_len[h]] {
            owner[tasks[i as usize] as usize] = r;
        }
    }
    for &(_, i, k) in &pairs[split..] {
        if room.open == 0 {
            break;
        }
        if !placed[i as usize] && allowed(&room, k) {
            placed[i as usize] = true;
            take(&mut room, k);
            owner[tasks[i as usize] as usize] = members[slots[k as usize].0 as usize];
        }
    }
    for (&r, &d) in members.iter().zip(&room.deficit) {
        deficit[r as usize] = d;
    }
}

/// What limits the warm-state placement: per slot the tasks owned, per subtopology the
/// surplus beyond the floors, per holder the room beyond the floors it lacks and the room
/// left below target, and how many holders have room left.
struct Room {
    count: Vec<u32>,
    surplus: Vec<i64>,
    spare: Vec<i64>,
    deficit: Vec<u32>,
    open: usize,
}

/// Deals the still unowned tasks of one kind, subtopology by subtopology, round the ring of
/// members below target (consecutive members on different processes). Of the next few
/// members, one still below its floor `⌊n_s/M⌋` of the subtopology is preferred, then one
/// below its fair share `⌈n_s/M⌉`, then the one with the most room to spare: what it still
/// has to take beyond the floors of the subtopologies still to deal. So no member runs out of
/// room before a later subtopology has given it its floor, and the spare room (the later
/// subtopologies' extras) stays spread over as many members as possible.
// Not inlined: measured ~20K instructions fewer per 1000-member call, on all six standard
// inputs, than with it inlined into `assign`.
#[inline(never)]
fn deal(
    g: &Group,
    owner: &mut [u32],
    stateful: bool,
    deficit: Vec<u32>,
    below: &BelowTarget,
    placed: &[u32],
) {
    // Per ring position, everything the dealing reads and updates for its member, side by
    // side (a dealt task used to touch a dozen arrays, each with its bounds check); `seat_of`
    // finds a member's position. Members off the ring are never dealt to, so their counts
    // are not kept.
    let mut seat_of = vec![NONE; g.members()];
    let mut seats: Vec<Seat> = Vec::new();
    for &r in &g.ring {
        if deficit[r as usize] > 0 {
            seat_of[r as usize] = seats.len() as u32;
            seats.push(Seat {
                member: r,
                deficit: deficit[r as usize],
                spare: deficit[r as usize],
                ..Seat::default()
            });
        }
    }
    if seats.is_empty() {
        return;
    }
    let m = g.members() as u32;
    let n = seats.len() as u32;
    for (k, seat) in (0..n).zip(&mut seats) {
        (seat.next, seat.prev) = ((k + 1) % n, (k + n - 1) % n);
    }
    let seat = |o: u32| seat_of.get(o as usize).copied().filter(|&k| k != NONE);
    let mut at = 0u32;
    let dealt: Vec<usize> = (0..g.subtopology_start.len())
        .filter(|&s| {
            g.subtopology_stateful[s] == stateful
                && g.subtopology_tasks(s).any(|t| owner[t as usize] == NONE)
        })
        .collect();
    let floor = |s: usize| g.subtopology_tasks(s).len() as u32 / m;
    // A seat's room to spare is its deficit minus the floors of the subtopologies still to
    // deal that it lacks; kept as `deficit + have` (`have`: how much of those floors it
    // already holds), which differs by a sum that is the same for every member. Per seat:
    // the subtopology whose tasks it holds are being counted, and how many so far (stamped
    // with the subtopology, so no second pass resets it): what it kept and what warm state
    // gave it come separately.
    let mut held = vec![(usize::MAX, 0u32); seats.len()];
    // The seats owning each dealt subtopology's tasks, with how many, in one flat list (the
    // `i`-th's end at `ends[i]`): counted again just before it is dealt (dealing one
    // subtopology changes no other's owners) without a second pass over all its owners. A
    // seat is below target, so it owns what it kept and what warm state gave it: those lists
    // are read instead of every task's owner.
    let (mut holding, mut ends) = (Vec::new(), Vec::with_capacity(dealt.len()));
    for &s in &dealt {
        let f = floor(s);
        let range = g.subtopology_tasks(s);
        let given = &placed[placed.partition_point(|&t| t < range.start)
            ..placed.partition_point(|&t| t < range.end)];
        let owners =
            (below.of(s).iter().copied()).chain(given.iter().map(|&t| (owner[t as usize], 1)));
        for (o, n) in owners {
            if let Some(k) = seat(o) {
                let h = &mut held[k as usize];
                if h.0 != s {
                    *h = (s, 0);
                }
                seats[k as usize].spare += within(h.1, n, f);
                h.1 += n;
                holding.push((k, n));
            }
        }
        ends.push(holding.len());
    }
    // A member's preference as a class, the larger the better: below the floor (so below the
    // fair share too), then below the fair share, then room to spare (`width` spare values
    // per step; sized once: the room to spare only shrinks from here on).
    let width = seats.iter().map(|seat| seat.spare).max().unwrap_or(0) + 1;
    let class = |count: u32, floor: u32, fair: u32, spare: u32| {
        (u32::from(count < floor) + u32::from(count < fair)) * width + spare
    };
    // How many ring members each class has: the best class present is then known exactly,
    // and a task goes to the first member of it round the ring.
    let mut members_in = vec![0u32; 3 * width as usize];
    for (i, &s) in dealt.iter().enumerate() {
        let range = g.subtopology_tasks(s);
        let (floor, fair) = (floor(s), (range.len() as u32).div_ceil(m));
        let owners = range.start as usize..range.end as usize;
        let from = if i == 0 { 0 } else { ends[i - 1] };
        for &(k, n) in &holding[from..ends[i]] {
            let seat = &mut seats[k as usize];
            seat.spare -= within(seat.count, n, floor);
            seat.count += n;
        }
        // Every ring member's class, counted. Over the seats in order rather than round the
        // ring: the same members (a seat leaves the ring exactly when its deficit reaches 0)
        // without a pointer to chase; and a run of equal classes at a time: neighbours mostly
        // share one, and a counter bumped once per seat was a chain of dependent updates of
        // one memory word, ~4 % of a native cold start's time.
        members_in.fill(0);
        let mut run = (0, 0);
        for seat in seats.iter_mut().filter(|seat| seat.deficit > 0) {
            seat.key = class(seat.count, floor, fair, seat.spare);
            if seat.key != run.0 {
                members_in[run.0 as usize] += run.1;
                run = (seat.key, 0);
            }
            run.1 += 1;
        }
        members_in[run.0 as usize] += run.1;
        // The best class present, found as a task needs it: classes only fall as members are
        // dealt to, and while a task is left a ring member is (no search after the last).
        let mut top = members_in.len() - 1;
        // Over the subtopology's owners as a slice: no bounds check per task.
        for o in &mut owner[owners.clone()] {
            if *o != NONE {
                continue;
            }
            while members_in[top] == 0 {
                top -= 1;
            }
            // Round the ring from `at` to the first member of the best class, so the spread
            // never pays for a member passed over. Usually the next member or one of the next
            // few; late in a large cold start the few members with room to spare can be far
            // apart.
            let mut pos = at;
            while seats[pos as usize].key != top as u32 {
                pos = seats[pos as usize].next;
            }
            let seat = &mut seats[pos as usize];
            *o = seat.member;
            seat.count += 1;
            seat.deficit -= 1;
            seat.spare -= 1;
            members_in[top] -= 1;
            at = seat.next;
            if seat.deficit > 0 {
                seat.key = class(seat.count, floor, fair, seat.spare);
                members_in[seat.key as usize] += 1;
            } else {
                // Unlink `pos`; the ring empties exactly when the last task is dealt.
                let (prev, next) = (seat.prev, seat.next);
                seats[prev as usize].next = next;
                seats[next as usize].prev = prev;
            }
        }
        // Every task of `s` has an owner now, and only owners have counts: clear whichever is
        // fewer, the seats or the tasks.
        if range.len() >= seats.len() {
            seats.iter_mut().for_each(|seat| seat.count = 0);
        } else {
            for &o in &owner[owners] {
                if let Some(k) = seat(o) {
                    seats[k as usize].count = 0;
                }
            }
        }
    }
}

/// How many of `n` tasks more than `count` fall within `floor`.
fn within(count: u32, n: u32, floor: u32) -> u32 {
    (count + n).min(floor) - count.min(floor)
}

/// A ring position while dealing: its member, the member's class (`key`), its neighbours
/// still on the ring, and its counts: tasks of the subtopology being dealt, room to spare
/// (see `deal`) and tasks still to take.
#[derive(Default)]
struct Seat {
    member: u32,
    key: u32,
    next: u32,
    prev: u32,
    count: u32,
    spare: u32,
    deficit: u32,
}

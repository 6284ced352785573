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
        let counts = &mut prev[kind];
        for (t, &o) in range
            .clone()
            .zip(&owner[range.start as usize..range.end as usize])
        {
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
        }
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
    let kept = Kept::new(g, &owner, &prev, &deficits);
    // A kind without tasks has nothing to release, place or deal (its passes over the members
    // alone cost ~65K wasm instructions at 1000 members).
    for kind in (0..2).filter(|&k| total[k] > 0) {
        let stateful = kind == 0;
        let mut released = Vec::new();
        release(
            g,
            &mut owner,
            stateful,
            &prev[kind],
            &targets[kind],
            &mut released,
        );
        // What the release freed joins the unowned stateful tasks (only when some member is
        // above target).
        if stateful && find_orphans && !released.is_empty() {
            unowned.extend(released);
            unowned.sort_unstable();
        }
        let open: &[u32] = if stateful { &unowned } else { &[] };
        let mut deficit = std::mem::take(&mut deficits[kind]);
        // `open`: (no member above target takes a task, so none goes back to its previous
        // owner) exactly the tasks the exchange may trade, and those of them warm state placed
        // are what dealing counts beyond the kept tasks.
        if stateful {
            to_warm_state(g, &mut owner, open, &kept, &mut deficit, acceptable_lag);
        }
        deal(g, &mut owner, stateful, deficit, &kept, open);
        if stateful {
            exchange_to_caught_up(g, &mut owner, open, acceptable_lag);
        }
    }
    owner
}

/// Per subtopology, the owners of its tasks that are below their target of the task's kind
/// (so they keep all they held), one per task, in task order: what the warm-state placement
/// and dealing count of the members with room, found in one pass over the tasks instead of a
/// pass over them each.
struct Kept {
    owners: Vec<u32>,
    /// Per subtopology: where its owners end in `owners`.
    ends: Vec<u32>,
}

impl Kept {
    /// Collects the owners in `owner` with a `deficit` of the task's kind (`prev`: what they
    /// held).
    fn new(g: &Group, owner: &[u32], prev: &[Vec<u32>; 2], deficit: &[Vec<u32>; 2]) -> Self {
        // Sized exactly (what those members held): one allocation, and no pass when they held
        // nothing.
        let len: u32 = (0..2)
            .map(|k| {
                (prev[k].iter().zip(&deficit[k]))
                    .filter(|&(_, &d)| d > 0)
                    .map(|(&p, _)| p)
                    .sum::<u32>()
            })
            .sum();
        let mut owners = Vec::with_capacity(len as usize);
        let mut ends = Vec::with_capacity(g.subtopology_start.len());
        for s in 0..g.subtopology_start.len() {
            let deficit = &deficit[usize::from(!g.subtopology_stateful[s])];
            let range = g.subtopology_tasks(s);
            if len > 0 {
                owners.extend(
                    owner[range.start as usize..range.end as usize]
                        .iter()
                        .copied()
                        // [`NONE`] is past every member, so has no deficit.
                        .filter(|&o| deficit.get(o as usize).is_some_and(|&d| d > 0)),
                );
            }
            ends.push(owners.len() as u32);
        }
        Self { owners, ends }
    }

    /// The owners below target of subtopology `s`'s tasks.
    fn of(&self, s: usize) -> &[u32] {
        let from = if s == 0 { 0 } else { self.ends[s - 1] as usize };
        &self.owners[from..self.ends[s] as usize]
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
    // Per member: which subtopologies its list holds, as a filter (bit `s mod 64`), so that a
    // search passes over a partner without a task of the subtopology at a glance. A trade swaps
    // two tasks of one subtopology, so the filters stay true.
    let bit = |t: u32| 1u64 << (g.task_ids[t as usize].subtopology % 64);
    let mut kinds = vec![0u64; g.members()];
    let mut took = vec![0u32; moved_tasks.len()];
    let mut end = start.clone();
    for &t in moved_tasks {
        let o = owner[t as usize] as usize;
        took[end[o] as usize] = t;
        end[o] += 1;
        kinds[o] |= bit(t);
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
    // stamped with the trade's number) after its failure (kept with the task in `work`).
    // Later rounds then cost a look at each task's few partners instead of a scan of their
    // lists.
    let mut trades = 0u32;
    let mut changed = vec![0u32; g.members()];
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
            if since != NONE && !partners(t).any(|c| changed[c as usize] > since) {
                continue;
            }
            let s = g.task_ids[t as usize].subtopology;
            let kind = bit(t);
            let trade = partners(t).find_map(|c| {
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
            });
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
            changed[c as usize] = trades;
            changed[o as usize] = trades;
            // Its owner changed: looked at again, and searched afresh.
            if let Ok(j) = work.binary_search_by_key(&u, |w| w.0) {
                work[j].2 = NONE;
            }
            next.push((u, NONE, NONE));
        }
        if next.is_empty() {
            return;
        }
        // `work` is in task order and `next` holds the few tasks traded away: merging them
        // costs less than sorting the two together.
        next.sort_unstable();
        let mut merged: Vec<(u32, u32, u32)> = Vec::with_capacity(work.len() + next.len());
        let (mut a, mut b) = (work.iter().peekable(), next.iter().peekable());
        while let Some(&(t, found, since)) = match (a.peek(), b.peek()) {
            (Some(&&x), Some(&&y)) if y.0 < x.0 => b.next(),
            (Some(_), _) => a.next(),
            (None, _) => b.next(),
        } {
            let o = owner[t as usize];
            if merged.last().is_none_or(|&(last, _, _)| last != t)
                && (o == found || (moved(owner, t) && away(owner, t)))
            {
                merged.push((t, o, since));
            }
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
    /// The first `f` gives of a partner, in order.
    fn find_map<T>(self, mut f: impl FnMut(u32) -> Option<T>) -> Option<T> {
        for (c, lag) in self.holders {
            if lag <= self.acceptable_lag {
                for &r in self.g.members_of(self.g.process[c as usize]) {
                    if let Some(x) = f(r) {
                        return Some(x);
                    }
                }
            }
        }
        None
    }

    /// Whether `f` holds for a partner.
    fn any(self, f: impl Fn(u32) -> bool) -> bool {
        self.find_map(|r| f(r).then_some(())).is_some()
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
/// The tasks given up are added to `released`.
fn release(
    g: &Group,
    owner: &mut [u32],
    stateful: bool,
    prev: &[u32],
    target: &[u32],
    released: &mut Vec<u32>,
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
///    no room is not searched again, which bounds the work to about one pass over the pairs.
/// 3. The rest go to lagging holders, the least lag first, while they have room.
///
/// `unowned`: the stateful tasks without an owner, in order; `kept`: the members below target
/// that own each task.
// Not inlined: natively ~20K instructions fewer per 1000-member churn call (and 16K on
// previous) than inlined into `assign`; the same fuel.
#[inline(never)]
fn to_warm_state(
    g: &Group,
    owner: &mut [u32],
    unowned: &[u32],
    kept: &Kept,
    deficit: &mut [u32],
    acceptable_lag: u64,
) {
    if g.candidates.is_empty() {
        return;
    }
    // Per unowned stateful task: its holders with room, with their lags, best first, in one
    // flat list.
    let mut start: Vec<u32> = Vec::new();
    let mut tasks: Vec<u32> = Vec::new();
    let mut holders: Vec<(u64, u32)> = Vec::new();
    for &t in unowned.iter() {
        // A holder without room neither takes a task nor (having taken none) passes one on.
        let from = holders.len();
        holders.extend(
            g.candidates
                .with_lags(t)
                .filter(|&(r, _)| deficit[r as usize] > 0)
                .map(|(r, lag)| (lag, r)),
        );
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
    // Per (holder, subtopology) it may take a task of: the tasks of it the holder owns so far,
    // in a sorted flat list (a map over members × subtopologies could be huge). Sorted by a
    // counting sort by holder: the tasks come in dense order, so each holder's subtopologies
    // arrive in order and its repeats side by side (a comparison sort of the pairs was most
    // of this placement's sorting). Per member: where its slots start in `keys`, so a lookup
    // scans the member's few subtopologies instead of searching all the slots (a binary
    // search there cost 0.25M instructions more on the 1000-member churn input); counted over
    // every pair to place them, then again over the slots left once repeats are dropped.
    let mut key_start = vec![0u32; g.members() + 1];
    for &(_, r) in &holders {
        key_start[r as usize + 1] += 1;
    }
    for r in 0..g.members() {
        key_start[r + 1] += key_start[r];
    }
    let mut keys = vec![(0u32, 0u32); holders.len()];
    for i in 0..tasks.len() {
        let s = subtopology(i as u32) as u32;
        for &(_, r) in of(i) {
            let at = &mut key_start[r as usize];
            keys[*at as usize] = (r, s);
            *at += 1;
        }
    }
    keys.dedup();
    key_start.fill(0);
    for &(r, _) in &keys {
        key_start[r as usize + 1] += 1;
    }
    for r in 0..g.members() {
        key_start[r + 1] += key_start[r];
    }
    let slot = |r: u32, s: usize| {
        let from = key_start[r as usize] as usize;
        keys[from..key_start[r as usize + 1] as usize]
            .iter()
            .position(|&(_, k)| k == s as u32)
            .map(|i| from + i)
    };
    // Per subtopology: its unowned tasks beyond what the members below target still lack of
    // its floor `⌊n_s/M⌋`. A holder already at the floor takes one only from this surplus and
    // from its own room beyond its floors, or dealing could not give every member every
    // floor (skew two).
    let mut surplus = vec![0i64; g.subtopology_start.len()];
    for &t in unowned {
        surplus[g.task_ids[t as usize].subtopology as usize] += 1;
    }
    let mut count = vec![0u32; keys.len()];
    // The slots by subtopology, to read their counts off `held` as each one is done.
    // A counting sort too: the order among one subtopology's slots does not matter.
    let mut sub_start = vec![0usize; g.subtopology_start.len() + 1];
    for &(_, s) in &keys {
        sub_start[s as usize + 1] += 1;
    }
    for s in 0..g.subtopology_start.len() {
        sub_start[s + 1] += sub_start[s];
    }
    let mut by_subtopology = vec![0usize; keys.len()];
    for (k, &(_, s)) in keys.iter().enumerate() {
        let at = &mut sub_start[s as usize];
        by_subtopology[*at] = k;
        *at += 1;
    }
    let mut next_slot = 0;
    // Per member: the subtopology whose tasks it holds are being counted, and how many so far
    // (stamped with the subtopology, so no pass over the tasks resets it).
    let mut held = vec![(usize::MAX, 0u32); g.members()];
    // Per member: its room beyond the floors it still lacks, counted up from `-Σ floors`.
    let mut spare: Vec<i64> = deficit.iter().map(|&d| i64::from(d)).collect();
    let lacking = deficit.iter().filter(|&&d| d > 0).count() as i64;
    let mut floors = 0i64;
    // One pass over the tasks the members below target own counts the surplus, and with it
    // the slots: a pass over every task with a slot lookup per task was this placement's
    // largest cost at 1000 members, and a pass over every task's owner still cost 0.8 M guest
    // instructions per sandboxed 1000-member churn call.
    for (s, surplus) in surplus.iter_mut().enumerate() {
        if !g.subtopology_stateful[s] {
            continue;
        }
        let f = floor(s);
        let mut have = 0i64;
        // All below target: the members with room, none of which has released a task.
        for &o in kept.of(s) {
            let h = &mut held[o as usize];
            if h.0 != s {
                *h = (s, 0);
            }
            h.1 += 1;
            let within = h.1 <= f;
            have += i64::from(within);
            spare[o as usize] += i64::from(within);
        }
        *surplus -= lacking * i64::from(f) - have;
        floors += i64::from(f);
        // Every slot's member is below target (only holders with room have one), so `held`
        // has just counted the tasks of `s` it owns.
        while let Some(&k) = by_subtopology.get(next_slot)
            && keys[k].1 as usize == s
        {
            let (r, _) = keys[k];
            let (at, n) = held[r as usize];
            count[k] = if at == s { n } else { 0 };
            next_slot += 1;
        }
    }
    spare.iter_mut().for_each(|x| *x -= floors);
    let mut room = Room {
        count,
        surplus,
        spare,
        deficit,
    };
    // Whether `r` may take task `i`: room, below the fair share, and at the floor only from
    // the surplus and its own spare room. If so, its slot for the task's subtopology (every
    // member looked at holds a task of it with room, so has one), for `take`; the room is
    // looked at first, which spares the slot's search for the many holders already full.
    let allowed = |room: &Room<'_>, r: u32, i: u32| {
        if room.deficit[r as usize] == 0 {
            return None;
        }
        let s = subtopology(i);
        let k = slot(r, s)?;
        let c = room.count[k];
        (c < fair(s) && (c < floor(s) || (room.surplus[s] > 0 && room.spare[r as usize] > 0)))
            .then_some(k)
    };
    // `r` takes the unowned task `i`, counted in its slot `k`.
    let take = |room: &mut Room<'_>, r: u32, i: u32, k: usize| {
        let s = subtopology(i);
        room.count[k] += 1;
        room.deficit[r as usize] -= 1;
        if room.count[k] > floor(s) {
            room.surplus[s] -= 1;
            room.spare[r as usize] -= 1;
        }
    };
    // Pairs by (lag, task, candidate order): step 1 takes the caught-up ones, step 3 the rest.
    // Collected in plain loops: a `flat_map` compiled to a call per pair in wasm.
    let mut pairs: Vec<(u64, u32, u32, u32)> = Vec::with_capacity(holders.len());
    for i in 0..tasks.len() {
        for (k, &(lag, r)) in (0u32..).zip(of(i)) {
            pairs.push((lag, i as u32, k, r));
        }
    }
    pairs.sort_unstable();
    let split = pairs.partition_point(|p| p.0 <= acceptable_lag);
    let mut placed = vec![false; tasks.len()];
    // Per member: the tasks (by index) it took in step 1 or 2, which a path may move on.
    let mut took: Vec<Vec<u32>> = vec![Vec::new(); g.members()];
    for &(_, i, _, r) in &pairs[..split] {
        if !placed[i as usize]
            && let Some(k) = allowed(&room, r, i)
        {
            placed[i as usize] = true;
            take(&mut room, r, i, k);
            took[r as usize].push(i);
        }
    }
    // Step 2: breadth-first over members, along tasks of the one subtopology (so only the
    // last member's counts change); `via[r]`: (previous member, task index) on the path.
    // Per (holder, subtopology) slot: whether a search found no room from it.
    let mut dead = vec![false; keys.len()];
    let is_dead = |dead: &[bool], r: u32, s: usize| slot(r, s).is_some_and(|k| dead[k]);
    let mut via: Vec<Option<(u32, u32)>> = vec![None; g.members()];
    let mut queue = Vec::new();
    for i in 0..tasks.len() as u32 {
        if placed[i as usize] {
            continue;
        }
        let s = subtopology(i);
        queue.clear();
        for &(_, r) in caught_up(i as usize) {
            if !is_dead(&dead, r, s) && via[r as usize].is_none() {
                via[r as usize] = Some((NONE, i));
                queue.push(r);
            }
        }
        let mut head = 0;
        let mut found = None;
        while head < queue.len() {
            let r = queue[head];
            head += 1;
            if let Some(k) = allowed(&room, r, i) {
                found = Some((r, k));
                break;
            }
            for &j in took[r as usize].iter().filter(|&&j| subtopology(j) == s) {
                for &(_, q) in caught_up(j as usize) {
                    if q != r && !is_dead(&dead, q, s) && via[q as usize].is_none() {
                        via[q as usize] = Some((r, j));
                        queue.push(q);
                    }
                }
            }
        }
        match found {
            // No member reached can ever take a task of `s` again: room only shrinks.
            None => {
                for &r in &queue {
                    if let Some(k) = slot(r, s) {
                        dead[k] = true;
                    }
                }
            }
            Some((mut r, k)) => {
                placed[i as usize] = true;
                take(&mut room, r, i, k);
                // Walk back: each member on the path takes the task that leads to it, and the
                // member before gives that task up (the counts of `s` stay as they were).
                while let Some((from, j)) = via[r as usize] {
                    took[r as usize].push(j);
                    if from == NONE {
                        break;
                    }
                    let list = &mut took[from as usize];
                    let at = list.iter().position(|&x| x == j).expect("on the path");
                    list.swap_remove(at);
                    r = from;
                }
            }
        }
        queue.iter().for_each(|&r| via[r as usize] = None);
    }
    for (r, took) in (0u32..).zip(&took) {
        for &i in took {
            owner[tasks[i as usize] as usize] = r;
        }
    }
    for &(_, i, _, r) in &pairs[split..] {
        if !placed[i as usize]
            && let Some(k) = allowed(&room, r, i)
        {
            placed[i as usize] = true;
            take(&mut room, r, i, k);
            owner[tasks[i as usize] as usize] = r;
        }
    }
}

/// What limits the warm-state placement: per (holder, subtopology) slot the tasks owned, per
/// subtopology the surplus beyond the floors, per member the room beyond the floors it lacks
/// and the room left below target.
struct Room<'a> {
    count: Vec<u32>,
    surplus: Vec<i64>,
    spare: Vec<i64>,
    deficit: &'a mut [u32],
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
    kept: &Kept,
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
    // with the subtopology, so no second pass resets it).
    let mut held = vec![(usize::MAX, 0u32); seats.len()];
    // The seats owning each dealt subtopology's tasks, in one flat list (the `i`-th's end at
    // `ends[i]`): counted again just before it is dealt (dealing one subtopology changes no
    // other's owners) without a second pass over all its owners. A seat is below target, so
    // it owns what it kept and what warm state gave it: those lists are read instead of
    // every task's owner.
    let (mut holding, mut ends) = (Vec::new(), Vec::with_capacity(dealt.len()));
    for &s in &dealt {
        let f = floor(s);
        let range = g.subtopology_tasks(s);
        let given = &placed[placed.partition_point(|&t| t < range.start)
            ..placed.partition_point(|&t| t < range.end)];
        let owners = kept
            .of(s)
            .iter()
            .chain(given.iter().map(|&t| &owner[t as usize]));
        for &o in owners {
            if let Some(k) = seat(o) {
                let h = &mut held[k as usize];
                if h.0 != s {
                    *h = (s, 0);
                }
                h.1 += 1;
                seats[k as usize].spare += u32::from(h.1 <= f);
                holding.push(k);
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
        for &k in &holding[from..ends[i]] {
            let seat = &mut seats[k as usize];
            seat.count += 1;
            if seat.count <= floor {
                seat.spare -= 1;
            }
        }
        members_in.fill(0);
        let mut look = at;
        loop {
            let seat = &mut seats[look as usize];
            seat.key = class(seat.count, floor, fair, seat.spare);
            members_in[seat.key as usize] += 1;
            look = seat.next;
            if look == at {
                break;
            }
        }
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

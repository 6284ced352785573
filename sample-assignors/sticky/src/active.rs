//! Active tasks: per-member targets, then keep, release, hand to warm state, deal the rest.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::group::{Group, NONE};

/// How many members round the ring dealing compares for each task. Bounds the cost per task;
/// a miss only costs spread, never balance.
const LOOKAHEAD: usize = 32;

/// The active owner of every dense task.
pub(crate) fn assign(g: &Group) -> Vec<u32> {
    let m = g.members();
    let mut owner = g.prev_owner.clone();
    let mut prev = [vec![0u32; m], vec![0u32; m]]; // [stateful, stateless] previous counts
    let mut total = [0u32; 2];
    for t in 0..g.tasks() as u32 {
        let kind = usize::from(!g.is_stateful(t));
        total[kind] += 1;
        if owner[t as usize] != NONE {
            prev[kind][owner[t as usize] as usize] += 1;
        }
    }
    let targets = targets(m, total, &prev);
    for kind in 0..2 {
        let stateful = kind == 0;
        release(g, &mut owner, stateful, &prev[kind], &targets[kind]);
        let mut deficit: Vec<u32> = (0..m)
            .map(|r| targets[kind][r] - prev[kind][r].min(targets[kind][r]))
            .collect();
        if stateful {
            to_warm_state(g, &mut owner, &mut deficit);
        }
        deal(g, &mut owner, stateful, deficit);
    }
    owner
}

/// Per kind (stateful, stateless), each member's target active count.
///
/// Each kind gives every member `⌊n/M⌋` and `n mod M` members one more. Which members get the
/// extra one is chosen so that (a) a member's stateful plus stateless count stays within one
/// of every other member's, and (b) as many members as possible keep a task they would
/// otherwise give up: an extra goes first to a member that held more than `⌊n/M⌋` of the kind,
/// the one that held the most first. Movement is then the fewest any balanced assignment needs.
fn targets(m: usize, total: [u32; 2], prev: &[Vec<u32>; 2]) -> [Vec<u32>; 2] {
    let q = total.map(|n| n / m as u32);
    let extra = total.map(|n| n as usize % m);
    let gains: [Vec<bool>; 2] = [0, 1].map(|k| prev[k].iter().map(|&p| p > q[k]).collect());
    // Preference for an extra: gains first, then the most held, then rank.
    let order: [Vec<u32>; 2] = [0, 1].map(|k| {
        let mut o: Vec<u32> = (0..m as u32).collect();
        o.sort_by_key(|&r| {
            (
                Reverse(gains[k][r as usize]),
                Reverse(prev[k][r as usize]),
                r,
            )
        });
        o
    });
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

/// Members above their target give up their excess, from the subtopologies where they hold
/// the most beyond the fair share `⌈n_s/M⌉`; ties go to the subtopology released least so far,
/// so that what is handed out covers the subtopologies evenly and what is kept stays spread.
fn release(g: &Group, owner: &mut [u32], stateful: bool, prev: &[u32], target: &[u32]) {
    let m = g.members();
    let mut held: Vec<Vec<u32>> = vec![Vec::new(); m];
    for t in 0..g.tasks() as u32 {
        let o = owner[t as usize];
        if o != NONE && g.is_stateful(t) == stateful && prev[o as usize] > target[o as usize] {
            held[o as usize].push(t);
        }
    }
    let mut released = vec![0u32; g.subtopology_start.len()];
    for (r, tasks) in held.iter().enumerate() {
        let mut excess = prev[r].saturating_sub(target[r]);
        if excess == 0 {
            continue;
        }
        // Runs of one subtopology: (subtopology, first index in `tasks`, remaining length).
        let mut runs: Vec<(usize, usize, usize)> = Vec::new();
        for (i, &t) in tasks.iter().enumerate() {
            let s = g.task_ids[t as usize].subtopology as usize;
            match runs.last_mut() {
                Some(run) if run.0 == s => run.2 += 1,
                _ => runs.push((s, i, 1)),
            }
        }
        let key = |s: usize, len: usize, released: &[u32]| {
            let n = g.subtopology_tasks(s).len();
            (
                len as i64 - n.div_ceil(m) as i64,
                Reverse(released[s]),
                Reverse(s),
            )
        };
        let mut heap: BinaryHeap<_> = runs
            .iter()
            .enumerate()
            .map(|(i, &(s, _, len))| (key(s, len, &released), i))
            .collect();
        while excess > 0 {
            let Some((_, i)) = heap.pop() else { break };
            let (s, first, len) = &mut runs[i];
            *len -= 1;
            owner[tasks[*first + *len] as usize] = NONE;
            released[*s] += 1;
            excess -= 1;
            if *len > 0 {
                heap.push((key(*s, *len, &released), i));
            }
        }
    }
}

/// Unowned stateful tasks go to a member with local state for them (current standby or
/// warm-up first, then reported offsets, highest first) while that member is below target.
fn to_warm_state(g: &Group, owner: &mut [u32], deficit: &mut [u32]) {
    for t in 0..g.tasks() as u32 {
        if owner[t as usize] != NONE || !g.is_stateful(t) {
            continue;
        }
        if let Some(&c) = g
            .candidates
            .of(t)
            .iter()
            .find(|&&c| deficit[c as usize] > 0)
        {
            owner[t as usize] = c;
            deficit[c as usize] -= 1;
        }
    }
}

/// Deals the still unowned tasks of one kind, subtopology by subtopology, round the ring of
/// members below target (consecutive members on different processes). Of the next few
/// members, one still below its fair share `⌈n_s/M⌉` of the subtopology is preferred, then the
/// one with the most still to take, so that no member runs out of room early and leaves a later
/// subtopology to fewer members.
fn deal(g: &Group, owner: &mut [u32], stateful: bool, mut deficit: Vec<u32>) {
    let ring: Vec<u32> = g
        .ring
        .iter()
        .copied()
        .filter(|&r| deficit[r as usize] > 0)
        .collect();
    if ring.is_empty() {
        return;
    }
    let n = ring.len();
    let mut next: Vec<usize> = (1..=n).map(|i| i % n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| (i + n - 1) % n).collect();
    let mut at = 0usize;
    let mut count = vec![0u32; g.members()];
    // How many members still need exactly `d`, and the largest such `d`: a member below its
    // fair share with that much to take is as good as any, so the search can stop there.
    let mut needing = vec![0u32; deficit.iter().max().map_or(0, |&d| d as usize + 1)];
    for &r in &ring {
        needing[deficit[r as usize] as usize] += 1;
    }
    let mut most = needing.len() - 1;
    for s in 0..g.subtopology_start.len() {
        let range = g.subtopology_tasks(s);
        if g.subtopology_stateful[s] != stateful || range.clone().all(|t| owner[t as usize] != NONE)
        {
            continue;
        }
        let fair = (range.len() as u32).div_ceil(g.members() as u32);
        for t in range.clone() {
            if owner[t as usize] != NONE {
                count[owner[t as usize] as usize] += 1;
            }
        }
        for t in range.clone() {
            if owner[t as usize] != NONE {
                continue;
            }
            // Below its fair share of the subtopology first, then the most still to take.
            let (mut pos, mut best) = (at, None);
            let mut look = at;
            for _ in 0..LOOKAHEAD.min(n) {
                let r = ring[look] as usize;
                let rank = (count[r] < fair, deficit[r]);
                if best.is_none_or(|b| rank > b) {
                    (pos, best) = (look, Some(rank));
                    if rank == (true, most as u32) {
                        break;
                    }
                }
                look = next[look];
                if look == at {
                    break;
                }
            }
            let r = ring[pos] as usize;
            owner[t as usize] = r as u32;
            count[r] += 1;
            needing[deficit[r] as usize] -= 1;
            deficit[r] -= 1;
            needing[deficit[r] as usize] += 1;
            while most > 0 && needing[most] == 0 {
                most -= 1;
            }
            at = next[pos];
            if deficit[r] == 0 {
                // Unlink `pos`; the ring empties exactly when the last task is dealt.
                next[prev[pos]] = next[pos];
                prev[next[pos]] = prev[pos];
            }
        }
        for t in range {
            count[owner[t as usize] as usize] = 0;
        }
    }
}

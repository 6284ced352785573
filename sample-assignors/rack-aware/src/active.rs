//! Actives: the sticky owners re-placed by a rack-level min-cost flow, then dealt to members.

use std::collections::VecDeque;

use crate::flow::MinCostFlow;
use crate::racks::Racks;
use crate::{RackAwareAssignor, Strategy};

/// What the optimisation works from, all indexed densely.
pub(crate) struct Input<'a> {
    /// The rack layout.
    pub racks: &'a Racks,
    /// Per dense task: the member (input index) the sticky assignment made its owner.
    pub owner: &'a [u32],
    /// Per subtopology index: (first dense task, task count, stateful).
    pub subtopologies: &'a [(u32, u32, bool)],
    /// Per rack: its members, ordered by member id.
    pub members_by_rack: &'a [Vec<u32>],
    /// Every member, ordered by member id.
    pub members_by_id: &'a [u32],
}

/// The new owner of every dense task. Stateful and stateless tasks are optimised apart, each
/// member keeping exactly as many of each kind as the sticky assignment gave it.
pub(crate) fn optimise(input: &Input<'_>, config: &RackAwareAssignor) -> Vec<u32> {
    let members = input.racks.member_rack.len();
    let mut owner = input.owner.to_vec();
    for stateful in [true, false] {
        let subs: Vec<(u32, u32)> = input
            .subtopologies
            .iter()
            .filter(|s| s.2 == stateful && s.1 > 0)
            .map(|&(start, n, _)| (start, n))
            .collect();
        let mut cap = vec![0u32; members];
        for &(start, n) in &subs {
            for t in start..start + n {
                cap[input.owner[t as usize] as usize] += 1;
            }
        }
        let per_subtopology = match config.strategy {
            Strategy::BalanceSubtopology => subtopology_caps(input, &subs, &cap),
            _ => None,
        };
        match per_subtopology {
            Some(caps) => {
                for (&(start, n), cap) in subs.iter().zip(&caps) {
                    let tasks: Vec<u32> = (start..start + n).collect();
                    solve(input, config, &tasks, cap, &mut owner);
                }
            }
            None => {
                let tasks: Vec<u32> = subs.iter().flat_map(|&(s, n)| s..s + n).collect();
                solve(input, config, &tasks, &cap, &mut owner);
            }
        }
    }
    owner
}

/// Per subtopology, how many of its tasks each member takes: `⌊n/M⌋` or `⌈n/M⌉` (skew at
/// most one), summing per member to `cap`. The `n mod M` extras of each subtopology go to the
/// members with the most extras still owed, preferring among those the members that held more
/// than `⌊n/M⌋` of it; serving the largest remaining demand first always completes (the
/// greedy proof of the Gale–Ryser condition), since owed extras differ by at most one.
/// `None` if `cap` is not balanced enough to allow it.
fn subtopology_caps(input: &Input<'_>, subs: &[(u32, u32)], cap: &[u32]) -> Option<Vec<Vec<u32>>> {
    let m = cap.len() as u32;
    let floors: u32 = subs.iter().map(|&(_, n)| n / m).sum();
    let mut owed: Vec<u32> = cap
        .iter()
        .map(|&c| c.checked_sub(floors))
        .collect::<Option<_>>()?;
    let mut held = vec![0u32; cap.len()];
    let mut order = input.members_by_id.to_vec();
    let mut caps = Vec::with_capacity(subs.len());
    for &(start, n) in subs {
        let (floor, extras) = (n / m, (n % m) as usize);
        let mut row = vec![floor; cap.len()];
        if extras > 0 {
            held.fill(0);
            for t in start..start + n {
                held[input.owner[t as usize] as usize] += 1;
            }
            order.sort_by_key(|&i| {
                (
                    std::cmp::Reverse(owed[i as usize]),
                    held[i as usize] <= floor,
                )
            });
            for &i in &order[..extras] {
                owed[i as usize] = owed[i as usize].checked_sub(1)?;
                row[i as usize] += 1;
            }
        }
        caps.push(row);
    }
    owed.iter().all(|&o| o == 0).then_some(caps)
}

/// Re-places `tasks` so that member `i` ends with `cap[i]` of them, at minimum cost.
///
/// The flow runs on racks, not members: source → class of interchangeable tasks (same home
/// rack, same cross-rack partitions per rack) → rack → sink, with rack capacity the sum of its
/// members' capacities. Each task then keeps its sticky owner if it stays in that owner's rack
/// (room is certain: the owner's capacity counts its own tasks), and the tasks entering a rack
/// are dealt round its members with room.
fn solve(
    input: &Input<'_>,
    config: &RackAwareAssignor,
    tasks: &[u32],
    cap: &[u32],
    owner: &mut [u32],
) {
    let racks = input.racks;
    let r = racks.count;
    let home = |t: u32| racks.member_rack[input.owner[t as usize] as usize];
    // Keys computed once, not at every comparison: (home rack, profile, task).
    let mut keyed: Vec<(u32, u32, u32)> = tasks
        .iter()
        .map(|&t| (home(t), racks.profile[t as usize], t))
        .collect();
    keyed.sort_unstable();
    let mut classes: Vec<(usize, usize)> = Vec::new();
    for (i, &(h, p, _)) in keyed.iter().enumerate() {
        match classes.last_mut() {
            Some((start, end)) if (keyed[*start].0, keyed[*start].1) == (h, p) => *end = i + 1,
            _ => classes.push((i, i + 1)),
        }
    }
    let sorted: Vec<u32> = keyed.into_iter().map(|(_, _, t)| t).collect();

    // Costs are scaled so that, among assignments of equal cost, the one moving the fewest
    // tasks out of their rack wins: ties never move anything, and an optimal input is kept.
    let scale = owner.len() as i64 + 1;
    let (source, sink, rack_node) = (0, 1, 2 + classes.len());
    let mut graph = MinCostFlow::new(2 + classes.len() + r);
    let mut edges = Vec::with_capacity(classes.len() * r);
    for (c, &(start, end)) in classes.iter().enumerate() {
        let size = (end - start) as i64;
        let (t, h) = (sorted[start], home(sorted[start]));
        graph.add_edge(source, 2 + c, size, 0);
        for rack in 0..r as u32 {
            let moved = i64::from(rack != h);
            let cost = config.traffic_cost as i64 * i64::from(racks.miss(t as usize, rack))
                + config.non_overlap_cost as i64 * moved;
            edges.push(graph.add_edge(
                2 + c,
                rack_node + rack as usize,
                size,
                cost * scale + moved,
            ));
        }
    }
    let mut room = vec![0i64; r];
    for (&c, &rack) in cap.iter().zip(&racks.member_rack) {
        room[rack as usize] += i64::from(c);
    }
    for (rack, &room) in room.iter().enumerate() {
        graph.add_edge(rack_node + rack, sink, room, 0);
    }
    let (flow, _) = graph.solve(source, sink);
    debug_assert_eq!(flow, tasks.len() as i64);

    let mut used = vec![0u32; cap.len()];
    let mut entering: Vec<Vec<u32>> = vec![Vec::new(); r];
    for (c, &(start, end)) in classes.iter().enumerate() {
        let h = home(sorted[start]) as usize;
        let flows = &edges[c * r..][..r];
        let mut members = sorted[start..end].iter().copied();
        for t in members.by_ref().take(graph.flow(flows[h]) as usize) {
            let o = input.owner[t as usize];
            if used[o as usize] < cap[o as usize] {
                used[o as usize] += 1;
                owner[t as usize] = o;
            } else {
                entering[h].push(t);
            }
        }
        for (rack, &e) in flows.iter().enumerate().filter(|&(rack, _)| rack != h) {
            entering[rack].extend(members.by_ref().take(graph.flow(e) as usize));
        }
    }
    for (rack, mut tasks) in entering.into_iter().enumerate() {
        tasks.sort_unstable();
        let mut ring: VecDeque<u32> = input.members_by_rack[rack]
            .iter()
            .copied()
            .filter(|&m| used[m as usize] < cap[m as usize])
            .collect();
        for t in tasks {
            let m = ring
                .pop_front()
                .expect("rack capacity covers the tasks sent to it");
            owner[t as usize] = m;
            used[m as usize] += 1;
            if used[m as usize] < cap[m as usize] {
                ring.push_back(m);
            }
        }
    }
}

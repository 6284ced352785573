//! [`MinCostFlow`]: minimum-cost maximum flow by successive shortest paths with potentials.
//!
//! Each round runs Dijkstra on reduced costs (`cost + π(u) − π(v)`, never negative once the
//! potentials are the previous round's distances), then pushes the path's bottleneck. Kafka's
//! cycle cancelling needs a Bellman-Ford pass per cancelled cycle; here a round is
//! `O(E log V)` and moves as much flow as the path allows, so the rack-level graphs this crate
//! builds (a node per class of interchangeable tasks, one per rack) take a handful of rounds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A directed graph of capacitated, costed edges; edge `e`'s residual twin is `e ^ 1`.
#[derive(Debug, Clone, Default)]
pub(crate) struct MinCostFlow {
    /// Per node: its outgoing edges (forward and residual).
    adjacent: Vec<Vec<usize>>,
    to: Vec<usize>,
    /// Remaining capacity.
    capacity: Vec<i64>,
    cost: Vec<i64>,
}

impl MinCostFlow {
    /// A graph of `nodes` nodes and no edges.
    pub fn new(nodes: usize) -> Self {
        Self {
            adjacent: vec![Vec::new(); nodes],
            ..Self::default()
        }
    }

    /// Adds an edge `from → to`; returns its id for [`flow`](Self::flow). Costs must not be
    /// negative (the first Dijkstra round needs zero potentials to be feasible).
    pub fn add_edge(&mut self, from: usize, to: usize, capacity: i64, cost: i64) -> usize {
        debug_assert!(cost >= 0 && capacity >= 0);
        let id = self.to.len();
        self.adjacent[from].push(id);
        self.adjacent[to].push(id + 1);
        self.to.extend([to, from]);
        self.capacity.extend([capacity, 0]);
        self.cost.extend([cost, -cost]);
        id
    }

    /// The flow on edge `edge` after [`solve`](Self::solve).
    pub fn flow(&self, edge: usize) -> i64 {
        self.capacity[edge ^ 1]
    }

    /// Sends as much flow as possible from `source` to `sink` at minimum total cost; returns
    /// (flow, cost).
    pub fn solve(&mut self, source: usize, sink: usize) -> (i64, i64) {
        let n = self.adjacent.len();
        let mut potential = vec![0i64; n];
        let mut dist = vec![i64::MAX; n];
        let mut via = vec![usize::MAX; n];
        let mut heap = BinaryHeap::new();
        let (mut flow, mut cost) = (0i64, 0i64);
        loop {
            dist.fill(i64::MAX);
            via.fill(usize::MAX);
            dist[source] = 0;
            heap.push(Reverse((0i64, source)));
            while let Some(Reverse((d, u))) = heap.pop() {
                if d > dist[u] {
                    continue;
                }
                for &e in &self.adjacent[u] {
                    if self.capacity[e] == 0 {
                        continue;
                    }
                    let v = self.to[e];
                    let next = d + self.cost[e] + potential[u] - potential[v];
                    if next < dist[v] {
                        dist[v] = next;
                        via[v] = e;
                        heap.push(Reverse((next, v)));
                    }
                }
            }
            if dist[sink] == i64::MAX {
                return (flow, cost);
            }
            for (p, &d) in potential.iter_mut().zip(&dist) {
                if d != i64::MAX {
                    *p += d;
                }
            }
            let mut push = i64::MAX;
            let mut v = sink;
            while v != source {
                let e = via[v];
                push = push.min(self.capacity[e]);
                v = self.to[e ^ 1];
            }
            let mut v = sink;
            while v != source {
                let e = via[v];
                self.capacity[e] -= push;
                self.capacity[e ^ 1] += push;
                cost += push * self.cost[e];
                v = self.to[e ^ 1];
            }
            flow += push;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force: the cheapest way to give each of `costs.len()` unit tasks a column, with
    /// column `c` taking exactly `caps[c]` tasks.
    fn brute(costs: &[Vec<i64>], caps: &mut [i64], row: usize) -> i64 {
        if row == costs.len() {
            return 0;
        }
        let mut best = i64::MAX;
        for c in 0..caps.len() {
            if caps[c] > 0 {
                caps[c] -= 1;
                let rest = brute(costs, caps, row + 1);
                caps[c] += 1;
                if rest != i64::MAX {
                    best = best.min(rest + costs[row][c]);
                }
            }
        }
        best
    }

    /// A transportation problem, solved on a task → column → sink graph, costs as much as the
    /// best of every assignment with the same column counts, on many small random instances.
    #[test]
    fn matches_brute_force() {
        let mut seed = 12345u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        for _ in 0..300 {
            let rows = 1 + next(7) as usize;
            let cols = 1 + next(4) as usize;
            let costs: Vec<Vec<i64>> = (0..rows)
                .map(|_| (0..cols).map(|_| next(20) as i64).collect())
                .collect();
            let mut caps = vec![0i64; cols];
            for _ in 0..rows {
                caps[next(cols as u64) as usize] += 1;
            }
            let (source, sink) = (0, 1);
            let mut g = MinCostFlow::new(2 + rows + cols);
            for (r, row) in costs.iter().enumerate() {
                g.add_edge(source, 2 + r, 1, 0);
                for (c, &cost) in row.iter().enumerate() {
                    g.add_edge(2 + r, 2 + rows + c, 1, cost);
                }
            }
            for (c, &cap) in caps.iter().enumerate() {
                g.add_edge(2 + rows + c, sink, cap, 0);
            }
            let (flow, cost) = g.solve(source, sink);
            assert_eq!(flow, rows as i64);
            assert_eq!(cost, brute(&costs, &mut caps, 0), "{costs:?} {caps:?}");
        }
    }

    /// Flow splits over parallel paths by cost and capacity, and edge flows are reported.
    #[test]
    fn splits_by_capacity() {
        let mut g = MinCostFlow::new(4);
        let cheap = g.add_edge(0, 1, 3, 1);
        let dear = g.add_edge(0, 2, 10, 5);
        g.add_edge(1, 3, 10, 0);
        g.add_edge(2, 3, 10, 0);
        assert_eq!(g.solve(0, 3), (13, 3 + 50));
        assert_eq!((g.flow(cheap), g.flow(dear)), (3, 10));
    }
}

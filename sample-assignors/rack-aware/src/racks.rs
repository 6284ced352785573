//! [`Racks`]: where members sit and what each task would read across racks from each of them.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use assignor_sdk::{GroupSpec, Topology};

use crate::Decision;

/// The group's rack layout, indexed densely.
#[derive(Debug)]
pub(crate) struct Racks {
    /// The number of distinct member racks.
    pub count: usize,
    /// Per member (input order): its rack.
    pub member_rack: Vec<u32>,
    /// Per dense task (in [`Topology::tasks`] order) and member rack, row-major: how many of
    /// the task's input partitions have no replica in that rack.
    pub miss: Vec<u32>,
    /// Per dense task: the rank of its row of [`miss`](Self::miss) among the distinct rows in
    /// lexicographic order, so that tasks compare and group by profile as one integer.
    pub profile: Vec<u32>,
}

impl Racks {
    /// The layout, or why rack-aware assignment cannot apply: a member without a rack, a
    /// task without input partitions, or a partition without replica racks.
    pub fn new(group: &GroupSpec, topology: &Topology) -> Result<Self, Decision> {
        let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
        for m in &group.members {
            match m.rack_id.as_deref() {
                Some(r) if !r.is_empty() => {
                    ids.insert(r, 0);
                }
                _ => return Err(Decision::MemberWithoutRack(m.member_id.clone())),
            }
        }
        for (i, v) in ids.values_mut().enumerate() {
            *v = i as u32;
        }
        let count = ids.len();
        let member_rack = group
            .members
            .iter()
            .map(|m| ids[m.rack_id.as_deref().unwrap_or_default()])
            .collect();
        // Topology rack index → member rack, for the racks some member sits in.
        let topo_rack: Vec<Option<u32>> = topology
            .racks
            .iter()
            .map(|r| ids.get(r.as_str()).copied())
            .collect();

        let mut miss = Vec::new();
        let mut holds = vec![false; count];
        for s in &topology.subtopologies {
            for p in 0..s.max_num_input_partitions as usize {
                let row = miss.len();
                miss.resize(row + count, 0);
                let mut partitions = 0;
                for topic in &s.source_topics {
                    let Some(replicas) = topic.partition_racks.get(p) else {
                        continue;
                    };
                    if replicas.is_empty() {
                        return Err(Decision::PartitionWithoutRacks(format!(
                            "{}-{p}",
                            topic.name
                        )));
                    }
                    partitions += 1;
                    holds.fill(false);
                    for &r in replicas {
                        if let Some(Some(r)) = topo_rack.get(r as usize) {
                            holds[*r as usize] = true;
                        }
                    }
                    for (m, &h) in miss[row..].iter_mut().zip(&holds) {
                        *m += u32::from(!h);
                    }
                }
                if partitions == 0 {
                    return Err(Decision::TaskWithoutPartitions(format!("{}_{p}", s.id)));
                }
            }
        }
        // Rows are interned by hash (a handful of distinct ones in practice, each seen
        // thousands of times), then only the distinct rows are sorted to rank them.
        let mut ids: HashMap<&[u32], u32, BuildHasherDefault<RowHasher>> = HashMap::default();
        let mut distinct: Vec<&[u32]> = Vec::new();
        let id: Vec<u32> = miss
            .chunks_exact(count)
            .map(|row| {
                *ids.entry(row).or_insert_with(|| {
                    distinct.push(row);
                    distinct.len() as u32 - 1
                })
            })
            .collect();
        let mut order: Vec<u32> = (0..distinct.len() as u32).collect();
        order.sort_unstable_by_key(|&i| distinct[i as usize]);
        let mut rank = vec![0u32; distinct.len()];
        for (r, &i) in (0u32..).zip(&order) {
            rank[i as usize] = r;
        }
        let profile = id.iter().map(|&i| rank[i as usize]).collect();
        Ok(Self {
            count,
            member_rack,
            miss,
            profile,
        })
    }

    /// Input partitions of dense task `t` with no replica in rack `r`.
    pub fn miss(&self, t: usize, r: u32) -> u32 {
        self.miss[t * self.count + r as usize]
    }
}

/// A multiply-rotate hash (Firefox's FxHash) for rows of a few small integers: the default
/// SipHash costs several times more and its resistance to crafted keys buys nothing here,
/// where a collision only costs a comparison.
#[derive(Debug, Default)]
struct RowHasher(u64);

impl Hasher for RowHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

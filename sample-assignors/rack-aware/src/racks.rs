//! [`Racks`]: where members sit and what each task would read across racks from each of them.

use std::collections::BTreeMap;

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
        Ok(Self {
            count,
            member_rack,
            miss,
        })
    }

    /// Input partitions of dense task `t` with no replica in rack `r`.
    pub fn miss(&self, t: usize, r: u32) -> u32 {
        self.miss[t * self.count + r as usize]
    }

    /// The row of [`miss`](Self::miss) for dense task `t`.
    pub fn row(&self, t: usize) -> &[u32] {
        &self.miss[t * self.count..][..self.count]
    }
}

//! Helper of the coordinator crash test (`tests/all/coordinator.rs`): drives a [`Coordinator`]
//! on a [`RedbStore`] until it is killed.
//!
//! `coordinator-writer <database-file>` opens the coordinator (registry `sticky,balanced`), prints
//! `start`, then for step `n = 1, 2, …` forever: sets group `g`'s `streams.assignor.name`
//! (alternately `balanced` and `sticky`) and `streams.num.standby.replicas` (`n % 3`), joins
//! member `m<n % 40>` on process `p<n % 7>` with rack `r<n>` (a metadata change, so the group
//! epoch moves), and computes the target. After each step it prints
//! `committed <n> <group epoch> <target epoch>`, flushed, so the test knows exactly what was
//! acknowledged when it kills the process. It exits when its stdout closes.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use assignor_coordinator::Registry;
use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::store::RedbStore;
use assignor_coordinator::{ASSIGNOR_NAME, ConfigOp, Coordinator, NUM_STANDBY_REPLICAS};
use assignor_sandbox::{Limits, Runtime};
use assignor_sdk::{Member, Subtopology, Topology};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: coordinator-writer <database-file>")?
        .into();
    let config = BrokerConfig::load(None, &["group.streams.assignors=sticky,balanced".into()])?;
    let registry = Registry::build(&Runtime::new(Limits::default())?, &config)?;
    let mut coordinator = Coordinator::open(registry, &config, Arc::new(RedbStore::open(&dir)?))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "start")?;
    out.flush()?;
    let topology = Topology {
        subtopologies: (0..4)
            .map(|s| Subtopology {
                id: format!("s{s}"),
                max_num_input_partitions: 16,
                is_stateful: s % 2 == 0,
                source_topics: Vec::new(),
            })
            .collect(),
        racks: Vec::new(),
    };
    coordinator.set_topology("g", topology)?;
    for n in 1u64.. {
        let assignor = if n % 2 == 0 { "sticky" } else { "balanced" };
        coordinator.alter_config(
            "g",
            &[
                (ASSIGNOR_NAME, ConfigOp::Set(assignor.into())),
                (NUM_STANDBY_REPLICAS, ConfigOp::Set((n % 3).to_string())),
            ],
        )?;
        coordinator.upsert_member(
            "g",
            Member {
                member_id: format!("m{}", n % 40),
                process_id: format!("p{}", n % 7),
                rack_id: Some(format!("r{n}")),
                ..Member::default()
            },
        )?;
        let target = coordinator.compute_target("g")?.ok_or("no target")?.epoch;
        let group_epoch = coordinator.describe("g")?.group_epoch;
        // A closed stdout (the test is gone) ends the loop through this error.
        writeln!(out, "committed {n} {group_epoch} {target}")?;
        out.flush()?;
    }
    Ok(())
}

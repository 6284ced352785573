//! Benchmark inputs from `shared/bench/gen.py` (DESIGN §5), so every benchmark measures the
//! same groups as the rest of the project.

use std::path::PathBuf;
use std::process::Command;

use assignor_sdk::{GroupSpec, SourceTopic, Topology};

/// The standard sizes: members, processes, stateful subtopologies, partitions per
/// subtopology (128, 2048 and 16384 tasks).
pub const SIZES: &[(u32, u32, u32, u32)] =
    &[(10, 5, 4, 32), (100, 50, 8, 256), (1000, 500, 16, 1024)];
/// The large size of issue 19: 10,000 members on 5,000 processes, 32 stateful subtopologies
/// of 5,000 partitions (160,000 tasks). Slow to generate (seconds) and to run, so benchmarks
/// keep it apart from [`SIZES`].
pub const LARGE: (u32, u32, u32, u32) = (10_000, 5_000, 32, 5_000);
/// The generator's seed used project-wide.
pub const SEED: u32 = 7;

/// What the members currently hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing: a new group.
    Cold,
    /// A previous balanced assignment (`--previous`).
    Previous,
    /// A previous assignment after members left and joined (`--churn`).
    Churn,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Cold, Mode::Previous, Mode::Churn];

    /// The mode's name in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cold => "cold",
            Mode::Previous => "previous",
            Mode::Churn => "churn",
        }
    }
}

/// The input generator: `ASSIGNOR_BENCH_GEN`, else `shared/bench/gen.py` beside the workspace.
fn generator() -> PathBuf {
    match std::env::var_os("ASSIGNOR_BENCH_GEN") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/bench/gen.py"
        )),
    }
}

/// The generated group of `size` with `standbys` replicas in `mode`; panics, saying how to
/// fix it, when the generator is missing or fails.
pub fn generate(
    (members, processes, subtopologies, partitions): (u32, u32, u32, u32),
    standbys: u32,
    mode: Mode,
) -> (GroupSpec, Topology) {
    let script = generator();
    assert!(
        script.is_file(),
        "the benchmark input generator {} does not exist; set ASSIGNOR_BENCH_GEN to the path \
         of gen.py",
        script.display()
    );
    let mut command = Command::new("python3");
    command.arg(&script).args(
        [
            members,
            processes,
            subtopologies,
            partitions,
            standbys,
            SEED,
        ]
        .map(|n| n.to_string()),
    );
    match mode {
        Mode::Cold => {}
        Mode::Previous => {
            command.arg("--previous");
        }
        Mode::Churn => {
            command.arg("--churn");
        }
    }
    let output = command.output().unwrap_or_else(|e| {
        panic!(
            "cannot run `python3 {}` to generate benchmark input: {e}",
            script.display()
        )
    });
    assert!(
        output.status.success(),
        "`{command:?}` failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).expect("gen.py writes UTF-8 JSON");
    assignor_coordinator::json::parse_input(&text)
        .unwrap_or_else(|e| panic!("`{command:?}` produced an unusable input: {e}"))
}

/// Gives a group racks `r0`, `r1`, … (`racks` of them) and its subtopologies source topics
/// with replica racks, for the rack-aware benchmark and tests. Processes, in order of first
/// appearance, are dealt to the racks in turn (a member's rack is its process's). Every
/// subtopology reads two topics `<id>-a` and `<id>-b`, of one partition per task; each
/// partition has replicas in one or two racks drawn from `seed`, rack `r0` twice as likely as
/// each other. The layout is skewed on purpose: a third of the members sit in `r0` but about
/// half the replicas do, and a task's two topics often disagree, so a rack-blind assignment
/// reads many partitions across racks and only some of that can be saved.
pub fn with_racks(group: &mut GroupSpec, topology: &mut Topology, racks: u32, seed: u64) {
    let racks = racks.max(1);
    let mut processes: Vec<&str> = Vec::new();
    let rack_of: Vec<u32> = group
        .members
        .iter()
        .map(|m| {
            let p = match processes.iter().position(|&p| p == m.process_id) {
                Some(p) => p,
                None => {
                    processes.push(&m.process_id);
                    processes.len() - 1
                }
            };
            p as u32 % racks
        })
        .collect();
    for (m, rack) in group.members.iter_mut().zip(rack_of) {
        m.rack_id = Some(format!("r{rack}"));
    }
    topology.racks = (0..racks).map(|r| format!("r{r}")).collect();
    // splitmix64: a fixed stream per seed, the same on every platform.
    let mut state = seed;
    let mut next = move |n: u32| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % u64::from(n)) as u32
    };
    for s in &mut topology.subtopologies {
        s.source_topics = ["a", "b"]
            .iter()
            .map(|suffix| SourceTopic {
                name: format!("{}-{suffix}", s.id),
                partition_racks: (0..s.max_num_input_partitions)
                    .map(|_| {
                        let copies = 1 + next(2);
                        let mut replicas: Vec<u32> = (0..copies)
                            // Draws of 0 and 1 both mean r0: twice the weight of the others.
                            .map(|_| next(racks + 1).saturating_sub(1))
                            .collect();
                        replicas.dedup();
                        replicas
                    })
                    .collect(),
            })
            .collect();
    }
}

//! Benchmark inputs from `shared/bench/gen.py` (DESIGN §5), so every benchmark measures the
//! same groups as the rest of the project.

use std::path::PathBuf;
use std::process::Command;

use assignor_sdk::{GroupSpec, Topology};

/// The standard sizes: members, processes, stateful subtopologies, partitions per
/// subtopology (128, 2048 and 16384 tasks).
pub const SIZES: &[(u32, u32, u32, u32)] =
    &[(10, 5, 4, 32), (100, 50, 8, 256), (1000, 500, 16, 1024)];
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
    assignor_runtime::json::parse_input(&text)
        .unwrap_or_else(|e| panic!("`{command:?}` produced an unusable input: {e}"))
}

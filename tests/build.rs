//! Builds the test guests under `guests/` as components, all in one nested cargo build, and
//! generates `$OUT_DIR/guests.rs` (included by `src/lib.rs` as the `guests` module): one
//! `pub const` path per guest, named after its directory in upper snake case, and `ALL`, the
//! table of (name, expected outcome, path).
//!
//! Every directory under `guests/` must be classified in [`GUESTS`] with what the runtime is
//! expected to report for it. An unclassified directory, or an entry without a directory,
//! fails the build: a guest cannot be added without saying what it is for.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use assignor_guest_build::{Guest, TARGET, build, workspace_root};

/// What the runtime is expected to report when it loads and runs a guest.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The call runs out of fuel.
    OutOfFuel,
    /// The guest hits the memory limit.
    MemoryLimit,
    /// The guest overflows its stack: the engine's wasm stack, or its own in linear memory.
    StackOverflow,
    /// The call passes its wall-clock deadline (blocked in a host function, where fuel does
    /// not reach).
    Timeout,
    /// The guest traps (a Rust panic ends in `unreachable`).
    Trap,
    /// The guest returns an `assign-error`.
    GuestError,
    /// The guest returns an assignment the runtime rejects.
    InvalidOutput,
    /// The component is refused at load (wrong world, forbidden imports).
    Load,
    /// The guest behaves and its assignment is accepted.
    Ok,
}

impl Expect {
    /// The name the tests match on.
    fn as_str(self) -> &'static str {
        match self {
            Self::OutOfFuel => "out-of-fuel",
            Self::MemoryLimit => "memory-limit",
            Self::StackOverflow => "stack-overflow",
            Self::Timeout => "timeout",
            Self::Trap => "trap",
            Self::GuestError => "guest-error",
            Self::InvalidOutput => "invalid-output",
            Self::Load => "load",
            Self::Ok => "ok",
        }
    }
}

/// Every directory under `guests/` (the package is `guest-<dir>`, the assignor's name is
/// `<dir>`) with the outcome the runtime should report for it.
const GUESTS: &[(&str, Expect)] = &[
    ("endless-loop", Expect::OutOfFuel),
    ("unbounded-alloc", Expect::MemoryLimit),
    ("deep-recursion", Expect::StackOverflow),
    ("panics", Expect::Trap),
    ("guest-error", Expect::GuestError),
    ("invalid-output", Expect::InvalidOutput),
    ("oversized-output", Expect::InvalidOutput),
    ("slow-legal", Expect::Ok),
    ("chatty", Expect::Ok),
    ("hashmap-user", Expect::Ok),
    // Ok on the example group; spins on groups of more than three members.
    ("loops-on-large-groups", Expect::Ok),
    ("forbidden-import", Expect::Load),
    ("bad-name", Expect::Load),
    ("probe-echo", Expect::Ok),
    ("probe-raw", Expect::Ok),
    ("not-an-assignor", Expect::Load),
    // The hostile corpus of issue 14: each bounds the host, not only the guest.
    ("sleeper", Expect::Timeout),
    ("poll-forever", Expect::Timeout),
    // Over the host's cap on one call's randomness (a trap), or out of the fuel its bytes cost.
    ("random-flood", Expect::Trap),
    ("stdout-flood", Expect::OutOfFuel),
    // Charged per pollable passed to `poll`, before the host polls them.
    ("poll-flood", Expect::OutOfFuel),
    ("output-flood", Expect::InvalidOutput),
    ("huge-name", Expect::Load),
    ("huge-error", Expect::GuestError),
    ("shadow-stack", Expect::StackOverflow),
    ("same-process-standby", Expect::InvalidOutput),
];

/// Sample assignors (directory under `sample-assignors/`, the package of its component crate)
/// the tests also run; they must behave.
const SAMPLES: &[(&str, &str)] = &[
    ("balanced", "balanced-assignor-component"),
    ("sticky", "sticky-assignor-component"),
    ("rack-aware", "rack-aware-assignor-component"),
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = workspace_root(&manifest, 1);
    let guests_dir = manifest.join("guests");
    println!("cargo:rerun-if-changed={}", guests_dir.display());
    check_classified(&guests_dir);

    let samples = SAMPLES.iter().map(|&(dir, package)| {
        let guest = Guest {
            package: package.to_owned(),
            dir: workspace.join("sample-assignors").join(dir),
        };
        (guest, dir, Expect::Ok)
    });
    let entries: Vec<(Guest, &str, Expect)> = GUESTS
        .iter()
        .map(|&(dir, expect)| {
            let guest = Guest {
                package: format!("guest-{dir}"),
                dir: guests_dir.join(dir),
            };
            (guest, dir, expect)
        })
        .chain(samples)
        .collect();
    let guests: Vec<Guest> = entries.iter().map(|(g, _, _)| g.clone()).collect();
    let target_dir = build(&workspace, &guests);
    // A relative CARGO_TARGET_DIR was resolved by the nested cargo, which runs in the workspace.
    let target_dir = workspace.join(target_dir);

    let mut out = String::from("// @generated by tests/build.rs: the test guests' components.\n");
    let mut all = String::new();
    for (guest, dir, expect) in &entries {
        let path = artifact(guest, &target_dir);
        assert!(
            path.is_file(),
            "the build of {} did not produce {}",
            guest.package,
            path.display()
        );
        let path = path.to_str().unwrap_or_else(|| {
            panic!("the guest path {} is not UTF-8", path.display());
        });
        let name = const_name(dir);
        let expect = expect.as_str();
        writeln!(
            out,
            "\n/// Component built from {} (expected: {expect}).\n\
             pub const {name}: &str = {path:?};",
            guest
                .dir
                .strip_prefix(&workspace)
                .unwrap_or(&guest.dir)
                .display()
        )
        .expect("writing to a String");
        writeln!(all, "    ({dir:?}, {expect:?}, {name}),").expect("writing to a String");
    }
    write!(
        out,
        "\n/// Every test guest: (directory name, which is also the assignor's name; expected \
         outcome; component path).\n\
         pub const ALL: &[(&str, &str, &str)] = &[\n{all}];\n"
    )
    .expect("writing to a String");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let generated = out_dir.join("guests.rs");
    fs::write(&generated, out)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", generated.display()));
}

/// Panics unless the directories under `guests_dir` and the entries of [`GUESTS`] match.
fn check_classified(guests_dir: &Path) {
    let entries = fs::read_dir(guests_dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", guests_dir.display()));
    let mut found = BTreeSet::new();
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", guests_dir.display()));
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        assert!(
            entry.path().join("Cargo.toml").is_file(),
            "tests/guests/{name} is not a crate (no Cargo.toml)"
        );
        found.insert(name);
    }
    let listed: BTreeSet<String> = GUESTS.iter().map(|(dir, _)| (*dir).to_owned()).collect();
    let unclassified: Vec<_> = found.difference(&listed).collect();
    assert!(
        unclassified.is_empty(),
        "unclassified test guests {unclassified:?}: add each to GUESTS in tests/build.rs with \
         the outcome the runtime should report for it"
    );
    let missing: Vec<_> = listed.difference(&found).collect();
    assert!(
        missing.is_empty(),
        "GUESTS in tests/build.rs lists {missing:?}, which have no directory under tests/guests"
    );
}

/// The component a guest's build produces. [`Guest::artifact`] is a library's (underscored
/// name); a binary-only crate, such as `not-an-assignor`, keeps its dashes.
fn artifact(guest: &Guest, target_dir: &Path) -> PathBuf {
    if guest.dir.join("src/lib.rs").is_file() {
        guest.artifact(target_dir)
    } else {
        target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{}.wasm", guest.package))
    }
}

/// `endless-loop` → `ENDLESS_LOOP`; panics on a directory name that makes no identifier.
fn const_name(dir: &str) -> String {
    assert!(
        dir.starts_with(|c: char| c.is_ascii_lowercase())
            && dir
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "test guest directory {dir:?}: use lowercase letters, digits and dashes"
    );
    dir.to_uppercase().replace('-', "_")
}

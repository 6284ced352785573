//! Builds the test guests (the examples of the `assignor-test-guests` crate in `guests/`) and
//! the sample components as components, in nested cargo builds, and generates
//! `$OUT_DIR/guests.rs` (included by `src/lib.rs` as the `guests` module): one `pub const`
//! path per guest, named after it in upper snake case, and `ALL`, the table of (name, expected
//! outcome, path).
//!
//! Every file in `guests/examples/` must be classified in [`GUESTS`] with what the runtime is
//! expected to report for it. An unclassified file, or an entry without a file, fails the
//! build: a guest cannot be added without saying what it is for.

use std::collections::BTreeSet;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use assignor_guest_build::{Guest, build, workspace_root};

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

/// Every test guest (`guests/examples/<name>.rs`, whose assignor's name is `<name>`) with the
/// outcome the runtime should report for it.
const GUESTS: &[(&str, Expect)] = &[
    ("endless-loop", Expect::OutOfFuel),
    // Bulk memory costs fuel per byte.
    ("copy-flood", Expect::OutOfFuel),
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
    // Its `configure` refuses every configuration, quoting it.
    ("config-echo", Expect::Load),
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
    // The Kafka plugin's hot-swap versions of one assignor, `swap`.
    ("swap-v1", Expect::Ok),
    ("swap-v2", Expect::Ok),
    // Loads; its empty assignment misses every task.
    ("swap-broken", Expect::InvalidOutput),
];

/// The guest crate's package.
const GUEST_PACKAGE: &str = "assignor-test-guests";

/// Guests that are programs (examples without a crate type, so `wasi:cli/run` command
/// components), not libraries: cargo names their files differently.
const COMMANDS: &[&str] = &["not-an-assignor"];

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
    check_classified(&guests_dir.join("examples"));

    let samples = SAMPLES.iter().map(|&(dir, package)| {
        let guest = Guest {
            package: package.to_owned(),
            example: None,
            dir: workspace.join("sample-assignors").join(dir),
        };
        (guest, dir, Expect::Ok)
    });
    let entries: Vec<(Guest, &str, Expect)> = GUESTS
        .iter()
        .map(|&(name, expect)| {
            let guest = Guest {
                package: GUEST_PACKAGE.to_owned(),
                example: Some(name.to_owned()),
                dir: guests_dir.clone(),
            };
            (guest, name, expect)
        })
        .chain(samples)
        .collect();
    let guests: Vec<Guest> = entries.iter().map(|(g, _, _)| g.clone()).collect();
    let target_dir = build(&workspace, &guests);
    // A relative CARGO_TARGET_DIR was resolved by the nested cargo, which runs in the workspace.
    let target_dir = workspace.join(target_dir);

    let mut out = String::from("// @generated by tests/build.rs: the test guests' components.\n");
    let mut all = String::new();
    for (guest, name, expect) in &entries {
        let path = artifact(guest, name, &target_dir);
        assert!(
            path.is_file(),
            "the build of {} did not produce {}",
            guest.package,
            path.display()
        );
        let path = path.to_str().unwrap_or_else(|| {
            panic!("the guest path {} is not UTF-8", path.display());
        });
        let constant = const_name(name);
        let expect = expect.as_str();
        let source = guest.dir.strip_prefix(&workspace).unwrap_or(&guest.dir);
        let source = match &guest.example {
            Some(example) => source.join("examples").join(format!("{example}.rs")),
            None => source.to_path_buf(),
        };
        writeln!(
            out,
            "\n/// Component built from {} (expected: {expect}).\n\
             pub const {constant}: &str = {path:?};",
            source.display()
        )
        .expect("writing to a String");
        writeln!(all, "    ({name:?}, {expect:?}, {constant}),").expect("writing to a String");
    }
    write!(
        out,
        "\n/// Every test guest and sample: (name, which is also the assignor's name; expected \
         outcome; component path).\n\
         pub const ALL: &[(&str, &str, &str)] = &[\n{all}];\n"
    )
    .expect("writing to a String");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let generated = out_dir.join("guests.rs");
    fs::write(&generated, out)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", generated.display()));
}

/// Panics unless the files in `examples` and the entries of [`GUESTS`] match.
fn check_classified(examples: &Path) {
    let entries = fs::read_dir(examples)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", examples.display()));
    let mut found = BTreeSet::new();
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", examples.display()));
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.starts_with('.') {
            continue;
        }
        let name = file.strip_suffix(".rs").unwrap_or_else(|| {
            panic!("tests/guests/examples/{file} is not a guest: each guest is one `<name>.rs`")
        });
        found.insert(name.to_owned());
    }
    let listed: BTreeSet<String> = GUESTS.iter().map(|(name, _)| (*name).to_owned()).collect();
    let unclassified: Vec<_> = found.difference(&listed).collect();
    assert!(
        unclassified.is_empty(),
        "unclassified test guests {unclassified:?}: add each to GUESTS in tests/build.rs with \
         the outcome the runtime should report for it, and an [[example]] to \
         tests/guests/Cargo.toml"
    );
    let missing: Vec<_> = listed.difference(&found).collect();
    assert!(
        missing.is_empty(),
        "GUESTS in tests/build.rs lists {missing:?}, which have no file in tests/guests/examples"
    );
}

/// The component a guest's build produces: a command guest's file keeps its dashes.
fn artifact(guest: &Guest, name: &str, target_dir: &Path) -> PathBuf {
    match guest.binary_artifact(target_dir) {
        Some(path) if COMMANDS.contains(&name) => path,
        _ => guest.artifact(target_dir),
    }
}

/// `endless-loop` → `ENDLESS_LOOP`; panics on a name that makes no identifier.
fn const_name(name: &str) -> String {
    assert!(
        name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
        "test guest {name:?}: use lowercase letters, digits and dashes"
    );
    name.to_uppercase().replace('-', "_")
}

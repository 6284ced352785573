//! Build-script helper that compiles workspace guest crates to `wasm32-wasip2` components.
//!
//! Used by the runtime's build script (to embed the sample assignors) and by the test crate's
//! (to build the hostile test guests), so that every component the project runs is built
//! from source in the same way. It installs the `wasm32-wasip2` target with rustup when it is
//! missing, so a fresh clone builds with nothing but `cargo`.
//!
//! The nested `cargo build` uses its own target directory (`<target>/guests`): the outer build
//! holds the lock on the normal one.

#![deny(missing_docs)]

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The guest target.
pub const TARGET: &str = "wasm32-wasip2";

/// A guest component to build: a package's library (the sample assignors' thin component
/// crates), or one example of a package (the test guests are one crate with an example per
/// guest, so 29 components share one manifest).
#[derive(Debug, Clone)]
pub struct Guest {
    /// Cargo package name, e.g. `balanced-assignor-component` or `assignor-test-guests`.
    pub package: String,
    /// The example target that is the component, or `None` for the package's library.
    pub example: Option<String>,
    /// The directory whose changes rebuild it: the crate's, or for a sample's thin component
    /// crate the sample's (the library and, inside it, the component crate).
    pub dir: PathBuf,
}

impl Guest {
    /// The component file the build produces for this guest. Cargo names a library (and a
    /// `cdylib` example) after its crate, with underscores; a binary example (a command
    /// component) keeps its dashes: [`Guest::binary_artifact`].
    pub fn artifact(&self, target_dir: &Path) -> PathBuf {
        let release = target_dir.join(TARGET).join("release");
        match &self.example {
            Some(example) => release
                .join("examples")
                .join(format!("{}.wasm", example.replace('-', "_"))),
            None => release.join(format!("{}.wasm", self.package.replace('-', "_"))),
        }
    }

    /// The file a binary example (no `crate-type`, so a `wasi:cli/run` command component)
    /// builds to; `None` for a library.
    pub fn binary_artifact(&self, target_dir: &Path) -> Option<PathBuf> {
        let example = self.example.as_ref()?;
        Some(
            target_dir
                .join(TARGET)
                .join("release")
                .join("examples")
                .join(format!("{example}.wasm")),
        )
    }
}

/// The workspace root: `depth` levels above a crate directory (1 for `runtime/`).
pub fn workspace_root(manifest_dir: &Path, depth: usize) -> PathBuf {
    manifest_dir
        .ancestors()
        .nth(depth)
        .expect("crate directories sit inside the workspace")
        .to_path_buf()
}

/// Builds `guests` in release mode for [`TARGET`] and returns the shared target directory
/// ([`Guest::artifact`] finds each component in it). Emits `rerun-if-changed` for the guests, the SDK and the WIT. Panics with the nested
/// build's output when it fails: a build script has no better channel.
pub fn build(workspace: &Path, guests: &[Guest]) -> PathBuf {
    for guest in guests {
        println!("cargo:rerun-if-changed={}", guest.dir.display());
    }
    for shared in ["guest-sdk/src", "guest-sdk/Cargo.toml", "wit", "Cargo.lock"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(shared).display()
        );
    }
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");

    ensure_target();
    let target_dir = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"))
        .join("guests");
    if !guests.is_empty() {
        cargo_build(workspace, &target_dir, guests);
    }
    target_dir
}

/// Runs the nested release builds of `guests` into `target_dir`: one for the libraries, one
/// for the examples (`--lib` would refuse a package that has none, and `--example` picks
/// targets across every selected package). The sample libraries are plain rlibs (their
/// components are thin crates of their own), so nothing here needs features turned off or
/// links a `cdylib` dependency.
fn cargo_build(workspace: &Path, target_dir: &Path, guests: &[Guest]) {
    let (examples, libraries): (Vec<&Guest>, Vec<&Guest>) =
        guests.iter().partition(|g| g.example.is_some());
    if !libraries.is_empty() {
        let mut args = Vec::new();
        for guest in libraries {
            args.extend(["-p", guest.package.as_str()]);
        }
        cargo(workspace, target_dir, &args);
    }
    if !examples.is_empty() {
        let mut packages: Vec<&str> = examples.iter().map(|g| g.package.as_str()).collect();
        packages.sort_unstable();
        packages.dedup();
        let mut args = Vec::new();
        for package in packages {
            args.extend(["-p", package]);
        }
        for example in examples.iter().filter_map(|g| g.example.as_deref()) {
            args.extend(["--example", example]);
        }
        cargo(workspace, target_dir, &args);
    }
}

/// Runs `cargo build --release --target wasm32-wasip2` with `args` in `workspace`.
fn cargo(workspace: &Path, target_dir: &Path, args: &[&str]) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(target_dir)
        .args(args);
    // The outer build's flags and wrappers (clippy's, coverage's) are for host code.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    // Small components: no DWARF (panic locations and function names survive). Fat LTO in
    // one codegen unit inlines the SDK's glue and the standard library into the assignor:
    // the sticky sample's 10-member call went from 391,678 to 362,770 fuel (-7.4 %) and its
    // component from 475 KB to 394 KB (issue 19). `simd128` was measured too and left out:
    // 0.5 % less fuel, no faster.
    cmd.env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the guests: {e}"));
    if !output.status.success() {
        panic!(
            "building the guest components failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Installs the guest target with rustup when the toolchain lacks it.
///
/// Two build scripts (the runtime's and the tests') may get here at once on a fresh machine:
/// if `rustup` fails, the other one may just have installed the target, so look again before
/// giving up.
fn ensure_target() {
    if target_installed() {
        return;
    }
    println!("cargo:warning=installing the {TARGET} target with rustup");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    for _ in 0..30 {
        if target_installed() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    match status {
        Ok(s) => panic!("`rustup target add {TARGET}` failed ({s}); install the target and retry"),
        Err(e) => panic!(
            "the {TARGET} target is missing and rustup could not be run ({e}); install the \
             target for this toolchain and retry"
        ),
    }
}

/// Whether the toolchain running this build has the guest target's standard library.
fn target_installed() -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .is_some_and(|sysroot| sysroot.join("lib/rustlib").join(TARGET).exists())
}

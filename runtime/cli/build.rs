//! Builds the sample assignors as components so the `assignor` binary can embed them (the
//! `demo` command runs with no setup).

use std::env;
use std::path::PathBuf;

use assignor_guest_build::{Guest, build, workspace_root};

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = workspace_root(&manifest, 2);
    let guests = [Guest {
        package: "balanced-assignor-component".into(),
        example: None,
        dir: workspace.join("sample-assignors/balanced"),
    }];
    let target_dir = build(&workspace, &guests);
    for guest in &guests {
        let env_name = guest.package.to_uppercase().replace('-', "_") + "_WASM";
        println!(
            "cargo:rustc-env={env_name}={}",
            guest.artifact(&target_dir).display()
        );
    }
}

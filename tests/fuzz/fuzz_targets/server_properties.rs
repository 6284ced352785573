//! `server.properties` (`assignor serve --config`, `assignor registry --config`): a file of
//! arbitrary bytes never panics, hangs or over-allocates the reader of the broker and service
//! keys, and no `service.*` key (they hold token hashes) reaches the broker config that
//! components' `configure` is given.

#![no_main]

use assignor_fuzz::{clear_dir, scratch_dir};
use assignor_service::config::ServiceConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = scratch_dir("server_properties");
    clear_dir(&dir);
    let file = dir.join("server.properties");
    std::fs::write(&file, data).expect("the scratch file can be written");
    let Ok(config) = ServiceConfig::load(Some(&file), &[]) else {
        return;
    };
    assert!(
        config
            .broker
            .originals()
            .keys()
            .all(|k| !k.starts_with("service.")),
        "a service key reaches components' configure"
    );
    assert!(!config.broker.assignors.is_empty(), "no default assignor");
});

//! The service's JSON request bodies besides the group document (fuzzed in `input_json`):
//! `PUT /v1/groups/{g}/config` and the admin's `PUT /v1/admin/tenants/{t}/limits`, through the
//! parsers their handlers run first. Arbitrary bytes never panic, hang or over-allocate them.
//! Config changes the body parser accepts are then applied to a coordinator, which stores
//! only a config that reloads as the same; limits it accepts apply to a tenant's limits, and
//! the JSON the service stores them as (read back on restart) reads back equal.
//!
//! The first byte picks the body, so each has its own part of the corpus.

#![no_main]

use std::sync::Arc;

use assignor_coordinator::store::MemoryStore;
use assignor_coordinator::{ConfigOp, Coordinator};
use assignor_fuzz::{broker_config, registry};
use assignor_protocol::LimitOverrides;
use assignor_service::config::TenantLimits;
use assignor_service::{fuzz_config_change, fuzz_limits_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        config_change(body);
    } else {
        limits(body);
    }
});

fn config_change(body: &[u8]) {
    let Ok(ops) = fuzz_config_change(body) else {
        return;
    };
    let store = Arc::new(MemoryStore::new());
    let open = || {
        Coordinator::open(registry(), &broker_config(), store.clone())
            .expect("a memory store opens")
    };
    let mut coordinator = open();
    let changes: Vec<(&str, ConfigOp)> = ops.iter().map(|(k, o)| (k.as_str(), o.clone())).collect();
    let Ok(config) = coordinator.alter_config("g", &changes) else {
        return;
    };
    assert_eq!(
        open().config("g").ok(),
        Some(&config),
        "the stored config reloads changed"
    );
}

fn limits(body: &[u8]) {
    let Ok(overrides) = fuzz_limits_body(body) else {
        return;
    };
    // A refusal is an answer (400); applying must not panic either way.
    let _ = TenantLimits::default().with_overrides(&overrides);
    assert_eq!(LimitOverrides::default().then(&overrides), overrides);
    let stored = serde_json::to_vec(&overrides).expect("limits always serialize");
    assert_eq!(
        serde_json::from_slice::<LimitOverrides>(&stored).ok(),
        Some(overrides),
        "stored limits read back changed"
    );
}

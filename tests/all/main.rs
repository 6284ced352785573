//! Integration tests of the sandbox, the registry, the coordinator and its store: one module
//! per topic, all against real components built from `tests/guests/` and
//! `sample-assignors/` by the build script.

mod cache;
mod check;
mod client;
mod common;
mod compile_limit;
mod coordinator;
mod corpus;
mod determinism;
mod etcd;
mod harness;
mod host_bounds;
mod hostile;
mod hostile_cli;
mod invalid_output;
mod load;
mod old_data;
mod polyglot;
mod rack_aware;
mod registry;
mod replicas;
mod service;
mod service_corpus;
mod service_limits;
mod service_noisy;
mod service_observability;
mod service_restart;
mod sticky;
mod store;
mod wire;

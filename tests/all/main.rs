//! Integration tests of the sandbox: one module per topic, all against real components built
//! from `tests/guests/` by the build script.

mod common;
mod determinism;
mod hostile;
mod invalid_output;
mod load;
mod store;

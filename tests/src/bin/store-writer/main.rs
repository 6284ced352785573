//! Helper of the store crash test (`tests/all/store.rs`): writes to a [`RedbStore`] until it
//! is killed.
//!
//! `store-writer <database-file>` opens the store, checks every value already in it, prints
//! `start <n>` where `n` is one past the highest counter stored, then forever puts
//! [`value::encode`]`(n)` under [`value::key`]`(n)`, printing `writing <key> <n>` before each
//! put and `committed <key> <n>` after it returns, and incrementing `n`. Every printed line is flushed, so the test knows exactly
//! which writes were committed when it kills the process. It exits when its stdout closes.

use std::io::Write as _;
use std::path::PathBuf;

use assignor_coordinator::store::{RedbStore, Store as _};

mod value;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: store-writer <database-file>")?
        .into();
    let store = RedbStore::open(&path)?;
    let mut next = 0;
    for (key, stored) in store.load_all()? {
        let counter = value::decode(&stored).map_err(|e| format!("{key}: {e}"))?;
        next = next.max(counter + 1);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "start {next}")?;
    out.flush()?;
    loop {
        let key = value::key(next);
        writeln!(out, "writing {key} {next}")?;
        out.flush()?;
        store.put(&key, &value::encode(next))?;
        // A closed stdout (the test is gone) ends the loop through this error.
        writeln!(out, "committed {key} {next}")?;
        out.flush()?;
        next += 1;
    }
}

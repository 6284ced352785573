//! The oldest store (one checksummed file per key), which the service still reads to import a
//! data directory written before the log: a record file of arbitrary bytes never panics, hangs
//! or over-allocates `import::read_dir`. A record it accepts holds the key its file is named
//! for, and reads the same again.
//!
//! A record ends in the SHA-256 of the rest, which mutation never gets right; so when the
//! first byte is odd the harness writes the correct one, and what the reader checks after the
//! checksum (the key's encoding and its file name) is explored too.

#![no_main]

use assignor_coordinator::store::import;
use assignor_fuzz::{clear_dir, scratch_dir};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha256};

/// The record file of the key `fuzz`: `k-` and the key's readable escaped form.
const FILE: &str = "k-fuzz.rec";
/// The checksum's length, at the end of the record.
const CHECKSUM: usize = 32;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, record)) = data.split_first() else {
        return;
    };
    let mut record = record.to_vec();
    if mode % 2 == 1 && record.len() >= CHECKSUM {
        let body = record.len() - CHECKSUM;
        let checksum = Sha256::digest(&record[..body]);
        record[body..].copy_from_slice(&checksum);
    }
    let dir = scratch_dir("import_dir");
    clear_dir(&dir);
    std::fs::write(dir.join(FILE), &record).expect("the scratch record can be written");
    let Ok(entries) = import::read_dir(&dir) else {
        return;
    };
    let [(key, _)] = &entries[..] else {
        panic!("one record file read as {} entries", entries.len());
    };
    assert_eq!(
        key, "fuzz",
        "a record accepted under another key's file name"
    );
    assert_eq!(
        import::read_dir(&dir).expect("a record read once reads again"),
        entries
    );
});

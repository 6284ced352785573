//! The service's store log (`<data dir>/log/log`), read back on every start: opening a
//! `LogStore` whose log holds arbitrary bytes never panics, hangs or over-allocates. A log it
//! opens is one it can read whole, and it stays usable: a write and a reopen find every entry
//! it had, plus the write.
//!
//! Every record ends in a CRC-32 that mutation almost never gets right, which would leave
//! what the store checks after the checksum unexplored. So when the first byte is odd the
//! harness writes correct checksums into the records the rest lays out (the format is the
//! one `LogStore`'s documentation gives); when it is even the rest is written as it is.

#![no_main]

use assignor_coordinator::store::{LogStore, Store};
use assignor_fuzz::{clear_dir, scratch_dir};
use libfuzzer_sys::fuzz_target;

/// A key the fuzzed log may hold too (the write then replaces it).
const KEY: &str = "group/fuzz";
const VALUE: &[u8] = b"written after the fuzzed log was opened";
/// The header, then per record: `len` (u32, from kind to the end of value), kind (u8),
/// `key_len` (u32), key, value, CRC-32 of everything from `len` to the end of value.
const HEADER: usize = 8;
const LEN: usize = 4;
const CRC: usize = 4;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, log)) = data.split_first() else {
        return;
    };
    let mut log = log.to_vec();
    if mode % 2 == 1 {
        fix_checksums(&mut log);
    }
    let dir = scratch_dir("log_store");
    clear_dir(&dir);
    std::fs::write(dir.join("log"), &log).expect("the scratch log can be written");
    let Ok(store) = LogStore::open(&dir) else {
        return;
    };
    let mut entries = store.load_all().expect("an opened log reads whole");
    store.put(KEY, VALUE).expect("an opened log takes a write");
    drop(store);

    let store = LogStore::open(&dir).expect("a log the store wrote reopens");
    entries.retain(|(k, _)| k != KEY);
    entries.push((KEY.to_owned(), VALUE.to_vec()));
    entries.sort();
    assert_eq!(
        store.load_all().expect("a reopened log reads whole"),
        entries,
        "the reopened log lost or changed entries"
    );
});

/// Overwrites the checksum of each record whose `len` fits in what is left of `log`, in
/// order from the header, stopping at the first that does not.
fn fix_checksums(log: &mut [u8]) {
    let mut at = HEADER;
    while let Some(len) = log.get(at..at + LEN) {
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let end = at + LEN + len;
        if len == 0 || end + CRC > log.len() {
            break;
        }
        let crc = crc32fast::hash(&log[at..end]);
        log[end..end + CRC].copy_from_slice(&crc.to_le_bytes());
        at = end + CRC;
    }
}

//! The log of a data directory from before redb (`<data dir>/log/log`), imported on the
//! service's first start: `import::read_log` of a log holding arbitrary bytes never panics,
//! hangs or over-allocates. A log it reads gives each key once, sorted, and reads the same
//! again.
//!
//! Every record ends in a CRC-32 that mutation almost never gets right, which would leave
//! what the store checks after the checksum unexplored. So when the first byte is odd the
//! harness writes correct checksums into the records the rest lays out (the format is the
//! one `store::import`'s documentation gives); when it is even the rest is written as it is.

#![no_main]

use assignor_coordinator::store::import;
use assignor_fuzz::{clear_dir, scratch_dir};
use libfuzzer_sys::fuzz_target;

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
    let dir = scratch_dir("import_log");
    clear_dir(&dir);
    std::fs::write(dir.join("log"), &log).expect("the scratch log can be written");
    let Ok(entries) = import::read_log(&dir) else {
        return;
    };
    assert!(
        entries.windows(2).all(|w| w[0].0 < w[1].0),
        "entries not sorted by key, or a key twice"
    );
    assert_eq!(
        import::read_log(&dir).expect("a log read once reads again"),
        entries,
        "a second read differs"
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

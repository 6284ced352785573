//! The values the store crash test writes: a counter and a payload derived from it, so that a
//! reader can tell a whole value from a torn or mixed one. Shared by the `store-writer` binary
//! and `tests/all/store.rs`.

/// The largest payload; values vary between 0 and this so that kills land mid-write.
const MAX_PAYLOAD: u64 = 1 << 20;

/// The store key the `counter`th write goes to: seven groups, in turn.
pub fn key(counter: u64) -> String {
    format!("group/g{}", counter % 7)
}

fn payload_len(counter: u64) -> usize {
    // A multiplicative hash spreads the sizes instead of growing them steadily.
    ((counter.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % (MAX_PAYLOAD + 1)) as usize
}

/// Every payload byte of the `counter`th write. Successive writes to one key differ in it, so a
/// value mixing two writes does not decode; a fill (memset) keeps encoding cheap even unoptimized,
/// so the writer spends its time inside `put`, where the kills should land.
fn fill(counter: u64) -> u8 {
    counter.to_le_bytes()[0] ^ 0x5a
}

/// The value of the `counter`th write: the counter, little-endian, then its payload.
pub fn encode(counter: u64) -> Vec<u8> {
    let len = payload_len(counter);
    let mut value = Vec::with_capacity(8 + len);
    value.extend_from_slice(&counter.to_le_bytes());
    value.resize(8 + len, fill(counter));
    value
}

/// The counter of a value written by [`encode`], or what is wrong with it.
pub fn decode(value: &[u8]) -> Result<u64, String> {
    let (counter, payload) = value
        .split_first_chunk::<8>()
        .ok_or_else(|| format!("{} bytes, too short for a counter", value.len()))?;
    let counter = u64::from_le_bytes(*counter);
    let len = payload_len(counter);
    if payload.len() != len {
        return Err(format!(
            "counter {counter} with a {}-byte payload, expected {len}",
            payload.len()
        ));
    }
    // Slice equality is a memcmp: fast in the unoptimized test build.
    if *payload != *vec![fill(counter); len] {
        return Err(format!(
            "counter {counter}: the payload is not all {:#04x}",
            fill(counter)
        ));
    }
    Ok(counter)
}

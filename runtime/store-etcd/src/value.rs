//! How a value is kept in etcd: inline (a tag, the value's SHA-256, the value) when it fits in
//! one request, else as content-addressed chunks and a manifest (a tag, the total length, and
//! each chunk's SHA-256 and length). Decoding checks every hash and length, so a value damaged
//! in etcd (or written by something else) is an error, never bytes handed to the coordinator.

use sha2::{Digest as _, Sha256};

/// The first byte of an inline record.
const INLINE: u8 = 1;
/// The first byte of a manifest.
const MANIFEST: u8 = 2;
/// A manifest's fixed part: tag, total length (u64), chunk count (u32).
const MANIFEST_HEADER: usize = 1 + 8 + 4;
/// One chunk's entry in a manifest: its SHA-256 and its length (u32).
const MANIFEST_ENTRY: usize = 32 + 4;

/// A chunk's content address.
pub(crate) type Hash = [u8; 32];

/// SHA-256 of `bytes`.
pub(crate) fn hash(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Lowercase hex of a hash: a chunk's key suffix.
pub(crate) fn hex(hash: &Hash) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` as an inline record.
pub(crate) fn encode_inline(value: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(1 + 32 + value.len());
    record.push(INLINE);
    record.extend_from_slice(&hash(value));
    record.extend_from_slice(value);
    record
}

/// The value of an inline record, after checking its hash.
pub(crate) fn decode_inline(record: &[u8]) -> Result<&[u8], String> {
    match record {
        [INLINE, rest @ ..] if rest.len() >= 32 => {
            let (stored, value) = rest.split_at(32);
            if hash(value)[..] != *stored {
                return Err(format!(
                    "its {} bytes do not match their SHA-256 (altered or torn)",
                    value.len()
                ));
            }
            Ok(value)
        }
        _ => Err(format!(
            "not an inline record ({} bytes, first byte {:?})",
            record.len(),
            record.first()
        )),
    }
}

/// The chunks of a large value and its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// The value's length: the sum of the chunks' lengths.
    pub(crate) total: u64,
    /// Each chunk's hash and length, in order.
    pub(crate) chunks: Vec<(Hash, u32)>,
}

impl Manifest {
    /// The manifest of `value` cut into chunks of `chunk_bytes` (the last may be shorter).
    pub(crate) fn of(value: &[u8], chunk_bytes: usize) -> Self {
        Self {
            total: value.len() as u64,
            chunks: value
                .chunks(chunk_bytes)
                .map(|c| (hash(c), c.len() as u32))
                .collect(),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MANIFEST_HEADER + self.chunks.len() * MANIFEST_ENTRY);
        out.push(MANIFEST);
        out.extend_from_slice(&self.total.to_le_bytes());
        out.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for (hash, len) in &self.chunks {
            out.extend_from_slice(hash);
            out.extend_from_slice(&len.to_le_bytes());
        }
        out
    }

    /// Decodes a manifest, refusing one whose value would pass `max_value_bytes` or whose
    /// lengths do not add up, before anything is sized from its numbers.
    pub(crate) fn decode(record: &[u8], max_value_bytes: usize) -> Result<Self, String> {
        let bad = |what: String| Err(format!("not a valid manifest: {what}"));
        if record.len() < MANIFEST_HEADER || record[0] != MANIFEST {
            return bad(format!(
                "{} bytes, first byte {:?}",
                record.len(),
                record.first()
            ));
        }
        let total = u64::from_le_bytes(record[1..9].try_into().expect("8 bytes"));
        let count = u32::from_le_bytes(record[9..13].try_into().expect("4 bytes")) as usize;
        if total > max_value_bytes as u64 {
            return bad(format!(
                "a value of {total} bytes, over the limit of {max_value_bytes}"
            ));
        }
        let entries = &record[MANIFEST_HEADER..];
        if entries.len() != count.saturating_mul(MANIFEST_ENTRY) {
            return bad(format!(
                "{count} chunks announced, {} bytes of entries",
                entries.len()
            ));
        }
        let chunks: Vec<(Hash, u32)> = entries
            .chunks_exact(MANIFEST_ENTRY)
            .map(|e| {
                (
                    e[..32].try_into().expect("32 bytes"),
                    u32::from_le_bytes(e[32..].try_into().expect("4 bytes")),
                )
            })
            .collect();
        let sum: u64 = chunks.iter().map(|&(_, len)| u64::from(len)).sum();
        if sum != total {
            return bad(format!("chunks of {sum} bytes for a value of {total}"));
        }
        Ok(Self { total, chunks })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inline record round-trips, and one byte altered anywhere, or a record cut short,
    /// fails its check.
    #[test]
    fn inline_records_are_checked() {
        let record = encode_inline(b"a group's target");
        assert_eq!(decode_inline(&record), Ok(&b"a group's target"[..]));
        for i in 0..record.len() {
            let mut altered = record.clone();
            altered[i] ^= 0x20;
            assert!(decode_inline(&altered).is_err(), "byte {i}");
        }
        assert!(decode_inline(&record[..20]).is_err());
        assert_eq!(decode_inline(&encode_inline(b"")), Ok(&b""[..]));
    }

    /// A manifest round-trips; one whose lengths disagree, whose value is over the limit or
    /// whose entries are cut short is refused.
    #[test]
    fn manifests_are_checked() {
        let value = vec![7u8; 2500];
        let manifest = Manifest::of(&value, 1000);
        assert_eq!(manifest.chunks.len(), 3);
        assert_eq!(manifest.chunks[2].1, 500);
        let record = manifest.encode();
        assert_eq!(Manifest::decode(&record, 2500), Ok(manifest.clone()));
        assert!(
            Manifest::decode(&record, 2499)
                .unwrap_err()
                .contains("limit")
        );
        assert!(Manifest::decode(&record[..record.len() - 1], 2500).is_err());
        let mut wrong_total = record.clone();
        wrong_total[1] = 0xff;
        assert!(Manifest::decode(&wrong_total, usize::MAX).is_err());
        let mut huge_count = record;
        huge_count[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Manifest::decode(&huge_count, usize::MAX).is_err());
    }
}

//! Readers of the two formats the service's data directory held before
//! [`RedbStore`](super::RedbStore), so that one written then is imported on its first start:
//! [`read_log`], the log of `<data>/log/` (the store just before redb), and
//! [`read_dir`], the directory of record files of `<data>/store/` (the store before that).
//! Readers only: nothing here writes either format.
//!
//! # The log
//!
//! `log` is a header, then records, then zeros to the end of the file (space allocated ahead
//! of the records); integers little-endian:
//!
//! ```text
//! header       8 bytes  "ASTLOG\0" then the format version, 1
//! each record:
//!   len        u32      bytes from kind to the end of value: at least 5, never 0
//!   kind       u8       1 = put, 2 = delete
//!   key_len    u32
//!   key        key_len bytes, UTF-8
//!   value      len - 5 - key_len bytes; none for a delete
//!   crc        u32      CRC-32 (IEEE) of everything from len to the end of value
//! then         zeros    preallocated space, possibly none
//! ```
//!
//! A key's value is its last record if that is a put. The log ends where zeros run to the end
//! of the file. Damage with no valid record anywhere after it (a record cut short or failing its
//! checksum, followed by anything) is the torn end of writes a crash interrupted before they
//! were flushed, so never acknowledged: it is skipped with a warning. Damage that a valid record
//! follows cannot be that, and is [`StoreError::Corrupt`] naming the offset. `log.compact` (an
//! interrupted compaction's new log) is never read: the rename that would have made it the log
//! did not happen.
//!
//! # The directory of record files
//!
//! One file per key, named by a deterministic, injective, filesystem-safe encoding of the key
//! (`k-<escaped key>.rec` while that stays short, else `h-<SHA-256 of the key, hex>.rec`);
//! `*.tmp` files are writes a crash interrupted before their rename, and are not read. A
//! record file is, integers little-endian:
//!
//! ```text
//! magic      8 bytes  "ASTORE\0" then the format version, 1
//! key_len    u32
//! value_len  u64
//! key        key_len bytes, UTF-8
//! value      value_len bytes
//! checksum   32 bytes, SHA-256 of everything above
//! ```
//!
//! Its length must be exactly what the header says; the key must be the one its name encodes.
//!
//! Both readers take the directory's `LOCK` (an exclusive `flock`, as the stores that wrote
//! them did), so an older build still running on the directory is never read mid-write.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, BufReader, Read as _};
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{StoreError, io_err};

const LOCK_FILE: &str = "LOCK";
const LOG_FILE: &str = "log";
/// `"ASTLOG\0"` and the format version.
const LOG_MAGIC: [u8; 8] = *b"ASTLOG\0\x01";
const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
/// `len`, `kind` and `key_len`: what precedes a record's key.
const HEAD_LEN: usize = 4 + 1 + 4;
const CRC_LEN: usize = 4;
/// The smallest record: a delete of the empty key.
const MIN_RECORD: usize = HEAD_LEN + CRC_LEN;
/// How much of the log is read at once, when reading it and when looking for records or
/// zeros after damage.
const IO_BUFFER: usize = 1 << 20;

const RECORD_SUFFIX: &str = ".rec";
/// `"ASTORE\0"` and the format version.
const MAGIC: [u8; 8] = *b"ASTORE\0\x01";
const HEADER_LEN: usize = MAGIC.len() + 4 + 8;
const CHECKSUM_LEN: usize = 32;
/// Longest record name that uses the readable escaped form.
const MAX_READABLE_NAME: usize = 200;

/// Every key and value of the log in `dir` (its `log` file), sorted by key, after taking
/// the directory's lock.
///
/// Fails with [`StoreError::Locked`] if another process holds the directory, and with
/// [`StoreError::Corrupt`] if the log is damaged other than at its end.
pub fn read_log(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let _lock = lock(dir)?;
    let path = dir.join(LOG_FILE);
    let file = File::open(&path).map_err(io_err("open", &path))?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: path.clone(),
        reason,
    };
    let file_len = file.metadata().map_err(io_err("stat", &path))?.len();
    if file_len < LOG_MAGIC.len() as u64 {
        return Err(corrupt(format!(
            "{file_len} bytes, shorter than the log's header"
        )));
    }
    let mut reader = BufReader::with_capacity(IO_BUFFER, &file);
    let mut header = [0; LOG_MAGIC.len()];
    reader
        .read_exact(&mut header)
        .map_err(io_err("read", &path))?;
    check_magic(&header).map_err(corrupt)?;

    let mut entries = BTreeMap::new();
    let mut offset = LOG_MAGIC.len() as u64;
    let mut record = Vec::new();
    while offset < file_len {
        let damage = match read_next(&mut reader, file_len - offset, &mut record)
            .map_err(io_err("read", &path))?
        {
            Err(damage) => damage,
            Ok(()) => match decode(&record) {
                Ok(Record::Put { key, value }) => {
                    entries.insert(key.to_owned(), value.to_vec());
                    offset += record.len() as u64;
                    continue;
                }
                Ok(Record::Delete { key }) => {
                    entries.remove(key);
                    offset += record.len() as u64;
                    continue;
                }
                Err(Damage::Checksum) => "its checksum does not match".to_owned(),
                Err(Damage::Invalid(why)) => {
                    return Err(corrupt(format!("record at offset {offset}: {why}")));
                }
            },
        };
        let data_end = data_end(&file, offset, file_len).map_err(io_err("read", &path))?;
        if data_end == offset {
            // No record starts with a zero length, so these are the log's preallocated space.
            break;
        }
        // A record's kind is not zero, so none starts in the zeros after `data_end`.
        if let Some(next) =
            find_record(&file, offset + 1, data_end, file_len).map_err(io_err("read", &path))?
        {
            return Err(corrupt(format!(
                "the record at offset {offset} is damaged ({damage}), but a valid record follows \
                 at offset {next}, so this is not the torn end of an interrupted write"
            )));
        }
        tracing::warn!(
            path = %path.display(),
            offset,
            skipped_bytes = file_len - offset,
            damage,
            "skipped the torn end of the old store's log: writes that a crash interrupted \
             before they were flushed"
        );
        break;
    }
    Ok(entries.into_iter().collect())
}

/// Every key and value of the directory of record files `dir`, sorted by key, after taking
/// the directory's lock.
///
/// Fails with [`StoreError::Locked`] if another process holds the directory, and with
/// [`StoreError::Corrupt`] naming the file if a record is damaged or under another key's name.
pub fn read_dir(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let _lock = lock(dir)?;
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        // `LOCK`, temp files of interrupted writes, non-UTF-8 names, an operator's notes: not
        // records.
        let Some(name) = entry
            .file_name()
            .into_string()
            .ok()
            .filter(|n| n.ends_with(RECORD_SUFFIX))
        else {
            continue;
        };
        let path = dir.join(&name);
        let bytes = fs::read(&path).map_err(io_err("read", &path))?;
        let (key, value) = decode_record(bytes).map_err(|reason| StoreError::Corrupt {
            path: path.clone(),
            reason,
        })?;
        // A valid record under another key's name (copied or renamed by hand) would make two
        // files claim one key.
        if file_name(&key) != name {
            return Err(StoreError::Corrupt {
                path,
                reason: format!("holds key {key:?}, which belongs in {}", file_name(&key)),
            });
        }
        entries.push((key, value));
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(entries)
}

/// Takes the exclusive `flock` of `dir`'s `LOCK` (created if missing, as the old stores did on
/// open), held until the returned file is dropped.
fn lock(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(LOCK_FILE);
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_err("open lock file", &path))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(TryLockError::WouldBlock) => {
            let mut pid = String::new();
            let holder = lock
                .read_to_string(&mut pid)
                .ok()
                .and_then(|_| pid.trim().parse().ok());
            Err(StoreError::Locked {
                path: dir.to_path_buf(),
                holder,
            })
        }
        Err(TryLockError::Error(e)) => Err(io_err("lock", &path)(e)),
    }
}

/// The record file name for `key`.
///
/// The readable form keeps `a-z`, `0-9` and `-` and writes every other byte as `_xx` (lowercase
/// hex), so `group/My.App` is `k-group_2f_4dy_2e_41pp.rec`: no `/`, no `.` or `..`, no NUL,
/// and no upper-case letters, which keeps distinct keys distinct on case-insensitive filesystems.
/// Keys whose escaped form would be too long are named by their SHA-256 instead; the prefixes
/// keep the two forms apart.
fn file_name(key: &str) -> String {
    let mut name = String::with_capacity(2 + key.len() + RECORD_SUFFIX.len());
    name.push_str("k-");
    for &b in key.as_bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' {
            name.push(char::from(b));
        } else {
            let _ = write!(name, "_{b:02x}");
        }
        if name.len() + RECORD_SUFFIX.len() > MAX_READABLE_NAME {
            return format!("h-{:x}{RECORD_SUFFIX}", Sha256::digest(key.as_bytes()));
        }
    }
    name.push_str(RECORD_SUFFIX);
    name
}

#[cfg(test)]
fn encode_record(key: &str, value: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(HEADER_LEN + key.len() + value.len() + CHECKSUM_LEN);
    record.extend_from_slice(&MAGIC);
    let key_len = u32::try_from(key.len()).expect("a group key is far below 4 GiB");
    record.extend_from_slice(&key_len.to_le_bytes());
    record.extend_from_slice(&(value.len() as u64).to_le_bytes());
    record.extend_from_slice(key.as_bytes());
    record.extend_from_slice(value);
    let checksum = Sha256::digest(&record);
    record.extend_from_slice(&checksum);
    record
}

/// Parses a record file, or says what is wrong with it.
fn decode_record(mut record: Vec<u8>) -> Result<(String, Vec<u8>), String> {
    if record.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(format!(
            "{} bytes, shorter than any record (truncated)",
            record.len()
        ));
    }
    if record[..MAGIC.len()] != MAGIC {
        return Err(if record[..MAGIC.len() - 1] == MAGIC[..MAGIC.len() - 1] {
            format!(
                "record format version {}, this build reads {}",
                record[MAGIC.len() - 1],
                MAGIC[MAGIC.len() - 1]
            )
        } else {
            "not a store record (bad magic)".to_owned()
        });
    }
    let key_len = u32::from_le_bytes(record[8..12].try_into().expect("4 bytes"));
    let value_len = u64::from_le_bytes(record[12..20].try_into().expect("8 bytes"));
    // Computed in u128 so a garbage header cannot overflow the sum.
    let expected = HEADER_LEN as u128 + u128::from(key_len) + u128::from(value_len) + 32;
    if record.len() as u128 != expected {
        return Err(format!(
            "{} bytes where the header says {expected} (truncated or torn)",
            record.len()
        ));
    }
    let body_len = record.len() - CHECKSUM_LEN;
    if Sha256::digest(&record[..body_len])[..] != record[body_len..] {
        return Err("checksum mismatch".to_owned());
    }
    // Both lengths fit in usize: their sum is the file's length.
    let key_end = HEADER_LEN + key_len as usize;
    record.truncate(body_len);
    let value = record.split_off(key_end);
    record.drain(..HEADER_LEN);
    let key = String::from_utf8(record).map_err(|_| "key is not UTF-8".to_owned())?;
    Ok((key, value))
}

/// A record read back.
enum Record<'a> {
    Put { key: &'a str, value: &'a [u8] },
    Delete { key: &'a str },
}

/// Why bytes are not a record.
enum Damage {
    /// The checksum does not match: the record was torn, or altered since.
    Checksum,
    /// The checksum matches, so the record was written like this, but this build cannot read
    /// it.
    Invalid(String),
}

/// Parses one whole record, `len` to `crc`; the caller has cut it to the size its `len` says,
/// at least [`MIN_RECORD`].
fn decode(record: &[u8]) -> Result<Record<'_>, Damage> {
    let (body, crc) = record.split_at(record.len() - CRC_LEN);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err(Damage::Checksum);
    }
    let kind = body[4];
    let key_len = u32::from_le_bytes(body[5..HEAD_LEN].try_into().expect("4 bytes")) as usize;
    let rest = &body[HEAD_LEN..];
    let Some(key) = rest.get(..key_len) else {
        return Err(Damage::Invalid(format!(
            "key length {key_len} runs past the record's end"
        )));
    };
    let key =
        std::str::from_utf8(key).map_err(|_| Damage::Invalid("key is not UTF-8".to_owned()))?;
    let value = &rest[key_len..];
    match kind {
        KIND_PUT => Ok(Record::Put { key, value }),
        KIND_DELETE if value.is_empty() => Ok(Record::Delete { key }),
        KIND_DELETE => Err(Damage::Invalid("a delete that carries a value".to_owned())),
        other => Err(Damage::Invalid(format!("unknown record kind {other}"))),
    }
}

/// The whole size of the record whose first [`HEAD_LEN`] bytes are `head`, if they could start
/// one: a length that covers kind and key length, a known kind, a key that fits.
fn plausible_size(head: &[u8]) -> Option<u64> {
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
    let key_len = u32::from_le_bytes(head[5..HEAD_LEN].try_into().expect("4 bytes"));
    let holds_key = len.checked_sub(5).is_some_and(|rest| key_len <= rest);
    let known_kind = matches!(head[4], KIND_PUT | KIND_DELETE);
    (holds_key && known_kind).then(|| (4 + CRC_LEN) as u64 + u64::from(len))
}

/// Checks a log's header.
fn check_magic(header: &[u8]) -> Result<(), String> {
    if header == LOG_MAGIC {
        Ok(())
    } else if header[..LOG_MAGIC.len() - 1] == LOG_MAGIC[..LOG_MAGIC.len() - 1] {
        Err(format!(
            "log format version {}, this build reads {}",
            header[LOG_MAGIC.len() - 1],
            LOG_MAGIC[LOG_MAGIC.len() - 1]
        ))
    } else {
        Err("not a store log (bad header)".to_owned())
    }
}

/// Reads the next record from `reader`, with `remaining` bytes left in the file, into `record`,
/// or says why the bytes there cannot be one. Only its length is checked here.
fn read_next(
    reader: &mut impl io::Read,
    remaining: u64,
    record: &mut Vec<u8>,
) -> io::Result<Result<(), String>> {
    if remaining < MIN_RECORD as u64 {
        return Ok(Err(format!("{remaining} bytes, too few for a record")));
    }
    let mut len = [0; 4];
    reader.read_exact(&mut len)?;
    let size = (4 + CRC_LEN) as u64 + u64::from(u32::from_le_bytes(len));
    if size < MIN_RECORD as u64 {
        return Ok(Err(format!("its length, {size} bytes, is too short")));
    }
    if size > remaining {
        return Ok(Err(format!(
            "its length, {size} bytes, runs past the end of the file, {remaining} bytes on"
        )));
    }
    record.clear();
    record.extend_from_slice(&len);
    // At most the file's remaining length, checked above.
    record.resize(size as usize, 0);
    reader.read_exact(&mut record[4..])?;
    Ok(Ok(()))
}

/// The offset of the first valid record starting anywhere in `from..starts_before` of `file`
/// and ending by `end`, if any, found by trying every byte. Damage with none after it is a torn
/// end.
fn find_record(file: &File, from: u64, starts_before: u64, end: u64) -> io::Result<Option<u64>> {
    // Each window overlaps the next by a record head, so a head is never split between them.
    let mut window = vec![0; IO_BUFFER + HEAD_LEN - 1];
    let mut start = from;
    let mut record = Vec::new();
    while start < starts_before && end.saturating_sub(start) >= MIN_RECORD as u64 {
        let len = usize::try_from(end - start).map_or(window.len(), |n| n.min(window.len()));
        let bytes = &mut window[..len];
        file.read_exact_at(bytes, start)?;
        for i in 0..=(len - HEAD_LEN).min(IO_BUFFER - 1) {
            let at = start + i as u64;
            if at >= starts_before {
                break;
            }
            // Random bytes almost never pass this, so the checksum is rarely computed.
            let Some(size) = plausible_size(&bytes[i..i + HEAD_LEN]) else {
                continue;
            };
            if size > end - at {
                continue;
            }
            // Fits in memory: it is within the file's length, checked above.
            let size = size as usize;
            let candidate = match bytes.get(i..i + size) {
                Some(candidate) => candidate,
                None => {
                    record.resize(size, 0);
                    file.read_exact_at(&mut record, at)?;
                    &record[..]
                }
            };
            if !matches!(decode(candidate), Err(Damage::Checksum)) {
                return Ok(Some(at));
            }
        }
        start += IO_BUFFER as u64;
    }
    Ok(None)
}

/// Where the zeros that run to `to` in `from..to` of `file` start: just after its last byte
/// that is not zero, or `from` if all are zeros. Read backwards, [`IO_BUFFER`] bytes at a time.
fn data_end(file: &File, from: u64, to: u64) -> io::Result<u64> {
    let mut buffer = vec![0; IO_BUFFER.min(usize::try_from(to - from).unwrap_or(IO_BUFFER))];
    let mut end = to;
    while end > from {
        // At most the buffer's length.
        let len = (end - from).min(buffer.len() as u64) as usize;
        let bytes = &mut buffer[..len];
        let start = end - len as u64;
        file.read_exact_at(bytes, start)?;
        if bytes.iter().any(|&b| b != 0) {
            let last = bytes.iter().rposition(|&b| b != 0).expect("not all zeros");
            return Ok(start + last as u64 + 1);
        }
        end = start;
    }
    Ok(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, value: &[u8]) -> (String, Vec<u8>) {
        (key.to_owned(), value.to_vec())
    }

    /// A log record, as the log store wrote it.
    fn log_record(kind: u8, key: &str, value: &[u8]) -> Vec<u8> {
        let len = u32::try_from(1 + 4 + key.len() + value.len()).unwrap();
        let mut record = len.to_le_bytes().to_vec();
        record.push(kind);
        record.extend_from_slice(&u32::try_from(key.len()).unwrap().to_le_bytes());
        record.extend_from_slice(key.as_bytes());
        record.extend_from_slice(value);
        let crc = crc32fast::hash(&record);
        record.extend_from_slice(&crc.to_le_bytes());
        record
    }

    /// A log of puts of `a` and `b`, an overwrite of `a`, and a delete of `b`, then `zeros`
    /// bytes of preallocated space; returns each record's offset and the log's end.
    fn write_log(dir: &Path, zeros: usize) -> Vec<u64> {
        let mut log = LOG_MAGIC.to_vec();
        let mut offsets = Vec::new();
        for record in [
            log_record(KIND_PUT, "a", b"first"),
            log_record(KIND_PUT, "b", b"gone"),
            log_record(KIND_PUT, "a", b"second"),
            log_record(KIND_DELETE, "b", b""),
            log_record(KIND_PUT, "c", &[9; 100]),
        ] {
            offsets.push(log.len() as u64);
            log.extend_from_slice(&record);
        }
        offsets.push(log.len() as u64);
        log.resize(log.len() + zeros, 0);
        fs::write(dir.join(LOG_FILE), log).unwrap();
        offsets
    }

    fn corrupt_reason(result: Result<Vec<(String, Vec<u8>)>, StoreError>, path: &Path) -> String {
        match result {
            Err(e @ StoreError::Corrupt { .. }) => {
                let message = e.to_string();
                assert!(message.contains(&path.display().to_string()), "{message}");
                message
            }
            other => panic!("expected a corrupt-store error, got {other:?}"),
        }
    }

    /// A log reads as each key's last put, with or without preallocated zeros after it.
    #[test]
    fn log_reads_each_keys_last_put() {
        let dir = tempfile::tempdir().unwrap();
        for zeros in [0, 1, 4096] {
            write_log(dir.path(), zeros);
            assert_eq!(
                read_log(dir.path()).unwrap(),
                [entry("a", b"second"), entry("c", &[9; 100])]
            );
        }
    }

    /// A torn end (the last record cut short at any length, or its bytes altered, with zeros
    /// or nothing after it) is skipped: the records before it are read.
    #[test]
    fn torn_log_end_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = write_log(dir.path(), 0);
        let path = dir.path().join(LOG_FILE);
        let clean = fs::read(&path).unwrap();
        let last = offsets[4] as usize;
        let before = [entry("a", b"second")];
        for cut in last + 1..clean.len() {
            let mut torn = clean[..cut].to_vec();
            torn.resize(clean.len() + 64, 0);
            fs::write(&path, &torn).unwrap();
            assert_eq!(read_log(dir.path()).unwrap(), before, "cut at {cut}");
        }
        let mut flipped = clean.clone();
        flipped[last + 20] ^= 1;
        fs::write(&path, &flipped).unwrap();
        assert_eq!(read_log(dir.path()).unwrap(), before);
    }

    /// Damage with a valid record after it is reported naming the file and the offset, and so
    /// are a bad header and a record whose checksum matches but that this build cannot read.
    #[test]
    fn damaged_log_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = write_log(dir.path(), 0);
        let path = dir.path().join(LOG_FILE);
        let clean = fs::read(&path).unwrap();
        let mut damaged = clean.clone();
        damaged[offsets[1] as usize + 10] ^= 1;
        fs::write(&path, &damaged).unwrap();
        let message = corrupt_reason(read_log(dir.path()), &path);
        assert!(
            message.contains(&format!("offset {}", offsets[1])),
            "{message}"
        );

        let mut newer = clean.clone();
        newer[7] = 2;
        fs::write(&path, &newer).unwrap();
        let message = corrupt_reason(read_log(dir.path()), &path);
        assert!(message.contains("format version 2"), "{message}");
        fs::write(&path, b"ASTL").unwrap();
        corrupt_reason(read_log(dir.path()), &path);

        let mut unknown = LOG_MAGIC.to_vec();
        unknown.extend_from_slice(&log_record(7, "a", b"x"));
        fs::write(&path, &unknown).unwrap();
        let message = corrupt_reason(read_log(dir.path()), &path);
        assert!(message.contains("unknown record kind 7"), "{message}");
    }

    /// A directory of record files reads as its records sorted by key, ignoring temp files,
    /// `LOCK` and other names; awkward keys round-trip.
    #[test]
    fn record_files_read_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x/".repeat(500);
        let keys = [
            "group/b",
            "",
            "../../etc/passwd",
            "Group/A",
            "gröup/名前/🦀",
            &long,
        ];
        for (i, key) in keys.iter().enumerate() {
            fs::write(
                dir.path().join(file_name(key)),
                encode_record(key, &[i as u8]),
            )
            .unwrap();
        }
        fs::write(dir.path().join("k-a.rec.3.tmp"), b"ASTORE\0\x01 half").unwrap();
        fs::write(dir.path().join("notes.txt"), b"an operator's").unwrap();
        let mut expected: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| entry(k, &[i as u8]))
            .collect();
        expected.sort();
        assert_eq!(read_dir(dir.path()).unwrap(), expected);
    }

    /// A record file flipped at any byte, cut at any length, or under another key's name is
    /// reported naming it.
    #[test]
    fn damaged_record_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file_name("group/a"));
        let clean = encode_record("group/a", b"some value");
        for i in 0..clean.len() {
            let mut bytes = clean.clone();
            bytes[i] ^= 0x10;
            fs::write(&path, &bytes).unwrap();
            corrupt_reason(read_dir(dir.path()), &path);
        }
        for len in 0..clean.len() {
            fs::write(&path, &clean[..len]).unwrap();
            let message = corrupt_reason(read_dir(dir.path()), &path);
            assert!(message.contains("truncated"), "{message}");
        }
        fs::remove_file(&path).unwrap();
        let misplaced = dir.path().join(file_name("group/b"));
        fs::write(&misplaced, &clean).unwrap();
        let message = corrupt_reason(read_dir(dir.path()), &misplaced);
        assert!(message.contains("belongs in"), "{message}");
    }

    /// Distinct keys get distinct file names, even when they differ only in case or in
    /// characters the encoding escapes.
    #[test]
    fn file_names_are_injective() {
        let long = "k".repeat(300);
        let keys = [
            "a",
            "A",
            "_61",
            "a_",
            "a.",
            "a/",
            "a-",
            "",
            &long,
            &format!("{long}k"),
        ];
        let names: std::collections::BTreeSet<_> = keys.iter().map(|k| file_name(k)).collect();
        assert_eq!(names.len(), keys.len(), "{names:?}");
        assert!(names.iter().all(|n| n.len() <= MAX_READABLE_NAME));
    }

    /// Neither reader reads a directory whose lock another holder has.
    #[test]
    fn locked_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 0);
        let held = lock(dir.path()).unwrap();
        for result in [read_log(dir.path()), read_dir(dir.path())] {
            let error = result.expect_err("locked");
            assert!(matches!(error, StoreError::Locked { .. }), "{error:?}");
        }
        drop(held);
        assert_eq!(read_log(dir.path()).unwrap().len(), 2);
    }
}

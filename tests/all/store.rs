//! What every [`Store`] promises, checked on each (the memory store, [`RedbStore`] and
//! [`EtcdStore`] on a real one-member cluster); and the service's [`RedbStore`] survives
//! SIGKILL at any point of a write (issue 4, item 4): a process killed while writing state
//! restarts with every committed value intact and readable.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use assignor_coordinator::store::{MemoryStore, RedbStore, Store as _};
use assignor_store_etcd::EtcdStore;
use assignor_store_etcd::testing::Cluster;

#[path = "../src/bin/store-writer/value.rs"]
mod value;

/// What every [`Store`] promises, run on each implementation below.
mod contract {
    use assignor_coordinator::store::Store;

    fn entry(key: &str, value: &[u8]) -> (String, Vec<u8>) {
        (key.to_owned(), value.to_vec())
    }

    /// On an empty `store`: puts come back from `load_all` sorted by key (empty values and
    /// non-ASCII keys too), a second put replaces the value, and a delete removes the key,
    /// where deleting a missing key is fine.
    pub(super) fn put_overwrite_delete(store: &dyn Store) {
        store.put("group/b", b"").unwrap();
        store.put("group/a", b"hello").unwrap();
        store.put("gröup/名前/🦀", b"x").unwrap();
        assert_eq!(
            store.load_all().unwrap(),
            [
                entry("group/a", b"hello"),
                entry("group/b", b""),
                entry("gröup/名前/🦀", b"x")
            ]
        );
        store.put("group/a", b"second, longer").unwrap();
        assert_eq!(
            store.load_all().unwrap()[0],
            entry("group/a", b"second, longer")
        );
        store.delete("group/a").unwrap();
        store.delete("group/a").unwrap();
        store.delete("never existed").unwrap();
        store.delete("gröup/名前/🦀").unwrap();
        assert_eq!(store.load_all().unwrap(), [entry("group/b", b"")]);
        store.delete("group/b").unwrap();
        assert_eq!(store.load_all().unwrap(), []);
    }

    /// A store `open` makes again sees every put, overwrite and delete the dropped one made.
    pub(super) fn reopen_sees_everything<S: Store>(open: impl Fn() -> S) {
        let store = open();
        store.put("group/a", b"1").unwrap();
        store.put("group/b", &vec![7; 100_000]).unwrap();
        store.put("group/a", b"one").unwrap();
        store.put("group/c", b"3").unwrap();
        store.delete("group/c").unwrap();
        let before = store.load_all().unwrap();
        assert_eq!(before.len(), 2);
        drop(store);
        assert_eq!(open().load_all().unwrap(), before);
    }

    /// Writes queued with `put_unsynced` are read by `load_all` in their order, and each
    /// token's `sync` returns once it is durable.
    pub(super) fn unsynced_writes_are_read_in_order(store: &dyn Store) {
        store.put_unsynced("a", b"1").unwrap();
        let token = store.put_unsynced("a", b"2").unwrap();
        store.put_unsynced("b", b"3").unwrap();
        assert_eq!(
            store.load_all().unwrap(),
            [entry("a", b"2"), entry("b", b"3")]
        );
        store.sync(token).unwrap();
    }
}

/// The contract holds for the memory store, but for durability.
#[test]
fn memory_store_keeps_the_contract() {
    contract::put_overwrite_delete(&MemoryStore::new());
    contract::unsynced_writes_are_read_in_order(&MemoryStore::new());
}

/// The contract holds for the redb store, which creates its missing (nested) directory.
#[test]
fn redb_store_keeps_the_contract() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data").join("nested");
    let open = |name: &str| RedbStore::open(dir.join(name)).expect("open store");
    contract::put_overwrite_delete(&open("first.redb"));
    contract::unsynced_writes_are_read_in_order(&open("second.redb"));
    contract::reopen_sees_everything(|| open("store.redb"));
}

/// The contract holds for the etcd store on a real one-member cluster; each part under its own
/// key prefix, as it expects an empty store.
#[test]
fn etcd_store_keeps_the_contract() {
    let cluster = Cluster::start(1).expect("an etcd cluster");
    let open = |prefix: &str| {
        EtcdStore::open_with(&cluster.endpoints(), prefix, Default::default()).expect("open")
    };
    contract::put_overwrite_delete(&open("first/"));
    contract::unsynced_writes_are_read_in_order(&open("second/"));
    contract::reopen_sees_everything(|| open("third/"));
}

/// A running `store-writer`, killed on drop so a failing test leaves no writer behind.
struct Writer {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Writer {
    fn spawn(path: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_store-writer"))
            .arg(path)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn store-writer");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines }
    }

    /// The writer's next line, split into words.
    fn next_line(&mut self) -> Option<Vec<String>> {
        let line = self.lines.next()?.expect("read writer output");
        Some(line.split(' ').map(str::to_owned).collect())
    }

    fn kill(&mut self) {
        // SIGKILL on Unix: no destructors, no flush, nothing the writer could tidy up.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A line of the writer: `writing <key> <n>` before a put, `committed <key> <n>` after it
/// returned.
#[derive(Debug, PartialEq)]
enum Line {
    Writing(String, u64),
    Committed(String, u64),
}

/// Parses a writer's line.
fn parse(line: &[String]) -> Line {
    match line {
        [word, key, n] if word == "writing" => Line::Writing(key.clone(), n.parse().unwrap()),
        [word, key, n] if word == "committed" => Line::Committed(key.clone(), n.parse().unwrap()),
        _ => panic!("unexpected writer output {line:?}"),
    }
}

/// xorshift64: varied kill points without a dependency; the seed is printed for replay.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Twenty writers on one database, each SIGKILLed after a random number of commits plus a
/// random delay (so mostly in the middle of a put): after every kill the store opens, every
/// value is whole, and each key holds exactly its last reported commit — or the write that
/// was in flight, which may have landed but must then be complete.
#[test]
fn sigkill_mid_write_keeps_every_committed_value() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("store crash test seed {seed}");
    let mut random = seed;
    // Each key's value as last seen durable: reported commits and in-flight writes found.
    let mut durable = BTreeMap::<String, u64>::new();
    // Evidence that kills land inside `put`: the writer's last line announced a write it never
    // reported committed; and how many of those writes were durable all the same.
    let mut killed_mid_put = 0;
    let mut in_flight_landed = 0;

    for round in 0..20 {
        let mut writer = Writer::spawn(&path);
        let start = writer.next_line().expect("writer starts");
        let expected_start = durable.values().max().map_or(0, |&n| n + 1);
        assert_eq!(
            start,
            ["start".to_owned(), expected_start.to_string()],
            "round {round}"
        );

        let record = |line: Line, durable: &mut BTreeMap<String, u64>| match line {
            Line::Committed(key, n) => {
                durable.insert(key, n);
                None
            }
            Line::Writing(_, n) => Some(n),
        };
        let mut in_flight = None;
        for _ in 0..next_random(&mut random) % 24 {
            in_flight = record(
                parse(&writer.next_line().expect("writer died")),
                &mut durable,
            );
        }
        std::thread::sleep(Duration::from_micros(next_random(&mut random) % 5_000));
        writer.kill();
        // Lines already in the pipe were printed before the kill: a commit reported there had
        // returned.
        while let Some(line) = writer.next_line() {
            in_flight = record(parse(&line), &mut durable);
        }
        if in_flight.is_some() {
            killed_mid_put += 1;
        }

        // The writer is dead, so its lock is gone and the database opens at once.
        let store = RedbStore::open(&path).expect("reopen after SIGKILL");
        let stored = store.load_all().expect("every record intact after SIGKILL");
        for (key, bytes) in &stored {
            let n = value::decode(bytes)
                .unwrap_or_else(|e| panic!("round {round}: {key} holds a damaged value: {e}"));
            if Some(n) == in_flight && *key == value::key(n) && durable.get(key) != Some(&n) {
                durable.insert(key.clone(), n);
                in_flight_landed += 1;
            }
            assert_eq!(
                durable.get(key),
                Some(&n),
                "round {round}: {key} holds {n}; its last commit was {:?}, in flight {in_flight:?}",
                durable.get(key)
            );
        }
        assert_eq!(
            stored.len(),
            durable.len(),
            "round {round}: a committed key is missing"
        );
    }
    eprintln!(
        "store crash test: {} writes committed; of 20 kills, {killed_mid_put} landed inside a \
         put and {in_flight_landed} of those writes were durable; {:?}",
        durable.values().max().map_or(0, |&n| n + 1),
        started.elapsed()
    );
    assert!(
        !durable.is_empty(),
        "the writers committed nothing: the test tested nothing"
    );
    assert!(
        killed_mid_put > 0,
        "no kill landed inside a put: the test did not test a crash mid-write"
    );
}

/// The value check has teeth: a value cut short or altered does not decode.
#[test]
fn damaged_values_do_not_decode() {
    let whole = value::encode(12);
    assert_eq!(value::decode(&whole), Ok(12));
    assert!(value::decode(&whole[..whole.len() - 1]).is_err());
    assert!(value::decode(&whole[..4]).is_err());
    let mut altered = whole.clone();
    *altered.last_mut().unwrap() ^= 1;
    assert!(value::decode(&altered).is_err());
}

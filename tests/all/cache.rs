//! The compiled-component cache on disk: a file that is not what the cache wrote (truncated,
//! corrupt, another entry's, foreign) is compiled over, never used; and the service's cache
//! holds only the entries of live uploads (and the broker's components) through replaces,
//! deletes, failed uploads, tenants sharing a hash, concurrent uploads, and restarts with
//! strays or removed tenants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Instant;

use assignor_sandbox::{Limits, Runtime};
use assignor_service::config::ServiceConfig;
use assignor_tests::guests;

use crate::common::example;
use crate::service::{Client, Server, TOKEN_A, TOKEN_B, config, config_keys};

/// The upload every test makes: its `name()` is `hashmap-user`.
const NAME: &str = "hashmap-user";

fn cache_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("cache")
}

/// The cache's file names.
fn files(cache: &Path) -> BTreeSet<String> {
    match std::fs::read_dir(cache) {
        Ok(entries) => entries
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
        Err(e) => panic!("reading {}: {e}", cache.display()),
    }
}

/// The content hashes the cache has entries for (each file is `<sha256>-<engine>.cwasm`).
fn hashes(cache: &Path) -> BTreeSet<String> {
    files(cache)
        .iter()
        .map(|f| f.split_once('-').expect("an entry's name").0.to_owned())
        .collect()
}

/// The cache files of the component with content hash `sha256`.
fn entries_of(cache: &Path, sha256: &str) -> Vec<PathBuf> {
    files(cache)
        .iter()
        .filter(|f| f.starts_with(sha256))
        .map(|f| cache.join(f))
        .collect()
}

/// `component` with a custom section appended: another content hash, the same assignor.
fn variant(component: &[u8], n: u32) -> Vec<u8> {
    let name = b"variant";
    let payload = n.to_le_bytes();
    let size = 1 + name.len() + payload.len();
    let mut bytes = component.to_vec();
    bytes.extend([0, u8::try_from(size).expect("small"), name.len() as u8]);
    bytes.extend(name);
    bytes.extend(payload);
    bytes
}

fn hashmap_user() -> Vec<u8> {
    std::fs::read(guests::HASHMAP_USER).expect("the guest is built")
}

/// Uploads `bytes` as [`NAME`], answering its content hash.
fn upload(client: &Client, bytes: &[u8]) -> String {
    let (status, report) = client.put(&format!("/v1/assignors/{NAME}"), bytes);
    assert!(status == 200 || status == 201, "{status}: {report}");
    report["sha256"].as_str().expect("a hash").to_owned()
}

fn delete(client: &Client) {
    let (status, body) = client.delete(&format!("/v1/assignors/{NAME}"));
    assert_eq!(status, 204, "{body}");
}

/// [`config`] with `extra` keys after its own (later keys win).
fn config_with(data_dir: &Path, extra: &[&str]) -> ServiceConfig {
    let mut keys = config_keys(data_dir);
    keys.extend(extra.iter().map(|k| (*k).to_owned()));
    ServiceConfig::load(None, &keys).expect("valid service config")
}

/// A cache file that is truncated, bit-flipped, another entry's or foreign is compiled over
/// (the file ends up as the cache wrote it) and the component loads and assigns correctly.
#[test]
fn a_bad_cache_file_is_recompiled_not_used() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = BTreeMap::new();
    let load = |bytes: &[u8]| {
        let runtime = Runtime::with_cache_dir(Limits::default(), dir.path()).expect("runtime");
        let assignor = runtime.load(bytes, NAME, &config).expect("loads");
        let (group, topology) = example();
        assignor.assign(&group, &topology).expect("assigns");
        assignor.sha256()
    };
    let (ours, other) = (hashmap_user(), variant(&hashmap_user(), 1));
    let sha = load(&ours);
    let other_sha = load(&other);
    let entries = entries_of(dir.path(), &sha);
    let [path] = entries.as_slice() else {
        panic!("one entry for {sha}: {:?}", files(dir.path()));
    };
    let good = std::fs::read(path).expect("the entry");
    let other_file = std::fs::read(&entries_of(dir.path(), &other_sha)[0]).expect("the entry");
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0xff;
    let bad: [(&str, Vec<u8>); 5] = [
        ("truncated", good[..good.len() / 2].to_vec()),
        ("bit-flipped", flipped),
        ("another entry's", other_file),
        ("empty", Vec::new()),
        ("foreign", b"\x7fELF not a cache file at all".repeat(100)),
    ];
    for (what, bytes) in bad {
        std::fs::write(path, &bytes).expect("spoil the entry");
        assert_eq!(load(&ours), sha, "{what}");
        assert!(
            std::fs::read(path).expect("the entry") == good,
            "a {what} file is written over with the compiled component"
        );
    }
}

/// Replacing an upload twenty times, failing an upload and deleting it leave in the cache
/// only the live upload's entry besides the broker's.
#[test]
fn only_live_uploads_keep_their_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_dir(dir.path());
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    let broker = hashes(&cache);
    let component = hashmap_user();
    let mut shas = BTreeSet::new();
    for n in 0..=20 {
        let sha = upload(&a, &variant(&component, n));
        shas.insert(sha.clone());
        let mut live = broker.clone();
        live.insert(sha.clone());
        assert_eq!(hashes(&cache), live, "after upload {n}");
        assert_eq!(entries_of(&cache, &sha).len(), 1, "after upload {n}");
    }
    assert_eq!(shas.len(), 21, "every variant has its own hash");
    // Under another name, `name()` fails the upload's checks after it compiled.
    let (status, body) = a.put("/v1/assignors/other-name", &variant(&component, 99));
    assert_eq!(status, 422, "{body}");
    assert_eq!(hashes(&cache).len(), broker.len() + 1, "{body}");
    delete(&a);
    assert_eq!(hashes(&cache), broker, "the deleted upload's entry is gone");
}

/// Two tenants uploading the same component share its entry: it survives one tenant's
/// delete and goes with the second's.
#[test]
fn a_shared_hash_survives_one_tenants_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_dir(dir.path());
    let server = Server::start(&config(dir.path()));
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    let component = variant(&hashmap_user(), 7);
    let sha = upload(&a, &component);
    assert_eq!(upload(&b, &component), sha);
    delete(&a);
    assert!(!entries_of(&cache, &sha).is_empty(), "b still uses it");
    let (status, body) = b.get("/v1/assignors");
    assert_eq!(status, 200, "{body}");
    delete(&b);
    assert!(entries_of(&cache, &sha).is_empty(), "{:?}", files(&cache));
}

/// Tenant `b` deletes the component tenant `a` is uploading while `a` runs its trial
/// (loaded from `b`'s entry): `a`'s upload keeps the entry.
#[test]
fn a_delete_does_not_take_an_upload_in_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_dir(dir.path());
    let server = Server::start(&config(dir.path()));
    let (a, b) = (server.client(TOKEN_A), server.client(TOKEN_B));
    let path = "/v1/assignors/slow-legal";
    let component = std::fs::read(guests::SLOW_LEGAL).expect("the guest is built");
    for n in 0..3 {
        let bytes = variant(&component, n);
        assert_eq!(b.put(path, &bytes).0, 201);
        // Its trial's time: the component is compiled already.
        let started = Instant::now();
        assert_eq!(b.put(path, &bytes).0, 200);
        let trial = started.elapsed();
        let (status, report) = thread::scope(|s| {
            let uploading = s.spawn(|| a.put(path, &bytes));
            thread::sleep(trial / 2);
            assert_eq!(b.delete(path).0, 204);
            uploading.join().expect("the upload thread")
        });
        assert_eq!(status, 201, "{report}");
        let sha = report["sha256"].as_str().expect("a hash");
        assert_eq!(entries_of(&cache, sha).len(), 1, "round {n} ({trial:?})");
        assert_eq!(a.delete(path).0, 204);
    }
}

/// A restart sweeps the cache: stray files (foreign, temporary, entries of unknown
/// components or engines) and the entries of a tenant no longer configured go; the live
/// entries stay, and still load without recompiling (their files are unchanged).
#[test]
fn a_restart_removes_strays_and_removed_tenants_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = cache_dir(dir.path());
    let (kept, dropped, broker) = {
        let server = Server::start(&config(dir.path()));
        let broker = files(&cache);
        let kept = upload(&server.client(TOKEN_A), &variant(&hashmap_user(), 1));
        let dropped = upload(&server.client(TOKEN_B), &variant(&hashmap_user(), 2));
        (kept, dropped, broker)
    };
    let live: BTreeSet<String> = files(&cache)
        .into_iter()
        .filter(|f| !f.starts_with(&dropped))
        .collect();
    assert_eq!(live.len(), broker.len() + 1, "{live:?}");
    let kept_file = cache.join(
        live.iter()
            .find(|f| f.starts_with(&kept))
            .expect("a's entry"),
    );
    let modified = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .expect("a's entry")
    };
    let kept_at = modified(&kept_file);
    let tag = kept_file
        .file_name()
        .and_then(|f| f.to_str())
        .and_then(|f| f.strip_suffix(".cwasm"))
        .and_then(|f| f.split_once('-'))
        .expect("<sha256>-<engine>.cwasm")
        .1
        .to_owned();
    let unknown = "ab".repeat(32);
    for stray in [
        "notes.txt".to_owned(),
        format!("{unknown}-{tag}.cwasm"),
        format!("{kept}-0123456789abcdef.cwasm"),
        format!("{kept}-{tag}.tmp4242-0"),
    ] {
        std::fs::write(cache.join(stray), b"stray").expect("write a stray");
    }
    let without_b = config_with(dir.path(), &["service.tenants=a,tiny"]);
    let server = Server::start(&without_b);
    assert_eq!(files(&cache), live, "only the live entries are left");
    assert_eq!(
        modified(&kept_file),
        kept_at,
        "a's entry was used, not rewritten"
    );
    let (status, listed) = server.client(TOKEN_A).get("/v1/assignors");
    assert_eq!(status, 200, "{listed}");
    let listed = listed["assignors"].as_array().expect("a list");
    assert!(
        listed
            .iter()
            .any(|u| u["sha256"].as_str() == Some(kept.as_str())),
        "{listed:?}"
    );
}

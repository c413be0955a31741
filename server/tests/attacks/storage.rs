//! Storage faults (issue 38): real `dls` processes restarted on data directories damaged
//! between a `kill -9` and the restart. The one promise: a fencing token is never handed
//! out twice. A node restarted on damage either refuses to start, naming the file and the
//! repair, or serves with every later token above every token it granted before; the
//! damage issue 38 found trimmed or ignored must be refused.
//!
//! Each case starts a node on its own copy of one data directory, so a base history is
//! written once per test. Run against another build with `DLS_BIN_UNDER_TEST=/path/to/dls`:
//! against v0.1.0 (ca59f73) the cases fail with the tokens the node handed out again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use caerus_core::LockMode;
use caerus_testkit::disk::{self, Record};
use futures::StreamExt;

use crate::common::{
    eventually_async as eventually, grant_many, http_get, opts, patient_client, wait, Cluster, Spec, PATIENCE,
};

/// How long a restarted node may take to refuse or to serve.
const START: Duration = Duration::from_secs(20);
/// Cases started at once (each is one `dls` process).
const PARALLEL: usize = 4;
/// What every refusal ends with: the way back.
const REPAIR: &str = "from a backup";

/// A stopped node's data directory, copies of its files from earlier in its life, and the
/// token it handed out last.
struct Base {
    _dir: tempfile::TempDir,
    data_dir: PathBuf,
    /// The data directory as it was half-way (copied while the node was paused).
    earlier: PathBuf,
    /// Granted last and still held (the key `ns/held`, by a transaction with a long lease).
    held: u64,
}

/// One node (started with `flags`) grants 30 tokens, then one more that stays held (the
/// last entry of its log), and is killed with SIGKILL.
async fn single_node_base(flags: &[&str]) -> Base {
    let mut cluster = Cluster::start_with(1, flags).await;
    let c = patient_client(cluster.endpoints()).await;
    let half = grant_many(&c, "k", 15, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let earlier = dir.path().join("earlier");
    cluster.pause(1);
    disk::copy_dir(&cluster.node(1).data_dir, &earlier).unwrap();
    cluster.resume(1);
    let before = grant_many(&c, "l", 15, half).await;
    let holder = c.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(held.fencing_token > before);
    cluster.kill(1);
    let data_dir = dir.path().join("data");
    disk::copy_dir(&cluster.node(1).data_dir, &data_dir).unwrap();
    Base { _dir: dir, data_dir, earlier, held: held.fencing_token }
}

/// What a node did when started on a damaged copy.
enum Outcome {
    /// It exited; what it logged.
    Refused(String),
    /// It served: the token of a new grant, and that of `ns/held` if it was granted (the
    /// holder's lock forgotten).
    Served { next: u64, held_again: Option<u64> },
    /// It neither refused nor served; what its `/readyz` said.
    Stuck(String),
}

/// Starts a single node on a copy of `base` damaged by `damage` (given the copy's data
/// directory and the base's).
async fn restart_on(base: &Base, damage: &Damage) -> Outcome {
    let mut cluster = Cluster::new(Spec::default()).unwrap();
    let data_dir = cluster.node(1).data_dir.clone();
    disk::copy_dir(&base.data_dir, &data_dir).unwrap();
    damage(&data_dir, base);
    cluster.start_all().unwrap();
    let deadline = Instant::now() + START;
    loop {
        if cluster.has_exited(1) {
            return Outcome::Refused(cluster.log_of(1));
        }
        if cluster.leader_now().await.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let readyz = http_get(&cluster.http_addr(1), "/readyz").map(|(status, body)| format!("{status} {body}"));
            return Outcome::Stuck(readyz.unwrap_or_else(|e| e.to_string()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = patient_client(cluster.endpoints()).await;
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(1000)).await.unwrap().fencing_token;
    let held_again = t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await.ok().map(|l| l.fencing_token);
    Outcome::Served { next, held_again }
}

type Damage = Box<dyn Fn(&Path, &Base) + Send + Sync>;

/// What a case requires of the node.
enum Must {
    /// Refuse, its log naming each of these (and the repair).
    Refuse(Vec<String>),
    /// Refuse naming the repair, or serve with every token above the last one granted.
    RefuseOrServeAbove,
}

struct Case {
    name: String,
    damage: Damage,
    must: Must,
}

fn case(name: impl Into<String>, must: Must, damage: impl Fn(&Path, &Base) + Send + Sync + 'static) -> Case {
    Case { name: name.into(), damage: Box::new(damage), must }
}

fn refuse(needles: &[&str]) -> Must {
    Must::Refuse(needles.iter().map(|s| s.to_string()).collect())
}

/// Why the outcome breaks what the case requires, if it does.
fn broken(case: &Case, base: &Base, outcome: Outcome) -> Option<String> {
    let name = &case.name;
    match (outcome, &case.must) {
        (Outcome::Refused(log), must) => {
            let mut needles = vec![REPAIR.to_string()];
            if let Must::Refuse(more) = must {
                needles.extend(more.iter().cloned());
            }
            let missing: Vec<String> = needles.into_iter().filter(|n| !log.contains(n.as_str())).collect();
            let last: Vec<&str> = log.lines().rev().take(3).collect();
            (!missing.is_empty()).then(|| format!("{name}: the refusal does not say {missing:?}: {last:?}"))
        }
        (Outcome::Served { next, held_again }, must) => {
            let reissued = next <= base.held || held_again.is_some();
            (reissued || matches!(must, Must::Refuse(_))).then(|| {
                format!(
                    "{name}: the node served{}: a new grant got token {next}{} (token {} was granted and held \
                     before){}",
                    if reissued { "" } else { " instead of refusing" },
                    if next <= base.held { ", handed out again" } else { "" },
                    base.held,
                    held_again.map_or(String::new(), |t| format!("; ns/held, still held, was granted again as {t}"))
                )
            })
        }
        (Outcome::Stuck(readyz), _) => {
            Some(format!("{name}: the node started but did not serve within {START:?} (/readyz: {})", readyz.trim()))
        }
    }
}

/// Runs every case on its own copy of `base` and fails with all that broke their rule.
async fn run(base: &Base, cases: Vec<Case>) {
    let failures: Vec<String> = futures::stream::iter(&cases)
        .map(|c| async move { broken(c, base, restart_on(base, &c.damage).await) })
        .buffer_unordered(PARALLEL)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

fn flip(path: &Path, at: u64) {
    disk::flip_byte(path, at).unwrap();
}

fn cut(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

/// Damage to the file `name` of the data directory, given a record of it.
fn on_file(
    name: String,
    record: Record,
    damage: impl Fn(&Path, Record) + Send + Sync + 'static,
) -> impl Fn(&Path, &Base) + Send + Sync + 'static {
    move |d, _| damage(&at(d, &name), record)
}

/// `name` inside a data directory.
fn at(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join(name)
}

/// Issue 38's single-node reproductions: damage to the last, acknowledged record (or to
/// the newest segment holding it) was trimmed as a torn tail and its token handed out
/// again. Each is refused now, naming the file (and the byte) and the repair.
#[tokio::test]
async fn damage_to_acknowledged_log_records_refuses_the_start_instead_of_reissuing_tokens() {
    let base = single_node_base(&[]).await;
    let (segment, last) = disk::last_record(&base.data_dir).unwrap();
    assert!(last.end() > 4096, "the log spans more than one page");
    let name = format!("raft-log/{}", segment.file_name().unwrap().to_str().unwrap());
    let page = (last.end() - 1) / 4096 * 4096;
    let damaged_at = |offset: u64| refuse(&[&name, &format!("is damaged at byte {offset}")]);
    let r = last;
    let on_last = |f: fn(&Path, Record)| on_file(name.clone(), r, f);
    let n = name.clone();
    let cases = vec![
        case(
            "a payload byte of the last record flipped",
            damaged_at(r.offset),
            on_last(|p, r| flip(p, r.offset + 24 + r.len / 2)),
        ),
        case("the last record's checksum flipped", damaged_at(r.offset), on_last(|p, r| flip(p, r.offset + 1))),
        case("the last record's length flipped", damaged_at(r.offset), on_last(|p, r| flip(p, r.offset + 4))),
        case(
            "the last 4 KiB page zeroed",
            refuse(&[&name]),
            on_file(name.clone(), r, move |p, _| disk::zero(p, page, 4096).unwrap()),
        ),
        case("the segment cut to half its written size", refuse(&[&name]), on_last(|p, r| cut(p, r.end() / 2))),
        case("the segment cut at its last record", refuse(&[&name]), on_last(|p, r| cut(p, r.offset))),
        case("the first page zeroed", damaged_at(0), on_last(|p, _| disk::zero(p, 0, 4096).unwrap())),
        case("the newest segment deleted", refuse(&["is missing: raft-meta says the log was on disk"]), move |d, _| {
            std::fs::remove_file(at(d, &n)).unwrap()
        }),
        case("raft-log/ deleted", refuse(&["is missing: raft-meta says the log was on disk"]), |d, _| {
            std::fs::remove_dir_all(at(d, "raft-log")).unwrap()
        }),
        case("an older copy of the newest segment put back", refuse(&[&name]), {
            let n = name.clone();
            move |d, b| std::fs::copy(at(&b.earlier, &n), at(d, &n)).map(drop).unwrap()
        }),
    ];
    run(&base, cases).await;
}

/// The files a node writes, as paths relative to its data directory, with what a refusal
/// must name and whether every damage to it must be refused.
fn files_of(data_dir: &Path) -> Vec<(String, &'static str, bool)> {
    let mut files = Vec::new();
    for segment in disk::segments(data_dir).unwrap() {
        if disk::records(&segment).unwrap().is_empty() {
            continue;
        }
        let name = format!("raft-log/{}", segment.file_name().unwrap().to_str().unwrap());
        files.push((name, "raft-log", true));
    }
    for e in std::fs::read_dir(at(data_dir, "snapshots")).unwrap() {
        let name = format!("snapshots/{}", e.unwrap().file_name().to_str().unwrap());
        files.push((name, "snapshots", true));
    }
    // (v0.1.0 kept no raft-meta: a run against it with DLS_BIN_UNDER_TEST leaves it out.)
    for (name, strict) in [("raft-meta", false), ("cluster-id.toml", false)] {
        if at(data_dir, name).exists() {
            files.push((name.to_string(), name, strict));
        }
    }
    files
}

/// Where a file's written data ends: a segment's last payload byte + 1 (its padding and
/// preallocated zeros are not data), any other file's size.
fn written_end(path: &Path) -> u64 {
    match disk::records(path) {
        Ok(records) if path.extension().is_some_and(|e| e == "wal") => {
            records.last().map_or(disk::SEGMENT_HEADER, |r| r.offset + disk::RECORD_HEADER + r.len)
        }
        _ => std::fs::metadata(path).unwrap().len(),
    }
}

/// Issue 38, item 6: every file the node writes (log segments, snapshot, vote and
/// metadata, identity) and every damage (a byte flipped at the start, the middle and the
/// end of its data, a zeroed page, the file cut to half, deleted, an older copy put back).
/// The node refuses naming the file and the repair, or serves with every token above every
/// token it granted; damage to acknowledged log records, to a snapshot the log no longer
/// covers, or that leaves no trustworthy vote is refused.
#[tokio::test]
async fn every_damage_to_every_file_refuses_naming_it_or_serves_above_every_token() {
    let base = single_node_base(&["--snapshot-every", "20"]).await;
    let files = files_of(&base.data_dir);
    assert!(files.iter().any(|(_, kind, _)| *kind == "snapshots"), "a snapshot was taken: {files:?}");
    let mut cases = Vec::new();
    for (name, kind, strict) in files {
        let end = written_end(&at(&base.data_dir, &name));
        let must = |strict: bool| if strict { refuse(&[kind]) } else { Must::RefuseOrServeAbove };
        let file = move |d: &Path| at(d, &name);
        let f = file.clone();
        cases.push(case(format!("{kind}: the first byte flipped"), must(strict), move |d, _| flip(&f(d), 0)));
        let f = file.clone();
        cases.push(case(format!("{kind}: a byte in the middle flipped"), must(strict), move |d, _| {
            flip(&f(d), end / 2)
        }));
        let f = file.clone();
        cases.push(case(format!("{kind}: the last byte flipped"), must(strict), move |d, _| flip(&f(d), end - 1)));
        let f = file.clone();
        cases.push(case(format!("{kind}: a page zeroed"), must(strict), move |d, _| {
            disk::zero(&f(d), (end / 2) / 4096 * 4096, 4096.min(end)).unwrap()
        }));
        let f = file.clone();
        cases.push(case(format!("{kind}: cut to half"), must(strict || kind == "raft-meta"), move |d, _| {
            cut(&f(d), end / 2)
        }));
        let f = file.clone();
        cases.push(case(format!("{kind}: deleted"), must(strict || kind == "raft-meta"), move |d, _| {
            std::fs::remove_file(f(d)).unwrap()
        }));
        let f = file.clone();
        let rel = f(Path::new(""));
        if at(&base.earlier, rel.to_str().unwrap()).exists() {
            // An older copy of the newest segment lacks synced records, one of raft-meta lacks
            // the watermark the records vouch for: refused; an older snapshot may be served
            // from with the log after it.
            let must = must(kind == "raft-log" || kind == "raft-meta");
            cases.push(case(format!("{kind}: an older copy put back"), must, move |d, b| {
                std::fs::copy(at(&b.earlier, rel.to_str().unwrap()), f(d)).map(drop).unwrap()
            }));
        }
    }
    if at(&base.data_dir, "raft-meta").exists() {
        cases.push(case("raft-meta: both copies damaged", refuse(&["raft-meta is damaged: neither copy"]), |d, _| {
            flip(&at(d, "raft-meta"), 40);
            flip(&at(d, "raft-meta"), 4096 + 40);
        }));
    }
    cases.push(case("every snapshot deleted, an older one put back", Must::RefuseOrServeAbove, |d, b| {
        for e in std::fs::read_dir(at(d, "snapshots")).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        for e in std::fs::read_dir(at(&b.earlier, "snapshots")).unwrap() {
            let p = e.unwrap().path();
            std::fs::copy(&p, at(d, "snapshots").join(p.file_name().unwrap())).unwrap();
        }
    }));
    run(&base, cases).await;
}

/// Data directories of v0.1.0 kept the vote in sled (`raft.sled`): the first start reads
/// it once into `raft-meta`. With `DLS_V010_BIN` set the directory is written by that
/// binary (v0.1.0, commit ca59f73); otherwise by this build, then given v0.1.0's layout
/// (the segments have not changed: the vote, commit index and purge point go back into
/// sled under v0.1.0's keys, `raft-meta` is removed).
#[tokio::test]
async fn a_v010_data_directory_restarts_with_its_vote_and_its_tokens() {
    let old_bin = std::env::var_os("DLS_V010_BIN").map(PathBuf::from);
    let mut old = Cluster::start_spec(Spec { bin: old_bin.clone(), ..Spec::default() }).await;
    let c = patient_client(old.endpoints()).await;
    let before = grant_many(&c, "k", 10, 0).await;
    let holder = c.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(held.fencing_token > before);
    old.kill(1);
    let data_dir = old.node(1).data_dir.clone();
    if old_bin.is_none() {
        as_v010(&data_dir);
    }
    let vote = read_v010_vote(&data_dir).expect("a vote in raft.sled");

    old.set_bin(caerus_testkit::dls_bin());
    old.start_again(1);
    old.wait_for_leader(START).await;
    let log = old.log_since_start(1);
    assert!(log.contains("migrating the raft metadata of a v0.1.0 data directory"), "{log}");
    assert!(data_dir.join("raft.sled.migrated").is_dir() && !data_dir.join("raft.sled").exists());
    let meta = caerus_server::raft::meta::MetaFile::open(&data_dir).unwrap().expect("raft-meta written");
    let term = meta.get().vote.expect("the vote").leader_id().get_term();
    assert!(term >= vote.leader_id().get_term(), "vote {vote} read back as term {term}");
    let c = patient_client(old.endpoints()).await;
    let t = c.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(1000)).await.unwrap();
    assert!(next.fencing_token > held.fencing_token, "token {} after {}", next.fencing_token, held.fencing_token);
    assert!(t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await.is_err(), "ns/held is still held");
}

/// v0.1.0's sled tree and keys (`server/src/raft/log_store.rs` at ca59f73).
const V010_TREE: &str = "raft_meta";

/// Gives a stopped node's data directory of this build v0.1.0's layout.
fn as_v010(data_dir: &Path) {
    use caerus_server::raft::types::codec;
    let meta = caerus_server::raft::meta::MetaFile::open(data_dir).unwrap().unwrap().get().clone();
    let db = sled::open(data_dir.join("raft.sled")).unwrap();
    let tree = db.open_tree(V010_TREE).unwrap();
    if let Some(vote) = meta.vote {
        tree.insert("vote", codec::encode(&vote).unwrap()).unwrap();
    }
    tree.insert("committed", codec::encode(&meta.committed).unwrap()).unwrap();
    if let Some(purged) = meta.purged {
        tree.insert("last_purged", codec::encode(&purged).unwrap()).unwrap();
    }
    db.flush().unwrap();
    std::fs::remove_file(data_dir.join("raft-meta")).unwrap();
}

fn read_v010_vote(data_dir: &Path) -> Option<caerus_server::raft::types::Vote> {
    let db = sled::open(data_dir.join("raft.sled")).unwrap();
    let v = db.open_tree(V010_TREE).unwrap().get("vote").unwrap()?;
    Some(caerus_server::raft::types::codec::decode(&v).unwrap())
}

/// Issue 38's three-node case: leader A, followers B and C; C paused; a token granted
/// (committed on A and B); power lost on all three; one byte of B's last record flipped;
/// B and C start first, A later. B trimmed the entry, B and C elected a leader without it,
/// and the token was handed out again. Now B cuts its log at the damage but neither votes
/// nor stands for election until a leader whose commit covers what it lost has given it
/// back (protocol-aware recovery): B and C cannot elect without A, A leads with the entry.
#[tokio::test]
async fn three_nodes_one_damaged_record_and_a_power_loss_hand_out_no_token_twice() {
    let mut cluster = Cluster::start(3).await;
    let a = cluster.wait_for_leader(START).await;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|&n| n != a).collect();
    let (b, c) = (others[0], others[1]);
    let client = patient_client(cluster.endpoints()).await;
    let before = grant_many(&client, "k", 5, 0).await;
    cluster.pause(c);
    let holder = client.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(5000)).await.unwrap();
    assert!(held.fencing_token > before);
    cluster.kill_all();

    let (segment, last) = disk::last_record(&cluster.node(b).data_dir).unwrap();
    flip(&segment, last.offset + 24 + last.len / 2);
    cluster.start_node(b).unwrap();
    cluster.start_node(c).unwrap();
    // B and C have had their chance: B said it does not vote, or (as before) they elected.
    eventually(PATIENCE, "B to stand aside, or B and C to elect a leader", || async {
        let aside = cluster.log_since_start(b).contains("not voting or standing for election");
        (aside || cluster.leader_now().await.is_some()).then_some(())
    })
    .await;
    let readyz_aside = http_get(&cluster.http_addr(b), "/readyz").unwrap();
    cluster.start_node(a).unwrap();

    let client = patient_client(cluster.endpoints()).await;
    let t = client.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(10_000)).await.unwrap();
    assert!(
        next.fencing_token > held.fencing_token,
        "token {} handed out again (granted and held before the power loss: {})",
        next.fencing_token,
        held.fencing_token
    );
    let again = t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await;
    assert!(again.is_err(), "ns/held, still held, was granted again: {again:?}");
    // B got the entries back and takes part again.
    eventually(PATIENCE, "B to fetch what it lost", || async {
        cluster.log_since_start(b).contains("fetched again every entry this node had lost").then_some(())
    })
    .await;
    let log = cluster.log_since_start(b);
    assert!(log.contains(&format!("{} is damaged at byte {}", segment.display(), last.offset)), "{log}");
    // While it owed them it said it could not serve.
    assert_eq!(readyz_aside.0, 503, "{readyz_aside:?}");
    assert!(readyz_aside.1.contains("recovering raft log entries up to index"), "{readyz_aside:?}");
    eventually(PATIENCE, "B to be ready once it caught up", || async {
        http_get(&cluster.http_addr(b), "/readyz").ok().filter(|(status, _)| *status == 200)
    })
    .await;
}

/// A leader that finds its own last record damaged after a power loss: openraft restores
/// a node whose saved vote is its own committed one as the leader of that term at once,
/// which with the shortened log would have its followers cut the entry too. It comes back
/// as a follower that owes the entry; the others lead.
#[tokio::test]
async fn a_leader_with_a_damaged_last_record_does_not_lead_its_followers_back_without_it() {
    let mut cluster = Cluster::start(3).await;
    let a = cluster.wait_for_leader(START).await;
    let client = patient_client(cluster.endpoints()).await;
    let holder = client.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(5000)).await.unwrap();
    cluster.kill_all();
    let (segment, last) = disk::last_record(&cluster.node(a).data_dir).unwrap();
    flip(&segment, last.offset + 1);
    cluster.start_all().unwrap();

    let client = patient_client(cluster.endpoints()).await;
    let t = client.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(10_000)).await.unwrap();
    assert!(next.fencing_token > held.fencing_token, "token {} handed out again", next.fencing_token);
    assert!(t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await.is_err(), "ns/held granted again");
    eventually(PATIENCE, "the old leader to fetch what it lost", || async {
        cluster.log_since_start(a).contains("fetched again every entry this node had lost").then_some(())
    })
    .await;
}

/// What a three-node case does to the follower B before it starts again.
type FollowerDamage = fn(&Path);

/// One three-node case: leader A, followers B and C. With `power_loss`, C is paused, a token
/// is granted (committed on A and B), all three lose power, B's data is damaged, and B and
/// C start before A (issue 38's case); else only B is killed, damaged and started again
/// while A and C run on. No token may be handed out twice, and B must come back (after
/// fetching what it lost) or refuse naming the repair.
async fn three_node_case(name: &str, power_loss: bool, damage: FollowerDamage) -> Option<String> {
    let mut cluster = Cluster::start(3).await;
    let a = cluster.wait_for_leader(START).await;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|&n| n != a).collect();
    let (b, c) = (others[0], others[1]);
    let client = patient_client(cluster.endpoints()).await;
    let before = grant_many(&client, "k", 5, 0).await;
    if power_loss {
        cluster.pause(c);
    }
    let holder = client.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(5000)).await.unwrap();
    assert!(held.fencing_token > before);
    if power_loss {
        cluster.kill_all();
    } else {
        cluster.kill(b);
    }
    damage(&cluster.node(b).data_dir);
    cluster.start_node(b).unwrap();
    if power_loss {
        cluster.start_node(c).unwrap();
        // B and C have had their chance: B stood aside or refused, or (as before) they elected.
        let deadline = Instant::now() + PATIENCE;
        loop {
            let aside = cluster.log_since_start(b).contains("not voting or standing for election");
            if aside || cluster.has_exited(b) || cluster.leader_now().await.is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "{name}: B neither stood aside nor refused, and no leader");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cluster.start_node(a).unwrap();
    }
    let client = patient_client(cluster.endpoints()).await;
    let t = client.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(10_000)).await.unwrap();
    if next.fencing_token <= held.fencing_token {
        return Some(format!("{name}: token {} handed out again (held: {})", next.fencing_token, held.fencing_token));
    }
    if let Ok(again) = t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await {
        return Some(format!("{name}: ns/held, still held, was granted again as {}", again.fencing_token));
    }
    let deadline = Instant::now() + PATIENCE;
    loop {
        if cluster.has_exited(b) || !cluster.is_running(b) {
            let log = cluster.log_since_start(b);
            return (!log.contains(REPAIR)).then(|| format!("{name}: B refused without naming the repair:\n{log}"));
        }
        if http_get(&cluster.http_addr(b), "/readyz").is_ok_and(|(status, _)| status == 200) {
            return None;
        }
        if Instant::now() > deadline {
            return Some(format!("{name}: B neither serves nor refused within {PATIENCE:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The damaged node's newest segment with records and its last record.
fn last_of(data_dir: &Path) -> (PathBuf, Record) {
    disk::last_record(data_dir).unwrap()
}

/// Issue 38, item 6: three-node cases of one node's damage, with a whole-cluster power loss
/// and a slow node as in the issue, or with the rest of the cluster running on (the leader
/// then finds B's log shorter than it last saw it match).
#[tokio::test]
async fn one_damaged_node_of_three_hands_out_no_token_twice_after_a_power_loss_or_alone() {
    let cases: Vec<(&str, bool, FollowerDamage)> = vec![
        ("power loss, B's last page zeroed", true, |d| {
            let (p, r) = last_of(d);
            disk::zero(&p, (r.end() - 1) / 4096 * 4096, 4096).unwrap()
        }),
        ("power loss, B's newest segment cut at its last record", true, |d| {
            let (p, r) = last_of(d);
            cut(&p, r.offset)
        }),
        ("power loss, B's newest segment deleted", true, |d| std::fs::remove_file(last_of(d).0).unwrap()),
        // (Absent on v0.1.0, which kept sled: nothing done there.)
        ("power loss, one copy of B's raft-meta damaged", true, |d| {
            if at(d, "raft-meta").exists() {
                flip(&at(d, "raft-meta"), 40)
            }
        }),
        ("power loss, B's raft-meta deleted", true, |d| {
            let _ = std::fs::remove_file(at(d, "raft-meta"));
        }),
        ("B alone, its last record's checksum flipped", false, |d| {
            let (p, r) = last_of(d);
            flip(&p, r.offset + 1)
        }),
        ("B alone, its last page zeroed", false, |d| {
            let (p, r) = last_of(d);
            disk::zero(&p, (r.end() - 1) / 4096 * 4096, 4096).unwrap()
        }),
    ];
    let failures: Vec<String> = futures::stream::iter(cases)
        .map(|(name, power_loss, damage)| three_node_case(name, power_loss, damage))
        .buffer_unordered(2)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(failures.is_empty(), "{} case(s) failed:\n{}", failures.len(), failures.join("\n"));
}

/// A leader reports its appends done before they are on its own disk (its followers write
/// theirs meanwhile), so a power loss can take its last entry while its followers hold it.
/// openraft restores a node whose saved vote is its own committed one as the leader of that
/// term, at once: it then appended a new entry at the lost one's index in the same term, the
/// followers kept the old one under the same log id, and the tables parted (the grant's token
/// was handed out again). A restarted leader stands for election again instead.
#[tokio::test]
async fn a_leader_that_lost_its_unsynced_last_entry_does_not_lead_again_in_the_same_term() {
    let mut cluster = Cluster::start(3).await;
    let a = cluster.wait_for_leader(START).await;
    let client = patient_client(cluster.endpoints()).await;
    let before = grant_many(&client, "k", 5, 0).await;
    let holder = client.begin_transaction(opts(600_000)).await.unwrap();
    let held = holder.acquire_lock("ns", "held", LockMode::Exclusive, wait(5000)).await.unwrap();
    assert!(held.fencing_token > before);
    // Both followers hold the grant (a majority without A): losing it on A alone is what a
    // crash before A's own sync leaves (A would not have answered the client then; the
    // answer here only names the token).
    let applied = cluster.metric(a, "dls_applied_index");
    eventually(PATIENCE, "both followers to apply the grant", || async {
        cluster.ids().iter().all(|&n| cluster.metric(n, "dls_applied_index") >= applied).then_some(())
    })
    .await;
    cluster.kill_all();
    // On A, the grant's record never reached the disk: zeros where it was, and the watermark
    // before it (the crash came before A's sync).
    let data_dir = cluster.node(a).data_dir.clone();
    let (segment, last) = last_of(&data_dir);
    disk::zero(&segment, last.offset, last.end() - last.offset).unwrap();
    let seq: u64 = segment.file_name().unwrap().to_str().unwrap()[..16].parse().unwrap();
    let mut file = caerus_server::raft::meta::MetaFile::open(&data_dir).unwrap().unwrap();
    let mut meta = file.get().clone();
    let w = meta.durable.as_mut().unwrap();
    w.pos = (seq << 32) | last.offset;
    w.next_index -= 1;
    meta.committed = meta.committed.filter(|c| c.index < w.next_index);
    file.write_both(meta).unwrap();
    drop(file);
    cluster.start_all().unwrap();

    let client = patient_client(cluster.endpoints()).await;
    let t = client.begin_transaction(opts(10_000)).await.unwrap();
    let next = t.acquire_lock("ns", "fresh", LockMode::Exclusive, wait(10_000)).await.unwrap();
    assert!(next.fencing_token > held.fencing_token, "token {} handed out again", next.fencing_token);
    assert!(t.acquire_lock("ns", "held", LockMode::Exclusive, wait(300)).await.is_err(), "ns/held granted again");
    assert!(!cluster.has_exited(a), "A (nothing acknowledged lost) runs on: {}", cluster.log_since_start(a));
}

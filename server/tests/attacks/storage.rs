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
const PARALLEL: usize = 3;
/// What every refusal ends with: the way back.
const REPAIR: &str = "Restore its data directory from a backup";

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

/// The vote, commit index and purge point lived in sled, which drops a record it cannot
/// read without a word: a flipped bit rolled the vote back, a deleted store started the
/// node at term 0. `raft-meta` is refused when it cannot be trusted.
#[tokio::test]
async fn damaged_missing_or_older_raft_metadata_refuses_and_one_damaged_copy_is_survived() {
    let base = single_node_base(&[]).await;
    let meta = "raft-meta";
    let cases = vec![
        case("one copy of raft-meta damaged", Must::RefuseOrServeAbove, move |d, _| flip(&at(d, meta), 40)),
        case("both copies of raft-meta damaged", refuse(&["raft-meta is damaged: neither copy"]), move |d, _| {
            flip(&at(d, meta), 40);
            flip(&at(d, meta), 4096 + 40);
        }),
        case("raft-meta deleted", refuse(&["raft-meta is missing, but"]), move |d, _| {
            std::fs::remove_file(at(d, meta)).unwrap()
        }),
        case("raft-meta cut short", refuse(&["raft-meta is damaged: it is 4096 bytes"]), move |d, _| {
            cut(&at(d, meta), 4096)
        }),
        case("an older copy of raft-meta put back", refuse(&["older than the"]), move |d, b| {
            std::fs::copy(at(&b.earlier, meta), at(d, meta)).map(drop).unwrap()
        }),
    ];
    run(&base, cases).await;
}

/// A deleted snapshot let a node whose log was purged come up empty ("a learner, last
/// token 0") with `/readyz` 200.
#[tokio::test]
async fn a_missing_snapshot_behind_a_purged_log_refuses() {
    let base = single_node_base(&["--snapshot-every", "20"]).await;
    let snapshots = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(at(d, "snapshots")).unwrap().map(|e| e.unwrap().path()).collect()
    };
    assert!(!snapshots(&base.data_dir).is_empty(), "a snapshot was taken");
    let cases = vec![
        case("the snapshot deleted", refuse(&["there is no snapshot file in"]), move |d, _| {
            snapshots(d).iter().for_each(|p| std::fs::remove_file(p).unwrap())
        }),
        case("an older snapshot put back", Must::RefuseOrServeAbove, move |d, b| {
            snapshots(d).iter().for_each(|p| std::fs::remove_file(p).unwrap());
            for p in snapshots(&b.earlier) {
                std::fs::copy(&p, at(d, "snapshots").join(p.file_name().unwrap())).unwrap();
            }
        }),
    ];
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

//! The clients' work: transactions that take one of a few keys in either mode, hold it a
//! little (writing or reading the fenced register) and end, every operation recorded in the
//! history; and the harness's own recorded transactions that the faults use.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use caerus_core::{AcquireOptions, ClientConfig, DlsClient, Error, LockMode, Transaction, TransactionOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::history::{History, Mode, Op, OpKind, Outcome};
use crate::register::FencedRegister;

/// The namespace of every lock of a run.
pub const NS: &str = "chaos";

pub fn classify(e: &Error) -> Outcome {
    match e {
        Error::LockTimeout { .. }
        | Error::DeadlockVictim { .. }
        | Error::TransactionLost { .. }
        | Error::TransactionNotFound { .. }
        | Error::WaitCancelled { .. }
        | Error::AlreadyWaiting { .. }
        | Error::InvalidArgument { .. } => Outcome::Fail,
        _ => Outcome::Unknown,
    }
}

pub fn client_config(endpoints: Vec<String>) -> ClientConfig {
    ClientConfig::new(endpoints)
        .without_api_key()
        .with_connect_timeout(Duration::from_millis(500))
        .with_request_timeout(Duration::from_secs(2))
        .with_retry_deadline(Duration::from_secs(8))
}

pub struct Ctx {
    pub history: Arc<History>,
    pub register: Arc<FencedRegister>,
    pub stop: Arc<AtomicBool>,
    pub keys: usize,
    pub lease_ms: u64,
}

pub fn key_name(i: usize) -> String {
    format!("k{i}")
}

/// Begins a transaction with the run's lease and records the Begin (ok or failed) in the
/// history; `None` when it failed.
pub async fn recorded_begin(client: &DlsClient, ctx: &Ctx, p: u64) -> Option<Transaction> {
    let h = &ctx.history;
    let t = h.now_us();
    match client.begin_transaction(TransactionOptions::default().with_timeout_ms(ctx.lease_ms)).await {
        Ok(tx) => {
            h.push(Op { invoke_us: t, complete_us: h.now_us(), ..Op::new(p, OpKind::Begin, tx.id()) });
            Some(tx)
        }
        Err(e) => {
            h.push(Op {
                invoke_us: t,
                complete_us: h.now_us(),
                outcome: classify(&e),
                error: e.code().into(),
                ..Op::new(p, OpKind::Begin, 0)
            });
            None
        }
    }
}

pub async fn worker(p: u64, client: DlsClient, ctx: Arc<Ctx>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let h = &ctx.history;
    let mut value = 0u64;
    while !ctx.stop.load(Ordering::Relaxed) {
        let Some(tx) = recorded_begin(&client, &ctx, p).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let id = tx.id();
        let key = key_name(rng.gen_range(0..ctx.keys));
        let mode = if rng.gen_bool(0.7) { Mode::Exclusive } else { Mode::Shared };
        let lm = if mode == Mode::Exclusive { LockMode::Exclusive } else { LockMode::SharedRead };
        let t = h.now_us();
        let res = tx.acquire_lock(NS, &key, lm, AcquireOptions::default().with_timeout_ms(1500)).await;
        let base = Op {
            key: key.clone(),
            mode: Some(mode),
            invoke_us: t,
            complete_us: h.now_us(),
            ..Op::new(p, OpKind::Acquire, id)
        };
        match res {
            Ok(lock) => {
                let token = lock.fencing_token;
                h.push(Op { token, ..base.clone() });
                // Strictly greater tokens only: a holder writes once per hold; readers read 1-3 times.
                let steps = if mode == Mode::Exclusive { 1 } else { rng.gen_range(1..=3) };
                for _ in 0..steps {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(5..80))).await;
                    if tx.is_lost() {
                        break;
                    }
                    let t = h.now_us();
                    if mode == Mode::Exclusive {
                        value += 1;
                        let (outcome, observed) = match ctx.register.write(&key, token, p * 1_000_000 + value) {
                            Ok(prev) => (Outcome::Ok, prev),
                            Err(last) => (Outcome::Fail, last),
                        };
                        h.push(Op {
                            kind: OpKind::Write,
                            token,
                            observed,
                            outcome,
                            invoke_us: t,
                            complete_us: t,
                            ..base.clone()
                        });
                    } else {
                        let (observed, _) = ctx.register.read(&key);
                        h.push(Op {
                            kind: OpKind::Read,
                            token,
                            observed,
                            invoke_us: t,
                            complete_us: t,
                            ..base.clone()
                        });
                    }
                }
                if rng.gen_bool(0.4) {
                    let t = h.now_us();
                    let r = tx.release(NS, &key).await;
                    let (outcome, error) = match &r {
                        Ok(_) => (Outcome::Ok, String::new()),
                        Err(e) => (classify(e), e.code().to_string()),
                    };
                    h.push(Op {
                        kind: OpKind::Release,
                        mode: None,
                        outcome,
                        error,
                        invoke_us: t,
                        complete_us: h.now_us(),
                        ..base.clone()
                    });
                }
            }
            Err(e) => h.push(Op { outcome: classify(&e), error: e.code().into(), ..base }),
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..30))).await;
        let abort = rng.gen_bool(0.1);
        let t = h.now_us();
        let r = if abort { tx.abort().await } else { tx.commit().await };
        let kind = if abort { OpKind::Abort } else { OpKind::Commit };
        let (outcome, error) = match &r {
            Ok(()) => (Outcome::Ok, String::new()),
            Err(e) => (classify(e), e.code().to_string()),
        };
        h.push(Op { outcome, error, invoke_us: t, complete_us: h.now_us(), ..Op::new(p, kind, id) });
    }
}

/// The harness's own in-process transaction on `key` (recorded under process `p`): begin,
/// acquire exclusively within `wait`. Returns the transaction and its grant.
pub async fn harness_acquire(
    client: &DlsClient,
    ctx: &Ctx,
    p: u64,
    key: &str,
    wait: Duration,
) -> Option<(Transaction, Op)> {
    let h = &ctx.history;
    let tx = recorded_begin(client, ctx, p).await?;
    let t = h.now_us();
    let r = tx
        .acquire_lock(NS, key, LockMode::Exclusive, AcquireOptions::default().with_timeout_ms(wait.as_millis() as u64))
        .await;
    let base = Op {
        key: key.to_string(),
        mode: Some(Mode::Exclusive),
        invoke_us: t,
        complete_us: h.now_us(),
        ..Op::new(p, OpKind::Acquire, tx.id())
    };
    match r {
        Ok(lock) => {
            let op = Op { token: lock.fencing_token, ..base };
            h.push(op.clone());
            Some((tx, op))
        }
        Err(e) => {
            h.push(Op { outcome: classify(&e), error: e.code().into(), ..base });
            let t = h.now_us();
            let r = tx.abort().await;
            h.push(Op {
                outcome: r.as_ref().map_or_else(classify, |_| Outcome::Ok),
                error: r.err().map(|e| e.code().to_string()).unwrap_or_default(),
                invoke_us: t,
                complete_us: h.now_us(),
                ..Op::new(p, OpKind::Abort, tx.id())
            });
            None
        }
    }
}

/// Writes to the register with the harness transaction's token, then commits it.
/// Returns whether the write was accepted.
pub async fn harness_write_commit(ctx: &Ctx, tx: Transaction, acq: &Op, p: u64) -> bool {
    let h = &ctx.history;
    let t = h.now_us();
    let (outcome, observed) = match ctx.register.write(&acq.key, acq.token, p) {
        Ok(prev) => (Outcome::Ok, prev),
        Err(last) => (Outcome::Fail, last),
    };
    h.push(Op { kind: OpKind::Write, observed, outcome, invoke_us: t, complete_us: t, ..acq.clone() });
    let t = h.now_us();
    let r = tx.commit().await;
    h.push(Op {
        outcome: r.as_ref().map_or_else(classify, |_| Outcome::Ok),
        error: r.err().map(|e| e.code().to_string()).unwrap_or_default(),
        invoke_us: t,
        complete_us: h.now_us(),
        ..Op::new(p, OpKind::Commit, acq.txn)
    });
    outcome == Outcome::Ok
}

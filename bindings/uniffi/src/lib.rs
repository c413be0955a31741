//! Kotlin and Swift SDKs of Caerus DLS: a thin uniffi layer over `caerus-core`.
//!
//! Every lock operation is a call into [`caerus_core`]: leader discovery, safe retries,
//! the heartbeat and the lost signal all live there. This crate only mirrors core's
//! values as uniffi records and enums, maps core's error to one [`DlsError`] with the
//! classes of the error table every SDK shares (with a lost transaction's end cause and a
//! deadlock victim's cycle), and runs core's futures on a tokio runtime
//! of its own, so that the foreign side can await them as Kotlin `suspend` functions or
//! Swift `async` ones whatever executor drives them.
//!
//! The idiomatic layers (`withTransaction` in Kotlin and Swift) are written in those
//! languages next to the generated code; see `bindings/uniffi/README.md`.

mod client;
mod errors;
mod events;
mod key_watch;
mod options;
mod runtime;
mod slots;
mod transaction;
mod types;

pub use client::DlsClient;
pub use errors::{error_classes, Deadlock, DlsError, ErrorClassInfo};
pub use events::{Event, EventDetail, EventKind, EventStream, WatchOptions};
pub use key_watch::{KeyChange, KeyChangeKind, KeyHolder, KeyUpdate, KeyWatch};
pub use options::{ClientConfig, TransactionOptions};
pub use slots::{SlotClaim, SlotOutcome, SlotRun, SlotRunState};
pub use transaction::{LostListener, Transaction};
pub use types::{CycleMember, Lock, LockMode, LostKind, LostReason, PendingLock, TransactionState, TransactionStatus};

uniffi::setup_scaffolding!("caerus_dls");

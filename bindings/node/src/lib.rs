//! Native part of `@caerus-dev/sdk`: a thin N-API layer over `caerus-core`.
//!
//! Every lock operation is a call into [`caerus_core`]: leader discovery, safe retries,
//! the heartbeat and the lost signal all live there. This crate only converts values
//! (u64 ⇄ `bigint`, modes as strings, errors as records, see `errors.rs`) and turns core's
//! futures into JavaScript promises, which napi runs on its tokio runtime, so no call
//! blocks the event loop. The JavaScript wrapper (`index.js`) turns the error records
//! into error classes and adds `AbortSignal` and async-iterator glue.
//!
//! The modules follow the Python and uniffi bindings: [`client`], [`transaction`],
//! [`events`], [`key_watch`], [`slots`], the value objects in [`types`] and [`options`],
//! cancellation in [`abort`], error conversion in [`errors`] and the promise bridge.

mod abort;
mod client;
// Public: `errorClasses()` is exported to JavaScript only, which a test build does not register.
pub mod errors;
mod events;
mod key_watch;
mod options;
mod promise_bridge;
mod slots;
mod transaction;
mod types;

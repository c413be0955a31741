//! Webhooks: the leader POSTs events of the replicated event log to HTTP endpoints.
//!
//! Each webhook keeps a cursor (the last event its endpoint acknowledged) in the
//! replicated state through `Command::WebhookDelivered`, so a new leader resumes where the
//! old one stopped. Delivery is at least once: the cursor is recorded in batches after the
//! endpoint answered, so a failover can resend the last few events; receivers dedupe by
//! event id. Within one webhook events go out in order, one at a time, and a failing
//! endpoint is retried with backoff until it accepts (it holds up only its own webhook).
//! The format is documented in docs/webhooks.md.
//!
//! - `config`: the webhooks file.
//! - `payload`: the JSON body and its signature.
//! - `delivery`: the couriers that send them while this node leads.

mod config;
mod delivery;
mod payload;

pub use config::{load, Webhook};
pub use delivery::Dispatcher;

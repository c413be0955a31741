//! gRPC services: `lock_service` and `admin_service` for clients (translating to and from
//! `engine` calls), `raft_service` and `discovery_service` for peers only, `forward` for
//! clients' calls a follower passes on to the leader.

pub mod admin_service;
pub mod auth;
pub mod caller;
pub mod convert;
pub mod discovery_service;
pub mod errors;
pub mod forward;
pub mod key_check;
pub mod lock_service;
pub mod raft_service;
pub mod validate;
pub mod victim_policies;

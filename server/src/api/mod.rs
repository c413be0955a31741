//! gRPC services: `lock_service` for clients, `raft_service` for peers only, `forward`
//! for clients' calls a follower passes on to the leader.

pub mod admin_service;
pub mod auth;
pub mod convert;
pub mod errors;
pub mod forward;
pub mod lock_service;
pub mod raft_service;
pub mod validate;

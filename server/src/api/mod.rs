//! gRPC services: `lock_service` for clients, `raft_service` for peers only.

pub mod admin_service;
pub mod auth;
pub mod convert;
pub mod errors;
pub mod lock_service;
pub mod raft_service;
pub mod validate;

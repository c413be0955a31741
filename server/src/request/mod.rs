//! What every layer from `node` up knows of a client's request: who makes it (`Principal`:
//! its API key's name, namespaces and powers) and how it fails (`EngineError`, which the
//! API maps to a status). Below `node`, `limits` and `engine`, so they can all name them
//! without an arrow running up the layers.

pub mod error;
pub mod principal;

pub use error::EngineError;
pub use principal::Principal;

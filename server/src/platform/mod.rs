//! What differs between Unix and Windows, one module per concern. On Unix each is the call
//! the server made before it built for Windows (same code path); on Windows, the nearest
//! equivalent, or a no-op that says why.
//!
//! - `file_io`: positional reads and writes, syncing a directory or a file by path,
//!   dropping a file's cached pages.
//! - `signals`: what stops a node or `dls lock` (no SIGHUP reload on Windows).
//! - `child`: the command `dls lock` runs: its process group, stopping it, its exit code.
//! - `priority`: a thread's CPU priority.

pub mod child;
pub mod file_io;
pub mod priority;
pub mod signals;

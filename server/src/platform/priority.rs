//! A thread's CPU priority.

/// Lowers the calling thread's priority (nice +10, per thread on Linux).
#[cfg(unix)]
pub fn lower_this_thread() -> std::io::Result<()> {
    rustix::process::nice(10)?;
    Ok(())
}

/// Not done on Windows: SetThreadPriority needs `unsafe`, which the workspace forbids, and
/// no safe crate in the tree wraps it. The thread runs at the normal priority.
#[cfg(windows)]
pub fn lower_this_thread() -> std::io::Result<()> {
    Ok(())
}

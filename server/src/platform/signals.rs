//! Signals. On Unix, tokio's Unix signals. Windows has no signals: Ctrl+C stands for SIGINT
//! and Ctrl+Break (what `GenerateConsoleCtrlEvent` and some service wrappers send) for
//! SIGTERM; there is no SIGHUP, so a node on Windows reads its keys and certificates at
//! start only.

#[cfg(unix)]
pub use tokio::signal::unix::{signal, Signal, SignalKind};

#[cfg(windows)]
pub use windows::{signal, Signal, SignalKind};

#[cfg(windows)]
mod windows {
    use tokio::signal::windows::{ctrl_break, ctrl_c, CtrlBreak, CtrlC};

    /// The Unix signals the server listens for, as Windows console events.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct SignalKind(bool);

    impl SignalKind {
        /// Ctrl+C.
        pub fn interrupt() -> SignalKind {
            SignalKind(false)
        }
        /// Ctrl+Break.
        pub fn terminate() -> SignalKind {
            SignalKind(true)
        }
    }

    pub enum Signal {
        CtrlC(CtrlC),
        CtrlBreak(CtrlBreak),
    }

    impl Signal {
        pub async fn recv(&mut self) -> Option<()> {
            match self {
                Signal::CtrlC(s) => s.recv().await,
                Signal::CtrlBreak(s) => s.recv().await,
            }
        }
    }

    pub fn signal(kind: SignalKind) -> std::io::Result<Signal> {
        Ok(if kind.0 { Signal::CtrlBreak(ctrl_break()?) } else { Signal::CtrlC(ctrl_c()?) })
    }
}

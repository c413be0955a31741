//! The command `dls lock` runs, on Windows. On Unix `dls lock` puts it in its own process
//! group and signals the group with kill(1) (see caerus-cli's `commands::lock`). Windows has no process groups
//! nor signals: the command shares `dls`'s console (Ctrl+C reaches both), `taskkill /T`
//! asks the command and the processes it started to close, and `taskkill /F /T` ends them.

#![cfg(windows)]

use std::process::Stdio;

use tokio::process::Command;

/// `Command::process_group` for Windows: none is made, so that Ctrl+C in the console still
/// reaches the command (a new process group would ignore it).
pub trait ProcessGroup {
    fn process_group(&mut self, pgroup: i32) -> &mut Self;
}

impl ProcessGroup for Command {
    fn process_group(&mut self, _pgroup: i32) -> &mut Self {
        self
    }
}

/// The Unix signal names `dls lock` sends, done with taskkill: `TERM` asks the command and
/// the processes it started to close (console programs without a window may not), `KILL`
/// ends them all. `INT` is not sent: Ctrl+C reached the command already through the console.
pub async fn send_signal(pid: u32, signal: &str) {
    let force = match signal {
        "KILL" => true,
        "TERM" => false,
        _ => return,
    };
    if pid == 0 {
        return;
    }
    let mut taskkill = Command::new("taskkill");
    if force {
        taskkill.arg("/F");
    }
    let sent =
        taskkill.args(["/T", "/PID"]).arg(pid.to_string()).stdout(Stdio::null()).stderr(Stdio::null()).status().await;
    if let Err(e) = sent {
        eprintln!("dls: cannot stop the command (pid {pid}) with taskkill: {e}");
    }
}

//! Loopback ports chosen by the kernel at run time, so parallel tests and runs never collide
//! on a fixed port.

use std::net::TcpListener;

/// A port that was free a moment ago (the OS picks it).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct ports that were free a moment ago (held together, so none repeats).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind loopback")).collect();
    held.iter().map(|l| l.local_addr().expect("bound address").port()).collect()
}

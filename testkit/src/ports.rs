//! Loopback ports for test servers, chosen at run time so parallel tests and runs never
//! collide on a fixed port.
//!
//! A port is only known to be free when it is picked; the server binds it a moment later.
//! Two things could take it in between, and both made "Address already in use" failures in
//! CI:
//! - any outgoing connection on the machine: the kernel gives it a local port from its
//!   ephemeral range (32768–60999 on Linux), where `bind(0)` picks too. So ports are drawn
//!   at random from [`RANGE`], below that range, and checked free by binding them;
//! - another test of the same process (tests run on parallel threads): a port is handed out
//!   at most once per process, even after whoever got it let it go.

use std::collections::HashSet;
use std::net::TcpListener;
use std::ops::Range;
use std::sync::Mutex;

use rand::Rng;

/// Where test ports come from: below Linux's default ephemeral range.
pub const RANGE: Range<u16> = 20_000..32_768;

/// Ports this process has handed out.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct ports that were free a moment ago, none handed out before in this process.
pub fn free_ports(n: usize) -> Vec<u16> {
    let mut guard = HANDED_OUT.lock().expect("ports lock");
    let handed_out = guard.get_or_insert_with(HashSet::new);
    let mut rng = rand::thread_rng();
    // Held until all are picked, so none repeats within the call either.
    let mut held = Vec::with_capacity(n);
    for _ in 0..RANGE.len() * 4 {
        if held.len() == n {
            break;
        }
        let port = rng.gen_range(RANGE);
        if handed_out.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            handed_out.insert(port);
            held.push(listener);
        }
    }
    assert_eq!(held.len(), n, "no {n} free loopback ports left in {RANGE:?} for this test process");
    held.iter().map(|l| l.local_addr().expect("bound address").port()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_outside_the_ephemeral_range_and_never_handed_out_twice() {
        let first = free_ports(50);
        let second = free_ports(50);
        let all: HashSet<u16> = first.iter().chain(&second).copied().collect();
        assert_eq!(all.len(), 100, "a port was handed out twice: {first:?} {second:?}");
        assert!(all.iter().all(|p| RANGE.contains(p)));
        // Free when handed out: a server can bind them.
        for p in first {
            TcpListener::bind(("127.0.0.1", p)).unwrap();
        }
    }
}

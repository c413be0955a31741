//! Attacks on the server by area, in one test binary (one link, one process start per
//! test run): each module states its threat and tests against real `dls` processes.

#[path = "../common/mod.rs"]
mod common;

mod clock;
mod storage;

//! Attacks on a node by anyone who can reach its ports or its disk, each a test against real
//! `dls` processes: what a client without a key, a key of another tenant, a node certificate
//! of the cluster CA, a damaged file or a stepped clock could do, and that it no longer can.
//! A module per area.

use crate::common;

mod calls;
mod clock;
mod cluster_keys;
mod handoff;
mod keys;
mod ports;
mod shares;
mod slots;
mod storage;
mod upgrade;
mod visibility;

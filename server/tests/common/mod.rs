//! Every integration test starts real `dls` processes through the shared test kit
//! (testkit/): ports chosen at run time, a temporary data directory per node.

pub use caerus_testkit::*;

//! Nothing to use: this crate exists for its `Cargo.toml` (see there and README.md).

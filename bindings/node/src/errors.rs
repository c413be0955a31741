//! Core errors as JavaScript errors: the message starts with the stable `[CODE]`, which
//! `index.js` turns into its error classes.

use caerus_core::Error as CoreError;
use napi::{Error, Status};

/// A core error as a JS error whose message starts with its stable code.
pub(crate) fn to_js(e: CoreError) -> Error {
    coded(e.code(), e.message())
}

pub(crate) fn coded(code: &str, message: &str) -> Error {
    Error::new(Status::GenericFailure, format!("[{code}] {message}"))
}

pub(crate) fn invalid(message: impl AsRef<str>) -> Error {
    coded("INVALID_ARGUMENT", message.as_ref())
}

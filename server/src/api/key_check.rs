//! The API key is checked from a call's headers before its body is read: a caller without a
//! valid key is answered UNAUTHENTICATED at once, so it can make a node hold neither its
//! request body nor a handler. The principal found is kept on the request, and the services
//! read it from there ([`principal`]), so a key is judged once per call and by one rule.

use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use super::auth::KeyRing;
use super::errors::ApiError;
use crate::request::Principal;

/// The interceptor in front of the client services (and of those the peer port serves for
/// forwarded calls, behind the peer gate).
#[derive(Clone)]
pub struct KeyCheck(pub Arc<KeyRing>);

impl Interceptor for KeyCheck {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        let who = self.0.authenticate(req.metadata())?;
        req.extensions_mut().insert(who);
        Ok(req)
    }
}

/// Who made a call: the principal [`KeyCheck`] found, or for a call that did not pass it
/// (the HTTP API runs the services in-process) its key checked now.
pub fn principal<T>(keys: &KeyRing, req: &Request<T>) -> Result<Principal, ApiError> {
    match req.extensions().get::<Principal>() {
        Some(who) => Ok(who.clone()),
        None => keys.authenticate(req.metadata()),
    }
}

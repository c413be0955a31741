//! The client behind a call. A call a follower forwarded (`forward`) comes from the
//! follower's connection, which carries many clients' calls; the follower names the
//! client's own address, believed only from a caller that passed the peer gate. A call the
//! HTTP port makes for its client names that client the same way ([`made_for`]).

use std::net::SocketAddr;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use super::auth::KeyRing;
use crate::limits::Tenant;
use crate::raft::peer_auth::Gate;

/// Marks a forwarded call with the id of the follower that sent it (for the leader's log).
pub const FORWARDED_BY: &str = "x-dls-forwarded-by";
/// The client's own address on a forwarded call.
pub const FORWARDED_FOR: &str = "x-dls-forwarded-for";

/// The client connection behind a call that came through a follower (set by
/// [`PeerCaller`] from `x-dls-forwarded-for`, so only an authenticated peer can set it;
/// `None` when the follower did not know it), or that the HTTP port makes ([`made_for`]).
#[derive(Clone, Copy, Debug)]
struct ForwardedFor(Option<SocketAddr>);

/// The address of the client that made a call: its own connection, or for a call a
/// follower forwarded, the connection the follower received it on (never the follower's
/// own connection, which carries the calls of many clients).
pub fn client_addr<T>(req: &Request<T>) -> Option<SocketAddr> {
    match req.extensions().get::<ForwardedFor>() {
        Some(forwarded) => forwarded.0,
        None => req.remote_addr(),
    }
}

/// A call the HTTP port makes for its client at `client`: counted against that client
/// (here, and on the leader when it is forwarded), not against the HTTP port as a whole.
pub fn made_for<T>(mut req: Request<T>, client: SocketAddr) -> Request<T> {
    req.extensions_mut().insert(ForwardedFor(Some(client)));
    req
}

/// Whose share of this node's bounds a call counts against (see [`Tenant`]): its API key as
/// this node knows it. For calls this node passes on without serving them (a follower
/// forwards them, and the leader authenticates them).
pub fn tenant<T>(keys: &KeyRing, req: &Request<T>) -> Tenant {
    if !keys.has_keys() {
        return Tenant::Open;
    }
    match super::key_check::principal(keys, req) {
        Ok(who) => Tenant::of(&who),
        Err(_) => Tenant::Unknown,
    }
}

/// The gate in front of the client services on the peer port: the caller must be a node of
/// this cluster ([`Gate`]); then the client address it vouches for is taken over.
#[derive(Clone)]
pub struct PeerCaller(pub Gate);

impl Interceptor for PeerCaller {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let mut req = self.0.call(req)?;
        let client = req.metadata().get(FORWARDED_FOR).and_then(|v| v.to_str().ok()?.parse().ok());
        req.extensions_mut().insert(ForwardedFor(client));
        if let Some(from) = req.metadata().get(FORWARDED_BY).and_then(|v| v.to_str().ok()) {
            tracing::debug!(follower = from, client = ?client, "serving a call forwarded by a follower");
        }
        Ok(req)
    }
}

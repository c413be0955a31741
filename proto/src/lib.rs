//! The Caerus DLS wire contract, generated from `proto/caerus/dls/v1/*.proto`.
//!
//! `v1` is the public client API (`LockService`); `raft` is the internal node-to-node
//! service and must never be exposed to clients.

mod shared;
pub use shared::{error_detail, set_error_detail, Wire};

/// Public client API: package `caerus.dls.v1`.
#[allow(clippy::all)]
pub mod v1 {
    tonic::include_proto!("caerus.dls.v1");
}

/// Internal raft transport between nodes: package `caerus.dls.raft.v1`.
#[allow(clippy::all)]
pub mod raft {
    tonic::include_proto!("caerus.dls.raft.v1");
}

/// The protobuf codec of every generated client and server: tonic's prost codec with a
/// 1 KiB starting buffer instead of 8 KiB. Messages here are small, and the buffer lives as
/// long as the call, so a leader with many waiting AcquireLock streams would keep mostly
/// empty buffers (docs/bench.md). Buffers still grow as a message needs.
pub mod codec {
    use std::marker::PhantomData;

    use tonic::codec::{BufferSettings, Codec, ProstCodec};

    fn settings() -> BufferSettings {
        BufferSettings::new(1024, 32 * 1024)
    }

    #[derive(Debug, Clone, Copy)]
    pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

    impl<T, U> Default for SmallBufferCodec<T, U> {
        fn default() -> Self {
            SmallBufferCodec(PhantomData)
        }
    }

    impl<T, U> Codec for SmallBufferCodec<T, U>
    where
        T: prost::Message + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        type Encode = T;
        type Decode = U;
        type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
        type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

        fn encoder(&mut self) -> Self::Encoder {
            ProstCodec::<T, U>::raw_encoder(settings())
        }

        fn decoder(&mut self) -> Self::Decoder {
            ProstCodec::<T, U>::raw_decoder(settings())
        }
    }
}

/// Metadata keys shared by server and clients, so both sides name them once.
pub mod metadata {
    /// `host:port` of the current leader, attached to UNAVAILABLE answers from a follower,
    /// and to answers a follower relayed from the leader (the client may go there directly).
    pub const LEADER_ADDR: &str = "x-dls-leader-addr";
    /// Node id of the current leader, beside [`LEADER_ADDR`].
    pub const LEADER_ID: &str = "x-dls-leader-id";
    /// Machine-readable error kind (see `ErrorKind` in the proto docs), beside the gRPC status.
    pub const ERROR_KIND: &str = "x-dls-error";
    /// The encoded `ErrorDetail` of an error answer (binary metadata: the key ends in -bin).
    pub const ERROR_DETAIL: &str = "x-dls-error-detail-bin";
    /// On a WatchEvents stream's response headers: the sequence the stream starts from
    /// (resolves `from_sequence = 0` and `only_new`), so a client can resume exactly.
    pub const FIRST_SEQUENCE: &str = "x-dls-first-sequence";
    /// On a WatchEvents stream's response headers: the last event sequence committed when
    /// the stream attached (the end of the backlog; 0 = no events yet).
    pub const LAST_SEQUENCE: &str = "x-dls-last-sequence";
    /// On an UNAVAILABLE answer of a leader shedding load: milliseconds to wait before
    /// retrying (the same request, same request_id).
    pub const RETRY_AFTER_MS: &str = "x-dls-retry-after-ms";
    /// On every answer a follower relayed from the leader (a success or the leader's own
    /// error status): the node id of the leader that served the call.
    pub const FORWARDED_TO: &str = "x-dls-forwarded-to";
    /// On an INVALID_ARGUMENT answer to a request on a semaphore key asked for with another
    /// permit count or as a lock: the count the key is in use with.
    pub const SEMAPHORE_PERMITS: &str = "x-dls-semaphore-permits";
    /// On a PERMISSION_DENIED answer for a namespace the API key is not limited to: the
    /// namespace prefixes it may use, one per line (UTF-8; binary metadata).
    pub const KEY_NAMESPACES: &str = "x-dls-key-namespaces-bin";
    /// Standard bearer-token header carrying the API key.
    pub const AUTHORIZATION: &str = "authorization";
}

//! The wire forms of the shared value types (`caerus-types`), converted in one place for
//! the server and the client. A value the other side does not know (UNSPECIFIED, or a
//! number from a newer contract) converts to `None`: the caller decides whether that is an
//! error (a request's mode) or just absent (an old server's missing cause).

use caerus_types::{EndCause, ErrorKind, EventKind, KeyChangeKind, LockMode, TransactionState, VictimPolicy};

use crate::v1 as pb;

/// Conversions between a shared type and its generated wire enum.
pub trait Wire: Sized {
    /// The `i32` a message field carries.
    fn to_wire(self) -> i32;
    /// The value of a message field, if it names one.
    fn from_wire(raw: i32) -> Option<Self>;
}

/// Pairs each shared variant with its wire variant once; both directions come from the list.
macro_rules! wire_enum {
    ($shared:ident <=> $wire:ident { $($a:ident = $b:ident),+ $(,)? }) => {
        impl Wire for $shared {
            fn to_wire(self) -> i32 {
                match self { $($shared::$a => pb::$wire::$b as i32),+ }
            }
            fn from_wire(raw: i32) -> Option<Self> {
                match pb::$wire::try_from(raw).ok()? {
                    $(pb::$wire::$b => Some($shared::$a),)+
                    #[allow(unreachable_patterns)]
                    _ => None,
                }
            }
        }
    };
}

wire_enum!(LockMode <=> LockMode { Exclusive = Exclusive, SharedRead = SharedRead, Semaphore = Semaphore });
wire_enum!(TransactionState <=> TransactionState {
    Active = Active,
    Committed = Committed,
    Aborted = Aborted,
    Expired = Expired,
});
wire_enum!(EndCause <=> EndCause {
    Committed = Committed,
    ClientAbort = ClientAbort,
    LeaseExpired = LeaseExpired,
    DeadlockVictim = DeadlockVictim,
    OperatorAbort = OperatorAbort,
    MaxDurationExceeded = MaxDurationExceeded,
});
wire_enum!(EventKind <=> EventKind {
    DeadlockResolved = DeadlockResolved,
    TransactionExpired = TransactionExpired,
    TransactionAborted = TransactionAborted,
    LockRevoked = LockRevoked,
    ApiKeyChanged = ApiKeyChanged,
});
wire_enum!(KeyChangeKind <=> KeyChangeKind {
    Granted = Granted,
    Released = Released,
    Expired = Expired,
    Revoked = Revoked,
    Downgraded = Downgraded,
});
wire_enum!(VictimPolicy <=> VictimPolicy {
    LowestPriorityThenYoungest = LowestPriorityThenYoungest,
    Youngest = Youngest,
    Oldest = Oldest,
});
wire_enum!(ErrorKind <=> ErrorKind {
    LockTimeout = LockTimeout,
    DeadlockVictim = DeadlockVictim,
    TransactionLost = TransactionLost,
    TransactionNotFound = TransactionNotFound,
    InvalidArgument = InvalidArgument,
    Unauthenticated = Unauthenticated,
    PermissionDenied = PermissionDenied,
    NotLeader = NotLeader,
    WaitCancelled = WaitCancelled,
    AlreadyWaiting = AlreadyWaiting,
    Unavailable = Unavailable,
    CursorExpired = CursorExpired,
    ResourceExhausted = ResourceExhausted,
    MembershipRefused = MembershipRefused,
    Internal = Internal,
    ApiKeyExists = ApiKeyExists,
    ApiKeyNotFound = ApiKeyNotFound,
});

/// The error detail of a status, from its `x-dls-error-detail-bin` metadata.
pub fn error_detail(status: &tonic::Status) -> Option<pb::ErrorDetail> {
    let bytes = status.metadata().get_bin(crate::metadata::ERROR_DETAIL)?.to_bytes().ok()?;
    prost::Message::decode(bytes.as_ref()).ok()
}

/// Attaches `detail` to a status as `x-dls-error-detail-bin`.
pub fn set_error_detail(status: &mut tonic::Status, detail: &pb::ErrorDetail) {
    let bytes = prost::Message::encode_to_vec(detail);
    status.metadata_mut().insert_bin(crate::metadata::ERROR_DETAIL, tonic::metadata::MetadataValue::from_bytes(&bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shared_value_round_trips_and_unspecified_is_none() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_wire(k.to_wire()), Some(k));
            // The generated name is the shared name: one vocabulary.
            assert_eq!(pb::ErrorKind::try_from(k.to_wire()).unwrap().as_str_name(), k.as_str());
        }
        for c in [
            EndCause::Committed,
            EndCause::ClientAbort,
            EndCause::LeaseExpired,
            EndCause::DeadlockVictim,
            EndCause::OperatorAbort,
            EndCause::MaxDurationExceeded,
        ] {
            assert_eq!(EndCause::from_wire(c.to_wire()), Some(c));
            assert_eq!(pb::EndCause::try_from(c.to_wire()).unwrap().as_str_name(), format!("END_CAUSE_{}", c.as_str()));
        }
        for k in [
            KeyChangeKind::Granted,
            KeyChangeKind::Released,
            KeyChangeKind::Expired,
            KeyChangeKind::Revoked,
            KeyChangeKind::Downgraded,
        ] {
            assert_eq!(KeyChangeKind::from_wire(k.to_wire()), Some(k));
            // The name every SDK shows is the wire name.
            let wire = pb::KeyChangeKind::try_from(k.to_wire()).unwrap().as_str_name();
            assert_eq!(wire, format!("KEY_CHANGE_KIND_{}", k.as_str()));
        }
        assert_eq!(KeyChangeKind::from_wire(0), None);
        for m in [LockMode::Exclusive, LockMode::SharedRead, LockMode::Semaphore] {
            assert_eq!(LockMode::from_wire(m.to_wire()), Some(m));
        }
        assert_eq!(EndCause::from_wire(0), None);
        assert_eq!(LockMode::from_wire(0), None);
        assert_eq!(TransactionState::from_wire(99), None);
    }

    #[test]
    fn an_error_detail_travels_in_binary_metadata() {
        let detail = pb::ErrorDetail {
            kind: ErrorKind::DeadlockVictim.to_wire(),
            transaction_id: 7,
            end_cause: EndCause::DeadlockVictim.to_wire(),
            deadlock: None,
        };
        let mut status = tonic::Status::aborted("victim");
        set_error_detail(&mut status, &detail);
        assert_eq!(error_detail(&status), Some(detail));
        assert_eq!(error_detail(&tonic::Status::aborted("no detail")), None);
    }
}

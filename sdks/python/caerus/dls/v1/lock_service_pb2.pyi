from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class KeyChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_CHANGE_KIND_UNSPECIFIED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_GRANTED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_RELEASED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_EXPIRED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_REVOKED: _ClassVar[KeyChangeKind]
    KEY_CHANGE_KIND_DOWNGRADED: _ClassVar[KeyChangeKind]

class LockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_MODE_UNSPECIFIED: _ClassVar[LockMode]
    EXCLUSIVE: _ClassVar[LockMode]
    SHARED_READ: _ClassVar[LockMode]
    SEMAPHORE: _ClassVar[LockMode]

class TransactionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRANSACTION_STATE_UNSPECIFIED: _ClassVar[TransactionState]
    ACTIVE: _ClassVar[TransactionState]
    COMMITTED: _ClassVar[TransactionState]
    ABORTED: _ClassVar[TransactionState]
    EXPIRED: _ClassVar[TransactionState]

class ErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_KIND_UNSPECIFIED: _ClassVar[ErrorKind]
    LOCK_TIMEOUT: _ClassVar[ErrorKind]
    DEADLOCK_VICTIM: _ClassVar[ErrorKind]
    TRANSACTION_LOST: _ClassVar[ErrorKind]
    TRANSACTION_NOT_FOUND: _ClassVar[ErrorKind]
    INVALID_ARGUMENT: _ClassVar[ErrorKind]
    UNAUTHENTICATED: _ClassVar[ErrorKind]
    PERMISSION_DENIED: _ClassVar[ErrorKind]
    NOT_LEADER: _ClassVar[ErrorKind]
    WAIT_CANCELLED: _ClassVar[ErrorKind]
    ALREADY_WAITING: _ClassVar[ErrorKind]
    UNAVAILABLE: _ClassVar[ErrorKind]
    CURSOR_EXPIRED: _ClassVar[ErrorKind]
    RESOURCE_EXHAUSTED: _ClassVar[ErrorKind]
    MEMBERSHIP_REFUSED: _ClassVar[ErrorKind]
    INTERNAL: _ClassVar[ErrorKind]
    API_KEY_EXISTS: _ClassVar[ErrorKind]
    API_KEY_NOT_FOUND: _ClassVar[ErrorKind]

class EndCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    END_CAUSE_UNSPECIFIED: _ClassVar[EndCause]
    END_CAUSE_COMMITTED: _ClassVar[EndCause]
    END_CAUSE_CLIENT_ABORT: _ClassVar[EndCause]
    END_CAUSE_LEASE_EXPIRED: _ClassVar[EndCause]
    END_CAUSE_DEADLOCK_VICTIM: _ClassVar[EndCause]
    END_CAUSE_OPERATOR_ABORT: _ClassVar[EndCause]
    END_CAUSE_MAX_DURATION_EXCEEDED: _ClassVar[EndCause]

class SlotRunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SLOT_RUN_STATE_UNSPECIFIED: _ClassVar[SlotRunState]
    SLOT_RUN_RUNNING: _ClassVar[SlotRunState]
    SLOT_RUN_SUCCEEDED: _ClassVar[SlotRunState]
    SLOT_RUN_FAILED: _ClassVar[SlotRunState]
    SLOT_RUN_LOST: _ClassVar[SlotRunState]

class VictimPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VICTIM_POLICY_UNSPECIFIED: _ClassVar[VictimPolicy]
    LOWEST_PRIORITY_THEN_YOUNGEST: _ClassVar[VictimPolicy]
    YOUNGEST: _ClassVar[VictimPolicy]
    OLDEST: _ClassVar[VictimPolicy]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    DEADLOCK_RESOLVED: _ClassVar[EventKind]
    TRANSACTION_EXPIRED: _ClassVar[EventKind]
    TRANSACTION_ABORTED: _ClassVar[EventKind]
    LOCK_REVOKED: _ClassVar[EventKind]
    API_KEY_CHANGED: _ClassVar[EventKind]

class ApiKeyChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    API_KEY_CHANGE_KIND_UNSPECIFIED: _ClassVar[ApiKeyChangeKind]
    API_KEY_CREATED: _ClassVar[ApiKeyChangeKind]
    API_KEY_REVOKED: _ClassVar[ApiKeyChangeKind]
    API_KEY_ROTATED: _ClassVar[ApiKeyChangeKind]
    API_KEY_EXPIRED: _ClassVar[ApiKeyChangeKind]
KEY_CHANGE_KIND_UNSPECIFIED: KeyChangeKind
KEY_CHANGE_KIND_GRANTED: KeyChangeKind
KEY_CHANGE_KIND_RELEASED: KeyChangeKind
KEY_CHANGE_KIND_EXPIRED: KeyChangeKind
KEY_CHANGE_KIND_REVOKED: KeyChangeKind
KEY_CHANGE_KIND_DOWNGRADED: KeyChangeKind
LOCK_MODE_UNSPECIFIED: LockMode
EXCLUSIVE: LockMode
SHARED_READ: LockMode
SEMAPHORE: LockMode
TRANSACTION_STATE_UNSPECIFIED: TransactionState
ACTIVE: TransactionState
COMMITTED: TransactionState
ABORTED: TransactionState
EXPIRED: TransactionState
ERROR_KIND_UNSPECIFIED: ErrorKind
LOCK_TIMEOUT: ErrorKind
DEADLOCK_VICTIM: ErrorKind
TRANSACTION_LOST: ErrorKind
TRANSACTION_NOT_FOUND: ErrorKind
INVALID_ARGUMENT: ErrorKind
UNAUTHENTICATED: ErrorKind
PERMISSION_DENIED: ErrorKind
NOT_LEADER: ErrorKind
WAIT_CANCELLED: ErrorKind
ALREADY_WAITING: ErrorKind
UNAVAILABLE: ErrorKind
CURSOR_EXPIRED: ErrorKind
RESOURCE_EXHAUSTED: ErrorKind
MEMBERSHIP_REFUSED: ErrorKind
INTERNAL: ErrorKind
API_KEY_EXISTS: ErrorKind
API_KEY_NOT_FOUND: ErrorKind
END_CAUSE_UNSPECIFIED: EndCause
END_CAUSE_COMMITTED: EndCause
END_CAUSE_CLIENT_ABORT: EndCause
END_CAUSE_LEASE_EXPIRED: EndCause
END_CAUSE_DEADLOCK_VICTIM: EndCause
END_CAUSE_OPERATOR_ABORT: EndCause
END_CAUSE_MAX_DURATION_EXCEEDED: EndCause
SLOT_RUN_STATE_UNSPECIFIED: SlotRunState
SLOT_RUN_RUNNING: SlotRunState
SLOT_RUN_SUCCEEDED: SlotRunState
SLOT_RUN_FAILED: SlotRunState
SLOT_RUN_LOST: SlotRunState
VICTIM_POLICY_UNSPECIFIED: VictimPolicy
LOWEST_PRIORITY_THEN_YOUNGEST: VictimPolicy
YOUNGEST: VictimPolicy
OLDEST: VictimPolicy
EVENT_KIND_UNSPECIFIED: EventKind
DEADLOCK_RESOLVED: EventKind
TRANSACTION_EXPIRED: EventKind
TRANSACTION_ABORTED: EventKind
LOCK_REVOKED: EventKind
API_KEY_CHANGED: EventKind
API_KEY_CHANGE_KIND_UNSPECIFIED: ApiKeyChangeKind
API_KEY_CREATED: ApiKeyChangeKind
API_KEY_REVOKED: ApiKeyChangeKind
API_KEY_ROTATED: ApiKeyChangeKind
API_KEY_EXPIRED: ApiKeyChangeKind

class WatchKeyRequest(_message.Message):
    __slots__ = ("namespace", "key", "cursor")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    cursor: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., cursor: _Optional[str] = ...) -> None: ...

class KeyHolders(_message.Message):
    __slots__ = ("holders", "changes", "cursor", "initial")
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    holders: _containers.RepeatedCompositeFieldContainer[KeyHolder]
    changes: _containers.RepeatedCompositeFieldContainer[KeyChange]
    cursor: str
    initial: bool
    def __init__(self, holders: _Optional[_Iterable[_Union[KeyHolder, _Mapping]]] = ..., changes: _Optional[_Iterable[_Union[KeyChange, _Mapping]]] = ..., cursor: _Optional[str] = ..., initial: _Optional[bool] = ...) -> None: ...

class KeyHolder(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "mode", "fencing_token", "since_ms")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    mode: LockMode
    fencing_token: int
    since_ms: int
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., fencing_token: _Optional[int] = ..., since_ms: _Optional[int] = ...) -> None: ...

class KeyChange(_message.Message):
    __slots__ = ("kind", "holder", "end_cause")
    KIND_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    END_CAUSE_FIELD_NUMBER: _ClassVar[int]
    kind: KeyChangeKind
    holder: KeyHolder
    end_cause: EndCause
    def __init__(self, kind: _Optional[_Union[KeyChangeKind, str]] = ..., holder: _Optional[_Union[KeyHolder, _Mapping]] = ..., end_cause: _Optional[_Union[EndCause, str]] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("kind", "transaction_id", "end_cause", "deadlock")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    END_CAUSE_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_FIELD_NUMBER: _ClassVar[int]
    kind: ErrorKind
    transaction_id: int
    end_cause: EndCause
    deadlock: DeadlockResolved
    def __init__(self, kind: _Optional[_Union[ErrorKind, str]] = ..., transaction_id: _Optional[int] = ..., end_cause: _Optional[_Union[EndCause, str]] = ..., deadlock: _Optional[_Union[DeadlockResolved, _Mapping]] = ...) -> None: ...

class BeginTransactionRequest(_message.Message):
    __slots__ = ("timeout_ms", "priority", "name", "request_id", "max_duration_ms")
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    priority: int
    name: str
    request_id: str
    max_duration_ms: int
    def __init__(self, timeout_ms: _Optional[int] = ..., priority: _Optional[int] = ..., name: _Optional[str] = ..., request_id: _Optional[str] = ..., max_duration_ms: _Optional[int] = ...) -> None: ...

class BeginTransactionResponse(_message.Message):
    __slots__ = ("transaction_id", "lease_timeout_ms")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    lease_timeout_ms: int
    def __init__(self, transaction_id: _Optional[int] = ..., lease_timeout_ms: _Optional[int] = ...) -> None: ...

class AcquireLockRequest(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "mode", "timeout_ms", "request_id", "begin", "stay_open", "permits")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    STAY_OPEN_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    mode: LockMode
    timeout_ms: int
    request_id: str
    begin: BeginTransactionRequest
    stay_open: bool
    permits: int
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., timeout_ms: _Optional[int] = ..., request_id: _Optional[str] = ..., begin: _Optional[_Union[BeginTransactionRequest, _Mapping]] = ..., stay_open: _Optional[bool] = ..., permits: _Optional[int] = ...) -> None: ...

class AcquireLockResponse(_message.Message):
    __slots__ = ("queued", "granted", "lost", "begun")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    BEGUN_FIELD_NUMBER: _ClassVar[int]
    queued: Queued
    granted: Granted
    lost: LockStreamLost
    begun: BeginTransactionResponse
    def __init__(self, queued: _Optional[_Union[Queued, _Mapping]] = ..., granted: _Optional[_Union[Granted, _Mapping]] = ..., lost: _Optional[_Union[LockStreamLost, _Mapping]] = ..., begun: _Optional[_Union[BeginTransactionResponse, _Mapping]] = ...) -> None: ...

class Queued(_message.Message):
    __slots__ = ("position", "blocking_transaction_ids")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    BLOCKING_TRANSACTION_IDS_FIELD_NUMBER: _ClassVar[int]
    position: int
    blocking_transaction_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, position: _Optional[int] = ..., blocking_transaction_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Granted(_message.Message):
    __slots__ = ("fencing_token", "namespace", "key", "mode")
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    fencing_token: int
    namespace: str
    key: str
    mode: LockMode
    def __init__(self, fencing_token: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ...) -> None: ...

class LockRequest(_message.Message):
    __slots__ = ("namespace", "key", "mode")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    mode: LockMode
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ...) -> None: ...

class AcquireLocksRequest(_message.Message):
    __slots__ = ("transaction_id", "locks", "timeout_ms", "request_id", "stay_open")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STAY_OPEN_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    locks: _containers.RepeatedCompositeFieldContainer[LockRequest]
    timeout_ms: int
    request_id: str
    stay_open: bool
    def __init__(self, transaction_id: _Optional[int] = ..., locks: _Optional[_Iterable[_Union[LockRequest, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., request_id: _Optional[str] = ..., stay_open: _Optional[bool] = ...) -> None: ...

class AcquireLocksResponse(_message.Message):
    __slots__ = ("queued", "granted", "lost")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    queued: Queued
    granted: LocksGranted
    lost: LockStreamLost
    def __init__(self, queued: _Optional[_Union[Queued, _Mapping]] = ..., granted: _Optional[_Union[LocksGranted, _Mapping]] = ..., lost: _Optional[_Union[LockStreamLost, _Mapping]] = ...) -> None: ...

class LockStreamLost(_message.Message):
    __slots__ = ("transaction_id", "end_cause", "message")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    END_CAUSE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    end_cause: EndCause
    message: str
    def __init__(self, transaction_id: _Optional[int] = ..., end_cause: _Optional[_Union[EndCause, str]] = ..., message: _Optional[str] = ...) -> None: ...

class LocksGranted(_message.Message):
    __slots__ = ("locks",)
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[Granted]
    def __init__(self, locks: _Optional[_Iterable[_Union[Granted, _Mapping]]] = ...) -> None: ...

class DowngradeLockRequest(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DowngradeLockResponse(_message.Message):
    __slots__ = ("held", "lock")
    HELD_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    held: bool
    lock: Granted
    def __init__(self, held: _Optional[bool] = ..., lock: _Optional[_Union[Granted, _Mapping]] = ...) -> None: ...

class VerifyFencingTokenRequest(_message.Message):
    __slots__ = ("namespace", "key", "fencing_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    fencing_token: int
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class VerifyFencingTokenResponse(_message.Message):
    __slots__ = ("current", "current_tokens")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    current: bool
    current_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, current: _Optional[bool] = ..., current_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class ReleaseLockRequest(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ReleaseLockResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class CancelWaitRequest(_message.Message):
    __slots__ = ("transaction_id", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelWaitResponse(_message.Message):
    __slots__ = ("cancelled", "granted")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    granted: bool
    def __init__(self, cancelled: _Optional[bool] = ..., granted: _Optional[bool] = ...) -> None: ...

class SlotRun(_message.Message):
    __slots__ = ("namespace", "key", "period_ms", "slot", "transaction_id", "transaction_name", "api_key", "started_at_ms", "finished_at_ms", "state", "exit_code", "reason", "attempt")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    period_ms: int
    slot: int
    transaction_id: int
    transaction_name: str
    api_key: str
    started_at_ms: int
    finished_at_ms: int
    state: SlotRunState
    exit_code: int
    reason: str
    attempt: int
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., period_ms: _Optional[int] = ..., slot: _Optional[int] = ..., transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., api_key: _Optional[str] = ..., started_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., state: _Optional[_Union[SlotRunState, str]] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class ClaimSlotRequest(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "period_ms", "retry_failed", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PERIOD_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_FAILED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    period_ms: int
    retry_failed: bool
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., period_ms: _Optional[int] = ..., retry_failed: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class ClaimSlotResponse(_message.Message):
    __slots__ = ("run", "slot", "attempt", "last_run")
    RUN_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    run: bool
    slot: int
    attempt: int
    last_run: SlotRun
    def __init__(self, run: _Optional[bool] = ..., slot: _Optional[int] = ..., attempt: _Optional[int] = ..., last_run: _Optional[_Union[SlotRun, _Mapping]] = ...) -> None: ...

class FinishSlotRequest(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "slot", "result", "exit_code", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    slot: int
    result: SlotRunState
    exit_code: int
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., slot: _Optional[int] = ..., result: _Optional[_Union[SlotRunState, str]] = ..., exit_code: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class FinishSlotResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: SlotRun
    def __init__(self, run: _Optional[_Union[SlotRun, _Mapping]] = ...) -> None: ...

class GetTransactionStatusRequest(_message.Message):
    __slots__ = ("transaction_id",)
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    def __init__(self, transaction_id: _Optional[int] = ...) -> None: ...

class HeldLock(_message.Message):
    __slots__ = ("namespace", "key", "mode", "fencing_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    mode: LockMode
    fencing_token: int
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., fencing_token: _Optional[int] = ...) -> None: ...

class PendingLock(_message.Message):
    __slots__ = ("namespace", "key", "mode", "position", "request_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    mode: LockMode
    position: int
    request_id: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., position: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class GetTransactionStatusResponse(_message.Message):
    __slots__ = ("transaction_id", "state", "name", "priority", "lease_timeout_ms", "lease_remaining_ms", "locks", "waiting", "end_reason", "end_cause")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    END_REASON_FIELD_NUMBER: _ClassVar[int]
    END_CAUSE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    state: TransactionState
    name: str
    priority: int
    lease_timeout_ms: int
    lease_remaining_ms: int
    locks: _containers.RepeatedCompositeFieldContainer[HeldLock]
    waiting: PendingLock
    end_reason: str
    end_cause: EndCause
    def __init__(self, transaction_id: _Optional[int] = ..., state: _Optional[_Union[TransactionState, str]] = ..., name: _Optional[str] = ..., priority: _Optional[int] = ..., lease_timeout_ms: _Optional[int] = ..., lease_remaining_ms: _Optional[int] = ..., locks: _Optional[_Iterable[_Union[HeldLock, _Mapping]]] = ..., waiting: _Optional[_Union[PendingLock, _Mapping]] = ..., end_reason: _Optional[str] = ..., end_cause: _Optional[_Union[EndCause, str]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("transaction_id", "more_transaction_ids")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    MORE_TRANSACTION_IDS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    more_transaction_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, transaction_id: _Optional[int] = ..., more_transaction_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_remaining_ms", "results")
    LEASE_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    lease_remaining_ms: int
    results: _containers.RepeatedCompositeFieldContainer[HeartbeatResult]
    def __init__(self, lease_remaining_ms: _Optional[int] = ..., results: _Optional[_Iterable[_Union[HeartbeatResult, _Mapping]]] = ...) -> None: ...

class HeartbeatResult(_message.Message):
    __slots__ = ("transaction_id", "lease_remaining_ms", "error_kind", "error_message", "error")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    lease_remaining_ms: int
    error_kind: str
    error_message: str
    error: ErrorDetail
    def __init__(self, transaction_id: _Optional[int] = ..., lease_remaining_ms: _Optional[int] = ..., error_kind: _Optional[str] = ..., error_message: _Optional[str] = ..., error: _Optional[_Union[ErrorDetail, _Mapping]] = ...) -> None: ...

class EndTransactionRequest(_message.Message):
    __slots__ = ("transaction_id", "commit", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    commit: bool
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., commit: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class EndTransactionResponse(_message.Message):
    __slots__ = ("state", "released_locks")
    STATE_FIELD_NUMBER: _ClassVar[int]
    RELEASED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    state: TransactionState
    released_locks: int
    def __init__(self, state: _Optional[_Union[TransactionState, str]] = ..., released_locks: _Optional[int] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("from_sequence", "namespace_prefixes", "kinds", "only_new")
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    ONLY_NEW_FIELD_NUMBER: _ClassVar[int]
    from_sequence: int
    namespace_prefixes: _containers.RepeatedScalarFieldContainer[str]
    kinds: _containers.RepeatedScalarFieldContainer[EventKind]
    only_new: bool
    def __init__(self, from_sequence: _Optional[int] = ..., namespace_prefixes: _Optional[_Iterable[str]] = ..., kinds: _Optional[_Iterable[_Union[EventKind, str]]] = ..., only_new: _Optional[bool] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("sequence", "time_ms", "kind", "namespaces", "deadlock_resolved", "transaction_expired", "transaction_aborted", "lock_revoked", "api_key_changed")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ABORTED_FIELD_NUMBER: _ClassVar[int]
    LOCK_REVOKED_FIELD_NUMBER: _ClassVar[int]
    API_KEY_CHANGED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time_ms: int
    kind: EventKind
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    deadlock_resolved: DeadlockResolved
    transaction_expired: TransactionExpired
    transaction_aborted: TransactionAborted
    lock_revoked: LockRevoked
    api_key_changed: ApiKeyChanged
    def __init__(self, sequence: _Optional[int] = ..., time_ms: _Optional[int] = ..., kind: _Optional[_Union[EventKind, str]] = ..., namespaces: _Optional[_Iterable[str]] = ..., deadlock_resolved: _Optional[_Union[DeadlockResolved, _Mapping]] = ..., transaction_expired: _Optional[_Union[TransactionExpired, _Mapping]] = ..., transaction_aborted: _Optional[_Union[TransactionAborted, _Mapping]] = ..., lock_revoked: _Optional[_Union[LockRevoked, _Mapping]] = ..., api_key_changed: _Optional[_Union[ApiKeyChanged, _Mapping]] = ...) -> None: ...

class CycleMember(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "priority", "namespace", "key", "mode")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    priority: int
    namespace: str
    key: str
    mode: LockMode
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., priority: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ...) -> None: ...

class DeadlockResolved(_message.Message):
    __slots__ = ("cycle", "victim_transaction_id", "policy")
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    VICTIM_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    cycle: _containers.RepeatedCompositeFieldContainer[CycleMember]
    victim_transaction_id: int
    policy: VictimPolicy
    def __init__(self, cycle: _Optional[_Iterable[_Union[CycleMember, _Mapping]]] = ..., victim_transaction_id: _Optional[int] = ..., policy: _Optional[_Union[VictimPolicy, str]] = ...) -> None: ...

class TransactionExpired(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "released_locks")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    RELEASED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    released_locks: _containers.RepeatedCompositeFieldContainer[HeldLock]
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., released_locks: _Optional[_Iterable[_Union[HeldLock, _Mapping]]] = ...) -> None: ...

class TransactionAborted(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "reason", "operator", "released_locks")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    RELEASED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    reason: str
    operator: str
    released_locks: _containers.RepeatedCompositeFieldContainer[HeldLock]
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ..., released_locks: _Optional[_Iterable[_Union[HeldLock, _Mapping]]] = ...) -> None: ...

class ApiKeyChanged(_message.Message):
    __slots__ = ("change", "key_name", "by")
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    KEY_NAME_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    change: ApiKeyChangeKind
    key_name: str
    by: str
    def __init__(self, change: _Optional[_Union[ApiKeyChangeKind, str]] = ..., key_name: _Optional[str] = ..., by: _Optional[str] = ...) -> None: ...

class LockRevoked(_message.Message):
    __slots__ = ("transaction_id", "namespace", "key", "mode", "fencing_token", "cause", "end_cause")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    END_CAUSE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    namespace: str
    key: str
    mode: LockMode
    fencing_token: int
    cause: str
    end_cause: EndCause
    def __init__(self, transaction_id: _Optional[int] = ..., namespace: _Optional[str] = ..., key: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., fencing_token: _Optional[int] = ..., cause: _Optional[str] = ..., end_cause: _Optional[_Union[EndCause, str]] = ...) -> None: ...

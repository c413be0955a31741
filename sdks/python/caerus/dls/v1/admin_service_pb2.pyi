from caerus.dls.v1 import lock_service_pb2 as _lock_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("name", "namespace_prefixes", "admin", "expires_in_ms", "request_id", "limits")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace_prefixes: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    expires_in_ms: int
    request_id: str
    limits: ApiKeyLimits
    def __init__(self, name: _Optional[str] = ..., namespace_prefixes: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ..., expires_in_ms: _Optional[int] = ..., request_id: _Optional[str] = ..., limits: _Optional[_Union[ApiKeyLimits, _Mapping]] = ...) -> None: ...

class ApiKeyLimits(_message.Message):
    __slots__ = ("max_transactions", "max_watches", "max_slot_records")
    MAX_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_WATCHES_FIELD_NUMBER: _ClassVar[int]
    MAX_SLOT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    max_transactions: int
    max_watches: int
    max_slot_records: int
    def __init__(self, max_transactions: _Optional[int] = ..., max_watches: _Optional[int] = ..., max_slot_records: _Optional[int] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("key", "info")
    KEY_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    key: str
    info: ApiKeyInfo
    def __init__(self, key: _Optional[str] = ..., info: _Optional[_Union[ApiKeyInfo, _Mapping]] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ApiKeyInfo(_message.Message):
    __slots__ = ("name", "namespace_prefixes", "admin", "expires_at_ms", "created_by", "created_at_ms", "limits", "rotated_at_ms", "previous_valid_until_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    ROTATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VALID_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    namespace_prefixes: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    expires_at_ms: int
    created_by: str
    created_at_ms: int
    limits: ApiKeyLimits
    rotated_at_ms: int
    previous_valid_until_ms: int
    def __init__(self, name: _Optional[str] = ..., namespace_prefixes: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ..., expires_at_ms: _Optional[int] = ..., created_by: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., limits: _Optional[_Union[ApiKeyLimits, _Mapping]] = ..., rotated_at_ms: _Optional[int] = ..., previous_valid_until_ms: _Optional[int] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKeyInfo]
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKeyInfo, _Mapping]]] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RotateApiKeyRequest(_message.Message):
    __slots__ = ("name", "grace_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    grace_ms: int
    def __init__(self, name: _Optional[str] = ..., grace_ms: _Optional[int] = ...) -> None: ...

class RotateApiKeyResponse(_message.Message):
    __slots__ = ("key", "info")
    KEY_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    key: str
    info: ApiKeyInfo
    def __init__(self, key: _Optional[str] = ..., info: _Optional[_Union[ApiKeyInfo, _Mapping]] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class TransferLeaderResponse(_message.Message):
    __slots__ = ("leader_id", "leader_addr")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_addr: str
    def __init__(self, leader_id: _Optional[int] = ..., leader_addr: _Optional[str] = ...) -> None: ...

class ListLocksRequest(_message.Message):
    __slots__ = ("namespace_prefix",)
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    namespace_prefix: str
    def __init__(self, namespace_prefix: _Optional[str] = ...) -> None: ...

class LockHolder(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "mode", "fencing_token", "since_ms")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    mode: _lock_service_pb2.LockMode
    fencing_token: int
    since_ms: int
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., mode: _Optional[_Union[_lock_service_pb2.LockMode, str]] = ..., fencing_token: _Optional[int] = ..., since_ms: _Optional[int] = ...) -> None: ...

class LockWaiter(_message.Message):
    __slots__ = ("transaction_id", "transaction_name", "mode", "position", "blocking_transaction_ids", "since_ms", "upgrade")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    BLOCKING_TRANSACTION_IDS_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    transaction_name: str
    mode: _lock_service_pb2.LockMode
    position: int
    blocking_transaction_ids: _containers.RepeatedScalarFieldContainer[int]
    since_ms: int
    upgrade: bool
    def __init__(self, transaction_id: _Optional[int] = ..., transaction_name: _Optional[str] = ..., mode: _Optional[_Union[_lock_service_pb2.LockMode, str]] = ..., position: _Optional[int] = ..., blocking_transaction_ids: _Optional[_Iterable[int]] = ..., since_ms: _Optional[int] = ..., upgrade: _Optional[bool] = ...) -> None: ...

class KeyLocks(_message.Message):
    __slots__ = ("namespace", "key", "holders", "waiters", "delayed_until_ms", "delayed_by_transaction_id", "delay_cause", "permits", "delay_remaining_ms")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    DELAYED_UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    DELAYED_BY_TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    DELAY_CAUSE_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    DELAY_REMAINING_MS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    holders: _containers.RepeatedCompositeFieldContainer[LockHolder]
    waiters: _containers.RepeatedCompositeFieldContainer[LockWaiter]
    delayed_until_ms: int
    delayed_by_transaction_id: int
    delay_cause: _lock_service_pb2.EndCause
    permits: int
    delay_remaining_ms: int
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[LockHolder, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[LockWaiter, _Mapping]]] = ..., delayed_until_ms: _Optional[int] = ..., delayed_by_transaction_id: _Optional[int] = ..., delay_cause: _Optional[_Union[_lock_service_pb2.EndCause, str]] = ..., permits: _Optional[int] = ..., delay_remaining_ms: _Optional[int] = ...) -> None: ...

class ListLocksResponse(_message.Message):
    __slots__ = ("locks", "slot_runs")
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    SLOT_RUNS_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[KeyLocks]
    slot_runs: _containers.RepeatedCompositeFieldContainer[_lock_service_pb2.SlotRun]
    def __init__(self, locks: _Optional[_Iterable[_Union[KeyLocks, _Mapping]]] = ..., slot_runs: _Optional[_Iterable[_Union[_lock_service_pb2.SlotRun, _Mapping]]] = ...) -> None: ...

class AbortTransactionRequest(_message.Message):
    __slots__ = ("transaction_id", "reason", "request_id")
    TRANSACTION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    transaction_id: int
    reason: str
    request_id: str
    def __init__(self, transaction_id: _Optional[int] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class AbortTransactionResponse(_message.Message):
    __slots__ = ("state", "released_locks")
    STATE_FIELD_NUMBER: _ClassVar[int]
    RELEASED_LOCKS_FIELD_NUMBER: _ClassVar[int]
    state: _lock_service_pb2.TransactionState
    released_locks: int
    def __init__(self, state: _Optional[_Union[_lock_service_pb2.TransactionState, str]] = ..., released_locks: _Optional[int] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterMember(_message.Message):
    __slots__ = ("node_id", "addr", "voter", "version", "feature_level")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    voter: bool
    version: str
    feature_level: int
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., voter: _Optional[bool] = ..., version: _Optional[str] = ..., feature_level: _Optional[int] = ...) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("node_id", "leader_id", "leader_addr", "term", "commit_index", "applied_index", "last_log_index", "role", "members", "last_fencing_token", "active_transactions", "last_event_sequence", "feature_level", "feature_level_used", "version")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LAST_FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_USED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    leader_id: int
    leader_addr: str
    term: int
    commit_index: int
    applied_index: int
    last_log_index: int
    role: str
    members: _containers.RepeatedCompositeFieldContainer[ClusterMember]
    last_fencing_token: int
    active_transactions: int
    last_event_sequence: int
    feature_level: int
    feature_level_used: int
    version: str
    def __init__(self, node_id: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_addr: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_log_index: _Optional[int] = ..., role: _Optional[str] = ..., members: _Optional[_Iterable[_Union[ClusterMember, _Mapping]]] = ..., last_fencing_token: _Optional[int] = ..., active_transactions: _Optional[int] = ..., last_event_sequence: _Optional[int] = ..., feature_level: _Optional[int] = ..., feature_level_used: _Optional[int] = ..., version: _Optional[str] = ...) -> None: ...

class ListMembersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MemberInfo(_message.Message):
    __slots__ = ("node_id", "addr", "peer_addr", "voter", "matched_index", "version", "feature_level")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    MATCHED_INDEX_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    peer_addr: str
    voter: bool
    matched_index: int
    version: str
    feature_level: int
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., peer_addr: _Optional[str] = ..., voter: _Optional[bool] = ..., matched_index: _Optional[int] = ..., version: _Optional[str] = ..., feature_level: _Optional[int] = ...) -> None: ...

class ListMembersResponse(_message.Message):
    __slots__ = ("members", "leader_id", "last_log_index", "changing")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHANGING_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    leader_id: int
    last_log_index: int
    changing: bool
    def __init__(self, members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ..., leader_id: _Optional[int] = ..., last_log_index: _Optional[int] = ..., changing: _Optional[bool] = ...) -> None: ...

class AddMemberRequest(_message.Message):
    __slots__ = ("node_id", "addr", "peer_addr", "stay_learner", "catch_up_timeout_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    STAY_LEARNER_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    addr: str
    peer_addr: str
    stay_learner: bool
    catch_up_timeout_ms: int
    def __init__(self, node_id: _Optional[int] = ..., addr: _Optional[str] = ..., peer_addr: _Optional[str] = ..., stay_learner: _Optional[bool] = ..., catch_up_timeout_ms: _Optional[int] = ...) -> None: ...

class AddMemberResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    def __init__(self, members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ...) -> None: ...

class RemoveMemberRequest(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    def __init__(self, node_id: _Optional[int] = ...) -> None: ...

class RemoveMemberResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    def __init__(self, members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ...) -> None: ...

class PromoteMemberRequest(_message.Message):
    __slots__ = ("node_id", "catch_up_timeout_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    catch_up_timeout_ms: int
    def __init__(self, node_id: _Optional[int] = ..., catch_up_timeout_ms: _Optional[int] = ...) -> None: ...

class PromoteMemberResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[MemberInfo]
    def __init__(self, members: _Optional[_Iterable[_Union[MemberInfo, _Mapping]]] = ...) -> None: ...

class SaveSnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SaveSnapshotResponse(_message.Message):
    __slots__ = ("chunk",)
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: bytes
    def __init__(self, chunk: _Optional[bytes] = ...) -> None: ...

class SetLockDelayRequest(_message.Message):
    __slots__ = ("namespace_prefix", "delay_ms")
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    namespace_prefix: str
    delay_ms: int
    def __init__(self, namespace_prefix: _Optional[str] = ..., delay_ms: _Optional[int] = ...) -> None: ...

class SetLockDelayResponse(_message.Message):
    __slots__ = ("previous_delay_ms",)
    PREVIOUS_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    previous_delay_ms: int
    def __init__(self, previous_delay_ms: _Optional[int] = ...) -> None: ...

class ListLockDelaysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LockDelayRule(_message.Message):
    __slots__ = ("namespace_prefix", "delay_ms")
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    namespace_prefix: str
    delay_ms: int
    def __init__(self, namespace_prefix: _Optional[str] = ..., delay_ms: _Optional[int] = ...) -> None: ...

class ListLockDelaysResponse(_message.Message):
    __slots__ = ("rules",)
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[LockDelayRule]
    def __init__(self, rules: _Optional[_Iterable[_Union[LockDelayRule, _Mapping]]] = ...) -> None: ...

"""Caerus DLS: Python SDK of a raft-replicated distributed lock service.

Locks are taken inside a transaction whose lease the client (in Rust) keeps alive with
heartbeats. Every grant carries a fencing token: a cluster-wide, strictly increasing int
to pass to the storage you protect, which should reject writes with a lower token.

asyncio::

    from caerus import DlsClient, LockMode

    client = DlsClient(endpoints=["127.0.0.1:7070"])   # api_key defaults to $CAERUS_API_KEY
    async with client.transaction(timeout_ms=15000) as tx:   # commit on exit, abort on exception
        lock = await tx.acquire_lock("billing-jobs", "monthly-billing-job", LockMode.EXCLUSIVE, timeout_ms=10000)
        await charge(fencing_token=lock.fencing_token)

Blocking (threads, scripts): :mod:`caerus.sync` has the same names without ``await``.

Errors are :class:`DlsError` subclasses with ``.code`` and ``.message`` (see :mod:`caerus.errors`).
"""

from ._native import (
    Event,
    KeyDelay,
    KeyLocks,
    Lock,
    LockDelayRule,
    ApiKeyInfo,
    LockMode,
    LostReason,
    KeyChange,
    KeyHolder,
    KeyUpdate,
    PendingLock,
    QueuePosition,
    SlotClaim,
    SlotRun,
    TokenCheck,
    TransactionStatus,
)
from ._aio import DlsClient, Election, EventStream, KeyWatch, Leadership, Transaction
from .errors import (
    AlreadyWaiting,
    ConfigError,
    CursorExpired,
    DeadlockVictim,
    DlsError,
    InternalError,
    InvalidArgument,
    LockTimeout,
    MembershipRefused,
    PermissionDenied,
    ResourceExhausted,
    TransactionLost,
    TransactionNotFound,
    Unauthenticated,
    Unavailable,
    WaitCancelled,
)
from . import errors, sync

__all__ = [
    "DlsClient",
    "Transaction",
    "EventStream",
    "LockMode",
    "Lock",
    "PendingLock",
    "TokenCheck",
    "QueuePosition",
    "SlotClaim",
    "SlotRun",
    "KeyWatch",
    "KeyUpdate",
    "KeyChange",
    "KeyHolder",
    "Election",
    "Leadership",
    "TransactionStatus",
    "LostReason",
    "Event",
    "KeyLocks",
    "KeyDelay",
    "LockDelayRule",
    "ApiKeyInfo",
    "sync",
    *errors.__all__,
]

"""Exceptions raised by the Caerus DLS client.

Every error is a :class:`DlsError` with a stable ``code`` (e.g. ``"LOCK_TIMEOUT"``) and the
server's or client's ``message``. Catch a subclass for the cases you handle.
"""

from __future__ import annotations

from typing import Dict, Type

__all__ = [
    "DlsError",
    "LockTimeout",
    "DeadlockVictim",
    "TransactionLost",
    "TransactionNotFound",
    "InvalidArgument",
    "Unauthenticated",
    "PermissionDenied",
    "WaitCancelled",
    "AlreadyWaiting",
    "CursorExpired",
    "ResourceExhausted",
    "Unavailable",
    "ConfigError",
    "InternalError",
]


class DlsError(Exception):
    """Base of every Caerus DLS error. ``code`` is the stable name, ``message`` the detail."""

    code: str = "INTERNAL"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class LockTimeout(DlsError):
    """The acquire timeout passed before the lock was granted; the transaction stays active."""

    code = "LOCK_TIMEOUT"


class TransactionLost(DlsError):
    """The transaction is no longer active (lease expired, aborted, ended): stop the work."""

    code = "TRANSACTION_LOST"


class DeadlockVictim(TransactionLost):
    """The server aborted the transaction to break a deadlock; its locks are gone."""

    code = "DEADLOCK_VICTIM"


class TransactionNotFound(DlsError):
    """The server does not know the transaction."""

    code = "TRANSACTION_NOT_FOUND"


class InvalidArgument(DlsError, ValueError):
    """A request field failed validation (empty namespace, key too long, timeout 0, ...)."""

    code = "INVALID_ARGUMENT"


class Unauthenticated(DlsError):
    """The API key is missing or unknown to the server."""

    code = "UNAUTHENTICATED"


class PermissionDenied(DlsError):
    """The API key may not use this namespace or this transaction."""

    code = "PERMISSION_DENIED"


class WaitCancelled(DlsError):
    """The wait for a lock was withdrawn by a ``release`` of the same key."""

    code = "WAIT_CANCELLED"


class AlreadyWaiting(DlsError):
    """The transaction already waits for another lock (one wait at a time)."""

    code = "ALREADY_WAITING"


class CursorExpired(DlsError):
    """An event watch asked for events older than the server still keeps."""

    code = "CURSOR_EXPIRED"


class ResourceExhausted(DlsError):
    """A server limit refused the request and nothing changed (too many active transactions
    for the API key, locks in the transaction, waiters on the lock, or event watches). The
    message names the limit and the server flag that sets it. Not retried automatically."""

    code = "RESOURCE_EXHAUSTED"


class Unavailable(DlsError):
    """No leader could be reached before the retry deadline. Safe to retry later."""

    code = "UNAVAILABLE"


class ConfigError(DlsError, ValueError):
    """The client configuration is invalid (no endpoints, malformed address, bad API key)."""

    code = "CONFIG"


class InternalError(DlsError):
    """Anything else: an unexpected gRPC status or a malformed answer."""

    code = "INTERNAL"


_BY_CODE: Dict[str, Type[DlsError]] = {
    cls.code: cls
    for cls in (
        LockTimeout,
        DeadlockVictim,
        TransactionLost,
        TransactionNotFound,
        InvalidArgument,
        Unauthenticated,
        PermissionDenied,
        WaitCancelled,
        AlreadyWaiting,
        CursorExpired,
        ResourceExhausted,
        Unavailable,
        ConfigError,
        InternalError,
    )
}


def _from_code(code: str, message: str) -> DlsError:
    """Called by the native module: the exception for a ``caerus_core::Error`` code."""
    return _BY_CODE.get(code, DlsError)(message, code)

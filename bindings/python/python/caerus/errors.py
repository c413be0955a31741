"""Exceptions raised by the Caerus DLS client.

Every error is a :class:`DlsError` with a stable ``code`` (e.g. ``"LOCK_TIMEOUT"``) and the
server's or client's ``message``. Catch a subclass for the cases you handle.

The subclasses are made from the error table every SDK shares (``caerus_types::ErrorClass``,
exported by the native module as ``ERROR_CLASSES``), one per code: a kind added there reaches
Python without an edit here. A :class:`TransactionLost` (and :class:`DeadlockVictim`) says
what ended the transaction in ``end_cause`` (``"LEASE_EXPIRED"``, ``"DEADLOCK_VICTIM"``,
``"OPERATOR_ABORT"``, ...; ``None`` when the server did not say) and a
:class:`DeadlockVictim` the broken cycle in ``deadlock`` (a dict shaped like a
``DEADLOCK_RESOLVED`` event's detail: ``cycle``, ``victim_transaction_id``, ``policy``;
``None`` when the server no longer had it).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Type

from ._native import ERROR_CLASSES


class DlsError(Exception):
    """Base of every Caerus DLS error. ``code`` is the stable name, ``message`` the detail."""

    code: str = "INTERNAL"
    #: Whether making the same call again later may succeed.
    retryable: bool = False

    def __init__(
        self,
        message: str,
        code: str | None = None,
        *,
        end_cause: Optional[str] = None,
        deadlock: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        #: What ended the transaction (``"LEASE_EXPIRED"``, ...), for a lost transaction.
        self.end_cause = end_cause
        #: The broken deadlock (``cycle``, ``victim_transaction_id``, ``policy``), for a victim.
        self.deadlock = deadlock

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


# Python's names and bases where they are not just the table's stem under DlsError; these
# are the names users import today and stay as they are.
_NAMES = {"CONFIG": "ConfigError", "INTERNAL": "InternalError"}
_BASES: Dict[str, Tuple[str, ...]] = {
    "DEADLOCK_VICTIM": ("TRANSACTION_LOST",),  # a victim's transaction is lost too
    "INVALID_ARGUMENT": ("", "ValueError"),
    "CONFIG": ("", "ValueError"),
}

_BY_CODE: Dict[str, Type[DlsError]] = {}


def _make_classes() -> None:
    # The parents first: a class's bases must exist before it.
    pending = list(ERROR_CLASSES)
    while pending:
        code, stem, retryable, description = pending.pop(0)
        bases = _BASES.get(code, ("",))
        if any(b and b != "ValueError" and b not in _BY_CODE for b in bases):
            pending.append((code, stem, retryable, description))
            continue
        resolved = tuple(
            DlsError if b == "" else ValueError if b == "ValueError" else _BY_CODE[b] for b in bases
        )
        name = _NAMES.get(code, stem)
        cls = type(
            name,
            resolved,
            {"__doc__": description, "__module__": __name__, "__qualname__": name, "code": code, "retryable": retryable},
        )
        _BY_CODE[code] = cls
        globals()[name] = cls


_make_classes()

__all__ = ["DlsError", *(cls.__name__ for cls in _BY_CODE.values())]


def _from_code(
    code: str, message: str, *, end_cause: Optional[str] = None, deadlock: Optional[Dict[str, Any]] = None
) -> DlsError:
    """Called by the native module: the exception for a ``caerus_core::Error`` code."""
    return _BY_CODE.get(code, DlsError)(message, code, end_cause=end_cause, deadlock=deadlock)

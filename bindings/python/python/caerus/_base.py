"""What the asyncio and the blocking transaction share: read-only views of the native
transaction (no I/O, so they need no await)."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Tuple, Union

from . import _native
from ._native import LockMode, LostReason

ModeLike = Union[LockMode, str]
# One lock of an all-or-nothing acquire: (namespace, key) for EXCLUSIVE, or (namespace, key, mode).
LockSpec = Union[Tuple[str, str], Tuple[str, str, ModeLike]]
PathLike = Union[str, "os.PathLike[str]"]


_NOT_LOOKED_UP = object()
_otel_inject = _NOT_LOOKED_UP


def trace_context(traceparent: Optional[str], tracestate: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """The W3C trace context to send with an acquire: the caller's, or else, when the
    OpenTelemetry API package (``opentelemetry``) is importable, the current span's. It is
    an optional import: without the package nothing is sent. A node started with
    ``--otlp-endpoint`` puts the lock's wait, grant and release spans in that trace."""
    global _otel_inject
    if traceparent is not None:
        return traceparent, tracestate
    if _otel_inject is _NOT_LOOKED_UP:
        try:
            from opentelemetry.propagate import inject
        except ImportError:
            inject = None
        _otel_inject = inject
    if _otel_inject is None:
        return None, None
    carrier: dict = {}
    try:
        _otel_inject(carrier)
    except Exception:  # tracing must never fail a lock call
        return None, None
    return carrier.get("traceparent"), carrier.get("tracestate")


class TransactionView:
    """Properties common to :class:`caerus.Transaction` and :class:`caerus.sync.Transaction`."""

    __slots__ = ("_tx",)

    def __init__(self, native: _native.NativeTransaction) -> None:
        self._tx = native

    @property
    def id(self) -> int:
        """The transaction id assigned by the server; 0 until the transaction's first call
        reached it (``transaction()``, ``with_transaction`` and ``lock()`` begin with the
        first acquire, in the same request)."""
        return self._tx.id

    @property
    def lease_ms(self) -> int:
        """The lease length the server applied, in milliseconds (the requested one until
        the transaction has begun)."""
        return self._tx.lease_ms

    @property
    def is_lost(self) -> bool:
        """True once the transaction is lost: its locks may already belong to someone else."""
        return self._tx.is_lost

    @property
    def lost_reason(self) -> Optional[LostReason]:
        """Why the transaction was lost, or None."""
        return self._tx.lost_reason


class LockContextBase:
    """What ``client.lock(...)`` asked for, shared by the asyncio and the blocking context
    managers; once entered, ``.transaction`` is the transaction that holds the lock."""

    __slots__ = ("_native", "_lock", "_tx_kwargs", "transaction")

    def __init__(
        self,
        native: _native.NativeClient,
        namespace: str,
        key: str,
        mode: ModeLike,
        timeout_ms: Optional[int],
        lease_ms: Optional[int],
        priority: int,
        name: Optional[str],
        lost_stream: bool = False,
    ) -> None:
        self._native = native
        self._lock = (namespace, key, mode, timeout_ms)
        self._tx_kwargs = {"timeout_ms": lease_ms, "priority": priority, "name": name, "lost_stream": lost_stream}
        self.transaction: Optional[TransactionView] = None

    def _deferred(self) -> _native.NativeTransaction:
        """The transaction that begins with the lock's acquire (one request)."""
        return self._native.transaction(**self._tx_kwargs)


def native_client(
    endpoints: Optional[Union[Sequence[str], str]],
    api_key: Optional[str],
    connect_timeout_ms: Optional[float],
    request_timeout_ms: Optional[float],
    retry_deadline_ms: Optional[float],
    ca_file: Optional[PathLike],
    client_cert_file: Optional[PathLike],
    client_key_file: Optional[PathLike],
) -> _native.NativeClient:
    """The Rust client both APIs wrap; ``endpoints`` may also be one comma-separated string."""
    if isinstance(endpoints, str):
        endpoints = [e for e in (p.strip() for p in endpoints.split(",")) if e]
    return _native.NativeClient(
        list(endpoints) if endpoints is not None else None,
        api_key,
        True,  # use_env_key: read $CAERUS_API_KEY when api_key is None
        connect_timeout_ms,
        request_timeout_ms,
        retry_deadline_ms,
        ca_file,
        client_cert_file,
        client_key_file,
    )

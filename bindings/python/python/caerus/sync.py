"""The synchronous API, for scripts and thread-based workers: same names as the asyncio
API, no event loop needed.

Calls block the calling thread with the GIL released while the Rust runtime does the work,
so other Python threads run meanwhile, and the transaction's heartbeat keeps running in
Rust while your code computes or ``time.sleep``-s. Ctrl-C interrupts a blocking call.

    from caerus.sync import DlsClient
    from caerus import LockMode

    client = DlsClient(endpoints=["127.0.0.1:7070"])
    with client.transaction(timeout_ms=15000) as tx:
        lock = tx.acquire_lock("billing-jobs", "monthly-billing-job", LockMode.EXCLUSIVE, timeout_ms=10000)
        charge(fencing_token=lock.fencing_token)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, TypeVar, Union

from . import _native
from ._base import LockContextBase, LockSpec, ModeLike, PathLike, TransactionView, native_client, trace_context
from ._native import (
    Event,
    KeyHolder,
    KeyLocks,
    KeyUpdate,
    LockDelayRule,
    ApiKeyInfo,
    Lock,
    LockMode,
    LostReason,
    QueuePosition,
    SlotClaim,
    SlotRun,
    TokenCheck,
    TransactionStatus,
)
from .errors import LockTimeout

__all__ = ["DlsClient", "Transaction", "EventStream", "KeyWatch", "Election", "Leadership"]

T = TypeVar("T")


class Transaction(TransactionView):
    """A running transaction (blocking API). The Rust core heartbeats its lease in the
    background until it is committed, aborted or lost; it is also a context manager
    (commit on normal exit, abort on exception)."""

    __slots__ = ()

    def acquire_lock(
        self,
        namespace: str,
        key: str,
        mode: ModeLike = LockMode.EXCLUSIVE,
        *,
        timeout_ms: Optional[int] = None,
        on_queued: Optional[Callable[[QueuePosition], Any]] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> Lock:
        """Takes a lock, waiting up to ``timeout_ms`` (default 10000; 0 tries once). Raises
        :class:`~caerus.LockTimeout`, :class:`~caerus.DeadlockVictim`, :class:`~caerus.TransactionLost`.
        ``on_queued(QueuePosition)`` is called (on an SDK thread, while this call blocks)
        each time the request's place in the queue changes. ``traceparent``/``tracestate``
        as in :meth:`caerus.Transaction.acquire_lock` (the current OpenTelemetry span's by
        default, when the package is installed)."""
        traceparent, tracestate = trace_context(traceparent, tracestate)
        return self._tx.acquire_lock_blocking(namespace, key, mode, timeout_ms, on_queued, traceparent, tracestate)

    def acquire_permit(
        self,
        namespace: str,
        key: str,
        permits: int,
        *,
        timeout_ms: Optional[int] = None,
        on_queued: Optional[Callable[[QueuePosition], Any]] = None,
    ) -> Lock:
        """Takes one permit of the counted semaphore ``namespace/key`` of ``permits``
        permits (see :meth:`caerus.Transaction.acquire_permit`): up to that many holders at
        once, a fencing token each, the others in arrival order."""
        return self._tx.acquire_permit_blocking(namespace, key, permits, timeout_ms, on_queued)

    def acquire_locks(
        self,
        locks: Iterable[LockSpec],
        *,
        timeout_ms: Optional[int] = None,
        on_queued: Optional[Callable[[QueuePosition], Any]] = None,
    ) -> List[Lock]:
        """Takes several locks at once, all or nothing (see
        :meth:`caerus.Transaction.acquire_locks`): each ``(namespace, key)`` (EXCLUSIVE) or
        ``(namespace, key, mode)``; every lock granted together, or none."""
        return self._tx.acquire_locks_blocking(list(locks), timeout_ms, on_queued)

    def downgrade(self, namespace: str, key: str) -> Optional[Lock]:
        """EXCLUSIVE -> SHARED_READ in place, same token (see :meth:`caerus.Transaction.downgrade`)."""
        return self._tx.downgrade_blocking(namespace, key)

    def release(self, namespace: str, key: str) -> bool:
        """Releases one lock early; returns whether the transaction held (or waited for) it."""
        return self._tx.release_blocking(namespace, key)

    def claim_slot(self, namespace: str, key: str, period_ms: int, retry_failed: bool = False) -> SlotClaim:
        """At most once per schedule slot (see :meth:`caerus.Transaction.claim_slot`)."""
        return self._tx.claim_slot_blocking(namespace, key, period_ms, retry_failed)

    def finish_slot(self, claim: SlotClaim, outcome: str, exit_code: Optional[int] = None) -> SlotRun:
        """Records how a claimed run ended (see :meth:`caerus.Transaction.finish_slot`)."""
        return self._tx.finish_slot_blocking(claim, outcome, exit_code)

    def status(self) -> TransactionStatus:
        """Reads the transaction from the leader."""
        return self._tx.status_blocking()

    def commit(self) -> None:
        """Ends the transaction and releases its locks; raises TransactionLost if it was lost."""
        self._tx.commit_blocking()

    def abort(self) -> None:
        """Ends the transaction and releases its locks; succeeds if it already ended."""
        self._tx.abort_blocking()

    def lost(self, timeout: Optional[float] = None) -> Optional[LostReason]:
        """Blocks until the transaction is lost and returns why, or returns None after
        ``timeout`` seconds (None = wait until lost)."""
        return self._tx.lost_blocking(None if timeout is None else timeout * 1000.0)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            _abort_quietly(self)

    def __repr__(self) -> str:
        return f"<caerus.sync.Transaction id={self.id} lease_ms={self.lease_ms} lost={self.is_lost}>"


def _abort_quietly(tx: Transaction) -> None:
    try:
        tx.abort()
    except Exception:  # the body's exception is the one to report
        pass


class _TransactionContext:
    __slots__ = ("_client", "_kwargs", "_tx")

    def __init__(self, client: "DlsClient", kwargs: dict) -> None:
        self._client = client
        self._kwargs = kwargs
        self._tx: Optional[Transaction] = None

    def __enter__(self) -> Transaction:
        # Begins with its first call: a first acquire carries the begin (one request).
        self._tx = Transaction(self._client._native.transaction(**self._kwargs))
        return self._tx

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._tx is not None
        self._tx.__exit__(exc_type, exc, tb)


class _LockContext(LockContextBase):
    """``with client.lock(namespace, key) as lock:`` — a transaction holding one lock; the
    transaction is ``.transaction`` (for more locks, ``is_lost``)."""

    __slots__ = ()

    def __enter__(self) -> Lock:
        tx = Transaction(self._deferred())
        self.transaction = tx
        namespace, key, mode, timeout_ms = self._lock
        try:
            return tx.acquire_lock(namespace, key, mode, timeout_ms=timeout_ms)
        except BaseException:
            _abort_quietly(tx)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        tx = self.transaction
        assert isinstance(tx, Transaction)
        tx.__exit__(exc_type, exc, tb)


class EventStream:
    """Events of the cluster's log in sequence order; an iterator that blocks for the next
    event. It ends after raising an error."""

    __slots__ = ("_stream",)

    def __init__(self, native: _native.NativeEventStream) -> None:
        self._stream = native

    @property
    def backlog_end(self) -> Optional[int]:
        """The last sequence committed when the watch attached."""
        return self._stream.backlog_end

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        event = self._stream.next_blocking()
        if event is None:
            raise StopIteration
        return event


class KeyWatch:
    """Who holds one key: ``KeyUpdate`` values (the holders now, then one per change); an
    iterator that blocks for the next one and ends after raising an error."""

    __slots__ = ("_watch",)

    def __init__(self, native: _native.NativeKeyWatch) -> None:
        self._watch = native

    def __iter__(self) -> Iterator[KeyUpdate]:
        return self

    def __next__(self) -> KeyUpdate:
        update = self._watch.next_blocking()
        if update is None:
            raise StopIteration
        return update


class Leadership:
    """Held while this candidate leads (see :meth:`Election.campaign`)."""

    __slots__ = {
        "transaction": "The transaction holding the lock; leadership ends with it.",
        "lock": "The election key's EXCLUSIVE lock (its fencing token is the term).",
    }

    def __init__(self, transaction: Transaction, lock: Lock) -> None:
        self.transaction = transaction
        self.lock = lock

    @property
    def term(self) -> int:
        """The lock's fencing token: higher for every later leader."""
        return self.lock.fencing_token

    def lost(self, timeout: Optional[float] = None) -> Optional[LostReason]:
        """Blocks until leadership is lost (the reason) or ``timeout`` seconds pass (None)."""
        return self.transaction.lost(timeout)

    def resign(self) -> None:
        """Steps down: the next candidate in line takes over."""
        self.transaction.commit()


class Election:
    """Leader election over one key (blocking API; see :class:`caerus.Election`)."""

    __slots__ = {"_client": None, "namespace": "The election key's namespace.", "key": "The election key."}

    def __init__(self, client: "DlsClient", namespace: str, key: str) -> None:
        self._client = client
        self.namespace = namespace
        self.key = key

    def campaign(self, candidate: str, *, lease_ms: int = 15000) -> Leadership:
        """Blocks until ``candidate`` leads."""
        tx = self._client.begin_transaction(name=candidate, timeout_ms=lease_ms)
        try:
            while True:
                try:
                    return Leadership(tx, tx.acquire_lock(self.namespace, self.key, timeout_ms=3_600_000))
                except LockTimeout:
                    continue
        except BaseException:
            _abort_quietly(tx)
            raise

    def leader(self) -> Optional[KeyHolder]:
        """The current leader, or None."""
        for update in self._client.watch_key(self.namespace, self.key):
            return update.holders[0] if update.holders else None
        return None

    def observe(self) -> Iterator[Optional[KeyHolder]]:
        """The leader now, then each time it changes (None: nobody leads)."""
        last: Any = object()
        for update in self._client.watch_key(self.namespace, self.key):
            leader = update.holders[0] if update.holders else None
            term = leader.fencing_token if leader else None
            if term != last:
                last = term
                yield leader


class DlsClient:
    """A connection to a Caerus DLS cluster (blocking API); arguments as :class:`caerus.DlsClient`.
    Safe to share between threads."""

    def __init__(
        self,
        endpoints: Optional[Union[Sequence[str], str]] = None,
        api_key: Optional[str] = None,
        *,
        connect_timeout_ms: Optional[float] = None,
        request_timeout_ms: Optional[float] = None,
        retry_deadline_ms: Optional[float] = None,
        ca_file: Optional[PathLike] = None,
        client_cert_file: Optional[PathLike] = None,
        client_key_file: Optional[PathLike] = None,
    ) -> None:
        self._native = native_client(
            endpoints,
            api_key,
            connect_timeout_ms,
            request_timeout_ms,
            retry_deadline_ms,
            ca_file,
            client_cert_file,
            client_key_file,
        )

    def begin_transaction(
        self,
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> Transaction:
        """Starts a transaction (lease ``timeout_ms``, default 15000) and its heartbeat."""
        return Transaction(self._native.begin_transaction_blocking(timeout_ms, priority, name, max_duration_ms, lost_stream))

    def transaction(
        self,
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> _TransactionContext:
        """``with client.transaction(timeout_ms=15000) as tx:`` commits on normal exit and
        aborts when the block raises."""
        options = {"timeout_ms": timeout_ms, "priority": priority, "name": name, "max_duration_ms": max_duration_ms, "lost_stream": lost_stream}
        return _TransactionContext(self, options)

    def lock(
        self,
        namespace: str,
        key: str,
        mode: ModeLike = LockMode.EXCLUSIVE,
        *,
        timeout_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        lost_stream: bool = False,
    ) -> _LockContext:
        """``with client.lock("billing-jobs", "monthly") as lock:`` takes one lock (waiting
        up to ``timeout_ms``, default 10000) in a new transaction (lease ``lease_ms``,
        default 15000) in one request, yields the :class:`~caerus.Lock` (its
        ``fencing_token``), commits on normal exit and aborts when the block raises. Raises
        what :meth:`Transaction.acquire_lock` raises; nothing is left held then."""
        return _LockContext(self._native, namespace, key, mode, timeout_ms, lease_ms, priority, name, lost_stream)

    def with_transaction(
        self,
        fn: Callable[[Transaction], T],
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> T:
        """Runs ``fn(tx)`` in a transaction: commits when it returns (returning its value),
        aborts when it raises. A thread cannot be cancelled: if the transaction was lost
        meanwhile, the commit raises :class:`~caerus.TransactionLost` after ``fn`` returns,
        so check ``tx.is_lost`` in long bodies."""
        with self.transaction(
            timeout_ms=timeout_ms, priority=priority, name=name, max_duration_ms=max_duration_ms, lost_stream=lost_stream
        ) as tx:
            return fn(tx)

    def watch_key(self, namespace: str, key: str) -> KeyWatch:
        """Follows who holds the key (see :meth:`caerus.DlsClient.watch_key`)."""
        return KeyWatch(self._native.watch_key_blocking(namespace, key))

    def election(self, namespace: str, key: str) -> Election:
        """Leader election over ``namespace``/``key``."""
        return Election(self, namespace, key)

    def verify_fencing_token(self, namespace: str, key: str, fencing_token: int) -> TokenCheck:
        """Whether ``fencing_token`` is a current grant of the key (see
        :meth:`caerus.DlsClient.verify_fencing_token`); truthy when it is."""
        return self._native.verify_fencing_token_blocking(namespace, key, fencing_token)

    def transaction_status(self, id: int) -> TransactionStatus:
        """Reads any transaction's status by id."""
        return self._native.transaction_status_blocking(id)

    def watch_events(
        self,
        from_sequence: int = 0,
        *,
        namespace_prefixes: Iterable[str] = (),
        kinds: Iterable[str] = (),
        only_new: bool = False,
    ) -> EventStream:
        """Attaches to the cluster's event log and returns a blocking iterator of events."""
        return EventStream(
            self._native.watch_events_blocking(from_sequence, list(namespace_prefixes), list(kinds), only_new)
        )

    def list_locks(self, namespace_prefix: str = "") -> List[KeyLocks]:
        """Operator call: holders and waiters of every key under the prefix (admin key)."""
        return self._native.list_locks_blocking(namespace_prefix)

    def abort_transaction(self, id: int, reason: str = "") -> str:
        """Operator call: aborts any transaction; returns its final state name (admin key)."""
        return self._native.abort_transaction_blocking(id, reason)

    def set_lock_delay(self, namespace_prefix: str, delay_ms: int) -> int:
        """Operator call (admin key): a revoked holder's keys in namespaces starting with the
        prefix grant nothing for ``delay_ms`` (0 removes the rule; at most 10 minutes);
        returns the prefix's previous delay in ms."""
        return self._native.set_lock_delay_blocking(namespace_prefix, delay_ms)

    def lock_delays(self) -> List[LockDelayRule]:
        """Operator call: the lock-delay rules, sorted by prefix (admin key)."""
        return self._native.lock_delays_blocking()

    def create_api_key(
        self, name: str, namespace_prefixes: Sequence[str] = (), admin: bool = False, expires_in_ms: int = 0
    ) -> str:
        """Operator call (admin key): creates an API key kept by the cluster; returns its secret."""
        return self._native.create_api_key_blocking(name, list(namespace_prefixes), admin, expires_in_ms)

    def list_api_keys(self) -> List[ApiKeyInfo]:
        """Operator call: the cluster's API keys this admin key may manage (never secrets)."""
        return self._native.list_api_keys_blocking()

    def revoke_api_key(self, name: str) -> None:
        """Operator call: revokes a cluster API key on every node; its open streams end."""
        self._native.revoke_api_key_blocking(name)

    def rotate_api_key(self, name: str, grace_ms: int = 0) -> str:
        """Operator call: a new secret for a cluster API key; the old one works ``grace_ms`` longer."""
        return self._native.rotate_api_key_blocking(name, grace_ms)

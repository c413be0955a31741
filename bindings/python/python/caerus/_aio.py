"""The asyncio API: :class:`DlsClient`, :class:`Transaction`, :class:`EventStream`."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, List, Optional, Sequence, TypeVar, Union

from . import _native
from ._base import LockContextBase, LockSpec, ModeLike, PathLike, TransactionView, native_client, trace_context
from .errors import LockTimeout, TransactionLost
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

T = TypeVar("T")

OnQueued = Callable[[QueuePosition], Any]


def _on_loop(callback: Optional[OnQueued]) -> Optional[OnQueued]:
    """The progress callback as the SDK's runtime thread calls it: handed over to the
    running event loop, so the caller's callback runs where its other code runs."""
    if callback is None:
        return None
    loop = asyncio.get_running_loop()
    return lambda position: loop.call_soon_threadsafe(callback, position)


class Transaction(TransactionView):
    """A running transaction (asyncio). The Rust core heartbeats its lease in the background
    until it is committed, aborted or lost.

    Use it as ``async with client.transaction(...) as tx:`` (commit on normal exit, abort on
    exception) or from :meth:`DlsClient.begin_transaction` with explicit ``commit``/``abort``.
    """

    __slots__ = ()

    async def acquire_lock(
        self,
        namespace: str,
        key: str,
        mode: ModeLike = LockMode.EXCLUSIVE,
        *,
        timeout_ms: Optional[int] = None,
        on_queued: Optional[OnQueued] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
    ) -> Lock:
        """Takes a lock, waiting up to ``timeout_ms`` (default 10000; 0 tries once without
        queueing) in the key's queue.

        ``traceparent`` / ``tracestate`` (W3C Trace Context) put the lock's wait, grant and
        release spans in the caller's trace on a node that exports spans; without them the
        current OpenTelemetry span's context is sent when the ``opentelemetry`` package is
        installed. A malformed one is ignored by the server.

        ``on_queued(QueuePosition)`` is called on the event loop each time the request's
        place in the queue changes (``position``: 1 = next; ``blocking_transaction_ids``:
        whom it waits for). Returns the :class:`Lock` with its ``fencing_token``. Raises
        :class:`LockTimeout` (the transaction stays active), :class:`DeadlockVictim` or
        :class:`TransactionLost`.
        """
        traceparent, tracestate = trace_context(traceparent, tracestate)
        return await self._tx.acquire_lock(namespace, key, mode, timeout_ms, _on_loop(on_queued), traceparent, tracestate)

    async def acquire_permit(
        self,
        namespace: str,
        key: str,
        permits: int,
        *,
        timeout_ms: Optional[int] = None,
        on_queued: Optional[OnQueued] = None,
    ) -> Lock:
        """Takes one permit of the counted semaphore ``namespace/key`` of ``permits``
        permits: up to that many transactions hold it at once, each with its own fencing
        token (the lock comes back in mode ``LockMode.SEMAPHORE``); the others wait in
        arrival order. Everyone on the key must name the same count while it is in use, and
        a semaphore key takes no EXCLUSIVE or SHARED_READ request (:class:`InvalidArgument`
        either way). Release it like a lock. ``timeout_ms`` and ``on_queued`` as in
        :meth:`acquire_lock`; raises like it."""
        return await self._tx.acquire_permit(namespace, key, permits, timeout_ms, _on_loop(on_queued))

    async def acquire_locks(
        self, locks: Iterable[LockSpec], *, timeout_ms: Optional[int] = None, on_queued: Optional[OnQueued] = None
    ) -> List[Lock]:
        """Takes several locks at once, all or nothing: each ``(namespace, key)``
        (EXCLUSIVE) or ``(namespace, key, mode)``. Every lock is granted together, one
        fencing token each, in the order given, or none is; while any is taken the request
        waits (up to ``timeout_ms``, default 10000; 0 tries once) in every key's queue,
        keeping its place, so keys need no ordering by hand. Locks already held in a
        covering mode come back with their tokens.

        ``on_queued`` as in :meth:`acquire_lock` (the furthest place over the keys waited
        for). Raises like :meth:`acquire_lock`; :class:`InvalidArgument` for an empty list,
        a key named twice or more than 64 locks."""
        return await self._tx.acquire_locks(list(locks), timeout_ms, _on_loop(on_queued))

    async def downgrade(self, namespace: str, key: str) -> Optional[Lock]:
        """Turns an EXCLUSIVE lock into SHARED_READ in place, keeping its fencing token
        (no moment in which another writer could take the key); readers queued behind it
        come in. Returns the lock as held now, or None when the transaction does not hold it."""
        return await self._tx.downgrade(namespace, key)

    async def release(self, namespace: str, key: str) -> bool:
        """Releases one lock early; returns whether the transaction held (or waited for) it."""
        return await self._tx.release(namespace, key)

    async def claim_slot(self, namespace: str, key: str, period_ms: int, retry_failed: bool = False) -> SlotClaim:
        """Claims the schedule slot of a lock this transaction holds EXCLUSIVE: at most once
        per slot of ``period_ms`` (aligned to the Unix epoch), decided by the cluster's clock,
        so a host whose clock is off or whose cron fired late finds the slot already ran.
        Run the job only when the claim's ``run`` is True, then :meth:`finish_slot`. With
        ``retry_failed`` a slot whose run failed or was lost may run again."""
        return await self._tx.claim_slot(namespace, key, period_ms, retry_failed)

    async def finish_slot(self, claim: SlotClaim, outcome: str, exit_code: Optional[int] = None) -> SlotRun:
        """Records how a claimed run ended: ``"SUCCEEDED"``, ``"FAILED"`` (with ``exit_code``)
        or ``"LOST"``. Call it before the lock is released: a run whose lock goes first is
        recorded LOST."""
        return await self._tx.finish_slot(claim, outcome, exit_code)

    async def status(self) -> TransactionStatus:
        """Reads the transaction from the leader: state, held locks, pending wait."""
        return await self._tx.status()

    async def commit(self) -> None:
        """Ends the transaction and releases its locks. Raises :class:`TransactionLost`
        (:class:`DeadlockVictim`) if it was lost first. Committing twice is fine."""
        await self._tx.commit()

    async def abort(self) -> None:
        """Ends the transaction and releases its locks; succeeds if it already ended."""
        await self._tx.abort()

    def lost(self) -> Awaitable[LostReason]:
        """An awaitable that resolves with the :class:`LostReason` when the transaction is
        lost. It never resolves if the transaction ends normally: race it against the work
        (e.g. ``asyncio.wait``)."""
        return self._tx.lost()

    def __repr__(self) -> str:
        return f"<caerus.Transaction id={self.id} lease_ms={self.lease_ms} lost={self.is_lost}>"


async def _abort_quietly(tx: Transaction) -> None:
    try:
        await tx.abort()
    except Exception:  # the body's exception is the one to report
        pass


async def _end(tx: Optional[Transaction], failed: bool) -> None:
    """The end of an ``async with`` block: commit, or abort when the block raised."""
    assert tx is not None
    if failed:
        await _abort_quietly(tx)
    else:
        await tx.commit()


class _TransactionContext:
    """``async with client.transaction(...) as tx``: begins on enter, commits on normal
    exit, aborts when the block raises."""

    __slots__ = ("_client", "_kwargs", "_tx")

    def __init__(self, client: "DlsClient", kwargs: dict) -> None:
        self._client = client
        self._kwargs = kwargs
        self._tx: Optional[Transaction] = None

    async def __aenter__(self) -> Transaction:
        # Begins with its first call: a first acquire carries the begin (one request).
        self._tx = Transaction(self._client._native.transaction(**self._kwargs))
        return self._tx

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await _end(self._tx, failed=exc_type is not None)


class _LockContext(LockContextBase):
    """``async with client.lock(namespace, key) as lock:`` — a transaction holding one
    lock; the transaction is ``.transaction`` (for more locks, ``lost()``)."""

    __slots__ = ()

    async def __aenter__(self) -> Lock:
        tx = Transaction(self._deferred())
        self.transaction = tx
        namespace, key, mode, timeout_ms = self._lock
        try:
            return await tx.acquire_lock(namespace, key, mode, timeout_ms=timeout_ms)
        except BaseException:
            await _abort_quietly(tx)
            raise

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        tx = self.transaction
        assert isinstance(tx, Transaction)
        await _end(tx, failed=exc_type is not None)


class EventStream:
    """Events of the cluster's log in sequence order; an async iterator. It follows the log
    across leader changes until closed, and ends after raising an error."""

    __slots__ = ("_stream",)

    def __init__(self, native: _native.NativeEventStream) -> None:
        self._stream = native

    @property
    def backlog_end(self) -> Optional[int]:
        """The last sequence committed when the watch attached (reading up to it replays the backlog)."""
        return self._stream.backlog_end

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Event:
        event = await self._stream.next()
        if event is None:
            raise StopAsyncIteration
        return event


class _WatchContext:
    """``client.watch_events(...)``: awaitable (-> EventStream) and async-iterable."""

    __slots__ = ("_client", "_kwargs", "_stream")

    def __init__(self, client: "DlsClient", kwargs: dict) -> None:
        self._client = client
        self._kwargs = kwargs
        self._stream: Optional[EventStream] = None

    async def _open(self) -> EventStream:
        if self._stream is None:
            self._stream = EventStream(await self._client._native.watch_events(**self._kwargs))
        return self._stream

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._open().__await__()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Event]:
        stream = await self._open()
        async for event in stream:
            yield event


class KeyWatch:
    """Who holds one key: ``KeyUpdate`` values (the holders now, then one per change); an
    async iterator that follows the key across leader changes and ends after an error."""

    __slots__ = ("_watch",)

    def __init__(self, native: _native.NativeKeyWatch) -> None:
        self._watch = native

    def __aiter__(self) -> "KeyWatch":
        return self

    async def __anext__(self) -> KeyUpdate:
        update = await self._watch.next()
        if update is None:
            raise StopAsyncIteration
        return update


# The longest single wait the server takes; a candidate waits again, keeping its turn
# except for the moment between two waits.
_CAMPAIGN_WAIT_MS = 3_600_000


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
        """The lock's fencing token: higher for every later leader. Hand it to what you write."""
        return self.lock.fencing_token

    async def lost(self) -> LostReason:
        """Resolves when leadership is lost (lease lapsed, operator abort); stop leading then."""
        return await self.transaction.lost()

    async def resign(self) -> None:
        """Steps down: the next candidate in line takes over."""
        await self.transaction.commit()


class Election:
    """Leader election over one key (as etcd's ``concurrency.Election`` or Curator's
    ``LeaderLatch``): candidates wait in line for the key's EXCLUSIVE lock; the holder
    leads, with the lock's fencing token as its term. Get one from :meth:`DlsClient.election`."""

    __slots__ = {"_client": None, "namespace": "The election key's namespace.", "key": "The election key."}

    def __init__(self, client: "DlsClient", namespace: str, key: str) -> None:
        self._client = client
        self.namespace = namespace
        self.key = key

    async def campaign(self, candidate: str, *, lease_ms: int = 15000) -> Leadership:
        """Waits until ``candidate`` leads. ``lease_ms``: how long a silent leader keeps
        leading before the next candidate takes over."""
        tx = await self._client.begin_transaction(name=candidate, timeout_ms=lease_ms)
        try:
            while True:
                try:
                    lock = await tx.acquire_lock(self.namespace, self.key, timeout_ms=_CAMPAIGN_WAIT_MS)
                    return Leadership(tx, lock)
                except LockTimeout:
                    continue
        except BaseException:
            await _abort_quietly(tx)
            raise

    async def leader(self) -> Optional[KeyHolder]:
        """The current leader (``transaction_name`` is its candidate name), or None."""
        async for update in await self._client.watch_key(self.namespace, self.key):
            return update.holders[0] if update.holders else None
        return None

    async def observe(self) -> AsyncIterator[Optional[KeyHolder]]:
        """The leader now, then each time it changes (None: nobody leads)."""
        last: Any = object()
        async for update in await self._client.watch_key(self.namespace, self.key):
            leader = update.holders[0] if update.holders else None
            term = leader.fencing_token if leader else None
            if term != last:
                last = term
                yield leader


class DlsClient:
    """A connection to a Caerus DLS cluster (asyncio API).

    ``endpoints``: ``host:port`` strings; default from ``$DLS_ENDPOINTS`` (comma separated,
    else ``127.0.0.1:7070``). One is enough: the client finds the leader itself.
    ``api_key``: default ``$CAERUS_API_KEY``. Timeouts in milliseconds: connect (2000),
    per request attempt (5000), total retry budget of a call (15000).

    TLS: ``https://host:port`` endpoints, or any endpoint once a CA file or client
    certificate is given. ``ca_file``: CA bundle (PEM) the nodes' certificates must chain
    to (default ``$DLS_CA_FILE``; without one, the public web roots).
    ``client_cert_file`` and ``client_key_file``: a client certificate and its key (PEM),
    for nodes that require one (default ``$DLS_CLIENT_CERT_FILE``, ``$DLS_CLIENT_KEY_FILE``).

    Cheap to share between tasks and threads. Create it anywhere (no running loop needed).
    """

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

    async def begin_transaction(
        self,
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> Transaction:
        """Starts a transaction (lease ``timeout_ms``, default 15000) and its heartbeat.
        ``priority``: higher is less likely to be chosen as a deadlock victim.
        ``max_duration_ms``: the server ends the transaction that long after its begin, however
        its lease is renewed (lost with kind ``EXPIRED``); None for no bound.
        ``lost_stream``: keep each acquire's stream open after the grant, so ``lost()`` fires
        as soon as the server ends the transaction (operator abort, deadlock victim, lease
        expiry, maximum duration) rather than at the next heartbeat; costs one open stream
        per transaction. Heartbeats still run and decide when the stream breaks."""
        return Transaction(await self._native.begin_transaction(timeout_ms, priority, name, max_duration_ms, lost_stream))

    def transaction(
        self,
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> _TransactionContext:
        """``async with client.transaction(timeout_ms=15000) as tx:`` commits on normal exit
        and aborts when the block raises."""
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
        """``async with client.lock("billing-jobs", "monthly") as lock:`` takes one lock
        (waiting up to ``timeout_ms``, default 10000) in a new transaction (lease
        ``lease_ms``, default 15000) in one request, yields the :class:`Lock` (its
        ``fencing_token``), commits on normal exit and aborts when the block raises. Raises
        what :meth:`Transaction.acquire_lock` raises; nothing is left held then."""
        return _LockContext(self._native, namespace, key, mode, timeout_ms, lease_ms, priority, name, lost_stream)

    async def with_transaction(
        self,
        fn: Callable[[Transaction], Awaitable[T]],
        *,
        timeout_ms: Optional[int] = None,
        priority: int = 0,
        name: Optional[str] = None,
        max_duration_ms: Optional[int] = None,
        lost_stream: bool = False,
    ) -> T:
        """Runs ``await fn(tx)`` in a transaction: commits when it returns (and returns its
        value), aborts when it raises. If the transaction is lost meanwhile, ``fn`` is
        cancelled and :class:`TransactionLost` (:class:`DeadlockVictim`) is raised."""
        tx = Transaction(self._native.transaction(timeout_ms, priority, name, max_duration_ms, lost_stream))
        work = asyncio.ensure_future(fn(tx))
        lost = asyncio.ensure_future(tx.lost())
        try:
            await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # we were cancelled
            work.cancel()
            lost.cancel()
            await _abort_quietly(tx)
            raise
        lost.cancel()
        if work.done():  # the body's own outcome wins a tie with the lost signal
            if work.cancelled() or work.exception() is not None:
                await _abort_quietly(tx)
                return work.result()  # re-raises the body's exception
            await tx.commit()  # raises TransactionLost if the lease was lost at the very end
            return work.result()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        await tx.commit()  # the transaction is lost: raises the core's TransactionLost / DeadlockVictim
        raise TransactionLost(f"transaction {tx.id} was lost while its body ran")

    async def watch_key(self, namespace: str, key: str) -> KeyWatch:
        """Follows who holds ``namespace``/``key``: ``async for update in await
        client.watch_key(ns, key)`` yields the holders now, then one ``KeyUpdate`` per change
        (``changes``: GRANTED, RELEASED, EXPIRED, REVOKED, DOWNGRADED). No transaction needed;
        survives leader changes."""
        return KeyWatch(await self._native.watch_key(namespace, key))

    def election(self, namespace: str, key: str) -> Election:
        """Leader election over ``namespace``/``key`` (see :class:`Election`)."""
        return Election(self, namespace, key)

    async def verify_fencing_token(self, namespace: str, key: str, fencing_token: int) -> TokenCheck:
        """Whether ``fencing_token`` is a current grant of ``namespace``/``key`` (held right
        now), as of everything committed before the call. The result is truthy when it is;
        ``.current_tokens`` names the current holders' tokens. For storage that cannot keep
        the last token it accepted; storage that can should compare tokens itself."""
        return await self._native.verify_fencing_token(namespace, key, fencing_token)

    async def transaction_status(self, id: int) -> TransactionStatus:
        """Reads any transaction's status by id."""
        return await self._native.transaction_status(id)

    def watch_events(
        self,
        from_sequence: int = 0,
        *,
        namespace_prefixes: Iterable[str] = (),
        kinds: Iterable[str] = (),
        only_new: bool = False,
    ) -> _WatchContext:
        """Follows the cluster's event log (deadlocks resolved, expiries, operator aborts,
        revoked locks). Use ``async for event in client.watch_events(...)``, or
        ``stream = await client.watch_events(...)`` to attach first (then
        ``stream.backlog_end`` is known and, with ``only_new=True``, every later event is
        delivered). ``from_sequence=0``: from the oldest retained event."""
        return _WatchContext(
            self,
            {
                "from_sequence": from_sequence,
                "namespace_prefixes": list(namespace_prefixes),
                "kinds": list(kinds),
                "only_new": only_new,
            },
        )

    async def list_locks(self, namespace_prefix: str = "") -> List[KeyLocks]:
        """Operator call: holders and waiters of every key under the prefix (admin key)."""
        return await self._native.list_locks(namespace_prefix)

    async def abort_transaction(self, id: int, reason: str = "") -> str:
        """Operator call: aborts any transaction; returns its final state name (admin key)."""
        return await self._native.abort_transaction(id, reason)

    async def set_lock_delay(self, namespace_prefix: str, delay_ms: int) -> int:
        """Operator call (admin key): when a holder in a namespace starting with the prefix
        is revoked (lease expired, operator abort, deadlock victim, maximum duration), its
        keys grant nothing for ``delay_ms``; a release or commit is never delayed.
        ``delay_ms=0`` removes the rule; at most 10 minutes and 256 rules. Returns the
        prefix's previous delay in ms (0: none)."""
        return await self._native.set_lock_delay(namespace_prefix, delay_ms)

    async def lock_delays(self) -> List[LockDelayRule]:
        """Operator call: the lock-delay rules, sorted by prefix (admin key)."""
        return await self._native.lock_delays()

    async def create_api_key(
        self, name: str, namespace_prefixes: Sequence[str] = (), admin: bool = False, expires_in_ms: int = 0
    ) -> str:
        """Operator call (admin key): creates an API key kept by the cluster and returns its
        secret, shown only here. Every node accepts it once it applied the change."""
        return await self._native.create_api_key(name, list(namespace_prefixes), admin, expires_in_ms)

    async def list_api_keys(self) -> List[ApiKeyInfo]:
        """Operator call: the cluster's API keys this admin key may manage (never secrets)."""
        return await self._native.list_api_keys()

    async def revoke_api_key(self, name: str) -> None:
        """Operator call: revokes a cluster API key; every node refuses it (Unauthenticated)
        once it applied the change, and its open streams end."""
        await self._native.revoke_api_key(name)

    async def rotate_api_key(self, name: str, grace_ms: int = 0) -> str:
        """Operator call: a new secret for a cluster API key (returned, shown only here); the
        old one keeps working for ``grace_ms``."""
        return await self._native.rotate_api_key(name, grace_ms)

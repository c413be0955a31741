"""Run a scheduled job at most once per schedule slot, whichever scheduler fires it.

Cron, Celery beat, APScheduler or a loop on every host may fire the same job at about the
same time; :func:`once_per` wraps the job so that exactly one firing per slot runs it::

    from datetime import timedelta
    from caerus.scheduling import once_per

    @app.task
    @once_per(["dls-1:7070", "dls-2:7070"], "jobs", "nightly-report", timedelta(days=1))
    def nightly_report():
        ...

Each call takes the lock ``namespace``/``key`` without waiting (a host that finds it held
skips: another host is running the slot), asks the cluster whether the current slot has run
(slot N = floor(cluster clock / period), so no host's clock decides it), runs the job only
if not, records the outcome (an exception records FAILED and is re-raised) and releases the
lock. See ``docs/slots.md`` for the rule and ``samples/celery-once-per`` for a Celery app.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import re
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Optional, Sequence, TypeVar, Union

from ._native import LockMode, SlotClaim, SlotRun
from .errors import LockTimeout
from .sync import DlsClient

__all__ = ["once_per", "Skipped", "current_claim", "period_ms"]

log = logging.getLogger("caerus.scheduling")

T = TypeVar("T")
Period = Union[timedelta, int, float, str]

_current: contextvars.ContextVar[Optional[SlotClaim]] = contextvars.ContextVar("caerus_slot_claim", default=None)

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class Skipped:
    """What a wrapped job returns when this firing did not run it. Falsy.

    ``reason`` is ``"locked"`` (another host holds the lock: it is running the slot) or
    ``"slot-done"`` (the slot already ran; ``last_run`` says who ran it and how it ended)."""

    reason: str
    slot: Optional[int] = None
    last_run: Optional[SlotRun] = None

    def __bool__(self) -> bool:
        return False


def current_claim() -> Optional[SlotClaim]:
    """Inside a job wrapped by :func:`once_per`: the claim it runs under (``.slot`` is the
    slot's number, e.g. for an idempotency key; ``.attempt`` counts retries). None elsewhere."""
    return _current.get()


def period_ms(period: Period) -> int:
    """A period as milliseconds: a ``timedelta``, seconds (int or float) or a string with a
    unit as ``dls lock --once-per`` takes it (``"500ms"``, ``"30s"``, ``"5m"``, ``"1h"``, ``"1d"``)."""
    if isinstance(period, timedelta):
        ms = int(period.total_seconds() * 1000)
    elif isinstance(period, bool):
        raise TypeError("period must be a timedelta, seconds or a string such as '5m', not a bool")
    elif isinstance(period, (int, float)):
        ms = int(period * 1000)
    elif isinstance(period, str):
        match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)\s*", period)
        if not match:
            raise ValueError(f"period {period!r}: expected a number and a unit (ms, s, m, h, d), e.g. '5m'")
        ms = int(match.group(1)) * _UNITS_MS[match.group(2)]
    else:
        raise TypeError(f"period must be a timedelta, seconds or a string such as '5m', not {type(period).__name__}")
    if ms <= 0:
        raise ValueError(f"period {period!r} must be positive")
    return ms


def once_per(
    client: Union[DlsClient, str, Sequence[str]],
    namespace: str,
    key: str,
    period: Period,
    *,
    retry_failed: bool = False,
    lease_ms: Optional[int] = None,
    name: Optional[str] = None,
) -> Callable[[Callable[..., T]], Callable[..., Union[T, Skipped]]]:
    """Decorates a blocking function so that it runs at most once per slot of ``period``.

    ``client`` is a :class:`caerus.sync.DlsClient` or the endpoints to build one from (once,
    on the first call; the API key then comes from ``$CAERUS_API_KEY``). ``retry_failed``
    lets a later firing in the same slot rerun a slot whose run failed or was lost (off by
    default: a half-done job may not be safe to repeat). ``lease_ms`` is the transaction's
    lease (default 15000; the SDK renews it while the job runs). ``name`` labels the
    transaction in ``dls locks`` (default: the function's qualified name).

    The wrapped function returns the job's value, or a falsy :class:`Skipped` when this
    firing did not run it (logged at INFO on the ``caerus.scheduling`` logger). Errors of
    the lock service (e.g. ``Unavailable``) propagate: nothing ran then."""
    slot_ms = period_ms(period)

    def decorate(job: Callable[..., T]) -> Callable[..., Union[T, Skipped]]:
        label = name or getattr(job, "__qualname__", repr(job))
        holder = _LazyClient(client)

        @functools.wraps(job)
        def run_once_per_slot(*args: Any, **kwargs: Any) -> Union[T, Skipped]:
            tx = holder.get().begin_transaction(timeout_ms=lease_ms, name=label)
            try:
                try:
                    # No wait: a holder is running this slot (or finishing the last one),
                    # and queueing behind it would only find the slot done.
                    tx.acquire_lock(namespace, key, LockMode.EXCLUSIVE, timeout_ms=0)
                except LockTimeout:
                    log.info("%s: skipped, %s/%s is held by another host", label, namespace, key)
                    return Skipped("locked")
                claim = tx.claim_slot(namespace, key, slot_ms, retry_failed=retry_failed)
                if not claim.run:
                    last = claim.last_run
                    log.info(
                        "%s: skipped, slot %d of %s/%s already ran (%s by %r)",
                        label, claim.slot, namespace, key,
                        last.state if last else "?", last.transaction_name if last else "?",
                    )
                    return Skipped("slot-done", claim.slot, last)
                token = _current.set(claim)
                try:
                    result = job(*args, **kwargs)
                except BaseException:
                    tx.finish_slot(claim, "FAILED")
                    raise
                finally:
                    _current.reset(token)
                tx.finish_slot(claim, "SUCCEEDED")
                return result
            finally:
                _end(tx)

        return run_once_per_slot

    return decorate


def _end(tx: Any) -> None:
    """Commits (releasing the lock); a transaction already lost has nothing to release."""
    if tx.is_lost:
        tx.abort()
    else:
        tx.commit()


class _LazyClient:
    """The client a decorator was given, or one built from endpoints on first use (at import
    time, where decorators run, the cluster may not be reachable yet)."""

    def __init__(self, client: Union[DlsClient, str, Sequence[str]]) -> None:
        self._client = client if isinstance(client, DlsClient) else None
        self._endpoints = None if isinstance(client, DlsClient) else client
        self._lock = threading.Lock()

    def get(self) -> DlsClient:
        with self._lock:
            if self._client is None:
                self._client = DlsClient(endpoints=self._endpoints)
            return self._client

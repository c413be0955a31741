"""Resource-side fencing guard: storage refuses writes whose fencing token is stale.

A lock alone cannot protect storage: a holder can stall past its lease and write after the
lock went to someone else. Each grant carries a fencing token higher than every earlier
one; this module makes the storage keep, per protected resource, the last token it
accepted (table ``caerus_fence``) and makes your write conditional on it, in the same
database transaction::

    import sqlite3
    from caerus import fence

    conn = sqlite3.connect("billing.db")
    fence.install(conn)                                   # CREATE TABLE IF NOT EXISTS caerus_fence
    with fence.fenced(conn, "billing/2024-05", lock.fencing_token) as cur:
        cur.execute("INSERT INTO charges VALUES (?, ?)", ("2024-05", 42))
    # committed; a stale token raises StaleTokenError and nothing is written

The check is one statement, ``INSERT ... ON CONFLICT (resource) DO UPDATE SET last_token =
excluded.last_token WHERE caerus_fence.last_token <= excluded.last_token``: it accepts a new
or equal token (the same holder writing twice) and changes nothing for a lower one. It
works with any DB-API 2.0 driver for SQLite (>= 3.24) or PostgreSQL (>= 9.5): ``sqlite3``,
``psycopg`` (3), ``psycopg2``. PostgreSQL orders racing writers by the fence row's lock
under the default READ COMMITTED; SQLite has one writer at a time.

Placeholders follow the driver's ``paramstyle`` (read from its module), or pass
``paramstyle=`` for a driver this does not find.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Tuple

__all__ = [
    "TABLE",
    "MAX_TOKEN",
    "FenceError",
    "StaleTokenError",
    "NotInTransactionError",
    "install",
    "check_and_advance",
    "last_token",
    "fenced",
]

TABLE = "caerus_fence"
# The column is a signed 64-bit BIGINT; a larger token is refused, never wrapped.
MAX_TOKEN = 2**63 - 1

_CREATE = (
    "CREATE TABLE IF NOT EXISTS caerus_fence ("
    "resource TEXT PRIMARY KEY, last_token BIGINT NOT NULL CHECK (last_token > 0))"
)
# {r} and {t} become the driver's placeholders for the resource and the token.
_ADVANCE = (
    "INSERT INTO caerus_fence (resource, last_token) VALUES ({r}, {t}) "
    "ON CONFLICT (resource) DO UPDATE SET last_token = excluded.last_token "
    "WHERE caerus_fence.last_token <= excluded.last_token"
)
_LAST = "SELECT last_token FROM caerus_fence WHERE resource = {r}"


class FenceError(Exception):
    """Base class of the guard's refusals."""


class StaleTokenError(FenceError):
    """Storage has already accepted a higher token for ``resource``: the lock was granted
    to someone else after ``token`` was issued. Nothing was written."""

    def __init__(self, resource: str, token: int, last_token: int):
        self.resource = resource
        self.token = token
        self.last_token = last_token
        super().__init__(
            f"stale fencing token {token} for {resource!r}: storage has already accepted "
            f"token {last_token} (a later lock holder wrote)"
        )


class NotInTransactionError(FenceError):
    """The connection autocommits, so the check would commit apart from the write it
    protects. Use :func:`fenced`, or open a transaction first."""


def _check_token(token: Any) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError(f"fencing token must be an int, got {type(token).__name__}")
    if not 1 <= token <= MAX_TOKEN:
        raise ValueError(f"fencing token {token} is out of range: tokens are 1..={MAX_TOKEN} (stored as BIGINT)")
    return token


def _paramstyle(obj: Any, explicit: Optional[str]) -> str:
    if explicit:
        return explicit
    # A connection's or cursor's class lives in its driver's package (sqlite3, psycopg,
    # psycopg2.extensions, ...), whose top-level module declares the DB-API paramstyle.
    module = sys.modules.get(type(obj).__module__.split(".")[0])
    style = getattr(module, "paramstyle", None)
    if not style:
        raise FenceError(f"cannot tell the paramstyle of {type(obj).__module__}; pass paramstyle=")
    return style


def _sql(template: str, style: str, resource: str, token: Optional[int] = None) -> Tuple[str, Any]:
    """The statement with the driver's placeholders, and its parameters."""
    names = ("r", "t")[: 1 if token is None else 2]
    values = (resource, token)[: len(names)]
    if style == "qmark":
        marks = ["?"] * len(names)
    elif style in ("format", "pyformat"):
        marks = ["%s"] * len(names)
    elif style == "numeric":
        marks = [f":{i + 1}" for i in range(len(names))]
    elif style == "named":
        return template.format(**{n: f":{n}" for n in names}), dict(zip(names, values))
    else:
        raise FenceError(f"unsupported paramstyle {style!r}")
    return template.format(**dict(zip(names, marks))), tuple(values)


def _autocommits(conn: Any) -> bool:
    """True when a statement on ``conn`` would commit on its own right now (best effort:
    sqlite3, psycopg and psycopg2 tell; other drivers are trusted)."""
    if type(conn).__module__ == "sqlite3":
        if conn.in_transaction:
            return False
        return conn.isolation_level is None or getattr(conn, "autocommit", -1) is True
    if getattr(conn, "autocommit", False) is not True:
        return False
    info = getattr(conn, "info", None)  # psycopg 3
    if info is not None and hasattr(info, "transaction_status"):
        return int(info.transaction_status) == 0  # IDLE: no transaction block open
    status = getattr(conn, "get_transaction_status", None)  # psycopg2
    return status is None or status() == 0


def install(conn: Any) -> None:
    """Creates the ``caerus_fence`` table if it is missing, and commits. Run it once (at
    deploy or start-up): PostgreSQL's ``CREATE TABLE IF NOT EXISTS`` can fail if two
    sessions run it at the same moment."""
    cur = conn.cursor()
    try:
        cur.execute(_CREATE)
    finally:
        cur.close()
    conn.commit()


def check_and_advance(cursor: Any, resource: str, token: int, *, paramstyle: Optional[str] = None) -> None:
    """Records ``token`` for ``resource`` unless a higher one was accepted, in the cursor's
    current transaction. Raises :class:`StaleTokenError` (nothing changed: roll back, do not
    commit your write) or :class:`NotInTransactionError`."""
    _check_token(token)
    if _autocommits(cursor.connection):
        raise NotInTransactionError(
            "the connection autocommits: the fencing check must run in the transaction of the write it protects"
        )
    style = _paramstyle(cursor, paramstyle)
    cursor.execute(*_sql(_ADVANCE, style, resource, token))
    if cursor.rowcount == 1:
        return
    # Refused: the upsert locked the row (PostgreSQL) or holds the write lock (SQLite), so
    # this read sees the token that beat ours.
    cursor.execute(*_sql(_LAST, style, resource))
    row = cursor.fetchone()
    raise StaleTokenError(resource, token, int(row[0]) if row else 0)


def last_token(conn: Any, resource: str, *, paramstyle: Optional[str] = None) -> Optional[int]:
    """The highest token accepted for ``resource``, ``None`` if it was never written."""
    cur = conn.cursor()
    try:
        cur.execute(*_sql(_LAST, _paramstyle(conn, paramstyle), resource))
        row = cur.fetchone()
    finally:
        cur.close()
    return int(row[0]) if row else None


@contextmanager
def fenced(conn: Any, resource: str, token: int, *, paramstyle: Optional[str] = None) -> Iterator[Any]:
    """One transaction: the check, then your writes on the yielded cursor, then commit.
    Rolls back and re-raises on any error, :class:`StaleTokenError` included. It commits
    the connection's transaction, so start it with none of your own pending."""
    _check_token(token)
    style = _paramstyle(conn, paramstyle)
    cur = conn.cursor()
    try:
        check_and_advance(cur, resource, token, paramstyle=style)
        yield cur
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    finally:
        cur.close()

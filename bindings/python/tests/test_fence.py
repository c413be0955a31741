"""The resource-side fencing guard (``caerus.fence``) on real databases: SQLite files through
the stdlib ``sqlite3`` and a throwaway PostgreSQL server (``postgres`` fixture) through
psycopg 3; and end to end with fencing tokens from a real dls server."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

import pytest

from caerus import fence, sync
from caerus.fence import NotInTransactionError, StaleTokenError


class SqliteDb:
    name = "sqlite"

    def __init__(self, path):
        self.path = str(path)

    def connect(self):
        return sqlite3.connect(self.path)

    upsert = "INSERT INTO docs (id, body) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET body = excluded.body"


class PostgresDb:
    name = "postgres"

    def __init__(self, pg):
        self.pg = pg

    def connect(self):
        return self.pg.connect()

    upsert = "INSERT INTO docs (id, body) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET body = excluded.body"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    db = SqliteDb(tmp_path / "db.sqlite") if request.param == "sqlite" else PostgresDb(request.getfixturevalue("postgres"))
    conn = db.connect()
    conn.cursor().execute("CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, body TEXT NOT NULL)")
    conn.commit()
    fence.install(conn)
    fence.install(conn)  # idempotent
    conn.close()
    return db


def rid() -> str:
    """A resource (and document) name of this test alone: the PostgreSQL server is shared."""
    return f"doc-{uuid.uuid4().hex[:10]}"


def put(db, conn, resource, token, body):
    with fence.fenced(conn, resource, token) as cur:
        cur.execute(db.upsert, (resource, body))


def body(conn, resource):
    cur = conn.cursor()
    cur.execute("SELECT body FROM docs WHERE id = " + ("?" if isinstance(conn, sqlite3.Connection) else "%s"), (resource,))
    row = cur.fetchone()
    conn.commit()  # end the read transaction: a PostgreSQL snapshot, a SQLite read lock
    return row[0] if row else None


def test_fresh_and_equal_tokens_write_a_lower_one_is_refused(db):
    a, b = rid(), rid()
    conn = db.connect()
    put(db, conn, a, 7, "first")
    put(db, conn, a, 7, "same holder again")
    assert body(conn, a) == "same holder again"

    with pytest.raises(StaleTokenError) as refused:
        put(db, conn, a, 6, "stale")
    assert (refused.value.resource, refused.value.token, refused.value.last_token) == (a, 6, 7)
    assert "stale fencing token 6" in str(refused.value) and "token 7" in str(refused.value)
    assert body(conn, a) == "same holder again", "a refused write changes nothing"

    # Resources are independent.
    put(db, conn, b, 1, "other")
    assert (fence.last_token(conn, a), fence.last_token(conn, b), fence.last_token(conn, rid())) == (7, 1, None)
    put(db, conn, a, 8, "next holder")
    assert body(conn, a) == "next holder"


def test_the_last_token_survives_a_reconnect(db):
    a = rid()
    first = db.connect()
    put(db, first, a, 10, "kept")
    first.close()
    conn = db.connect()
    assert fence.last_token(conn, a) == 10
    with pytest.raises(StaleTokenError):
        put(db, conn, a, 9, "late")
    assert body(conn, a) == "kept"


def test_a_failing_write_rolls_back_its_token(db):
    a = rid()
    conn = db.connect()
    with pytest.raises(Exception, match="no_such_table|no such table"):
        with fence.fenced(conn, a, 3) as cur:
            cur.execute(db.upsert, (a, "x"))
            cur.execute("INSERT INTO no_such_table VALUES (1)")
    assert fence.last_token(conn, a) is None and body(conn, a) is None


def test_bad_tokens_are_refused_before_touching_storage(db):
    conn = db.connect()
    for token, error in ((0, ValueError), (-1, ValueError), (fence.MAX_TOKEN + 1, ValueError), (True, TypeError), ("5", TypeError)):
        with pytest.raises(error, match="fencing token"):
            put(db, conn, "x", token, "x")
    a = rid()
    put(db, conn, a, fence.MAX_TOKEN, "the largest BIGINT")
    assert fence.last_token(conn, a) == fence.MAX_TOKEN


def test_the_check_refuses_to_run_in_autocommit(db):
    a = rid()
    if db.name == "sqlite":
        conn = sqlite3.connect(db.path, isolation_level=None)
    else:
        conn = db.pg.connect(autocommit=True)
    with pytest.raises(NotInTransactionError):
        fence.check_and_advance(conn.cursor(), a, 1)
    assert fence.last_token(conn, a) is None
    # An explicit transaction on the same connection is fine.
    cur = conn.cursor()
    cur.execute("BEGIN")
    fence.check_and_advance(cur, a, 1)
    cur.execute("COMMIT")
    assert fence.last_token(conn, a) == 1


def late_writer_waits(db, late_conn):
    """A probe, given the holder's connection: true once the writer on ``late_conn`` waits
    for the holder's open transaction. PostgreSQL shows it: the holder's backend is one of
    ``pg_blocking_pids`` of the late one. SQLite shows no lock waits: the probe turns true
    once the late connection's fencing statement has begun (its trace callback), which
    cannot finish while the holder has the write lock."""
    if db.name == "sqlite":
        began = threading.Event()
        late_conn.set_trace_callback(lambda sql: began.set() if fence.TABLE in sql else None)
        return lambda _holder_conn: began.is_set()
    late_pid = late_conn.info.backend_pid

    def blocked(holder_conn) -> bool:
        with db.connect() as watcher:
            (pids,) = watcher.execute("SELECT pg_blocking_pids(%s)", (late_pid,)).fetchone()
            return holder_conn.info.backend_pid in pids

    return blocked


def race(db, resource, first, second):
    """``first`` checks its token and holds its transaction open until ``second``, on another
    connection, is waiting for it; returns each writer's exception (or None)."""
    outcome = {}
    checked = threading.Event()
    probe = []  # the late writer's `late_writer_waits`, once its connection is open

    def holder():
        conn = db.connect()
        try:
            cur = conn.cursor()
            fence.check_and_advance(cur, resource, first)
            checked.set()
            deadline = time.monotonic() + 30
            while not (probe and probe[0](conn)):
                assert time.monotonic() < deadline, "timed out waiting until the other writer waits on the lock"
                time.sleep(0.01)
            cur.execute(db.upsert, (resource, str(first)))
            conn.commit()
        except Exception as e:  # reported below
            outcome[first] = e
        finally:
            conn.close()  # a failed holder must not keep the late writer waiting
            checked.set()

    def late():
        checked.wait()
        try:
            conn = db.connect()
            probe.append(late_writer_waits(db, conn))
            put(db, conn, resource, second, str(second))
        except Exception as e:
            outcome[second] = e

    threads = [threading.Thread(target=holder), threading.Thread(target=late)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome.get(first), outcome.get(second)


def test_racing_writers_on_two_connections_end_with_the_higher_token(db):
    conn = db.connect()
    # 6 holds the lock on the (new) fence row, 5 waits, then sees 6: refused.
    a = rid()
    six, five = race(db, a, 6, 5)
    assert six is None
    assert isinstance(five, StaleTokenError) and five.last_token == 6, five
    assert body(conn, a) == "6"

    # The same on an existing row.
    b = rid()
    put(db, conn, b, 1, "1")
    six, five = race(db, b, 6, 5)
    assert six is None and isinstance(five, StaleTokenError)
    assert body(conn, b) == "6"

    # 5 first, then 6: both write, 6's data stays.
    c = rid()
    assert race(db, c, 5, 6) == (None, None)
    assert body(conn, c) == "6"

    # Started together, whoever wins: 6's data stays, and 5 is refused if it came second.
    for _ in range(5):
        d, errors = rid(), {}

        def write(token):
            try:
                put(db, db.connect(), d, token, str(token))
            except Exception as e:
                errors[token] = e

        threads = [threading.Thread(target=write, args=(t,)) for t in (5, 6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert 6 not in errors, errors
        assert 5 not in errors or isinstance(errors[5], StaleTokenError), errors
        assert body(conn, d) == "6"


def test_a_late_write_of_an_earlier_holder_is_refused_end_to_end(server, tmp_path):
    """Tokens from a real dls server: the first holder's transaction ends (its time is up,
    as a stalled process's lease would), the next holder writes with a higher token, and
    the first holder's late write is refused."""
    ns = f"py-fence-{uuid.uuid4().hex[:8]}"
    client = sync.DlsClient(endpoints=[server.endpoint])
    conn = sqlite3.connect(tmp_path / "billing.db")
    conn.execute("CREATE TABLE charges (cycle TEXT, worker TEXT, token INTEGER)")
    fence.install(conn)

    def charge(worker, token):
        with fence.fenced(conn, "billing/2024-05", token) as cur:
            cur.execute("INSERT INTO charges VALUES ('2024-05', ?, ?)", (worker, token))

    first = client.begin_transaction(timeout_ms=10000, max_duration_ms=1000)
    a = first.acquire_lock(ns, "monthly")
    charge("a", a.fencing_token)
    with client.lock(ns, "monthly", timeout_ms=10000) as b:
        assert b.fencing_token > a.fencing_token
        charge("b", b.fencing_token)
        with pytest.raises(StaleTokenError) as refused:
            charge("a (late)", a.fencing_token)
    assert (refused.value.token, refused.value.last_token) == (a.fencing_token, b.fencing_token)
    assert [w for (w,) in conn.execute("SELECT worker FROM charges ORDER BY rowid")] == ["a", "b"]

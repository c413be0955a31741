"""The SDK against a real single-node dls server."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import pydoc
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from conftest import eventually

import caerus
from caerus import (
    DeadlockVictim,
    DlsClient,
    DlsError,
    InvalidArgument,
    LockMode,
    LockTimeout,
    PermissionDenied,
    ResourceExhausted,
    TransactionLost,
    Unauthenticated,
)
from caerus import sync


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


@pytest.fixture
def sclient(server):
    return sync.DlsClient(endpoints=[server.endpoint])


async def test_readme_example(client):
    async with client.transaction(timeout_ms=15000) as tx:
        lock = await tx.acquire_lock("billing-jobs", "monthly-billing-job", LockMode.EXCLUSIVE, timeout_ms=10000)
        assert isinstance(lock.fencing_token, int) and lock.fencing_token > 0
        assert lock.mode == LockMode.EXCLUSIVE and lock.namespace == "billing-jobs"
        status = await tx.status()
        assert status.state == "ACTIVE" and [l.key for l in status.locks] == ["monthly-billing-job"]
    assert (await client.transaction_status(tx.id)).state == "COMMITTED"


async def test_exclusive_excludes_and_shared_coexist(client):
    n = ns()
    a = await client.begin_transaction(name="a")
    b = await client.begin_transaction(name="b")
    await a.acquire_lock(n, "x", LockMode.EXCLUSIVE)
    with pytest.raises(LockTimeout) as e:
        await b.acquire_lock(n, "x", LockMode.SHARED_READ, timeout_ms=200)
    assert e.value.code == "LOCK_TIMEOUT" and isinstance(e.value, DlsError) and e.value.message
    # A lock timeout leaves the transaction active.
    assert not b.is_lost
    r1 = await a.acquire_lock(n, "y", LockMode.SHARED_READ)
    r2 = await b.acquire_lock(n, "y", "SHARED_READ")
    assert r2.fencing_token > r1.fencing_token
    assert await a.release(n, "x") is True
    await b.acquire_lock(n, "x", LockMode.EXCLUSIVE, timeout_ms=5000)
    await a.commit()
    await b.abort()


async def test_fencing_tokens_strictly_increase(client):
    n = ns()
    tokens = []
    for _ in range(5):
        async with client.transaction() as tx:
            tokens.append((await tx.acquire_lock(n, "k")).fencing_token)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


async def test_context_manager_aborts_on_exception(client):
    n = ns()
    with pytest.raises(RuntimeError):
        async with client.transaction() as tx:
            await tx.acquire_lock(n, "k")
            raise RuntimeError("boom")
    assert (await client.transaction_status(tx.id)).state == "ABORTED"


async def test_with_transaction_returns_value_and_aborts_on_error(client):
    n = ns()

    async def body(tx):
        return (await tx.acquire_lock(n, "k")).fencing_token

    token = await client.with_transaction(body, timeout_ms=5000, priority=3, name="job")
    assert isinstance(token, int)

    seen = {}

    async def failing(tx):
        await tx.acquire_lock(n, "k")
        seen["id"] = tx.id  # known once the first call (the acquire) began the transaction
        raise KeyError("nope")

    with pytest.raises(KeyError):
        await client.with_transaction(failing)
    assert (await client.transaction_status(seen["id"])).state == "ABORTED"


def proposed_commands(server) -> int:
    """Commands the node proposed (each one replicated write), from its /metrics."""
    with urllib.request.urlopen(f"http://{server.http}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("dls_proposed_commands_total "):
                return int(float(line.split()[1]))
    raise AssertionError("no dls_proposed_commands_total in /metrics")


async def test_transaction_lock_and_with_transaction_begin_in_their_first_acquire(client, server):
    n = ns()
    before = proposed_commands(server)
    async with client.transaction() as tx:
        assert tx.id == 0  # nothing sent yet
        first = await tx.acquire_lock(n, "k")
        assert tx.id > 0
    async with client.lock(n, "k", timeout_ms=5000, lease_ms=5000) as second:
        assert second.fencing_token > first.fencing_token and second.key == "k"
    third = await client.with_transaction(lambda tx: tx.acquire_lock(n, "k"))
    assert third.fencing_token > second.fencing_token
    # Begin + acquire in one replicated write, commit in another: two per cycle, not three.
    assert proposed_commands(server) - before == 2 * 3
    assert (await client.transaction_status(tx.id)).state == "COMMITTED"


async def test_lock_context_aborts_on_exception_and_leaves_nothing_on_timeout(client):
    n = ns()
    ctx = client.lock(n, "k")
    with pytest.raises(RuntimeError):
        async with ctx as lock:
            assert lock.mode == LockMode.EXCLUSIVE
            raise RuntimeError("boom")
    assert (await client.transaction_status(ctx.transaction.id)).state == "ABORTED"

    holder = await client.begin_transaction()
    await holder.acquire_lock(n, "k")
    busy = client.lock(n, "k", timeout_ms=100)
    with pytest.raises(LockTimeout):
        async with busy:
            raise AssertionError("the body must not run without the lock")
    assert (await client.transaction_status(busy.transaction.id)).state == "ABORTED"
    await holder.commit()


async def test_try_lock_with_timeout_zero_answers_at_once(client):
    n = ns()
    holder = await client.begin_transaction()
    held = await holder.acquire_lock(n, "k")
    other = await client.begin_transaction()
    with pytest.raises(LockTimeout):
        await other.acquire_lock(n, "k", LockMode.SHARED_READ, timeout_ms=0)
    assert (await other.status()).state == "ACTIVE"
    assert all(not k.waiters for k in await client.list_locks(n))
    await holder.commit()
    lock = await other.acquire_lock(n, "k", LockMode.SHARED_READ, timeout_ms=0)
    assert lock.fencing_token > held.fencing_token
    await other.commit()


def test_sync_try_lock(sclient):
    n = ns()
    with sclient.lock(n, "k"):
        with pytest.raises(LockTimeout):
            with sclient.lock(n, "k", timeout_ms=0):
                raise AssertionError("the body must not run without the lock")
    with sclient.lock(n, "k", timeout_ms=0) as lock:
        assert lock.fencing_token > 0


def test_sync_lock_context(sclient):
    n = ns()
    with sclient.lock(n, "k", LockMode.SHARED_READ) as a, sclient.lock(n, "k", LockMode.SHARED_READ) as b:
        assert a.fencing_token != b.fencing_token
    with pytest.raises(InvalidArgument):
        with sclient.lock("", "k"):
            pass
    ctx = sclient.lock(n, "k")
    with ctx as lock:
        assert ctx.transaction is not None and ctx.transaction.status().locks[0].fencing_token == lock.fencing_token
    assert sclient.transaction_status(ctx.transaction.id).state == "COMMITTED"


async def test_lost_signal_on_abort_from_elsewhere(client):
    n = ns()
    tx = await client.begin_transaction(timeout_ms=5000)
    await tx.acquire_lock(n, "k")
    assert not tx.is_lost and tx.lost_reason is None
    waiter = asyncio.ensure_future(tx.lost())
    assert await client.abort_transaction(tx.id, "test") == "ABORTED"
    reason = await asyncio.wait_for(waiter, 30)
    assert reason.kind == "ABORTED"
    assert tx.is_lost and tx.lost_reason.kind == "ABORTED"
    with pytest.raises(TransactionLost):
        await tx.acquire_lock(n, "k2")
    with pytest.raises(TransactionLost):
        await tx.commit()


async def test_with_transaction_cancels_body_when_lost(client):
    cancelled = asyncio.Event()

    async def body(tx):
        await tx.acquire_lock(ns(), "k")
        await client.abort_transaction(tx.id, "operator")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TransactionLost):
        await client.with_transaction(body)
    assert cancelled.is_set()


async def test_deadlock_victim(client):
    n = ns()
    t1 = await client.begin_transaction(name="t1")
    t2 = await client.begin_transaction(name="t2")
    await t1.acquire_lock(n, "a")
    await t2.acquire_lock(n, "b")
    results = await asyncio.gather(
        t1.acquire_lock(n, "b", timeout_ms=30000),
        t2.acquire_lock(n, "a", timeout_ms=30000),
        return_exceptions=True,
    )
    victims = [r for r in results if isinstance(r, DeadlockVictim)]
    locks = [r for r in results if isinstance(r, caerus.Lock)]
    assert len(victims) == 1 and len(locks) == 1, results
    assert victims[0].code == "DEADLOCK_VICTIM" and isinstance(victims[0], TransactionLost)
    victim_tx = t1 if isinstance(results[0], DeadlockVictim) else t2
    assert victim_tx.is_lost and victim_tx.lost_reason.kind == "DEADLOCK_VICTIM"
    await t1.abort()
    await t2.abort()


@pytest.mark.parametrize(
    "namespace,key,timeout_ms",
    [("", "k", None), ("ns", "k" * 257, None), ("ns", "", None), ("ns", "k", 3_600_001)],
    ids=["empty-namespace", "key-over-256-bytes", "empty-key", "timeout-over-an-hour"],
)
async def test_bad_input_is_invalid_argument(client, namespace, key, timeout_ms):
    async with client.transaction() as tx:
        with pytest.raises(InvalidArgument) as e:
            await tx.acquire_lock(namespace, key, LockMode.EXCLUSIVE, timeout_ms=timeout_ms)
        assert e.value.code == "INVALID_ARGUMENT"
        assert isinstance(e.value, ValueError)


async def test_transaction_timeout_0_is_invalid_argument(client):
    with pytest.raises(InvalidArgument):
        await client.begin_transaction(timeout_ms=0)


def test_bad_mode_is_value_error(sclient):
    with sclient.transaction() as tx:
        with pytest.raises(ValueError):
            tx.acquire_lock("ns", "k", "WRITE")


def test_unreachable_cluster_is_unavailable():
    c = sync.DlsClient(endpoints=["127.0.0.1:1"], retry_deadline_ms=300)
    with pytest.raises(caerus.Unavailable):
        c.begin_transaction()


def test_bad_endpoint_is_config_error():
    with pytest.raises(caerus.ConfigError):
        sync.DlsClient(endpoints=["ftp://x:1"])


async def test_fifty_tasks_never_overlap(client):
    n = ns()
    inside = 0
    max_inside = 0
    order = []

    async def worker():
        nonlocal inside, max_inside
        async with client.transaction(timeout_ms=15000) as tx:
            lock = await tx.acquire_lock(n, "hot", LockMode.EXCLUSIVE, timeout_ms=120000)
            inside += 1
            max_inside = max(max_inside, inside)
            order.append(lock.fencing_token)
            await asyncio.sleep(0.001)
            inside -= 1

    await asyncio.gather(*(worker() for _ in range(50)))
    assert max_inside == 1
    assert len(order) == 50
    assert all(a < b for a, b in zip(order, order[1:])), order


def test_eight_threads_never_overlap(sclient):
    n = ns()
    guard = threading.Lock()
    state = {"inside": 0, "max": 0}
    order = []
    errors = []

    def worker():
        try:
            for _ in range(5):
                with sclient.transaction(timeout_ms=15000) as tx:
                    lock = tx.acquire_lock(n, "hot", LockMode.EXCLUSIVE, timeout_ms=120000)
                    with guard:
                        state["inside"] += 1
                        state["max"] = max(state["max"], state["inside"])
                        order.append(lock.fencing_token)
                    time.sleep(0.001)
                    with guard:
                        state["inside"] -= 1
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert state["max"] == 1
    assert len(order) == 40
    assert all(a < b for a, b in zip(order, order[1:])), order


def test_sync_transaction_keeps_its_lock_while_sleeping(sclient):
    n = ns()
    with sclient.transaction(timeout_ms=500) as tx:
        lock = tx.acquire_lock(n, "k")
        time.sleep(3 * tx.lease_ms / 1000.0 + 0.2)  # three lease periods
        assert not tx.is_lost
        assert tx.status().state == "ACTIVE"
        with sclient.transaction() as other:
            with pytest.raises(LockTimeout):
                other.acquire_lock(n, "k", timeout_ms=200)
        assert tx.lost(timeout=0.05) is None
    # Released by the commit: the next holder gets a higher token.
    with sclient.transaction() as tx2:
        assert tx2.acquire_lock(n, "k", timeout_ms=5000).fencing_token > lock.fencing_token


def test_sync_with_transaction_and_lost(sclient):
    n = ns()
    assert sclient.with_transaction(lambda tx: tx.acquire_lock(n, "k").key) == "k"
    tx = sclient.begin_transaction()
    sclient.abort_transaction(tx.id, "stop")
    reason = tx.lost(timeout=30)
    assert reason is not None and reason.kind == "ABORTED"
    with pytest.raises(TransactionLost):
        tx.commit()


HOLDER = r"""
import sys
from caerus import sync
c = sync.DlsClient(endpoints=[sys.argv[1]])
tx = c.begin_transaction(timeout_ms=1000, name="sleeper")
lock = tx.acquire_lock(sys.argv[2], "k")
print(tx.id, lock.fencing_token, flush=True)
sys.stdin.read()
"""


async def test_lease_expires_when_the_holder_stops(client, server):
    """A holder process frozen with SIGSTOP stops heartbeating: its lease lapses, the lock
    goes to the next transaction with a higher token, and the event log records it."""
    n = ns()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, server.endpoint, n],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        tx_id, token = map(int, proc.stdout.readline().split())
        stream = await client.watch_events(only_new=True, namespace_prefixes=[n])
        os.kill(proc.pid, signal.SIGSTOP)
        async with client.transaction() as tx:
            lock = await tx.acquire_lock(n, "k", timeout_ms=30000)
            assert lock.fencing_token > token
        assert (await client.transaction_status(tx_id)).state == "EXPIRED"
        kinds = set()
        async for event in stream:
            assert n in event.namespaces
            assert event.detail["transaction_id"] == tx_id
            kinds.add(event.kind)
            if kinds >= {"TRANSACTION_EXPIRED", "LOCK_REVOKED"}:
                break
    finally:
        proc.kill()
        proc.wait()


async def test_watch_events_replays_deadlock(client):
    n = ns()
    t1 = await client.begin_transaction()
    t2 = await client.begin_transaction()
    await t1.acquire_lock(n, "a")
    await t2.acquire_lock(n, "b")
    await asyncio.gather(t1.acquire_lock(n, "b"), t2.acquire_lock(n, "a"), return_exceptions=True)
    await t1.abort()
    await t2.abort()
    async for event in client.watch_events(0, namespace_prefixes=[n], kinds=["DEADLOCK_RESOLVED"]):
        assert event.kind == "DEADLOCK_RESOLVED"
        assert event.detail["victim_transaction_id"] in (t1.id, t2.id)
        assert {m["key"] for m in event.detail["cycle"]} == {"a", "b"}
        break


def test_sync_watch_events(sclient):
    n = ns()
    tx = sclient.begin_transaction()
    tx.acquire_lock(n, "k")
    stream = sclient.watch_events(only_new=True, namespace_prefixes=[n])
    sclient.abort_transaction(tx.id, "ops")
    event = next(iter(stream))
    assert event.kind in ("TRANSACTION_ABORTED", "LOCK_REVOKED")
    assert event.sequence >= 1


class TestAuth:
    def test_missing_key_is_unauthenticated(self, auth_server):
        c = sync.DlsClient(endpoints=[auth_server.endpoint])
        with pytest.raises(Unauthenticated) as e:
            c.begin_transaction()
        assert e.value.code == "UNAUTHENTICATED"

    def test_unknown_key_is_unauthenticated(self, auth_server):
        c = sync.DlsClient(endpoints=[auth_server.endpoint], api_key="dls_" + "0" * 64)
        with pytest.raises(Unauthenticated):
            c.begin_transaction()

    def test_key_from_environment(self, auth_server, monkeypatch):
        monkeypatch.setenv("CAERUS_API_KEY", auth_server.keys["billing"])
        monkeypatch.setenv("DLS_ENDPOINTS", auth_server.endpoint)
        c = sync.DlsClient()
        with c.transaction() as tx:
            assert tx.acquire_lock("billing-jobs", "k").fencing_token > 0

    def test_namespace_outside_the_key_is_permission_denied(self, auth_server):
        c = sync.DlsClient(endpoints=[auth_server.endpoint], api_key=auth_server.keys["billing"])
        with c.transaction() as tx:
            with pytest.raises(PermissionDenied):
                tx.acquire_lock("payroll", "k")

    async def test_admin_lists_locks(self, auth_server):
        admin = DlsClient(endpoints=[auth_server.endpoint], api_key=auth_server.keys["admin"])
        async with admin.transaction() as tx:
            await tx.acquire_lock("billing-admin", "k")
            listed = await admin.list_locks("billing-admin")
            assert [(k.namespace, k.key) for k in listed] == [("billing-admin", "k")]
            assert listed[0].holders[0]["transaction_id"] == tx.id


def test_a_server_limit_is_resource_exhausted(limited_server):
    c = sync.DlsClient(endpoints=[limited_server.endpoint])
    with c.transaction() as first:
        first.acquire_lock(ns(), "held")  # begins it (the transaction begins with its first call)
        with pytest.raises(ResourceExhausted) as e:
            c.begin_transaction()
        assert e.value.code == "RESOURCE_EXHAUSTED"
        assert "--max-txns-per-api-key 1" in e.value.message
    # Ending the first frees its place.
    with c.transaction() as tx:
        assert tx.acquire_lock(ns(), "k").fencing_token > 0


def _undocumented(module) -> list:
    """Names in ``module.__all__``, and the public methods and properties its classes
    define, that have no docstring (what help() would show them with)."""
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (obj.__doc__ or "").strip():
            missing.append(f"{module.__name__}.{name}")
        if not inspect.isclass(obj):
            continue
        for attr, member in vars(obj).items():
            is_api = callable(member) or inspect.isdatadescriptor(member) or inspect.ismethoddescriptor(member)
            if attr.startswith("_") or not is_api or isinstance(member, obj):
                continue
            if not (inspect.getdoc(member) or "").strip():  # getdoc: __slots__ docs too
                missing.append(f"{module.__name__}.{name}.{attr}")
    return missing


def test_every_public_name_has_help():
    """help() is the reference of a Python SDK: every exported class and function, and each
    public method and property of the classes, must say what it does; pydoc must render it."""
    modules = [importlib.import_module(f"caerus{m}") for m in ("", ".sync", ".fence", ".scheduling", ".errors")]
    missing = [m for module in modules for m in _undocumented(module)]
    assert missing == [], f"no docstring: {', '.join(missing)}"
    for obj in (caerus, sync, DlsClient, caerus.Transaction, sync.DlsClient, sync.Transaction):
        text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        public = [n for n in getattr(obj, "__all__", vars(obj)) if not n.startswith("_")]
        assert all(n in text for n in public), f"help({obj.__name__}) leaves out {[n for n in public if n not in text]}"


def test_asyncio_results_reach_every_loop_and_cancelling_a_call_is_clean(server):
    """Each event loop is woken for its own results: loops in several threads at once, a
    fresh loop after others closed, hundreds of calls in flight on one loop, and a call
    cancelled by asyncio (wait_for) leaves the loop and the transaction working."""

    async def burst() -> int:
        c = DlsClient(endpoints=[server.endpoint])
        tx = await c.begin_transaction()
        statuses = await asyncio.gather(*(tx.status() for _ in range(200)))
        assert {s.id for s in statuses} == {tx.id}
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(tx.lost(), 0.05)
        assert (await tx.acquire_lock(ns(), "k")).fencing_token > 0
        await tx.commit()
        return tx.id

    ids: list = []
    threads = [threading.Thread(target=lambda: ids.append(asyncio.run(burst()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    ids.append(asyncio.run(burst()))
    ids.append(asyncio.run(burst()))
    assert len(ids) == 5 and len(set(ids)) == 5, ids


def test_event_loops_that_are_gone_leave_no_sockets_behind(server):
    """Each event loop gets its own wake-up socket pair; it goes with the loop."""
    import gc

    c = DlsClient(endpoints=[server.endpoint])

    async def one_call() -> None:
        tx = await c.begin_transaction()
        await tx.commit()

    asyncio.run(one_call())  # the client's connection is open from here on
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(30):
        asyncio.run(one_call())
    gc.collect()
    after = len(os.listdir("/proc/self/fd"))
    assert after - before <= 4, f"{after - before} file descriptors more after 30 event loops"


def test_asyncio_programs_exit_cleanly(server):
    """No tokio thread touches Python after the program's last await: an interpreter
    shutting down right after an asyncio call must not crash (it did, now and then, when
    results were handed over by a tokio thread taking the GIL)."""
    script = (
        "import asyncio\n"
        "from caerus import DlsClient\n"
        "async def main():\n"
        f"    c = DlsClient(endpoints=['{server.endpoint}'])\n"
        "    tx = await c.begin_transaction()\n"
        "    await c.transaction_status(tx.id)\n"
        "    await tx.abort()\n"
        "asyncio.run(main())\n"
    )
    for attempt in range(10):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
        assert done.returncode == 0, f"run {attempt}: exit {done.returncode}: {done.stderr.decode()[-2000:]}"


def _waiters(listing, key):
    """(transaction id, upgrade) of each waiter of ``key`` in a ``list_locks`` answer."""
    entry = next((k for k in listing if k.key == key), None)
    return [(w["transaction_id"], w["upgrade"]) for w in entry.waiters] if entry else []


async def test_a_cancelled_acquire_is_withdrawn_and_never_granted_to_nobody(client):
    n = ns()
    holder = await client.begin_transaction(name="holder")
    waiter = await client.begin_transaction(name="waiter")
    await holder.acquire_lock(n, "k")

    async def queue():
        return _waiters(await client.list_locks(n), "k")

    # Task cancellation, and asyncio.wait_for's timeout (which cancels too).
    task = asyncio.ensure_future(waiter.acquire_lock(n, "k", timeout_ms=3_600_000))
    await eventually("the waiter in the queue", lambda: _eq(queue(), [(waiter.id, False)]))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually("the cancelled wait leaves the queue", lambda: _eq(queue(), []))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(waiter.acquire_lock(n, "k", timeout_ms=3_600_000), 0.5)
    await eventually("the timed-out wait leaves the queue", lambda: _eq(queue(), []))

    await holder.commit()
    status = await waiter.status()
    assert (status.state, status.locks, status.waiting) == ("ACTIVE", [], None)
    assert not any(k.key == "k" for k in await client.list_locks(n)), "nobody holds the key"
    lock = await waiter.acquire_lock(n, "k")
    assert [l.fencing_token for l in (await waiter.status()).locks] == [lock.fencing_token]
    await waiter.commit()


async def test_a_cancelled_upgrade_is_withdrawn_and_keeps_the_shared_hold(client):
    n = ns()
    a = await client.begin_transaction()
    b = await client.begin_transaction()
    shared = await a.acquire_lock(n, "up", LockMode.SHARED_READ)
    await b.acquire_lock(n, "up", LockMode.SHARED_READ)

    async def queue():
        return _waiters(await client.list_locks(n), "up")

    task = asyncio.ensure_future(a.acquire_lock(n, "up", LockMode.EXCLUSIVE, timeout_ms=3_600_000))
    await eventually("the upgrade in the queue", lambda: _eq(queue(), [(a.id, True)]))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually("the cancelled upgrade leaves the queue", lambda: _eq(queue(), []))
    await b.commit()
    held = (await a.status()).locks
    assert [(l.mode, l.fencing_token) for l in held] == [(LockMode.SHARED_READ, shared.fencing_token)]
    await a.commit()


async def _eq(value, expected):
    return await value == expected


def test_a_blocking_acquire_given_up_by_a_timeout_is_withdrawn(sclient):
    n = ns()
    holder = sclient.begin_transaction(name="holder")
    waiter = sclient.begin_transaction(name="waiter")
    holder.acquire_lock(n, "k")
    seen = []

    def give_up(signum, frame):
        # The wait is in the queue by now (its place was reported); give it up.
        seen.append(_waiters(sclient.list_locks(n), "k"))
        raise TimeoutError("gave up waiting")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(TimeoutError):
            waiter.acquire_lock(n, "k", timeout_ms=3_600_000)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert seen == [[(waiter.id, False)]]
    deadline = time.monotonic() + 20
    while _waiters(sclient.list_locks(n), "k"):
        assert time.monotonic() < deadline, "the given-up wait stayed in the queue"
        time.sleep(0.05)
    holder.commit()
    status = waiter.status()
    assert (status.state, status.locks, status.waiting) == ("ACTIVE", [], None)
    assert not any(k.key == "k" for k in sclient.list_locks(n)), "nobody holds the key"
    waiter.commit()

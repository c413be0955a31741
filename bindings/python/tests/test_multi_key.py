"""All-or-nothing acquire of several locks (``acquire_locks``) against a real dls server."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest

import caerus
from caerus import DeadlockVictim, DlsClient, InvalidArgument, LockMode, LockTimeout
from caerus import sync


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_free_keys_are_granted_together_in_the_order_given(client):
    n = ns()
    async with client.transaction() as tx:
        locks = await tx.acquire_locks([(n, "b"), (n, "a", LockMode.SHARED_READ), (n, "c", "EXCLUSIVE")])
        assert [(l.key, l.mode) for l in locks] == [
            ("b", LockMode.EXCLUSIVE),
            ("a", LockMode.SHARED_READ),
            ("c", LockMode.EXCLUSIVE),
        ]
        tokens = [l.fencing_token for l in locks]
        assert tokens == sorted(tokens) and len(set(tokens)) == 3
        # Held locks come back with their tokens.
        again = await tx.acquire_locks([(n, "b")])
        assert again[0].fencing_token == locks[0].fencing_token


async def test_nothing_is_held_until_every_key_is_free(client):
    n = ns()
    holder = await client.begin_transaction()
    held = await holder.acquire_lock(n, "q")
    multi = await client.begin_transaction()
    waiting = asyncio.ensure_future(multi.acquire_locks([(n, "p"), (n, "q")], timeout_ms=30000))
    for _ in range(300):
        if any(k.waiters for k in await client.list_locks(n)):
            break
        await asyncio.sleep(0.01)
    assert sorted(k.key for k in await client.list_locks(n) if k.waiters) == ["p", "q"]
    assert (await multi.status()).locks == []
    # A try of the same keys is refused at once and queues nothing.
    trier = await client.begin_transaction()
    with pytest.raises(LockTimeout):
        await trier.acquire_locks([(n, "p"), (n, "q")], timeout_ms=0)
    await holder.commit()
    locks = await asyncio.wait_for(waiting, 30)
    assert [l.key for l in locks] == ["p", "q"]
    assert all(l.fencing_token > held.fencing_token for l in locks)
    await multi.commit()
    await trier.commit()


async def test_a_deadlock_between_two_requests_has_one_victim(client):
    n = ns()
    t1, t2 = await client.begin_transaction(), await client.begin_transaction()
    await t1.acquire_lock(n, "a")
    await t2.acquire_lock(n, "b")
    results = await asyncio.gather(
        t1.acquire_locks([(n, "b"), (n, "c")], timeout_ms=30000),
        t2.acquire_locks([(n, "c"), (n, "a")], timeout_ms=30000),
        return_exceptions=True,
    )
    victims = [r for r in results if isinstance(r, DeadlockVictim)]
    granted = [r for r in results if isinstance(r, list)]
    assert len(victims) == 1 and len(granted) == 1 and len(granted[0]) == 2, results
    await t1.abort()
    await t2.abort()


@pytest.mark.parametrize(
    "locks,says",
    [([], "locks is empty"), ([("n", "k"), ("n", "k", "SHARED_READ")], "named twice")],
    ids=["empty", "key-twice"],
)
async def test_bad_lists_are_invalid_argument(client, locks, says):
    async with client.transaction() as tx:
        with pytest.raises(InvalidArgument) as e:
            await tx.acquire_locks(locks)
        assert says in str(e.value)


def test_a_malformed_entry_is_a_type_error_before_anything_is_sent(server):
    with sync.DlsClient(endpoints=[server.endpoint]).transaction() as tx:
        with pytest.raises(TypeError, match=r"locks\[1\] must be a \(namespace, key\)"):
            tx.acquire_locks([("n", "a"), "n/b"])


def test_sync_acquire_locks(server):
    n = ns()
    client = sync.DlsClient(endpoints=[server.endpoint])
    with client.transaction() as tx:
        locks = tx.acquire_locks([(n, "a"), (n, "b", LockMode.SHARED_READ)], timeout_ms=0)
        assert [l.key for l in locks] == ["a", "b"] and isinstance(locks[0], caerus.Lock)



async def test_on_queued_reports_position_and_blockers_on_the_event_loop(client):
    n = ns()
    holder = await client.begin_transaction()
    await holder.acquire_lock(n, "a")
    seen = []
    loop = asyncio.get_running_loop()

    def on_queued(position):
        # Called on the event loop, as any asyncio callback.
        assert asyncio.get_running_loop() is loop
        seen.append(position)

    waiter = await client.begin_transaction()
    single = asyncio.ensure_future(waiter.acquire_lock(n, "a", timeout_ms=30000, on_queued=on_queued))
    for _ in range(300):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert [(p.position, p.blocking_transaction_ids) for p in seen] == [(1, [holder.id])]
    await holder.commit()
    await asyncio.wait_for(single, 30)

    multi_seen = []
    other = await client.begin_transaction()
    multi = asyncio.ensure_future(
        other.acquire_locks([(n, "a"), (n, "b")], timeout_ms=30000, on_queued=multi_seen.append)
    )
    for _ in range(300):
        if multi_seen:
            break
        await asyncio.sleep(0.01)
    assert multi_seen and multi_seen[0].blocking_transaction_ids == [waiter.id]
    await waiter.commit()
    assert [l.key for l in await asyncio.wait_for(multi, 30)] == ["a", "b"]
    await other.commit()


def test_sync_on_queued_is_called_while_the_call_blocks(server):
    client = sync.DlsClient(endpoints=[server.endpoint])
    n = ns()
    holder = client.begin_transaction()
    holder.acquire_lock(n, "k")
    waiter = client.begin_transaction()
    seen = []

    def on_queued(position):
        seen.append(position.position)
        # Runs on an SDK thread: hand the blocking commit to a thread of its own; the wait
        # then ends with the grant.
        threading.Thread(target=holder.commit).start()

    lock = waiter.acquire_lock(n, "k", timeout_ms=30000, on_queued=on_queued)
    assert seen == [1] and lock.key == "k"
    waiter.commit()

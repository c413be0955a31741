"""Lock-delay through the SDK (``set_lock_delay``, ``lock_delays``, ``KeyLocks.delay``)
against a real dls: a revoked holder's key is listed with its delay and grants nothing
until the delay ends; rules are listed, removed and refused."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from caerus import DlsClient, InvalidArgument, KeyDelay, LockDelayRule, LockTimeout, sync
from conftest import eventually, start_server


@pytest.fixture(scope="module")
def delay_server():
    """A node of its own: its lock-delay rules touch no other test."""
    s = start_server()
    yield s
    s.stop()


def ns() -> str:
    return f"py-delay-{uuid.uuid4().hex[:12]}"


async def listed(client: DlsClient, namespace: str, key: str):
    return next((k for k in await client.list_locks(namespace) if k.key == key), None)


async def test_an_aborted_holders_key_waits_out_the_delay(delay_server):
    client = DlsClient(endpoints=[delay_server.endpoint])
    n = ns()
    assert await client.lock_delays() == [], "off by default"
    assert await client.set_lock_delay(n, 3000) == 0
    rules = await client.lock_delays()
    assert all(isinstance(r, LockDelayRule) for r in rules)
    assert [(r.namespace_prefix, r.delay_ms) for r in rules] == [(n, 3000)]

    holder = await client.begin_transaction(timeout_ms=30000)
    await holder.acquire_lock(n, "k")
    nxt = await client.begin_transaction(timeout_ms=30000)
    waiting = asyncio.ensure_future(nxt.acquire_lock(n, "k", timeout_ms=30000))
    await eventually("the waiter is queued", lambda: _has_waiter(client, n, "k"))
    assert (await listed(client, n, "k")).delay is None, "no delay while held"

    assert await client.abort_transaction(holder.id, "maintenance") == "ABORTED"
    k = await eventually("the key is under a lock-delay", lambda: _delayed(client, n, "k"))
    delay = k.delay
    assert isinstance(delay, KeyDelay)
    assert (delay.transaction_id, delay.cause) == (holder.id, "OPERATOR_ABORT")
    assert k.holders == [] and [w["transaction_id"] for w in k.waiters] == [nxt.id]
    # The node runs on this machine: its clock is ours.
    if time.time() * 1000 < delay.until_ms - 500:
        other = await client.begin_transaction(timeout_ms=30000)
        with pytest.raises(LockTimeout):
            await other.acquire_lock(n, "k", timeout_ms=0)
        assert not waiting.done(), "granted during the delay"
        await other.abort()

    lock = await asyncio.wait_for(waiting, 30)
    assert lock.fencing_token > 0
    after = await listed(client, n, "k")
    assert after.delay is None
    assert after.holders[0]["transaction_id"] == nxt.id
    assert after.holders[0]["since_ms"] >= delay.until_ms, "granted before the delay ended"
    await nxt.commit()

    assert await client.set_lock_delay(n, 0) == 3000, "removing returns the previous delay"
    assert await client.lock_delays() == []


async def _has_waiter(client: DlsClient, n: str, key: str):
    k = await listed(client, n, key)
    return k is not None and bool(k.waiters)


async def _delayed(client: DlsClient, n: str, key: str):
    k = await listed(client, n, key)
    return k if k is not None and k.delay is not None else None


def test_sync_rules_and_a_refused_rule(delay_server):
    client = sync.DlsClient(endpoints=[delay_server.endpoint])
    n = ns()
    with pytest.raises(InvalidArgument) as e:
        client.set_lock_delay(n, 600_001)
    assert e.value.code == "INVALID_ARGUMENT" and "delay_ms" in e.value.message
    assert client.lock_delays() == [], "a refused rule is not stored"
    assert client.set_lock_delay(n, 250) == 0
    assert client.set_lock_delay(n, 600_000) == 250, "10 minutes is the maximum, allowed"
    [rule] = client.lock_delays()
    assert (rule.namespace_prefix, rule.delay_ms) == (n, 600_000)
    assert "LockDelayRule(" in repr(rule)
    assert client.set_lock_delay(n, 0) == 600_000
    assert client.lock_delays() == []
    # A plain abort outside any rule's prefix is not delayed.
    tx = client.begin_transaction(timeout_ms=30000)
    tx.acquire_lock(n, "k")
    client.abort_transaction(tx.id, "no rule")
    assert [k for k in client.list_locks(n) if k.key == "k"] == []

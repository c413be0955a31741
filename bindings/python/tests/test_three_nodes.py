"""The lock features of issue 22 end to end through the SDK against a real three-node
cluster: a client that knows every node, and one that knows only a follower (its calls are
forwarded to the leader)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caerus import DlsClient, InvalidArgument, LockMode, LockTimeout

from conftest import eventually, waits_in_line


def ns() -> str:
    return f"py3-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["every node", "a follower only"])
def client(request, three_nodes):
    if request.param == "every node":
        return DlsClient(endpoints=three_nodes.endpoints)
    leader = three_nodes.leader()
    follower = next(s for s in three_nodes.servers if s is not leader)
    return DlsClient(endpoints=[follower.endpoint])


async def test_locks_permits_tokens_and_bounds(client):
    n = ns()
    a, b = await client.begin_transaction(), await client.begin_transaction()
    # All or nothing, then a try-lock refused without queueing.
    x, y = await a.acquire_locks([(n, "x"), (n, "y", LockMode.SHARED_READ)])
    with pytest.raises(LockTimeout):
        await b.acquire_lock(n, "x", timeout_ms=0)
    assert await client.verify_fencing_token(n, "x", x.fencing_token)
    # Downgrade keeps the token; a reader then shares.
    down = await a.downgrade(n, "x")
    assert (down.mode, down.fencing_token) == (LockMode.SHARED_READ, x.fencing_token)
    assert (await b.acquire_lock(n, "x", LockMode.SHARED_READ, timeout_ms=2000)).fencing_token > y.fencing_token
    # A semaphore of two.
    p1 = await a.acquire_permit(n, "pool", 2)
    p2 = await b.acquire_permit(n, "pool", 2)
    assert p1.mode == LockMode.SEMAPHORE and p2.fencing_token > p1.fencing_token
    c = await client.begin_transaction()
    with pytest.raises(LockTimeout):
        await c.acquire_permit(n, "pool", 2, timeout_ms=0)
    with pytest.raises(InvalidArgument):
        await c.acquire_lock(n, "pool", timeout_ms=0)
    for t in (a, b, c):
        await t.commit()
    # A bounded transaction ends although it heartbeats, and its lost stream says so.
    bounded = await client.begin_transaction(timeout_ms=10000, max_duration_ms=800, lost_stream=True)
    await bounded.acquire_lock(n, "bounded")
    reason = await asyncio.wait_for(bounded.lost(), 15)
    assert reason.kind == "EXPIRED" and "max duration" in reason.message


async def test_watch_elect_and_lock_delay(client):
    n = ns()
    election = client.election(n, "leader")
    first = await election.campaign("first", lease_ms=2000)
    leader = await election.leader()
    assert (leader.transaction_name, leader.fencing_token) == ("first", first.term)
    second = asyncio.ensure_future(election.campaign("second", lease_ms=2000))
    await eventually("the second candidate waits in line behind the first",
                     lambda: waits_in_line(client, n, "leader", "second", second))
    assert not second.done(), "the second candidate waits while the first leads"
    await first.resign()
    took_over = await asyncio.wait_for(second, 15)
    assert took_over.term > first.term
    await took_over.resign()

    # Lock-delay: an operator-aborted holder's key waits out the delay.
    await client.set_lock_delay(n, 1500)
    holder = await client.begin_transaction()
    await holder.acquire_lock(n, "k")
    await client.abort_transaction(holder.id, "drill")
    (listed,) = [k for k in await client.list_locks(n) if k.key == "k"]
    assert listed.delay is not None and listed.delay.transaction_id == holder.id
    until = listed.delay.until_ms
    nxt = await client.begin_transaction()
    await nxt.acquire_lock(n, "k", timeout_ms=15000)
    (listed,) = [k for k in await client.list_locks(n) if k.key == "k"]
    assert listed.delay is None
    assert listed.holders[0]["since_ms"] >= until, "granted before the delay ended"
    await nxt.commit()
    assert await client.set_lock_delay(n, 0) == 1500

"""Counted semaphores (``acquire_permit``) against a real dls server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caerus import DlsClient, InvalidArgument, LockMode, LockTimeout
from caerus import sync


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_up_to_n_permits_then_fifo_and_no_mixing(client):
    n = ns()
    a, b, c = [await client.begin_transaction() for _ in range(3)]
    pa = await a.acquire_permit(n, "pool", 2)
    pb = await b.acquire_permit(n, "pool", 2)
    assert pa.mode == LockMode.SEMAPHORE and pb.fencing_token > pa.fencing_token
    positions = []
    waiting = asyncio.ensure_future(c.acquire_permit(n, "pool", 2, timeout_ms=30000, on_queued=lambda q: positions.append(q.position)))
    for _ in range(300):
        if positions:
            break
        await asyncio.sleep(0.01)
    assert positions[0] == 1
    (listed,) = await client.list_locks(n)
    assert listed.permits == 2 and [h["mode"] for h in listed.holders] == [LockMode.SEMAPHORE] * 2
    other = await client.begin_transaction()
    with pytest.raises(LockTimeout):
        await other.acquire_permit(n, "pool", 2, timeout_ms=0)
    with pytest.raises(InvalidArgument, match="semaphore with 2 permits"):
        await other.acquire_lock(n, "pool", LockMode.EXCLUSIVE, timeout_ms=0)
    with pytest.raises(InvalidArgument, match="declares 3"):
        await other.acquire_permit(n, "pool", 3, timeout_ms=1000)
    assert await a.release(n, "pool")
    got = await asyncio.wait_for(waiting, 30)
    assert got.fencing_token > pb.fencing_token
    for t in (b, c, other):
        await t.commit()


def test_sync_permit(server):
    n = ns()
    client = sync.DlsClient(endpoints=[server.endpoint])
    with client.transaction() as tx:
        p = tx.acquire_permit(n, "pool", 1)
        assert p.mode == LockMode.SEMAPHORE
        assert tx.status().locks[0].mode == LockMode.SEMAPHORE

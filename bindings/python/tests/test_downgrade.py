"""Lock downgrade (EXCLUSIVE -> SHARED_READ in place) against a real dls server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caerus import DlsClient, LockMode
from caerus import sync


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_downgrade_keeps_the_token_and_lets_a_queued_reader_in(client):
    n = ns()
    owner = await client.begin_transaction()
    held = await owner.acquire_lock(n, "k")
    reader = await client.begin_transaction()
    reading = asyncio.ensure_future(reader.acquire_lock(n, "k", LockMode.SHARED_READ, timeout_ms=30000))
    for _ in range(300):
        if any(k.waiters for k in await client.list_locks(n)):
            break
        await asyncio.sleep(0.01)
    down = await owner.downgrade(n, "k")
    assert down.mode == LockMode.SHARED_READ and down.fencing_token == held.fencing_token
    got = await asyncio.wait_for(reading, 30)
    assert got.fencing_token > held.fencing_token
    assert await owner.downgrade(n, "not-held") is None
    await owner.commit()
    await reader.commit()


def test_sync_downgrade(server):
    n = ns()
    client = sync.DlsClient(endpoints=[server.endpoint])
    with client.transaction() as tx:
        lock = tx.acquire_lock(n, "k")
        down = tx.downgrade(n, "k")
        assert (down.mode, down.fencing_token) == (LockMode.SHARED_READ, lock.fencing_token)
        assert tx.status().locks[0].mode == LockMode.SHARED_READ

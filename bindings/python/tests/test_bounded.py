"""Bounded transactions (``max_duration_ms``) against a real dls server."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from caerus import DlsClient, InvalidArgument, TransactionLost
from caerus import sync


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_the_server_ends_a_bounded_transaction_although_it_heartbeats(client):
    n = f"py-{uuid.uuid4().hex[:12]}"
    started = time.monotonic()
    tx = await client.begin_transaction(timeout_ms=10000, max_duration_ms=1200)
    held = await tx.acquire_lock(n, "k")
    reason = await asyncio.wait_for(tx.lost(), 30)
    assert time.monotonic() - started >= 1.2
    assert reason.kind == "EXPIRED" and "max duration" in reason.message
    status = await client.transaction_status(tx.id)
    assert (status.state, status.end_cause) == ("EXPIRED", "MAX_DURATION_EXCEEDED")
    async with client.lock(n, "k") as lock:
        assert lock.fencing_token > held.fencing_token


async def test_with_transaction_body_is_cancelled_when_the_bound_passes(client):
    n = f"py-{uuid.uuid4().hex[:12]}"

    async def body(tx):
        # The transaction begins with its first call.
        await tx.acquire_lock(n, "k")
        await asyncio.sleep(3600)

    with pytest.raises(TransactionLost):
        await asyncio.wait_for(client.with_transaction(body, timeout_ms=10000, max_duration_ms=500), 30)


def test_sync_bound_out_of_range_is_invalid_argument(server):
    client = sync.DlsClient(endpoints=[server.endpoint])
    with pytest.raises(InvalidArgument, match="max_duration_ms"):
        client.begin_transaction(max_duration_ms=10)

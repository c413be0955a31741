"""The lost stream (``lost_stream=True``): the lost signal fires as soon as the server ends
the transaction, not at the next heartbeat. Against a real dls server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caerus import DlsClient, TransactionLost
from caerus import sync


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_an_operator_abort_fires_the_lost_signal_before_the_heartbeat(client):
    n = f"py-{uuid.uuid4().hex[:12]}"
    # A 30 s lease heartbeats every 10 s: only the stream can tell within a few seconds.
    streamed = await client.begin_transaction(timeout_ms=30000, lost_stream=True)
    plain = await client.begin_transaction(timeout_ms=30000)
    await streamed.acquire_lock(n, "streamed")
    await plain.acquire_lock(n, "plain")
    await client.abort_transaction(streamed.id, "revoked by the operator")
    await client.abort_transaction(plain.id, "revoked by the operator")
    reason = await asyncio.wait_for(streamed.lost(), 5)
    assert reason.kind == "ABORTED" and "revoked by the operator" in reason.message
    assert not plain.is_lost  # the same abort, heard only at its next heartbeat


async def test_the_lock_context_passes_the_option_on(client):
    n = f"py-{uuid.uuid4().hex[:12]}"
    context = client.lock(n, "k", lease_ms=30000, lost_stream=True)
    with pytest.raises(TransactionLost):
        async with context:
            await client.abort_transaction(context.transaction.id, "gone")
            reason = await asyncio.wait_for(context.transaction.lost(), 5)
            assert reason.kind == "ABORTED"


def test_the_blocking_client_hears_the_abort_at_once(server):
    n = f"py-{uuid.uuid4().hex[:12]}"
    client = sync.DlsClient(endpoints=[server.endpoint])
    tx = client.begin_transaction(timeout_ms=30000, lost_stream=True)
    tx.acquire_lock(n, "k")
    client.abort_transaction(tx.id, "revoked")
    reason = tx.lost(timeout=5)
    assert reason is not None and reason.kind == "ABORTED"

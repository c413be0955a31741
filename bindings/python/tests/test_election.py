"""Key watches and leader election against a real dls server."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from caerus import DlsClient, InvalidArgument
from caerus import sync

from conftest import eventually, waits_in_line


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_a_key_watch_reports_each_change_with_its_kind(client):
    n = ns()
    watch = await client.watch_key(n, "k")
    first = await asyncio.wait_for(watch.__anext__(), 30)
    assert first.initial and first.holders == [] and first.changes == []
    tx = await client.begin_transaction(name="alpha")
    lock = await tx.acquire_lock(n, "k")
    granted = await asyncio.wait_for(watch.__anext__(), 30)
    assert [(c.kind, c.holder.transaction_name, c.holder.fencing_token) for c in granted.changes] == [
        ("GRANTED", "alpha", lock.fencing_token)
    ]
    await client.abort_transaction(tx.id, "test")
    revoked = await asyncio.wait_for(watch.__anext__(), 30)
    assert [(c.kind, c.end_cause) for c in revoked.changes] == [("REVOKED", "OPERATOR_ABORT")]
    assert revoked.holders == []
    with pytest.raises(InvalidArgument):
        await client.watch_key(n, "")


async def test_candidates_lead_in_turn_and_observers_see_each_leader(client):
    n = ns()
    election = client.election(n, "leader")
    assert await election.leader() is None
    seen = []
    watching = asyncio.Event()

    async def observe():
        async for leader in election.observe():
            seen.append(leader.transaction_name if leader else None)
            watching.set()
            if len(seen) == 3:
                return

    observer = asyncio.ensure_future(observe())
    # The observer's first event (nobody leads) is its proof that it watches: campaigning
    # before it would let it start at "a" and miss the empty seat.
    await asyncio.wait_for(watching.wait(), 30)
    first = await election.campaign("a", lease_ms=5000)
    second_campaign = asyncio.ensure_future(election.campaign("b", lease_ms=5000))
    await eventually("b waits in line for the leader key (or was wrongly granted it)",
                     lambda: waits_in_line(client, n, "leader", "b", second_campaign))
    assert not second_campaign.done(), "b waits while a leads"
    assert (await election.leader()).transaction_name == "a"
    await first.resign()
    second = await asyncio.wait_for(second_campaign, 30)
    assert second.term > first.term
    await asyncio.wait_for(observer, 30)
    assert seen == [None, "a", "b"]
    await second.resign()


def test_blocking_election_and_watch(server):
    client = sync.DlsClient(endpoints=[server.endpoint])
    election = client.election(ns(), "leader")
    leadership = election.campaign("solo", lease_ms=5000)
    leader = election.leader()
    assert leader is not None and leader.transaction_name == "solo" and leader.fencing_token == leadership.term
    assert leadership.lost(timeout=0.05) is None
    leadership.resign()
    assert election.leader() is None

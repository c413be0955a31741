"""VerifyFencingToken (``verify_fencing_token``) against a real dls server."""

from __future__ import annotations

import uuid

import pytest

from caerus import DlsClient, InvalidArgument
from caerus import sync


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_verify_fencing_token_follows_the_current_grant(client):
    n = ns()
    assert not await client.verify_fencing_token(n, "k", 1)
    tx = await client.begin_transaction()
    held = await tx.acquire_lock(n, "k")
    check = await client.verify_fencing_token(n, "k", held.fencing_token)
    assert check and check.current and check.current_tokens == [held.fencing_token]
    assert not await client.verify_fencing_token(n, "k", held.fencing_token + 1)
    await tx.commit()
    assert not (await client.verify_fencing_token(n, "k", held.fencing_token)).current
    with pytest.raises(InvalidArgument):
        await client.verify_fencing_token(n, "k", 0)
    with pytest.raises(OverflowError):
        await client.verify_fencing_token(n, "k", -1)


def test_sync_verify_fencing_token(server):
    n = ns()
    client = sync.DlsClient(endpoints=[server.endpoint])
    with client.lock(n, "k") as lock:
        assert client.verify_fencing_token(n, "k", lock.fencing_token).current
    assert client.verify_fencing_token(n, "k", lock.fencing_token).current_tokens == []

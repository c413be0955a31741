"""The exception classes come from the error table every SDK shares, and lost transactions'
errors carry their cause (``end_cause``) and a deadlock victim's the broken cycle
(``deadlock``), against a real dls server for the latter."""

from __future__ import annotations

import ast
import asyncio
import pathlib
import uuid

import pytest
from conftest import eventually

import caerus
from caerus import DeadlockVictim, DlsClient, DlsError, TransactionLost, errors
from caerus._native import ERROR_CLASSES

# Python's names where they are not the table's stem (kept as users import them).
PY_NAMES = {"CONFIG": "ConfigError", "INTERNAL": "InternalError"}


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


def test_every_class_of_the_table_exists_and_subclasses_the_base():
    codes = [code for code, *_ in ERROR_CLASSES]
    assert "MEMBERSHIP_REFUSED" in codes and len(codes) == len(set(codes))
    stub = ast.parse((pathlib.Path(errors.__file__).with_suffix(".pyi")).read_text())
    stubbed = {node.name for node in stub.body if isinstance(node, ast.ClassDef)}
    for code, stem, retryable, description in ERROR_CLASSES:
        name = PY_NAMES.get(code, stem)
        cls = getattr(caerus, name)
        assert cls is getattr(errors, name) and name in caerus.__all__, name
        assert issubclass(cls, DlsError) and cls is not DlsError, name
        assert (cls.code, cls.retryable, cls.__doc__) == (code, retryable, description), name
        assert cls.__module__ == "caerus.errors" and cls.__qualname__ == name
        assert name in stubbed, f"{name} is missing from errors.pyi"
        err = errors._from_code(code, "m")
        assert type(err) is cls and (err.code, err.message, str(err)) == (code, "m", f"{code}: m")
        assert (err.end_cause, err.deadlock) == (None, None)
    assert stubbed - {"DlsError"} == {PY_NAMES.get(c, s) for c, s, *_ in ERROR_CLASSES}, "no stub beside the table"
    # The hierarchy users catch today.
    assert issubclass(caerus.DeadlockVictim, TransactionLost)
    assert issubclass(caerus.InvalidArgument, ValueError) and issubclass(caerus.ConfigError, ValueError)


@pytest.fixture
def client(server):
    return DlsClient(endpoints=[server.endpoint])


async def test_a_deadlock_victim_carries_the_cycle(client):
    n = ns()
    older = await client.begin_transaction(name="older")
    younger = await client.begin_transaction(name="younger")
    try:
        await older.acquire_lock(n, "a")
        await younger.acquire_lock(n, "b")
        older_waits = asyncio.ensure_future(older.acquire_lock(n, "b", timeout_ms=30000))
        await eventually("older waits for b", lambda: _waiting(older))
        # Equal priorities: the default policy aborts the youngest.
        with pytest.raises(DeadlockVictim) as caught:
            await younger.acquire_lock(n, "a", timeout_ms=30000)
        err = caught.value
        assert err.end_cause == "DEADLOCK_VICTIM"
        assert err.deadlock is not None, "the victim's error carries the broken cycle"
        assert err.deadlock["victim_transaction_id"] == younger.id
        assert err.deadlock["policy"] == "LOWEST_PRIORITY_THEN_YOUNGEST"
        members = sorted((m["key"], m["transaction_id"], m["transaction_name"]) for m in err.deadlock["cycle"])
        assert members == [("a", younger.id, "younger"), ("b", older.id, "older")]
        assert (await older_waits).key == "b"
        await older.commit()
    finally:
        await older.abort()
        await younger.abort()


async def _waiting(tx) -> bool:
    return (await tx.status()).waiting is not None


async def _ended(client, tx_id: int, cause: str) -> bool:
    status = await client.transaction_status(tx_id)
    return status.state != "ACTIVE" and status.end_cause == cause


@pytest.mark.parametrize("cause", ["MAX_DURATION_EXCEEDED", "OPERATOR_ABORT"])
async def test_a_transaction_the_server_ended_says_why(client, cause):
    """The server ends the transaction (its maximum duration passed, or an operator aborted
    it); the holder's next call is refused with what ended it. The lease is long, so no
    heartbeat (every third of it) hears of the end first: the refusal is the server's."""
    n = ns()
    bound = 800 if cause == "MAX_DURATION_EXCEEDED" else None
    tx = await client.begin_transaction(timeout_ms=60000, max_duration_ms=bound)
    await tx.acquire_lock(n, "k")
    if cause == "OPERATOR_ABORT":
        await client.abort_transaction(tx.id, "test")
    await eventually(f"the server ended it ({cause})", lambda: _ended(client, tx.id, cause))
    with pytest.raises(TransactionLost) as caught:
        await tx.acquire_lock(n, "k2", timeout_ms=1000)
    assert not isinstance(caught.value, DeadlockVictim)
    assert (caught.value.code, caught.value.end_cause, caught.value.deadlock) == ("TRANSACTION_LOST", cause, None)
    # Now marked lost, the transaction keeps the cause: its lost reason and a later call say
    # the same (a reached maximum duration is not reported as a lapsed lease).
    assert tx.lost_reason.end_cause == cause
    with pytest.raises(TransactionLost) as again:
        await tx.acquire_lock(n, "k3", timeout_ms=1000)
    assert again.value.end_cause == cause

"""At most once per schedule slot (Transaction.claim_slot / finish_slot) against a real dls server."""

from __future__ import annotations

import uuid

import pytest

from caerus import DlsClient, InvalidArgument, SlotClaim, sync

HOUR_MS = 3_600_000


def ns() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


async def test_a_slot_runs_once_and_a_failed_one_again_only_when_asked(server):
    client = DlsClient(endpoints=[server.endpoint])
    n = ns()

    async def host(outcome: str, retry_failed: bool = False, exit_code=None) -> SlotClaim:
        async with client.transaction(timeout_ms=10_000) as tx:
            await tx.acquire_lock(n, "job")
            claim = await tx.claim_slot(n, "job", HOUR_MS, retry_failed=retry_failed)
            if claim.run:
                run = await tx.finish_slot(claim, outcome, exit_code)
                assert run.state == outcome and run.slot == claim.slot
            return claim

    first = await host("FAILED", exit_code=4)
    assert first.run and first.attempt == 1 and first.last_run is None
    skipped = await host("SUCCEEDED")
    if skipped.slot == first.slot:  # the same hour (the usual case)
        assert not skipped.run
        assert (skipped.last_run.state, skipped.last_run.exit_code) == ("FAILED", 4)
        retried = await host("SUCCEEDED", retry_failed=True)
        assert retried.run and retried.attempt == 2
        done = await host("SUCCEEDED", retry_failed=True)
        assert not done.run and done.last_run.state == "SUCCEEDED"


def test_sync_claim_needs_the_lock_held_exclusive_and_checks_the_outcome(server):
    client = sync.DlsClient(endpoints=[server.endpoint])
    n = ns()
    with client.transaction() as tx:
        with pytest.raises(InvalidArgument):
            tx.claim_slot(n, "job", HOUR_MS)
        tx.acquire_lock(n, "job")
        claim = tx.claim_slot(n, "job", HOUR_MS)
        assert claim.run
        with pytest.raises(ValueError):
            tx.finish_slot(claim, "MAYBE")
        run = tx.finish_slot(claim, "SUCCEEDED")
        assert (run.state, run.exit_code, run.period_ms) == ("SUCCEEDED", 0, HOUR_MS)

"""caerus.scheduling.once_per against a real dls server: several "hosts" (threads, each with its
own client) fire the same job at once and it runs once per slot; Celery in eager mode."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from celery import Celery

from caerus import sync
from caerus.scheduling import Skipped, current_claim, once_per, period_ms

DAY = timedelta(days=1)  # a slot long enough that no test run crosses into the next one
HOSTS = 6


def ns() -> str:
    return f"py-sched-{uuid.uuid4().hex[:12]}"


def fire_together(fns):
    """Calls each function on its own thread, all released at once; their results or exceptions."""
    barrier = threading.Barrier(len(fns))
    results = [None] * len(fns)

    def call(i):
        barrier.wait()
        try:
            results[i] = fns[i]()
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_hosts_firing_at_once_run_the_job_once_per_slot(server):
    n = ns()
    runs = []

    def host(i):
        @once_per(sync.DlsClient(endpoints=[server.endpoint]), n, "report", DAY, name=f"host-{i}")
        def report():
            runs.append(i)
            return f"done by host-{i}"

        return report

    jobs = [host(i) for i in range(HOSTS)]
    results = fire_together(jobs)
    assert len(runs) == 1, results
    ran = [r for r in results if not isinstance(r, Skipped)]
    assert ran == [f"done by host-{runs[0]}"]
    assert all(not r and r.reason in ("locked", "slot-done") for r in results if isinstance(r, Skipped))

    # A host whose scheduler fires late in the same slot finds it done, and who did it.
    late = jobs[(runs[0] + 1) % HOSTS]()
    assert isinstance(late, Skipped) and late.reason == "slot-done"
    assert (late.last_run.state, late.last_run.transaction_name) == ("SUCCEEDED", f"host-{runs[0]}")
    assert len(runs) == 1


def test_a_failed_run_raises_records_failed_and_reruns_only_with_retry_failed(server):
    client = sync.DlsClient(endpoints=[server.endpoint])
    n = ns()
    calls = []

    def job():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the payment provider said no")
        return "ok"

    plain = once_per(client, n, "charge", DAY)(job)
    retrying = once_per(client, n, "charge", DAY, retry_failed=True)(job)
    with pytest.raises(RuntimeError, match="said no"):
        plain()
    skipped = plain()
    assert skipped.reason == "slot-done" and skipped.last_run.state == "FAILED"
    assert retrying() == "ok"
    assert len(calls) == 2
    assert retrying().last_run.state == "SUCCEEDED"  # a succeeded slot is not rerun, even when asked


def test_endpoints_instead_of_a_client_the_current_claim_and_periods(server):
    claims = []
    job = once_per([server.endpoint], ns(), "job", "1d")(lambda: claims.append(current_claim()) or "ran")
    assert job() == "ran"
    skipped = job()
    assert not skipped and len(claims) == 1 and claims[0].run and claims[0].slot == skipped.slot
    assert current_claim() is None
    assert period_ms("500ms") == 500 and period_ms(90) == 90_000 and period_ms(timedelta(minutes=5)) == 300_000
    for bad in ("5 minutes", "0s", -1):
        with pytest.raises(ValueError):
            period_ms(bad)


def test_celery_task_fired_by_several_workers_runs_once_per_slot(server):
    app = Celery("billing", broker="memory://")
    app.conf.task_always_eager = True  # tasks run in the caller: no broker process in the test
    n = ns()
    runs = []

    @app.task(name="billing.monthly")
    @once_per([server.endpoint], n, "monthly-billing", DAY)
    def monthly_billing(cycle):
        runs.append(cycle)
        return f"billed {cycle}"

    results = fire_together([lambda: monthly_billing.apply(args=("2026-12",)).get() for _ in range(HOSTS)])
    assert runs == ["2026-12"], results
    assert sorted(map(str, results)).count("billed 2026-12") == 1
    assert isinstance(monthly_billing.delay("2026-12").get(), Skipped)

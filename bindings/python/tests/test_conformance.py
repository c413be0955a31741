"""The shared conformance scenarios (conformance/scenarios.json) through the asyncio SDK,
against the suite's real dls server: one test per scenario, raw-only ones skipped, and so
are those needing a capability this runner lacks (see CAPABILITIES).

The mapping of each op onto the SDK follows "Writing an SDK runner" in
conformance/README.md. ``expect_queued`` reads the queue from ``client.list_locks`` rather
than the acquire's ``on_queued`` callback (the server computes the waiter's position and
blockers there from the same queue as the acquire stream's ``queued`` messages). Mode
SEMAPHORE goes to ``tx.acquire_permit``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pytest

from caerus import DlsClient, DlsError, LockMode, TransactionStatus

SCENARIOS_FILE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "conformance", "scenarios.json")
with open(SCENARIOS_FILE, encoding="utf-8") as f:
    SCENARIOS: List[Dict[str, Any]] = json.load(f)["scenarios"]

# How long a step waits for the server: a hang guard, not a timing assertion.
PATIENCE_S = 30.0
POLL_S = 0.01
RUN_ID = uuid.uuid4().hex[:6]
# What this runner can express of the scenarios' `needs` (conformance/README.md
# "Capabilities"); a scenario needing anything else is skipped, saying why.
CAPABILITIES: frozenset = frozenset({"permits"})
# Why each capability missing from CAPABILITIES is missing (none is, so far).
WHY_NOT: Dict[str, str] = {}


class StepFailed(AssertionError):
    pass


def check(what: str, got: Any, want: Any) -> None:
    if got != want:
        raise StepFailed(f"{what}: expected {want!r}, got {got!r}")


# The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
GRANT_CHECKS = ("mode", "token_equals", "token_greater_than", "save_token")


class Background:
    """An acquire (``op`` "acquire") or acquire_all started with ``"wait": false``, running
    as a task until ``await``; ``keys`` are the (namespace, key) pairs it asked for."""

    def __init__(self, tx, op: str, keys: List[Tuple[str, str]], coro) -> None:
        self.tx, self.op, self.keys = tx, op, keys
        self.task = asyncio.ensure_future(coro)

    async def outcome(self):
        """("ok", the lock or, for acquire_all, the locks) or ("error", DlsError)."""
        try:
            return "ok", await asyncio.wait_for(asyncio.shield(self.task), 2 * PATIENCE_S)
        except DlsError as e:
            return "error", e


class Scenario:
    def __init__(self, client: DlsClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.txns: Dict[str, Any] = {}
        self.tokens: Dict[str, int] = {}
        self.handles: Dict[str, Background] = {}
        self.watches: Dict[str, Any] = {}

    # --- values -------------------------------------------------------------------------

    def text(self, value: Any) -> str:
        if isinstance(value, dict):
            value = value["repeat"] * value["times"]
        if not isinstance(value, str):
            raise StepFailed(f"expected a string, got {value!r}")
        return value.replace("${ns}", self.ns)

    def field(self, step: dict, name: str, default: str) -> str:
        return self.text(step.get(name, default))

    def txn(self, step: dict):
        if "txn_id" in step:
            raise StepFailed("a literal txn_id cannot be expressed through the SDK (raw-only)")
        name = step["txn"]
        if name not in self.txns:
            raise StepFailed(f"transaction {name!r} was not begun")
        return self.txns[name]

    def token(self, name: str) -> int:
        if name not in self.tokens:
            raise StepFailed(f"no saved token {name!r}")
        return self.tokens[name]

    @staticmethod
    def mode(step: dict) -> str:
        mode = step.get("mode", "EXCLUSIVE")
        if mode not in ("EXCLUSIVE", "SHARED_READ", "SEMAPHORE"):
            raise StepFailed(f"mode {mode!r} cannot be expressed through the SDK (raw-only)")
        return mode

    @staticmethod
    async def call(step: dict, coro):
        """Runs the call and compares its outcome with ``expect``: the ``ok`` checks (a
        dict) when it succeeded as expected, None when the expected error happened."""
        expect = step.get("expect", {"ok": {}})
        try:
            value = await coro
        except DlsError as e:
            if "error" not in expect:
                raise StepFailed(f"expected ok, got {e.code}: {e.message}") from e
            # Only the kind and the message are visible through an SDK; the gRPC code is a
            # raw-client check.
            want = expect["error"]
            if e.code != want["kind"]:
                raise StepFailed(f"expected error {want['kind']}, got {e.code}: {e.message}") from e
            words = want.get("message_contains")
            if words is not None and words not in e.message:
                raise StepFailed(f"expected error {want['kind']} saying {words!r}, got {e.code}: {e.message}") from e
            return None, None
        if "error" in expect:
            want = expect["error"]
            raise StepFailed(f"expected error {want.get('code')}/{want.get('kind')}, got ok")
        return expect.get("ok") or {}, value

    # --- running ------------------------------------------------------------------------

    async def run(self, spec: dict) -> None:
        try:
            for i, step in enumerate(spec["steps"], 1):
                try:
                    await self.step(step)
                except Exception as e:
                    raise StepFailed(f"step {i} ({step.get('op')}): {e}") from e
        finally:
            # Leave nothing behind for later scenarios, whatever happened.
            for h in self.handles.values():
                h.task.cancel()
            self.watches.clear()
            for tx in self.txns.values():
                try:
                    await tx.abort()
                except DlsError:
                    pass

    async def step(self, step: dict) -> None:
        op = step["op"]
        if op == "begin":
            name = self.field(step, "name", "")
            checks, tx = await self.call(
                step,
                self.client.begin_transaction(
                    timeout_ms=step.get("timeout_ms", 15000),
                    priority=step.get("priority", 0),
                    name=name or None,
                    max_duration_ms=step.get("max_duration_ms"),
                    lost_stream=step.get("lost_stream", False),
                ),
            )
            if checks is not None:
                if "lease_timeout_ms" in checks:
                    check("lease_timeout_ms", tx.lease_ms, checks["lease_timeout_ms"])
                if "same_txn_as" in checks:
                    check("transaction id", tx.id, self.txns[checks["same_txn_as"]].id)
                self.txns[step["txn"]] = tx
        elif op == "acquire":
            tx = self.txn(step)
            namespace, key = self.field(step, "namespace", "${ns}"), self.field(step, "key", "")
            mode, timeout_ms, permits = self.mode(step), step.get("timeout_ms", 10000), step.get("permits", 0)
            if mode == "SEMAPHORE":
                # A permit, of any count (the server judges it).
                coro = tx.acquire_permit(namespace, key, permits, timeout_ms=timeout_ms)
            elif permits:
                raise StepFailed("permits with a lock mode cannot be expressed through the SDK (raw-only)")
            else:
                coro = tx.acquire_lock(namespace, key, mode, timeout_ms=timeout_ms)
            if step.get("wait", True) is False:
                self.handles[step["handle"]] = Background(tx, op, [(namespace, key)], coro)
                return
            checks, lock = await self.call(step, coro)
            self.check_grant(checks, lock)
        elif op == "acquire_all":
            tx = self.txn(step)
            wanted = [(self.field(w, "namespace", "${ns}"), self.field(w, "key", ""), self.mode(w)) for w in step["locks"]]
            coro = tx.acquire_locks(wanted, timeout_ms=step.get("timeout_ms", 10000))
            if step.get("wait", True) is False:
                self.handles[step["handle"]] = Background(tx, op, [(ns, key) for ns, key, _ in wanted], coro)
                return
            checks, locks = await self.call(step, coro)
            self.check_grants(checks, locks)
        elif op == "expect_queued":
            await self.expect_queued(step)
        elif op == "await":
            h = self.handles[step["handle"]]
            kind, value = await h.outcome()

            async def replay():
                if kind == "error":
                    raise value
                return value

            checks, granted = await self.call(step, replay())
            if h.op == "acquire_all":
                self.check_grants(checks, granted)
            else:
                self.check_grant(checks, granted)
        elif op == "downgrade":
            tx = self.txn(step)
            checks, lock = await self.call(
                step, tx.downgrade(self.field(step, "namespace", "${ns}"), self.field(step, "key", ""))
            )
            if checks is not None:
                if "held" in checks:
                    check("held", lock is not None, checks["held"])
                if lock is not None:
                    self.check_grant(checks, lock)
                elif any(c in checks for c in GRANT_CHECKS):
                    raise StepFailed("grant checks on a lock that is not held (held=false)")
        elif op == "verify_token":
            token = step["token"]
            checks, answer = await self.call(
                step,
                self.client.verify_fencing_token(
                    self.field(step, "namespace", "${ns}"),
                    self.field(step, "key", ""),
                    self.token(token) if isinstance(token, str) else token,
                ),
            )
            if checks is not None:
                if "current" in checks:
                    check("current", answer.current, checks["current"])
                if "current_tokens" in checks:
                    # Sorted, so the holders compare as a set.
                    want = sorted(self.token(n) for n in checks["current_tokens"])
                    check("current_tokens", sorted(answer.current_tokens), want)
        elif op == "release":
            tx = self.txn(step)
            checks, released = await self.call(
                step, tx.release(self.field(step, "namespace", "${ns}"), self.field(step, "key", ""))
            )
            if checks is not None and "released" in checks:
                check("released", released, checks["released"])
        elif op == "status":
            if "txn_id" in step:
                coro = self.client.transaction_status(step["txn_id"])
            else:
                coro = self.txn(step).status()
            checks, status = await self.call(step, coro)
            if checks is not None:
                self.check_status(checks, status)
        elif op == "heartbeat":
            # The SDK heartbeats by itself; the scenario's later status shows the lease was
            # kept. Heartbeat errors are only expected in raw-only scenarios.
            self.txn(step)
            if "error" in step.get("expect", {}):
                raise StepFailed("an explicit heartbeat error cannot be expressed through the SDK (raw-only)")
        elif op == "end":
            tx = self.txn(step)
            commit = step.get("commit", True)
            checks, _ = await self.call(step, tx.commit() if commit else tx.abort())
            if checks is not None and "state" in checks:
                # The state is implied by the call succeeding; released_locks is not exposed.
                check("state", "COMMITTED" if commit else "ABORTED", checks["state"])
        elif op == "await_status":
            # The SDK heartbeats by itself: `heartbeat` needs nothing more here.
            await self.await_status(step)
        elif op == "sleep_ms":
            await asyncio.sleep(step["ms"] / 1000)
        elif op == "watch":
            if "resume" in step:
                raise StepFailed("a watch cursor cannot be expressed through the SDK (raw-only)")
            checks, watch = await self.call(
                step, self.client.watch_key(self.field(step, "namespace", "${ns}"), self.field(step, "key", ""))
            )
            if checks is not None:
                self.watches[step["handle"]] = watch
                first = await self.next_update(watch)
                if "initial" in checks:
                    check("initial", first.initial, checks["initial"])
                self.check_watch(checks, first.holders, first.changes)
        elif op == "expect_watch":
            watch = self.watches[step["handle"]]
            checks = step.get("expect", {}).get("ok", {})
            changes: List[Any] = []
            while True:
                update = await self.next_update(watch)
                changes += update.changes
                if len(changes) >= len(checks.get("changes", [])):
                    break
            self.check_watch(checks, update.holders, changes)
        elif op == "unwatch":
            del self.watches[step["handle"]]
        elif op == "expect_lost":
            tx = self.txn(step)
            within = step.get("within_ms", PATIENCE_S * 1000) / 1000
            try:
                reason = await asyncio.wait_for(tx.lost(), within)
            except asyncio.TimeoutError:
                raise StepFailed(f"the transaction was not reported lost within {within * 1000:.0f} ms") from None
            checks = step.get("expect", {}).get("ok", {})
            # end_cause (the server's LockStreamLost) is not visible through the SDK: its kind is.
            if "lost_kind" in checks:
                check("lost kind", reason.kind, checks["lost_kind"])
        elif op == "set_lock_delay":
            checks, previous = await self.call(
                step, self.client.set_lock_delay(self.field(step, "namespace_prefix", "${ns}"), step.get("delay_ms", 0))
            )
            if checks is not None and "previous_delay_ms" in checks:
                check("previous_delay_ms", previous, checks["previous_delay_ms"])
        elif op == "lock_delays":
            checks, rules = await self.call(step, self.client.lock_delays())
            if checks is not None and "rules" in checks:
                # Only this scenario's rules: other runs may share the server.
                got = [(r.namespace_prefix, r.delay_ms) for r in rules if r.namespace_prefix.startswith(self.ns)]
                want = [(self.field(w, "namespace_prefix", ""), w.get("delay_ms", 0)) for w in checks["rules"]]
                check("rules", got, want)
        elif op == "operator_abort":
            checks, state = await self.call(
                step, self.client.abort_transaction(self.txn(step).id, self.field(step, "reason", ""))
            )
            if checks is not None and "state" in checks:
                check("state", state, checks["state"])
        elif op == "list_key":
            namespace, key = self.field(step, "namespace", "${ns}"), self.field(step, "key", "")
            checks, listing = await self.call(step, self.client.list_locks(namespace))
            if checks is not None:
                listed = [k for k in listing if k.namespace == namespace and k.key == key]
                self.check_listed(checks, listed[0] if listed else None)
        elif op == "expect_streams_closed":
            # The SDK shows no stream; it must not have reported the transaction lost.
            reason = self.txn(step).lost_reason
            if reason is not None:
                raise StepFailed(f"the transaction was reported lost: {reason.kind}: {reason.message}")
        else:
            raise StepFailed(f"unknown op {op!r}")

    def check_listed(self, checks: dict, k) -> None:
        """list_key's checks on the key's ``list_locks`` entry (None: the key is not listed,
        so it has no holders, waiters or delay)."""
        if "listed" in checks:
            check("listed", k is not None, checks["listed"])
        mode = lambda e: getattr(e["mode"], "value", e["mode"])  # noqa: E731
        for field in ("holders", "waiters"):
            if field not in checks:
                continue
            got = getattr(k, field) if k is not None else []
            shown = [f"txn {e['transaction_id']} {mode(e)}" for e in got]
            if len(got) != len(checks[field]):
                raise StepFailed(f"number of {field}: expected {len(checks[field])}, got {shown}")
            for i, (w, e) in enumerate(zip(checks[field], got)):
                what = f"{field}[{i}]"
                if "txn" in w:
                    check(f"{what} transaction (want {w['txn']})", e["transaction_id"], self.txn(w).id)
                if "mode" in w:
                    check(f"{what} mode", mode(e), w["mode"])
                if "token" in w:
                    check(f"{what} fencing token (want {w['token']})", e["fencing_token"], self.token(w["token"]))
        if "delay" in checks:
            d, w = (k.delay if k is not None else None), checks["delay"]
            shown = d and f"until {d.until_ms} ms by txn {d.transaction_id} ({d.cause})"
            if w is None:
                if d is not None:
                    raise StepFailed(f"expected no delay, got {shown}")
            elif d is None:
                raise StepFailed("expected a delay, got none")
            else:
                if "txn" in w:
                    check(f"delay transaction (want {w['txn']})", d.transaction_id, self.txn(w).id)
                if "cause" in w:
                    check("delay cause", d.cause, w["cause"])

    @staticmethod
    async def next_update(watch):
        try:
            return await asyncio.wait_for(watch.__anext__(), PATIENCE_S)
        except asyncio.TimeoutError:
            raise StepFailed(f"no key watch update within {PATIENCE_S} s") from None
        except StopAsyncIteration:
            raise StepFailed("the key watch ended") from None

    @staticmethod
    def show_holder(h) -> str:
        return f"txn {h.transaction_id} {h.transaction_name!r} {h.mode.value}#{h.fencing_token}"

    def check_holder(self, what: str, w: dict, h) -> None:
        if "txn" in w:
            check(f"{what} transaction (want {w['txn']})", h.transaction_id, self.txn(w).id)
        if "name" in w:
            check(f"{what} transaction_name", h.transaction_name, self.text(w["name"]))
        if "mode" in w:
            check(f"{what} mode", h.mode.value, w["mode"])
        if "token" in w:
            check(f"{what} fencing token (want {w['token']})", h.fencing_token, self.token(w["token"]))

    def check_watch(self, checks: dict, holders, changes) -> None:
        """``holders`` in order, exactly; ``changes`` in order, exactly."""
        if "save_cursor" in checks:
            raise StepFailed("a watch cursor cannot be expressed through the SDK (raw-only)")
        try:
            if "holders" in checks:
                check("number of holders", len(holders), len(checks["holders"]))
                for i, (w, h) in enumerate(zip(checks["holders"], holders)):
                    self.check_holder(f"holders[{i}]", w, h)
            if "changes" in checks:
                check("number of changes", len(changes), len(checks["changes"]))
                for i, (w, c) in enumerate(zip(checks["changes"], changes)):
                    if "kind" in w:
                        check(f"changes[{i}] kind", c.kind, w["kind"])
                    if "end_cause" in w:
                        check(f"changes[{i}] end_cause", c.end_cause, w["end_cause"])
                    self.check_holder(f"changes[{i}]", w, c.holder)
        except StepFailed as e:
            shown = [f"{c.kind} {self.show_holder(c.holder)} ({c.end_cause})" for c in changes]
            raise StepFailed(f"{e}; holders {[self.show_holder(h) for h in holders]}, changes {shown}") from e

    async def expect_queued(self, step: dict) -> None:
        h = self.handles[step["handle"]]
        position = step["position"]
        blockers = [self.txns[name].id for name in step.get("blocked_by", [])]
        deadline = time.monotonic() + PATIENCE_S
        seen = None
        while True:
            if h.task.done():
                kind, value = await h.outcome()
                how = "granted" if kind == "ok" else f"error {value.code}: {value.message}"
                raise StepFailed(f"acquire ended ({how}) before queued position {position}; last seen {seen}")
            # The transaction's entries in the queues of the keys it asked for. An acquire_all
            # waits in several: like its queued messages, take the furthest position and
            # every blocker.
            waiters = []
            for namespace in {ns for ns, _ in h.keys}:
                for k in await self.client.list_locks(namespace):
                    if (k.namespace, k.key) in h.keys:
                        waiters += [w for w in k.waiters if w["transaction_id"] == h.tx.id]
            blocking = {b for w in waiters for b in w["blocking_transaction_ids"]}
            seen = waiters and {"position": max(w["position"] for w in waiters), "blocking": sorted(blocking)}
            if waiters and seen["position"] == position:
                missing = [b for b in blockers if b not in blocking]
                if missing:
                    raise StepFailed(f"queued at {position} but not blocked by {missing}; blockers {sorted(blocking)}")
                return
            if time.monotonic() > deadline:
                raise StepFailed(f"no queued position {position} within {PATIENCE_S} s; last seen {seen}")
            await asyncio.sleep(POLL_S)

    def check_grants(self, checks: Optional[dict], locks) -> None:
        """acquire_all's ``locks`` check against the grants in the order asked; each entry's
        saved token is stored before the next entry is checked."""
        if checks is None or "locks" not in checks:
            return
        got = [f"{l.key}:{l.mode.value}#{l.fencing_token}" for l in locks]
        if len(locks) != len(checks["locks"]):
            raise StepFailed(f"locks: expected {len(checks['locks'])} grants, got {got}")
        for i, (w, lock) in enumerate(zip(checks["locks"], locks)):
            want = (self.field(w, "namespace", "${ns}"), self.field(w, "key", ""))
            check(f"locks[{i}] lock", (lock.namespace, lock.key), want)
            try:
                self.check_grant(w, lock)
            except StepFailed as e:
                raise StepFailed(f"locks[{i}]: {e}") from e

    def check_grant(self, checks: Optional[dict], lock) -> None:
        if checks is None:
            return
        if "mode" in checks:
            check("mode", lock.mode.value, checks["mode"])
        if "token_equals" in checks:
            check("fencing token", lock.fencing_token, self.token(checks["token_equals"]))
        if "token_greater_than" in checks:
            t = self.token(checks["token_greater_than"])
            if lock.fencing_token <= t:
                raise StepFailed(f"fencing token {lock.fencing_token} is not greater than {t}")
        if "save_token" in checks:
            self.tokens[checks["save_token"]] = lock.fencing_token

    async def await_status(self, step: dict) -> None:
        """Polls the transaction's status until the step's ok checks hold; an ended
        transaction no longer changes, so a mismatch then fails."""
        checks = step.get("expect", {}).get("ok", {})
        deadline = time.monotonic() + step.get("within_ms", PATIENCE_S * 1000) / 1000
        while True:
            status = await self.txn(step).status()
            try:
                self.check_status(checks, status)
                return
            except StepFailed as e:
                if status.state != "ACTIVE" or time.monotonic() > deadline:
                    raise StepFailed(f"{e} (state {status.state})") from e
            await asyncio.sleep(0.05)

    def check_status(self, checks: dict, s: TransactionStatus) -> None:
        if "state" in checks:
            check("state", s.state, checks["state"])
        if "name" in checks:
            check("name", s.name or "", self.text(checks["name"]))
        if "priority" in checks:
            check("priority", s.priority, checks["priority"])
        if "lease_timeout_ms" in checks:
            check("lease_timeout_ms", s.lease_timeout_ms, checks["lease_timeout_ms"])
        if "end_cause" in checks:
            check("end_cause", s.end_cause, checks["end_cause"])
        if "locks" in checks:
            show = lambda l: f"{l.key}:{l.mode.value}#{l.fencing_token}"  # noqa: E731
            got = [show(l) for l in s.locks]
            unmatched = list(s.locks)
            for w in checks["locks"]:
                namespace, key = self.field(w, "namespace", "${ns}"), self.field(w, "key", "")
                token = self.token(w["token"]) if "token" in w else None
                hit = next(
                    (
                        l
                        for l in unmatched
                        if l.namespace == namespace
                        and l.key == key
                        and l.mode.value == w["mode"]
                        and (token is None or l.fencing_token == token)
                    ),
                    None,
                )
                if hit is None:
                    raise StepFailed(f"locks: no {key}:{w['mode']}{'' if token is None else f'#{token}'} in {got}")
                unmatched.remove(hit)
            if unmatched:
                raise StepFailed(f"locks: unexpected {[show(l) for l in unmatched]} in {got}")
        if "waiting" in checks:
            w, p = checks["waiting"], s.waiting
            if w is None:
                if p is not None:
                    raise StepFailed(f"expected no pending wait, got {p.key}:{p.mode.value} at {p.position}")
            elif p is None:
                raise StepFailed("expected a pending wait, got none")
            else:
                check("waiting.namespace", p.namespace, self.field(w, "namespace", "${ns}"))
                check("waiting.key", p.key, self.field(w, "key", ""))
                if "mode" in w:
                    check("waiting.mode", p.mode.value, w["mode"])
                if "position" in w:
                    check("waiting.position", p.position, w["position"])


@pytest.mark.parametrize("spec", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
async def test_scenario(server, spec):
    if spec.get("raw_only"):
        reason = f"raw only: {spec.get('why_raw_only', '')}"
        print(f"SKIP {spec['name']} ({reason})")
        pytest.skip(reason)
    lacking = [n for n in spec.get("needs", []) if n not in CAPABILITIES]
    if lacking:
        reason = "; ".join(f"needs {n}: {WHY_NOT.get(n, 'not implemented by this runner')}" for n in lacking)
        print(f"SKIP {spec['name']} ({reason})")
        pytest.skip(reason)
    ns = f"cf-py-{RUN_ID}-{SCENARIOS.index(spec):02d}"
    await Scenario(DlsClient(endpoints=[server.endpoint]), ns).run(spec)

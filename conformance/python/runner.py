#!/usr/bin/env python3
"""Conformance runner for the raw grpcio client generated into sdks/python.

Interprets conformance/scenarios.json (format: conformance/README.md) against a running
Caerus DLS server and prints one line per scenario. Exit status 1 if any scenario failed.
"""

import argparse
import json
import os
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# How long a step may wait for the server before the runner gives up: a guard against a
# hang, not a timing assertion.
PATIENCE_S = 30.0
UNKNOWN = object()
# The ok checks made on a granted lock (acquire, await, downgrade, each acquire_all entry).
GRANT_CHECKS = ("mode", "token_equals", "token_greater_than", "save_token")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--endpoint", default="127.0.0.1:7070", help="HOST:PORT of any node (default 127.0.0.1:7070)")
    p.add_argument("--api-key", default=os.environ.get("CAERUS_API_KEY"), help="sent as authorization: Bearer KEY")
    p.add_argument("--scenarios", default=os.path.join(os.path.dirname(HERE), "scenarios.json"))
    p.add_argument("--only", action="append", default=[], help="run only this scenario (repeatable)")
    p.add_argument("--sdk-path", default=os.path.join(REPO, "sdks", "python"),
                   help="directory holding the generated caerus/dls/v1 package (default sdks/python)")
    return p.parse_args()


ARGS = parse_args()
sys.path.insert(0, ARGS.sdk_path)

import grpc  # noqa: E402
from caerus.dls.v1 import lock_service_pb2 as pb  # noqa: E402
from caerus.dls.v1 import lock_service_pb2_grpc as pb_grpc  # noqa: E402


class StepFailed(Exception):
    pass


class Outcome:
    """What a call ended with: a value, or a gRPC status code name and x-dls-error kind."""

    def __init__(self, value=None, code=None, kind=None, message=""):
        self.value, self.code, self.kind, self.message = value, code, kind, message

    @property
    def ok(self):
        return self.code is None

    def describe(self):
        if self.ok:
            return "ok"
        return f"error {self.code}/{self.kind or '-'} ({self.message})"


def metadata_of(err, key):
    for k, v in (err.trailing_metadata() or ()):
        if k == key:
            return v
    return None


class Connection:
    """One channel to the node currently believed to lead; follows x-dls-leader-addr."""

    def __init__(self, endpoint, api_key):
        self.lock = threading.Lock()
        self.metadata = [("authorization", f"Bearer {api_key}")] if api_key else []
        self.endpoint = None
        self.connect(endpoint)

    def connect(self, endpoint):
        with self.lock:
            if endpoint == self.endpoint:
                return
            self.endpoint = endpoint
            self.channel = grpc.insecure_channel(endpoint)
            self.stub = pb_grpc.LockServiceStub(self.channel)

    def should_retry(self, err, deadline):
        """UNAVAILABLE means not the leader (follow the hint) or no leader yet (back off)."""
        if err.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
            return False
        leader = metadata_of(err, "x-dls-leader-addr")
        if leader:
            self.connect(leader)
        else:
            time.sleep(0.1)
        return True

    def unary(self, method, request):
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                value = getattr(self.stub, method)(request, metadata=self.metadata, timeout=PATIENCE_S)
                return Outcome(value)
            except grpc.RpcError as err:
                if self.should_retry(err, deadline):
                    continue
                return Outcome(code=err.code().name, kind=metadata_of(err, "x-dls-error"), message=err.details())

    def acquire(self, request, on_queued):
        """Follows the AcquireLock (or, for an AcquireLocksRequest, the AcquireLocks) stream
        to its grant or final status, re-attaching with the same request_id when the serving
        node stops leading. The grant is a Granted, or a LocksGranted for AcquireLocks."""
        method = "AcquireLocks" if isinstance(request, pb.AcquireLocksRequest) else "AcquireLock"
        deadline = time.monotonic() + request.timeout_ms / 1000.0 + PATIENCE_S
        while True:
            try:
                for msg in getattr(self.stub, method)(request, metadata=self.metadata):
                    which = msg.WhichOneof("event")
                    if which == "queued":
                        on_queued(msg.queued)
                    elif which == "granted":
                        return Outcome(msg.granted)
                return Outcome(code="UNKNOWN", message="stream ended without a grant or a status")
            except grpc.RpcError as err:
                if self.should_retry(err, deadline):
                    continue
                return Outcome(code=err.code().name, kind=metadata_of(err, "x-dls-error"), message=err.details())


class Background:
    """A background AcquireLock or AcquireLocks: its queued messages and, once over, its outcome."""

    def __init__(self, conn, request):
        self.cond = threading.Condition()
        self.queued = []
        self.consumed = 0
        self.outcome = None
        self.thread = threading.Thread(target=self.run, args=(conn, request), daemon=True)
        self.thread.start()

    def run(self, conn, request):
        def on_queued(q):
            with self.cond:
                self.queued.append(q)
                self.cond.notify_all()

        outcome = conn.acquire(request, on_queued)
        with self.cond:
            self.outcome = outcome
            self.cond.notify_all()

    def wait_queued(self, position):
        deadline = time.monotonic() + PATIENCE_S
        with self.cond:
            while True:
                while self.consumed < len(self.queued):
                    q = self.queued[self.consumed]
                    self.consumed += 1
                    if q.position == position:
                        return q
                if self.outcome is not None:
                    seen = [q.position for q in self.queued]
                    raise StepFailed(f"acquire ended ({self.outcome.describe()}) before queued position "
                                     f"{position}; positions seen {seen}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepFailed(f"no queued position {position} within {PATIENCE_S:.0f}s; "
                                     f"positions seen {[q.position for q in self.queued]}")
                self.cond.wait(left)

    def wait_outcome(self):
        self.thread.join(PATIENCE_S + 3700)
        if self.outcome is None:
            raise StepFailed("background acquire did not finish")
        return self.outcome


class Scenario:
    def __init__(self, conn, spec, ns):
        self.conn, self.spec, self.ns = conn, spec, ns
        self.txns = {}
        self.tokens = {}
        self.handles = {}
        self.last = None  # the value of the step's outcome, for the ok checks

    # ---- values -------------------------------------------------------------------------
    def text(self, value):
        if isinstance(value, dict):
            return self.text(value["repeat"]) * value["times"]
        return value.replace("${ns}", self.ns)

    def field(self, step, name, default=""):
        return self.text(step[name]) if name in step else self.text(default)

    def txn_id(self, step):
        if "txn_id" in step:
            return step["txn_id"]
        name = step["txn"]
        if name not in self.txns:
            raise StepFailed(f"transaction {name!r} was not begun")
        return self.txns[name]

    def request_id(self, step):
        # A raw client picks an id itself so that its own retries stay safe.
        return self.field(step, "request_id") if "request_id" in step else str(uuid.uuid4())

    @staticmethod
    def mode(step):
        m = step.get("mode", "EXCLUSIVE")
        return m if isinstance(m, int) else pb.LockMode.Value(m)

    def token(self, name):
        if name not in self.tokens:
            raise StepFailed(f"no saved token {name!r}")
        return self.tokens[name]

    # ---- checks -------------------------------------------------------------------------
    def check_outcome(self, step, outcome):
        """Compares success/failure with `expect`; returns the ok checks (or None)."""
        self.last = outcome.value
        expect = step.get("expect", {"ok": {}})
        if "error" in expect:
            want = expect["error"]
            if outcome.ok:
                raise StepFailed(f"expected error {want['code']}/{want['kind']}, got ok")
            if outcome.code != want["code"] or outcome.kind != want["kind"]:
                raise StepFailed(f"expected error {want['code']}/{want['kind']}, got {outcome.describe()}")
            return None
        if not outcome.ok:
            raise StepFailed(f"expected ok, got {outcome.describe()}")
        return expect.get("ok", {})

    @staticmethod
    def eq(what, got, want):
        if got != want:
            raise StepFailed(f"{what}: expected {want!r}, got {got!r}")

    def check_grant(self, checks, g):
        if "mode" in checks:
            self.eq("mode", pb.LockMode.Name(g.mode), checks["mode"])
        if "token_equals" in checks:
            self.eq("fencing token", g.fencing_token, self.token(checks["token_equals"]))
        if "token_greater_than" in checks:
            floor = self.token(checks["token_greater_than"])
            if not g.fencing_token > floor:
                raise StepFailed(f"fencing token {g.fencing_token} is not greater than "
                                 f"{checks['token_greater_than']}={floor}")
        if "save_token" in checks:
            self.tokens[checks["save_token"]] = g.fencing_token

    def check_status(self, checks, s):
        if "state" in checks:
            self.eq("state", pb.TransactionState.Name(s.state), checks["state"])
        for f in ("name", "priority", "lease_timeout_ms"):
            if f in checks:
                self.eq(f, getattr(s, f), self.text(checks[f]) if f == "name" else checks[f])
        if "end_cause" in checks:
            self.eq("end_cause", pb.EndCause.Name(s.end_cause).removeprefix("END_CAUSE_"), checks["end_cause"])
        if "locks" in checks:
            got = sorted((h.namespace, h.key, pb.LockMode.Name(h.mode), h.fencing_token) for h in s.locks)
            want = []
            for w in checks["locks"]:
                token = self.token(w["token"]) if "token" in w else UNKNOWN
                want.append((self.field(w, "namespace", "${ns}"), self.text(w["key"]), w["mode"], token))
            unmatched = list(got)
            for w in want:
                hit = next((g for g in unmatched if g[:3] == w[:3] and (w[3] is UNKNOWN or g[3] == w[3])), None)
                if hit is None:
                    raise StepFailed(f"locks: expected {self.show(want)}, got {self.show(got)}")
                unmatched.remove(hit)
            if unmatched:
                raise StepFailed(f"locks: expected {self.show(want)}, got {self.show(got)}")
        if "waiting" in checks:
            w = checks["waiting"]
            if w is None:
                if s.HasField("waiting"):
                    raise StepFailed(f"expected no pending wait, got {s.waiting.key} at {s.waiting.position}")
            else:
                if not s.HasField("waiting"):
                    raise StepFailed("expected a pending wait, got none")
                self.eq("waiting.key", s.waiting.key, self.text(w["key"]))
                self.eq("waiting.namespace", s.waiting.namespace, self.field(w, "namespace", "${ns}"))
                if "mode" in w:
                    self.eq("waiting.mode", pb.LockMode.Name(s.waiting.mode), w["mode"])
                if "position" in w:
                    self.eq("waiting.position", s.waiting.position, w["position"])

    def check_grants(self, checks, granted):
        """The ok checks of acquire_all: `locks` against the grants in the order asked (saved
        tokens are stored as each entry is checked, so later entries may compare with them)."""
        if "locks" not in checks:
            return
        got = [f"{g.key}:{pb.LockMode.Name(g.mode)}#{g.fencing_token}" for g in granted.locks]
        if len(granted.locks) != len(checks["locks"]):
            raise StepFailed(f"locks: expected {len(checks['locks'])} grants, got {got}")
        for i, (w, g) in enumerate(zip(checks["locks"], granted.locks)):
            self.eq(f"locks[{i}] lock", (g.namespace, g.key), (self.field(w, "namespace", "${ns}"), self.text(w["key"])))
            try:
                self.check_grant(w, g)
            except StepFailed as e:
                raise StepFailed(f"locks[{i}]: {e}") from e

    def check_downgrade(self, checks, d):
        if "held" in checks:
            self.eq("held", d.held, checks["held"])
        if d.held:
            self.check_grant(checks, d.lock)
        elif any(c in checks for c in GRANT_CHECKS):
            raise StepFailed("grant checks on a lock that is not held (held=false)")

    def check_verify(self, checks, v):
        if "current" in checks:
            self.eq("current", v.current, checks["current"])
        if "current_tokens" in checks:
            self.eq("current_tokens", sorted(v.current_tokens), sorted(self.token(n) for n in checks["current_tokens"]))

    @staticmethod
    def show(locks):
        return [f"{k}:{m}" + ("" if t is UNKNOWN else f"#{t}") for _, k, m, t in locks]

    # ---- steps --------------------------------------------------------------------------
    def acquire_request(self, step):
        return pb.AcquireLockRequest(
            transaction_id=self.txn_id(step), namespace=self.field(step, "namespace", "${ns}"),
            key=self.field(step, "key"), mode=self.mode(step), timeout_ms=step.get("timeout_ms", 10000),
            request_id=self.request_id(step))

    def acquire_all_request(self, step):
        locks = [pb.LockRequest(namespace=self.field(w, "namespace", "${ns}"), key=self.field(w, "key"), mode=self.mode(w))
                 for w in step["locks"]]
        return pb.AcquireLocksRequest(transaction_id=self.txn_id(step), locks=locks,
                                      timeout_ms=step.get("timeout_ms", 10000), request_id=self.request_id(step))

    def check_acquired(self, op, checks, value):
        """The ok checks of an `acquire` (one grant) or `acquire_all` (every grant) step."""
        if op == "acquire_all":
            self.check_grants(checks, value)
        else:
            self.check_grant(checks, value)

    def run_step(self, step):
        op = step["op"]
        if op == "begin":
            req = pb.BeginTransactionRequest(timeout_ms=step.get("timeout_ms", 15000), priority=step.get("priority", 0),
                                             name=self.field(step, "name"), request_id=self.request_id(step),
                                             max_duration_ms=step.get("max_duration_ms", 0))
            out = self.conn.unary("BeginTransaction", req)
            checks = self.check_outcome(step, out)
            if checks is not None:
                self.txns[step["txn"]] = out.value.transaction_id
                if "lease_timeout_ms" in checks:
                    self.eq("lease_timeout_ms", out.value.lease_timeout_ms, checks["lease_timeout_ms"])
                if "same_txn_as" in checks:
                    self.eq("transaction id", out.value.transaction_id, self.txns[checks["same_txn_as"]])
        elif op in ("acquire", "acquire_all"):
            req = self.acquire_request(step) if op == "acquire" else self.acquire_all_request(step)
            if step.get("wait", True) is False:
                self.handles[step["handle"]] = (Background(self.conn, req), step)
                return
            checks = self.check_outcome(step, self.conn.acquire(req, lambda q: None))
            if checks is not None:
                self.check_acquired(op, checks, self.last)
        elif op == "expect_queued":
            bg = self.handle(step)
            q = bg.wait_queued(step["position"])
            blockers = set(q.blocking_transaction_ids)
            for name in step.get("blocked_by", []):
                if self.txns[name] not in blockers:
                    raise StepFailed(f"queued at {q.position} but not blocked by {name} "
                                     f"({self.txns[name]}); blockers {sorted(blockers)}")
        elif op == "await":
            checks = self.check_outcome(step, self.handle(step).wait_outcome())
            if checks is not None:
                self.check_acquired(self.handles[step["handle"]][1]["op"], checks, self.last)
        elif op == "release":
            req = pb.ReleaseLockRequest(transaction_id=self.txn_id(step), namespace=self.field(step, "namespace", "${ns}"),
                                        key=self.field(step, "key"), request_id=self.request_id(step))
            out = self.conn.unary("ReleaseLock", req)
            checks = self.check_outcome(step, out)
            if checks is not None and "released" in checks:
                self.eq("released", out.value.released, checks["released"])
        elif op == "downgrade":
            req = pb.DowngradeLockRequest(transaction_id=self.txn_id(step), namespace=self.field(step, "namespace", "${ns}"),
                                          key=self.field(step, "key"), request_id=self.request_id(step))
            out = self.conn.unary("DowngradeLock", req)
            checks = self.check_outcome(step, out)
            if checks is not None:
                self.check_downgrade(checks, out.value)
        elif op == "verify_token":
            token = step["token"]
            req = pb.VerifyFencingTokenRequest(namespace=self.field(step, "namespace", "${ns}"), key=self.field(step, "key"),
                                               fencing_token=self.token(token) if isinstance(token, str) else token)
            out = self.conn.unary("VerifyFencingToken", req)
            checks = self.check_outcome(step, out)
            if checks is not None:
                self.check_verify(checks, out.value)
        elif op == "status":
            out = self.conn.unary("GetTransactionStatus", pb.GetTransactionStatusRequest(transaction_id=self.txn_id(step)))
            checks = self.check_outcome(step, out)
            if checks is not None:
                self.check_status(checks, out.value)
        elif op == "heartbeat":
            out = self.conn.unary("Heartbeat", pb.HeartbeatRequest(transaction_id=self.txn_id(step)))
            checks = self.check_outcome(step, out)
            if checks is not None and checks.get("lease_remaining_positive") and out.value.lease_remaining_ms <= 0:
                raise StepFailed(f"lease_remaining_ms is {out.value.lease_remaining_ms}")
        elif op == "end":
            req = pb.EndTransactionRequest(transaction_id=self.txn_id(step), commit=step.get("commit", True),
                                           request_id=self.request_id(step))
            out = self.conn.unary("EndTransaction", req)
            checks = self.check_outcome(step, out)
            if checks is not None:
                if "state" in checks:
                    self.eq("state", pb.TransactionState.Name(out.value.state), checks["state"])
                if "released_locks" in checks:
                    self.eq("released_locks", out.value.released_locks, checks["released_locks"])
        elif op == "sleep_ms":
            time.sleep(step["ms"] / 1000.0)
        else:
            raise StepFailed(f"unknown op {op!r}")

    def handle(self, step):
        if step["handle"] not in self.handles:
            raise StepFailed(f"no background acquire {step['handle']!r}")
        return self.handles[step["handle"]][0]

    def run(self):
        for i, step in enumerate(self.spec["steps"], 1):
            try:
                self.run_step(step)
            except StepFailed as e:
                self.cleanup()
                return f"step {i} ({step['op']}): {e}"
            except (KeyError, TypeError, ValueError) as e:  # a malformed step
                self.cleanup()
                return f"step {i} ({step.get('op')}): bad step: {e!r}"
        self.cleanup()
        return None

    def cleanup(self):
        """Ends whatever the scenario left open, so a failure does not hold locks."""
        for txn in self.txns.values():
            self.conn.unary("EndTransaction", pb.EndTransactionRequest(transaction_id=txn, commit=False))


def main():
    with open(ARGS.scenarios, encoding="utf-8") as f:
        spec = json.load(f)
    run = f"cf-py-{uuid.uuid4().hex[:6]}"
    conn = Connection(ARGS.endpoint, ARGS.api_key)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for index, scenario in enumerate(spec["scenarios"]):
        name = scenario["name"]
        if ARGS.only and name not in ARGS.only:
            continue
        error = Scenario(conn, scenario, f"{run}-{index:02d}").run()
        verdict = "FAIL" if error else "PASS"
        counts[verdict] += 1
        print(f"{verdict} {name}" + (f": {error}" if error else ""), flush=True)
    print(f"python raw grpcio runner: {counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['SKIP']} skipped ({ARGS.endpoint})", flush=True)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

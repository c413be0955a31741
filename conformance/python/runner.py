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
# What this runner can express of the scenarios' `needs` (README "Capabilities"): a raw
# client sends every field, so it has every capability the file names.
CAPABILITIES = {"permits"}


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
from caerus.dls.v1 import admin_service_pb2 as admin_pb  # noqa: E402
from caerus.dls.v1 import admin_service_pb2_grpc as admin_grpc  # noqa: E402


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
            self.admin = admin_grpc.AdminServiceStub(self.channel)

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

    def unary(self, method, request, admin=False):
        """A LockService call, or an AdminService one (`admin`), following leader changes."""
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                stub = self.admin if admin else self.stub
                value = getattr(stub, method)(request, metadata=self.metadata, timeout=PATIENCE_S)
                return Outcome(value)
            except grpc.RpcError as err:
                if self.should_retry(err, deadline):
                    continue
                return Outcome(code=err.code().name, kind=metadata_of(err, "x-dls-error"), message=err.details())

    def acquire(self, request, on_queued, on_stay_open=None):
        """Follows the AcquireLock (or, for an AcquireLocksRequest, the AcquireLocks) stream
        to its grant or final status, re-attaching with the same request_id when the serving
        node stops leading. The grant is a Granted, or a LocksGranted for AcquireLocks. A
        `stay_open` stream goes on being read after the grant by a StayOpen, handed to
        `on_stay_open`."""
        method = "AcquireLocks" if isinstance(request, pb.AcquireLocksRequest) else "AcquireLock"
        deadline = time.monotonic() + request.timeout_ms / 1000.0 + PATIENCE_S
        while True:
            try:
                call = getattr(self.stub, method)(request, metadata=self.metadata)
                for msg in call:
                    which = msg.WhichOneof("event")
                    if which == "queued":
                        on_queued(msg.queued)
                    elif which == "granted":
                        if request.stay_open and on_stay_open is not None:
                            on_stay_open(StayOpen(call))
                        return Outcome(msg.granted)
                return Outcome(code="UNKNOWN", message="stream ended without a grant or a status")
            except grpc.RpcError as err:
                if self.should_retry(err, deadline):
                    continue
                return Outcome(code=err.code().name, kind=metadata_of(err, "x-dls-error"), message=err.details())


class StayOpen:
    """A granted `stay_open` acquire stream, read on in the background until it ends: the
    `lost` message if one came, and the status it ended with ("OK" or a code name)."""

    def __init__(self, call):
        self.call = call
        self.cond = threading.Condition()
        self.lost = None
        self.ended = None  # "OK" or "CODE: details"
        self.extra = []  # any other message after the grant
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        ended = "OK"
        try:
            for msg in self.call:
                with self.cond:
                    if msg.WhichOneof("event") == "lost":
                        self.lost = msg.lost
                    else:
                        self.extra.append(msg.WhichOneof("event"))
                    self.cond.notify_all()
        except grpc.RpcError as err:
            ended = f"{err.code().name}: {err.details()}"
        with self.cond:
            self.ended = ended
            self.cond.notify_all()

    def cancel(self):
        self.call.cancel()


class Watch:
    """A WatchKey stream read in the background: its messages in order, and how it ended."""

    def __init__(self, conn, request):
        self.conn, self.request = conn, request
        self.cond = threading.Condition()
        self.messages = []
        self.consumed = 0
        self.ended = None
        self.call = None
        self.cancelled = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                with self.cond:
                    if self.cancelled:
                        return
                    self.call = self.conn.stub.WatchKey(self.request, metadata=self.conn.metadata)
                for msg in self.call:
                    with self.cond:
                        self.messages.append(msg)
                        self.cond.notify_all()
                ended = "the watch ended (OK)"
            except grpc.RpcError as err:
                if not self.messages and self.conn.should_retry(err, deadline):
                    continue
                ended = f"the watch ended: {err.code().name}/{metadata_of(err, 'x-dls-error') or '-'} ({err.details()})"
            with self.cond:
                self.ended = ended
                self.cond.notify_all()
            return

    def next(self):
        """The next message not yet consumed (waits for it)."""
        deadline = time.monotonic() + PATIENCE_S
        with self.cond:
            while self.consumed >= len(self.messages):
                if self.ended is not None:
                    raise StepFailed(self.ended)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepFailed(f"no key watch message within {PATIENCE_S:.0f}s")
                self.cond.wait(left)
            msg = self.messages[self.consumed]
            self.consumed += 1
            return msg

    def cancel(self):
        with self.cond:
            self.cancelled = True
            if self.call is not None:
                self.call.cancel()


class Background:
    """A background AcquireLock or AcquireLocks: its queued messages and, once over, its outcome."""

    def __init__(self, conn, request, on_stay_open=None):
        self.cond = threading.Condition()
        self.queued = []
        self.consumed = 0
        self.outcome = None
        self.thread = threading.Thread(target=self.run, args=(conn, request, on_stay_open), daemon=True)
        self.thread.start()

    def run(self, conn, request, on_stay_open):
        def on_queued(q):
            with self.cond:
                self.queued.append(q)
                self.cond.notify_all()

        outcome = conn.acquire(request, on_queued, on_stay_open)
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
        self.watches = {}
        self.cursors = {}
        self.lost_stream = set()  # transactions begun with lost_stream: their acquires stay open
        self.streams = {}  # transaction name -> its granted StayOpen streams
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
            if "message_contains" in want and want["message_contains"] not in (outcome.message or ""):
                raise StepFailed(f"expected error {want['code']}/{want['kind']} saying "
                                 f"{want['message_contains']!r}, got {outcome.describe()}")
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
    def stays_open(self, step):
        return step.get("txn") in self.lost_stream

    def acquire_request(self, step):
        return pb.AcquireLockRequest(
            transaction_id=self.txn_id(step), namespace=self.field(step, "namespace", "${ns}"),
            key=self.field(step, "key"), mode=self.mode(step), timeout_ms=step.get("timeout_ms", 10000),
            request_id=self.request_id(step), stay_open=self.stays_open(step), permits=step.get("permits", 0))

    def acquire_all_request(self, step):
        locks = [pb.LockRequest(namespace=self.field(w, "namespace", "${ns}"), key=self.field(w, "key"), mode=self.mode(w))
                 for w in step["locks"]]
        return pb.AcquireLocksRequest(transaction_id=self.txn_id(step), locks=locks,
                                      timeout_ms=step.get("timeout_ms", 10000), request_id=self.request_id(step),
                                      stay_open=self.stays_open(step))

    def on_stay_open(self, step):
        """Where a granted stay_open stream of the step's transaction is kept."""
        streams = self.streams.setdefault(step.get("txn"), [])
        return streams.append

    def check_listed(self, checks, k):
        """list_key's checks on the key's ListLocks entry (None: the key is not listed, so it
        has no holders, waiters or delay)."""
        if "listed" in checks:
            self.eq("listed", k is not None, checks["listed"])
        for field in ("holders", "waiters"):
            if field not in checks:
                continue
            got = list(getattr(k, field)) if k is not None else []
            shown = [f"txn {e.transaction_id} {pb.LockMode.Name(e.mode)}" for e in got]
            if len(got) != len(checks[field]):
                raise StepFailed(f"number of {field}: expected {len(checks[field])}, got {shown}")
            for i, (w, e) in enumerate(zip(checks[field], got)):
                what = f"{field}[{i}]"
                if "txn" in w:
                    self.eq(f"{what} transaction (want {w['txn']})", e.transaction_id, self.txn_id(w))
                if "mode" in w:
                    self.eq(f"{what} mode", pb.LockMode.Name(e.mode), w["mode"])
                if "token" in w:
                    self.eq(f"{what} fencing token (want {w['token']})", e.fencing_token, self.token(w["token"]))
        if "delay" in checks:
            until, by = (k.delayed_until_ms, k.delayed_by_transaction_id) if k is not None else (0, 0)
            cause = pb.EndCause.Name(k.delay_cause).removeprefix("END_CAUSE_") if k is not None else "UNSPECIFIED"
            shown = f"until {until} ms by txn {by} ({cause})"
            w = checks["delay"]
            if w is None:
                if until != 0 or by != 0:
                    raise StepFailed(f"expected no delay, got {shown}")
            elif until <= 0:
                raise StepFailed(f"expected a delay, got {shown}")
            else:
                if "txn" in w:
                    self.eq(f"delay transaction (want {w['txn']})", by, self.txn_id(w))
                if "cause" in w:
                    self.eq("delay cause", cause, w["cause"])

    # ---- key watches and lost streams ---------------------------------------------------
    def check_holder(self, what, w, h):
        if "txn" in w:
            self.eq(f"{what} transaction (want {w['txn']})", h.transaction_id, self.txns[w["txn"]])
        if "name" in w:
            self.eq(f"{what} transaction_name", h.transaction_name, self.text(w["name"]))
        if "mode" in w:
            self.eq(f"{what} mode", pb.LockMode.Name(h.mode), w["mode"])
        if "token" in w:
            self.eq(f"{what} fencing token (want {w['token']})", h.fencing_token, self.token(w["token"]))

    @staticmethod
    def show_holder(h):
        return f"txn {h.transaction_id} {h.transaction_name!r} {pb.LockMode.Name(h.mode)}#{h.fencing_token}"

    def show_change(self, c):
        cause = "" if c.end_cause == 0 else f" ({pb.EndCause.Name(c.end_cause).removeprefix('END_CAUSE_')})"
        return f"{pb.KeyChangeKind.Name(c.kind).removeprefix('KEY_CHANGE_KIND_')} {self.show_holder(c.holder)}{cause}"

    def check_watch(self, checks, holders, changes, cursor):
        try:
            if "holders" in checks:
                if len(holders) != len(checks["holders"]):
                    raise StepFailed(f"holders: expected {len(checks['holders'])}")
                for i, (w, h) in enumerate(zip(checks["holders"], holders)):
                    self.check_holder(f"holders[{i}]", w, h)
            if "changes" in checks:
                if len(changes) != len(checks["changes"]):
                    raise StepFailed(f"changes: expected {len(checks['changes'])}")
                for i, (w, c) in enumerate(zip(checks["changes"], changes)):
                    if "kind" in w:
                        self.eq(f"changes[{i}] kind", pb.KeyChangeKind.Name(c.kind).removeprefix("KEY_CHANGE_KIND_"),
                                w["kind"])
                    if "end_cause" in w:
                        self.eq(f"changes[{i}] end_cause", pb.EndCause.Name(c.end_cause).removeprefix("END_CAUSE_"),
                                w["end_cause"])
                    self.check_holder(f"changes[{i}]", w, c.holder)
        except StepFailed as e:
            raise StepFailed(f"{e}; holders {[self.show_holder(h) for h in holders]}, "
                             f"changes {[self.show_change(c) for c in changes]}") from e
        if "save_cursor" in checks:
            self.cursors[checks["save_cursor"]] = cursor

    def watch(self, name):
        if name not in self.watches:
            raise StepFailed(f"no watch {name!r}")
        return self.watches[name]

    def txn_streams(self, step):
        return self.streams.get(step["txn"], [])

    def expect_lost(self, step):
        within = step.get("within_ms", PATIENCE_S * 1000) / 1000.0
        deadline = time.monotonic() + within
        while True:
            streams = list(self.txn_streams(step))
            if not streams:
                raise StepFailed("the transaction has no granted stay_open stream")
            lost = next((s.lost for s in streams if s.lost is not None), None)
            if lost is not None:
                break
            if all(s.ended is not None for s in streams):
                raise StepFailed(f"every stay_open stream ended without lost: {[s.ended for s in streams]}")
            if time.monotonic() > deadline:
                raise StepFailed(f"no lost message within {within * 1000:.0f} ms")
            time.sleep(0.01)
        checks = self.check_outcome(step, Outcome(lost))
        self.eq("lost.transaction_id", lost.transaction_id, self.txn_id(step))
        if checks is not None and "end_cause" in checks:
            self.eq("lost.end_cause", pb.EndCause.Name(lost.end_cause).removeprefix("END_CAUSE_"), checks["end_cause"])

    def await_status(self, step):
        """Polls GetTransactionStatus until the step's ok checks hold, heartbeating first when
        the step says so; an ended transaction no longer changes, so a mismatch then fails."""
        checks = step.get("expect", {}).get("ok", {})
        deadline = time.monotonic() + step.get("within_ms", PATIENCE_S * 1000) / 1000.0
        while True:
            if step.get("heartbeat"):
                self.conn.unary("Heartbeat", pb.HeartbeatRequest(transaction_id=self.txn_id(step)))
            out = self.conn.unary("GetTransactionStatus", pb.GetTransactionStatusRequest(transaction_id=self.txn_id(step)))
            if not out.ok:
                raise StepFailed(f"status: {out.describe()}")
            try:
                self.check_status(checks, out.value)
                return
            except StepFailed as e:
                if out.value.state != pb.ACTIVE or time.monotonic() > deadline:
                    raise StepFailed(f"{e} (state {pb.TransactionState.Name(out.value.state)})") from e
            time.sleep(0.05)

    def expect_streams_closed(self, step):
        deadline = time.monotonic() + PATIENCE_S
        streams = list(self.txn_streams(step))
        if not streams:
            raise StepFailed("the transaction has no granted stay_open stream")
        while not all(s.ended is not None for s in streams):
            if time.monotonic() > deadline:
                raise StepFailed(f"a stay_open stream is still open after {PATIENCE_S:.0f}s")
            time.sleep(0.01)
        for i, s in enumerate(streams):
            if s.lost is not None:
                raise StepFailed(f"stay_open stream {i} sent lost ({pb.EndCause.Name(s.lost.end_cause)})")
            if s.extra:
                raise StepFailed(f"stay_open stream {i} sent {s.extra} after its grant")
            if s.ended != "OK":
                raise StepFailed(f"stay_open stream {i} ended with {s.ended}")

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
                if step.get("lost_stream"):
                    self.lost_stream.add(step["txn"])
                if "lease_timeout_ms" in checks:
                    self.eq("lease_timeout_ms", out.value.lease_timeout_ms, checks["lease_timeout_ms"])
                if "same_txn_as" in checks:
                    self.eq("transaction id", out.value.transaction_id, self.txns[checks["same_txn_as"]])
        elif op in ("acquire", "acquire_all"):
            req = self.acquire_request(step) if op == "acquire" else self.acquire_all_request(step)
            if step.get("wait", True) is False:
                self.handles[step["handle"]] = (Background(self.conn, req, self.on_stay_open(step)), step)
                return
            checks = self.check_outcome(step, self.conn.acquire(req, lambda q: None, self.on_stay_open(step)))
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
        elif op == "await_status":
            self.await_status(step)
        elif op == "sleep_ms":
            time.sleep(step["ms"] / 1000.0)
        elif op == "set_lock_delay":
            req = admin_pb.SetLockDelayRequest(namespace_prefix=self.field(step, "namespace_prefix", "${ns}"),
                                               delay_ms=step.get("delay_ms", 0))
            out = self.conn.unary("SetLockDelay", req, admin=True)
            checks = self.check_outcome(step, out)
            if checks is not None and "previous_delay_ms" in checks:
                self.eq("previous_delay_ms", out.value.previous_delay_ms, checks["previous_delay_ms"])
        elif op == "lock_delays":
            out = self.conn.unary("ListLockDelays", admin_pb.ListLockDelaysRequest(), admin=True)
            checks = self.check_outcome(step, out)
            if checks is not None and "rules" in checks:
                # Only this scenario's rules: other runs may share the server.
                got = [(r.namespace_prefix, r.delay_ms) for r in out.value.rules
                       if r.namespace_prefix.startswith(self.ns)]
                want = [(self.field(w, "namespace_prefix"), w.get("delay_ms", 0)) for w in checks["rules"]]
                self.eq("rules", got, want)
        elif op == "operator_abort":
            req = admin_pb.AbortTransactionRequest(transaction_id=self.txn_id(step), reason=self.field(step, "reason"),
                                                   request_id=self.request_id(step))
            out = self.conn.unary("AbortTransaction", req, admin=True)
            checks = self.check_outcome(step, out)
            if checks is not None and "state" in checks:
                self.eq("state", pb.TransactionState.Name(out.value.state), checks["state"])
        elif op == "list_key":
            namespace, key = self.field(step, "namespace", "${ns}"), self.field(step, "key")
            out = self.conn.unary("ListLocks", admin_pb.ListLocksRequest(namespace_prefix=namespace), admin=True)
            checks = self.check_outcome(step, out)
            if checks is not None:
                listed = [k for k in out.value.locks if k.namespace == namespace and k.key == key]
                self.check_listed(checks, listed[0] if listed else None)
        elif op == "watch":
            cursor = self.cursors[step["resume"]] if "resume" in step else ""
            req = pb.WatchKeyRequest(namespace=self.field(step, "namespace", "${ns}"), key=self.field(step, "key"),
                                     cursor=cursor)
            w = Watch(self.conn, req)
            self.watches[step["handle"]] = w
            try:
                first = Outcome(w.next())
            except StepFailed:
                if w.ended is None:
                    raise
                first = Outcome(code="WATCH", message=w.ended)
            checks = self.check_outcome(step, first)
            if checks is not None:
                if "initial" in checks:
                    self.eq("initial", first.value.initial, checks["initial"])
                self.check_watch(checks, first.value.holders, first.value.changes, first.value.cursor)
        elif op == "expect_watch":
            w = self.watch(step["handle"])
            checks = step.get("expect", {}).get("ok", {})
            changes = []
            while True:
                msg = w.next()
                changes.extend(msg.changes)
                if len(changes) >= len(checks.get("changes", [])):
                    break
            self.check_watch(checks, msg.holders, changes, msg.cursor)
        elif op == "unwatch":
            self.watch(step["handle"]).cancel()
            del self.watches[step["handle"]]
        elif op == "expect_lost":
            self.expect_lost(step)
        elif op == "expect_streams_closed":
            self.expect_streams_closed(step)
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
        for w in self.watches.values():
            w.cancel()
        for streams in self.streams.values():
            for s in streams:
                s.cancel()


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
        lacking = [n for n in scenario.get("needs", []) if n not in CAPABILITIES]
        if lacking:
            counts["SKIP"] += 1
            print(f"SKIP {name} (needs {', '.join(lacking)}: not implemented by this runner)", flush=True)
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

#!/usr/bin/env python3
"""sdk-bench (Python): the dls-bench lock cycle through Python client libraries.

Runs one workload against one target for a fixed time in N forked worker processes (the
way a Python service scales past the GIL), prints a progress line a second on stderr,
checks safety as it goes, and prints one JSON result line in dls-bench's format (with
``driver`` and ``language`` fields) on stdout.

Targets, each written the way a user of that library writes a lock:
  dls    caerus.sync: ``with client.transaction() as tx: tx.acquire_lock(...)``
  etcd   python-etcd3: ``lock = client.lock(name, ttl); lock.acquire(); lock.release()``
  redis  redis-py: ``SET key owner NX PX ttl`` (retried), compare-and-delete Lua release

Workloads: uncontended (each process its own key), contended (every process one hot key).

The safety check is dls-bench's (bench/src/checker.rs), shared by the processes through
shared memory under one cross-process lock: a grant is recorded after the client has it, a
release before the client sends it, so a recorded overlap is a real overlap; an exclusive
grant must carry a token above every earlier token of its key (DLS: the fencing token;
etcd: the revision of the put that took the lock, i.e. the lock key's create revision;
redis: none, as in dls-bench). A cycle takes one lock, so a holder is never blocked in
another acquire and dls-bench's revocation allowance never applies: every collision counts.

Exit status: 0 ok, 1 failure or no progress, 2 safety violations.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
import uuid

NAMESPACE = "bench"
KEPT_SAMPLES = 10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------
# Safety checker, shared by the worker processes
# ---------------------------------------------------------------------------------------


class Checker:
    """Per key: the exclusive holder (or -1) and the highest token seen. The arrays live in
    shared memory made before the fork; the lock is a cross-process semaphore."""

    def __init__(self, nkeys: int, quiet: bool = False) -> None:
        self.quiet = quiet
        self.lock = mp.Lock()
        self.holder = mp.RawArray("q", [-1] * nkeys)
        self.holder_token = mp.RawArray("q", [-1] * nkeys)
        self.max_token = mp.RawArray("q", [-1] * nkeys)
        self.violations = mp.RawValue("q", 0)
        self.samples: list[str] = []  # per process

    def _violation(self, msg: str) -> None:
        self.violations.value += 1
        if len(self.samples) < KEPT_SAMPLES:
            if not self.quiet:
                print(f"VIOLATION: {msg}", file=sys.stderr, flush=True)
            self.samples.append(msg)

    def granted(self, key: int, name: str, client: int, token: int | None) -> None:
        with self.lock:
            other = self.holder[key]
            if other >= 0:
                shown = self.holder_token[key] if self.holder_token[key] >= 0 else None
                self._violation(
                    f"{name}: client {client} granted EXCLUSIVE (token {token}) while client {other} holds it (token {shown})"
                )
            self.holder[key] = client
            self.holder_token[key] = -1 if token is None else token
            if token is not None:
                if token <= self.max_token[key]:
                    self._violation(
                        f"{name}: exclusive token {token} to client {client} not above earlier token {self.max_token[key]}"
                    )
                self.max_token[key] = max(self.max_token[key], token)

    def releasing(self, key: int, client: int) -> None:
        with self.lock:
            if self.holder[key] == client:
                self.holder[key] = -1


def self_test() -> int:
    """The checker catches an overlap and a stale token, and passes a clean hand-over."""
    c = Checker(1, quiet=True)
    c.granted(0, "k", 1, 5)
    c.releasing(0, 1)
    c.granted(0, "k", 2, 9)
    assert c.violations.value == 0, "a clean hand-over was flagged"
    c.granted(0, "k", 3, 10)
    assert c.violations.value == 1, "an overlap was missed"
    c.releasing(0, 3)
    c.releasing(0, 2)
    c.granted(0, "k", 4, 10)
    assert c.violations.value == 2, "a token not above the last was missed"
    c.releasing(0, 4)
    c.granted(0, "k", 5, None)
    assert c.violations.value == 2, "a grant without token after a release was flagged"
    print("sdk_bench.py self-test: checker ok", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------
# Targets: connect() in the child, then cycle() once per lock cycle
# ---------------------------------------------------------------------------------------


class OpError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


class DlsTarget:
    driver = "caerus.sync"

    def __init__(self, endpoints: list[str], lease_ms: int, wait_ms: int) -> None:
        from caerus import LockMode
        from caerus.sync import DlsClient

        self.client = DlsClient(endpoints=endpoints)
        self.mode = LockMode.EXCLUSIVE
        self.lease_ms, self.wait_ms = lease_ms, wait_ms

    def cycle(self, key: str, on_grant, on_release) -> None:
        from caerus import DlsError

        try:
            with self.client.transaction(timeout_ms=self.lease_ms) as tx:
                lock = tx.acquire_lock(NAMESPACE, key, self.mode, timeout_ms=self.wait_ms)
                on_grant(lock.fencing_token)
                on_release()
        except DlsError as e:
            raise OpError(e.code, e.message) from None


class EtcdTarget:
    driver = "python-etcd3"

    def __init__(self, endpoints: list[str], lease_ms: int, wait_ms: int) -> None:
        import etcd3

        host, port = endpoints[0].rsplit(":", 1)
        self.client = etcd3.client(host=host, port=int(port))
        # Talk to the leader, as a user pointing at one node would want: a follower
        # forwards every write, which would add a hop to etcd's figures.
        leader = self.client.status().leader
        if leader is not None and leader.client_urls:
            url = leader.client_urls[0].split("://", 1)[-1]
            host, port = url.rsplit(":", 1)
            self.client.close()
            self.client = etcd3.client(host=host, port=int(port))
        self.ttl = max(1, lease_ms // 1000)
        self.wait_s = wait_ms / 1000
        # python-etcd3's Lock keeps no token: its acquire is a Txn "create the key if absent",
        # and the revision of that Txn is the lock key's create revision, which orders the
        # holders. Read it off the Txn response as it passes (no extra round trip).
        self.last_txn_revision = None
        stub = self.client.kvstub
        original = stub.Txn

        def txn(*args, **kwargs):
            resp = original(*args, **kwargs)
            self.last_txn_revision = resp.header.revision
            return resp

        stub.Txn = txn

    def cycle(self, key: str, on_grant, on_release) -> None:
        import grpc

        try:
            lock = self.client.lock(key, ttl=self.ttl)
            self.last_txn_revision = None
            if not lock.acquire(timeout=self.wait_s):
                raise OpError("LOCK_TIMEOUT", f"{key} still taken after {self.wait_s}s")
            if self.last_txn_revision is None:
                raise OpError("ETCD_ERROR", "no revision seen on the acquiring Txn")
            try:
                on_grant(self.last_txn_revision)
            finally:
                on_release()
                released = lock.release()
            if not released:
                raise OpError("LEASE_LOST", f"{key} was no longer ours at release")
        except grpc.RpcError as e:
            kind = "UNAVAILABLE" if e.code() == grpc.StatusCode.UNAVAILABLE else "ETCD_ERROR"
            raise OpError(kind, str(e.details())) from None


RELEASE_LUA = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'


class RedisTarget:
    driver = "redis-py"

    def __init__(self, endpoints: list[str], lease_ms: int, wait_ms: int) -> None:
        import redis

        host, port = endpoints[0].rsplit(":", 1)
        self.redis = redis.Redis(host=host, port=int(port))
        self.redis.ping()
        self.release_script = self.redis.register_script(RELEASE_LUA)
        self.lease_ms, self.wait_s = lease_ms, wait_ms / 1000

    def cycle(self, key: str, on_grant, on_release) -> None:
        import redis

        owner = uuid.uuid4().hex
        deadline = time.monotonic() + self.wait_s
        try:
            while not self.redis.set(key, owner, nx=True, px=self.lease_ms):
                if time.monotonic() >= deadline:
                    raise OpError("LOCK_TIMEOUT", f"{key} still taken after {self.wait_s}s")
                time.sleep(random.uniform(0.001, 0.005))
            try:
                on_grant(None)
            finally:
                on_release()
                deleted = self.release_script(keys=[key], args=[owner])
            if deleted != 1:
                raise OpError("LEASE_LOST", f"{key} was no longer ours at release")
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise OpError("UNAVAILABLE", str(e)) from None


TARGETS = {"dls": DlsTarget, "etcd": EtcdTarget, "redis": RedisTarget}
DEFAULT_ENDPOINTS = {"dls": "127.0.0.1:7070", "etcd": "127.0.0.1:2379", "redis": "127.0.0.1:6379"}


# ---------------------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------------------


def worker(client: int, args, prefix: str, checker: Checker, window, barrier, progress, out) -> None:
    errors: dict[str, int] = {}
    first_errors: list[str] = []
    lat_us: list[int] = []
    try:
        target = TARGETS[args.target](args.endpoints, args.lease_ms, args.wait_ms)
    except Exception as e:  # reported by the parent
        out.send({"fatal": f"connect to {','.join(args.endpoints)}: {e!r}"})
        barrier.abort()
        return
    if args.workload == "uncontended":
        key_index, key = client, f"{prefix}-u{client}"
    else:
        key_index, key = 0, f"{prefix}-contended"
    barrier.wait()
    measure_from, end = window[0], window[1]

    def on_grant(token):
        checker.granted(key_index, key, client, token)

    def on_release():
        checker.releasing(key_index, client)

    while True:
        t0 = time.monotonic()
        if t0 >= end:
            break
        try:
            target.cycle(key, on_grant, on_release)
        except Exception as e:  # a library's own exception types too: counted, not fatal
            kind = e.kind if isinstance(e, OpError) else type(e).__name__
            if t0 >= measure_from:
                errors[kind] = errors.get(kind, 0) + 1
                if len(first_errors) < 5:
                    first_errors.append(str(e) if isinstance(e, OpError) else f"{kind}: {e}")
            time.sleep(0.01)  # do not spin on a failing server
            continue
        t1 = time.monotonic()
        if t0 >= measure_from and t1 <= end:
            lat_us.append(int((t1 - t0) * 1e6))
            progress[client] += 1
    out.send(
        {
            "lat_us": lat_us,
            "errors": errors,
            "first_errors": first_errors,
            "violation_samples": checker.samples,
        }
    )


def cpu_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def percentile(sorted_us: list[int], p: float) -> float:
    if not sorted_us:
        return 0.0
    import math

    i = min(max(math.ceil(p * len(sorted_us)), 1), len(sorted_us)) - 1
    return sorted_us[i] / 1000.0


def run(args) -> int:
    ctx = mp.get_context("fork")
    nkeys = args.clients if args.workload == "uncontended" else 1
    checker = Checker(nkeys)
    window = ctx.RawArray("d", [0.0, 0.0])

    def set_window() -> None:  # run by the last process to reach the barrier
        now = time.monotonic()
        window[0] = now + args.warmup
        window[1] = now + args.warmup + args.duration

    barrier = ctx.Barrier(args.clients + 1, action=set_window)
    progress = ctx.RawArray("q", args.clients)
    prefix = f"p{random.getrandbits(32):08x}"
    procs, pipes = [], []
    for client in range(args.clients):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=worker, args=(client, args, prefix, checker, window, barrier, progress, send), daemon=True)
        p.start()
        procs.append(p)
        pipes.append(recv)
    tag = f"[{args.target}/{TARGETS[args.target].driver} {args.workload} c={args.clients}]"
    try:
        barrier.wait(timeout=60)
    except Exception:
        for r in pipes:
            if r.poll(1):
                msg = r.recv()
                if "fatal" in msg:
                    print(f"sdk_bench.py: {msg['fatal']}", file=sys.stderr)
                    break
        else:
            print("sdk_bench.py: the worker processes did not connect within 60 s", file=sys.stderr)
        for p in procs:
            p.kill()
        return 1
    measure_from, end = window[0], window[1]
    start = time.monotonic()
    cpu_before, cpu_at = None, None
    last = 0
    next_print = start + 1.0
    while True:
        now = time.monotonic()
        if cpu_before is None and now >= measure_from:
            cpu_at, cpu_before = now, [cpu_ticks(p) for p in args.pids]
        if now >= end:
            break
        wake = min(end, next_print, measure_from if cpu_before is None else end)
        time.sleep(max(0.0, wake - now))
        if time.monotonic() >= next_print:
            next_print += 1.0
            total = sum(progress)
            phase = "" if time.monotonic() >= measure_from else " (warmup)"
            print(
                f"{tag} t={time.monotonic() - start:.0f}s {total - last} cycles/s total={total} "
                f"violations={checker.violations.value}{phase}",
                file=sys.stderr,
                flush=True,
            )
            last = total
    measured_s = time.monotonic() - cpu_at if cpu_at else args.duration
    cpu = {}
    if cpu_before is not None:
        for pid, before in zip(args.pids, cpu_before):
            after = cpu_ticks(pid)
            if before is not None and after is not None:
                cpu[str(pid)] = round((after - before) / CLOCK_TICKS / measured_s * 100.0, 3)

    lat: list[int] = []
    errors: dict[str, int] = {}
    first_errors: list[str] = []
    samples: list[str] = []
    grace = args.wait_ms / 1000 + 20
    for r, p in zip(pipes, procs):
        if not r.poll(grace):
            print(f"sdk_bench.py: a worker did not stop within {grace:.0f} s of the end", file=sys.stderr)
            for q in procs:
                q.kill()
            return 1
        msg = r.recv()
        if "fatal" in msg:
            print(f"sdk_bench.py: {msg['fatal']}", file=sys.stderr)
            return 1
        lat.extend(msg["lat_us"])
        for k, v in msg["errors"].items():
            errors[k] = errors.get(k, 0) + v
        first_errors.extend(msg["first_errors"][: max(0, 5 - len(first_errors))])
        samples.extend(msg["violation_samples"][: max(0, KEPT_SAMPLES - len(samples))])
        p.join(5)
    lat.sort()
    violations = checker.violations.value
    rd = lambda x: round(x, 3)  # noqa: E731
    result = {
        "target": args.target,
        "workload": args.workload,
        "clients": args.clients,
        "label": args.label,
        "endpoints": ",".join(args.endpoints),
        "duration_s": rd(measured_s),
        "cycles": len(lat),
        "throughput": rd(len(lat) / max(measured_s, 1e-9)),
        "p50_ms": rd(percentile(lat, 0.50)),
        "p90_ms": rd(percentile(lat, 0.90)),
        "p99_ms": rd(percentile(lat, 0.99)),
        "max_ms": rd(percentile(lat, 1.0)),
        "errors": sum(errors.values()),
        "errors_by_kind": errors,
        "first_errors": first_errors,
        "deadlocks": 0,
        "violations": violations,
        "violation_samples": samples,
        "alive": None,
        "cpu_pct": cpu,
        "leader_cpu_pct": max(cpu.values()) if cpu else None,
        "group_commit": None,
        "language": "python",
        "driver": TARGETS[args.target].driver,
        "concurrency": f"{args.clients} forked process(es), one client each",
    }
    print(json.dumps(result), flush=True)
    print(
        f"{tag} {result['throughput']:.1f} cycles/s, p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms, "
        f"errors {result['errors']} {errors}, violations {violations}",
        file=sys.stderr,
    )
    if violations:
        print(f"sdk_bench.py: {violations} SAFETY VIOLATION(S)", file=sys.stderr)
        return 2
    if not lat:
        print("sdk_bench.py: no progress: no lock cycle completed", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", choices=sorted(TARGETS), default="dls", help="system under test (default dls)")
    ap.add_argument("--workload", choices=["uncontended", "contended"], default="uncontended")
    ap.add_argument("--clients", type=int, default=1, help="worker processes, one client each (default 1)")
    ap.add_argument("--duration", type=float, default=10.0, help="measured seconds (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (default 2)")
    ap.add_argument("--endpoints", help="comma-separated host:port list (default: the target's usual local port)")
    ap.add_argument("--lease-ms", type=int, default=15000, help="lease / lock TTL in ms (default 15000)")
    ap.add_argument("--wait-ms", type=int, default=10000, help="how long one acquire may wait (default 10000)")
    ap.add_argument("--pids", default="", help="server pids whose CPU use to report (comma-separated)")
    ap.add_argument("--label", help="tag added to the JSON output")
    ap.add_argument("--self-test", action="store_true", help="check the safety checker itself and exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if args.clients < 1:
        ap.error("--clients must be at least 1")
    args.endpoints = [e.strip() for e in (args.endpoints or DEFAULT_ENDPOINTS[args.target]).split(",") if e.strip()]
    args.pids = [int(p) for p in args.pids.split(",") if p.strip()]
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())

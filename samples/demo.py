#!/usr/bin/env python3
"""The billing demo: a 3-node Caerus DLS cluster, the fenced ledger, and billing workers in
Rust, Python and Node competing for billing-jobs/monthly-billing-job.

  1. every cycle runs once: several workers per cycle, one bills, the others skip;
  2. a frozen holder: the worker holding the lock is SIGSTOPped until its lease expires,
     another worker takes over and finishes the cycle, then SIGCONT: its late write is
     rejected by the ledger with 409 (fencing);
  3. the raft leader is SIGKILLed mid-run and billing goes on;
  4. the check: zero double charges and every cycle billed exactly once.

Everything runs on free ports in a temporary directory and stops by itself. Exit status 0
when the check passes. `--short` is the quick form run by `make test-samples`.
Only the standard library is used; run it with the Makefile (`make demo` / `make test`).
"""

import argparse
import secrets
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

START = time.monotonic()
PRINT_LOCK = threading.Lock()
CUSTOMERS = {"acme", "globex", "initech", "umbrella", "hooli", "stark"}


def say(line, who="demo"):
    with PRINT_LOCK:
        print(f"{time.monotonic() - START:7.2f}s  {who:<10} {line}", flush=True)


def banner(text):
    with PRINT_LOCK:
        print(f"\n{time.monotonic() - START:7.2f}s  ==== {text}", flush=True)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Demo:
    def __init__(self, args, workdir):
        self.args = args
        self.dir = workdir
        self.procs = []  # everything we started, stopped at the end
        self.nodes = {}  # node id -> (Popen, grpc addr)
        p = free_ports(10)
        self.node_addrs = {i: f"127.0.0.1:{p[2 * (i - 1)]}" for i in (1, 2, 3)}
        self.http_addrs = {i: f"127.0.0.1:{p[2 * (i - 1) + 1]}" for i in (1, 2, 3)}
        self.peer_ports = {i: p[6 + i] for i in (1, 2, 3)}
        self.ledger_url = f"http://127.0.0.1:{p[6]}"
        self.endpoints = ",".join(self.node_addrs.values())
        self.env = dict(os.environ, DLS_ENDPOINTS=self.endpoints, LEDGER_URL=self.ledger_url, DLS_LOG="warn")
        self.env.pop("CAERUS_API_KEY", None)
        self.env["NODE_PATH"] = os.path.join(args.samples, "billing-worker-node", "node_modules")
        self.seq = 0
        self.secret = secrets.token_hex(16)

    # ---- processes -------------------------------------------------------------------
    def start_node(self, i):
        # Each member's client address and peer port; the peers authenticate each other with
        # a cluster secret (enough on loopback).
        peers = ",".join(f"{n}={a}/{self.peer_ports[n]}" for n, a in self.node_addrs.items())
        log = open(os.path.join(self.dir, f"node-{i}.log"), "ab")
        proc = subprocess.Popen(
            [self.args.dls, "serve", "--node-id", str(i), "--peers", peers,
             "--data-dir", os.path.join(self.dir, f"node-{i}"), "--http-listen", self.http_addrs[i],
             "--heartbeat-ms", "100", "--election-timeout-ms", "600"],
            stdout=log, stderr=log, env=dict(self.env, DLS_LOG="info", DLS_CLUSTER_SECRET=self.secret))
        self.procs.append(proc)
        self.nodes[i] = proc

    def start_ledger(self):
        proc = subprocess.Popen([self.args.ledger, "--listen", self.ledger_url[len("http://"):],
                                 "--data-dir", os.path.join(self.dir, "ledger")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env, text=True)
        self.procs.append(proc)
        threading.Thread(target=self.pump, args=(proc, "ledger", self.ledger_line), daemon=True).start()

    def ledger_line(self, line):
        # The ledger prints every accepted charge; only rejections make the timeline.
        return "REJECTED" in line or "listening" in line

    def pump(self, proc, who, keep=lambda line: True, lines=None):
        for line in proc.stdout:
            line = line.rstrip()
            if lines is not None:
                lines.append(line)
            if keep(line):
                say(line.split("] ", 1)[-1] if line.startswith("[") else line, who)

    def worker(self, lang, cycle, **settings):
        self.seq += 1
        name = f"{lang}-{self.seq}"
        cmd = {
            "rust": [self.args.worker_rust],
            "python": [self.args.python, os.path.join(self.args.samples, "billing-worker-python", "worker.py")],
            "node": [self.args.node, os.path.join(self.args.samples, "billing-worker-node", "worker.js")],
        }[lang]
        env = dict(self.env, CYCLE=cycle, WORKER_NAME=name, LEASE_MS=str(settings.get("lease_ms", 3000)),
                   LOCK_WAIT_MS=str(settings.get("wait_ms", 60000)),
                   CHARGE_DELAY_MS=str(settings.get("delay_ms", 50)))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
        proc.name, proc.lines = name, []
        self.procs.append(proc)
        threading.Thread(target=self.pump, args=(proc, name, lambda line: True, proc.lines), daemon=True).start()
        return proc

    def wait_workers(self, workers, timeout=90):
        deadline = time.monotonic() + timeout
        codes = {}
        for w in workers:
            try:
                codes[w.name] = w.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.kill()
                codes[w.name] = "timeout"
        return codes

    def wait_for(self, what, check, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = check()
            if result:
                return result
            time.sleep(0.05)
        raise SystemExit(f"demo: timed out waiting for {what}")

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    p.wait(timeout=5)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass

    # ---- cluster and ledger ----------------------------------------------------------
    def leader(self):
        live = ",".join(a for i, a in self.node_addrs.items() if self.nodes[i].poll() is None)
        out = subprocess.run([self.args.dls, "status", "--json", "--endpoints", live, "--timeout", "2"],
                             capture_output=True, text=True, env=self.env)
        try:
            for n in json.loads(out.stdout)["nodes"]:
                if n.get("reachable") and str(n.get("role", "")).lower() == "leader":
                    return n["node_id"]
        except (ValueError, KeyError):
            pass
        return None

    def ledger_get(self, path):
        with urllib.request.urlopen(self.ledger_url + path, timeout=5) as r:
            return json.load(r)

    # ---- the story -------------------------------------------------------------------
    def run(self):
        short = self.args.short
        langs = ["rust", "python", "node"] if not self.args.no_node else ["rust", "python"]
        banner(f"starting a 3-node cluster ({self.endpoints}) and the ledger ({self.ledger_url}); logs in {self.dir}")
        for i in (1, 2, 3):
            self.start_node(i)
        self.start_ledger()
        leader = self.wait_for("a leader", self.leader)
        self.wait_for("the ledger", lambda: self.ledger_get("/check"))
        say(f"node {leader} is the raft leader")

        expected = []
        # 1. every cycle runs once
        cycles = ["2026-01", "2026-02"] if short else ["2026-01", "2026-02", "2026-03", "2026-04"]
        per_lang = 1 if short else 2
        banner(f"1. each cycle runs once: {per_lang * len(langs)} workers ({', '.join(langs)}) per cycle, "
               f"cycles {', '.join(cycles)}")
        workers = [self.worker(lang, c) for c in cycles for _ in range(per_lang) for lang in langs]
        codes = self.wait_workers(workers)
        self.require(all(code == 0 for code in codes.values()), f"every worker ends with 0: {codes}")
        billed = sum(1 for w in workers if any("billed; committed" in l for l in w.lines))
        self.require(billed == len(cycles), f"{billed} workers billed {len(cycles)} cycles (one each)")
        say(f"{len(workers)} workers, {billed} billed a cycle, {len(workers) - billed} found theirs billed and skipped")
        expected += cycles

        # 2. frozen holder: lease expiry, takeover, late write rejected
        cycle = "2026-05"
        banner(f"2. a frozen lock holder: cycle {cycle}")
        frozen = self.worker("rust", cycle, lease_ms=1500, delay_ms=400)
        self.wait_for("the first charge", lambda: any("charged" in l for l in frozen.lines))
        frozen.send_signal(signal.SIGSTOP)
        say(f"SIGSTOP {frozen.name} (pid {frozen.pid}) while it holds the lock; its lease (1.5 s) will expire")
        successor = self.worker("python", cycle, lease_ms=3000, delay_ms=50)
        codes = self.wait_workers([successor])
        self.require(codes[successor.name] == 0, f"{successor.name} finished the cycle: {codes}")
        say(f"SIGCONT {frozen.name}: it wakes up still believing it holds the lock")
        frozen.send_signal(signal.SIGCONT)
        codes = self.wait_workers([frozen])
        self.require(codes[frozen.name] == 3, f"{frozen.name} was fenced off (exit 3): {codes}")
        check = self.ledger_get("/check")
        self.require(check["rejected_writes"] >= 1, "the ledger rejected the late write")
        late = check["rejected"][-1]
        say(f"the late write (charge {late['customer']} with token {late['fencing_token']}) was rejected "
            f"with 409; the ledger had accepted token {check['last_tokens'].get('billing-jobs/monthly-billing-job')}")
        expected.append(cycle)

        # 3. leader kill mid-run
        cycles = ["2026-06"] if short else ["2026-06", "2026-07", "2026-08"]
        banner(f"3. SIGKILL the raft leader while cycles {', '.join(cycles)} are being billed")
        workers = [self.worker(lang, c, delay_ms=300, lease_ms=5000) for c in cycles for lang in langs]
        self.wait_for("billing to start", lambda: any("charged" in l for w in workers for l in w.lines))
        leader = self.wait_for("the leader", self.leader)
        self.nodes[leader].kill()
        self.nodes[leader].wait()
        say(f"SIGKILL node {leader} (the leader)")
        new_leader = self.wait_for("a new leader", lambda: (lambda n: n if n not in (None, leader) else None)(self.leader()))
        say(f"node {new_leader} is the new leader")
        codes = self.wait_workers(workers, timeout=120)
        self.require(all(code == 0 for code in codes.values()), f"every worker ends with 0: {codes}")
        say("billing went on: all workers finished")
        expected += cycles

        # 4. the check
        banner("4. the check")
        check = self.ledger_get("/check")
        ok = check["ok"] and not check["double_charges"]
        say(f"double charges: {len(check['double_charges'])}  {check['double_charges'] or ''}")
        say(f"rejected late writes: {check['rejected_writes']}")
        for c in expected:
            got = {r["customer"] for r in self.ledger_get(f"/charges?cycle={c}")["charges"]}
            n = len(self.ledger_get(f"/charges?cycle={c}")["charges"])
            good = got == CUSTOMERS and n == len(CUSTOMERS)
            ok = ok and good
            say(f"cycle {c}: {n} charges for {len(got)} of {len(CUSTOMERS)} customers {'OK' if good else 'WRONG'}")
        unexpected = set(check["cycles"]) - set(expected)
        ok = ok and not unexpected
        banner("PASS: zero double charges, every cycle billed exactly once" if ok else "FAIL: see above")
        return ok

    def require(self, cond, what):
        if not cond:
            say(f"FAILED: {what}")
            raise SystemExit(1)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dls", required=True)
    ap.add_argument("--ledger", required=True)
    ap.add_argument("--worker-rust", required=True)
    ap.add_argument("--python", default=sys.executable, help="a Python with the caerus package")
    ap.add_argument("--node", default="node")
    ap.add_argument("--samples", default=here)
    ap.add_argument("--short", action="store_true", help="the quick form (make test)")
    ap.add_argument("--no-node", action="store_true", help="Rust and Python workers only")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data)")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="caerus-demo-")
    demo = Demo(args, workdir)
    ok = False
    try:
        ok = demo.run()
    finally:
        demo.stop_all()
        if ok and not args.keep:
            subprocess.run(["rm", "-rf", workdir])
        else:
            print(f"logs and data kept in {workdir}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

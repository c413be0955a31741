#!/usr/bin/env python3
"""Leader election sample: three instances of a scheduler campaign for one key; one leads,
and when it is killed (SIGKILL: no goodbye, its lease just stops being renewed) the next
instance in line takes over with a higher term.

1. Instances s1, s2, s3 start and campaign for scheduler/leader (lease 2 s); each prints
   "LEADER <name> term <token>" when it leads and then works, stamping each tick with its
   term (what real work would hand to storage as its fencing token).
2. An observer (client.election(...).observe()) prints every change of leader.
3. The sample kills the leader with SIGKILL; within about a lease the next one leads,
   with a higher term, and the observer sees it.

  python3 election.py --dls /path/to/dls          # starts its own single-node server
  python3 election.py --endpoints 127.0.0.1:7070  # or uses a running cluster

Exit status 0 when exactly one instance led at a time and the failover happened.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

NAMESPACE, KEY = "scheduler", "leader"
LEASE_MS = 2000


def instance(name):
    """Campaigns, then leads until killed (or until leadership is lost)."""
    from caerus import sync

    election = sync.DlsClient().election(NAMESPACE, KEY)
    print(f"[{name}] campaigning", flush=True)
    leadership = election.campaign(name, lease_ms=LEASE_MS)
    print(f"LEADER {name} term {leadership.term}", flush=True)
    while True:
        # The work of a leader, stamped with its term; stop at once if leadership is lost.
        lost = leadership.lost(timeout=0.5)
        if lost is not None:
            print(f"[{name}] lost leadership: {lost.kind}", flush=True)
            return 2
        print(f"[{name}] tick (term {leadership.term})", flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(args):
    from caerus import sync

    work = tempfile.mkdtemp(prefix="caerus-election-")
    me = os.path.abspath(__file__)
    env = dict(os.environ, DLS_ENDPOINTS=args.endpoints)
    server, procs = None, {}
    leaders = []  # (name, term) in the order the instances announced leadership
    lock = threading.Lock()
    try:
        if args.dls:
            server = subprocess.Popen([args.dls, "serve", "--listen", args.endpoints, "--data-dir",
                                       os.path.join(work, "dls")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run([args.dls, "lock", "--wait-timeout", "5s", "--endpoints", args.endpoints,
                            "election-sample", "ready", "--", "true"], check=True, env=env, timeout=30)
        client = sync.DlsClient(endpoints=[args.endpoints])
        observed = []

        def observe():
            for leader in client.election(NAMESPACE, KEY).observe():
                name = leader.transaction_name if leader else None
                print(f"[observer] leader: {name}", flush=True)
                observed.append(name)

        threading.Thread(target=observe, daemon=True).start()

        def follow(name, proc):
            for line in proc.stdout:
                if line.startswith("LEADER"):
                    with lock:
                        leaders.append((name, int(line.split()[-1])))
                if "tick" not in line:
                    print(line, end="", flush=True)

        for name in ("s1", "s2", "s3"):
            procs[name] = subprocess.Popen([sys.executable, me, "--instance", name], env=env,
                                           stdout=subprocess.PIPE, text=True)
            threading.Thread(target=follow, args=(name, procs[name]), daemon=True).start()
            time.sleep(0.2)  # a fixed order in line, for a readable output

        def wait_for_leaders(n, within):
            deadline = time.monotonic() + within
            while time.monotonic() < deadline:
                with lock:
                    if len(leaders) >= n:
                        return list(leaders)
                time.sleep(0.05)
            with lock:
                return list(leaders)

        first = wait_for_leaders(1, 30)
        if not first:
            print("[sample] nobody led -> FAIL")
            return 1
        name, term = first[0]
        os.kill(procs[name].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        print(f"[sample] killed the leader {name} (SIGKILL)", flush=True)
        after = wait_for_leaders(2, 30)
        took = time.monotonic() - killed_at
        time.sleep(0.5)  # let the observer catch up
        ok = (
            len(after) == 2
            and after[1][0] != name
            and after[1][1] > term
            and len(wait_for_leaders(3, 0)) == 2  # only one new leader
            and name in observed
            and after[1][0] in observed
        )
        if len(after) == 2:
            print(f"[sample] {after[1][0]} leads after {took:.1f} s with term {after[1][1]} > {term}")
        print(f"[sample] leaders in order: {after}; observer saw {observed} -> {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if server:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dls", help="start a single-node server with this dls binary")
    ap.add_argument("--endpoints", default=os.environ.get("DLS_ENDPOINTS", "127.0.0.1:7070"))
    ap.add_argument("--instance", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.instance:
        return instance(args.instance)
    if args.dls:
        args.endpoints = f"127.0.0.1:{free_port()}"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

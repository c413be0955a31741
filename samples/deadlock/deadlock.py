#!/usr/bin/env python3
"""Deadlock sample: two services move money between the same two accounts, taking the two
account locks in opposite order. Caerus DLS finds the cycle in its wait-for graph and aborts
one transaction (the victim); the other completes. An event watcher shows the
deadlock_resolved event from the cluster's log.

  python3 deadlock.py --dls /path/to/dls          # starts its own single-node server
  python3 deadlock.py --endpoints 127.0.0.1:7070  # or uses a running cluster

Exit status 0 when exactly one service was the victim and the other completed.
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

NAMESPACE = "accounts"


def service(name, first, second):
    """One service: lock `first`, give the other service time to lock `second`, then ask
    for `second` too. Exit 0 when the transfer completed, 4 as the deadlock victim."""
    from caerus import DeadlockVictim, LockMode
    from caerus.sync import DlsClient

    def say(msg):
        print(f"[{name}] {msg}", flush=True)

    tx = DlsClient().begin_transaction(timeout_ms=10000, name=name)
    lock = tx.acquire_lock(NAMESPACE, first, LockMode.EXCLUSIVE, timeout_ms=10000)
    say(f"holds {NAMESPACE}/{first} (token {lock.fencing_token}); transaction {tx.id}")
    time.sleep(1.0)  # the other service takes its first lock meanwhile
    say(f"asks for {NAMESPACE}/{second}")
    try:
        lock = tx.acquire_lock(NAMESPACE, second, LockMode.EXCLUSIVE, timeout_ms=10000)
    except DeadlockVictim as e:
        say(f"chosen as the deadlock victim: {e.code}: {e.message}")
        say("its locks are gone; a real service would retry the transfer from the start")
        return 4
    say(f"holds {NAMESPACE}/{second} too (token {lock.fencing_token}); moving the money")
    time.sleep(0.2)
    tx.commit()
    say("transfer done; committed")
    return 0


def watch(endpoints, seen):
    from caerus.sync import DlsClient

    for event in DlsClient(endpoints=endpoints).watch_events(only_new=True, kinds=["DEADLOCK_RESOLVED"]):
        d = event.detail
        cycle = ", ".join(f"{m['transaction_name']} (txn {m['transaction_id']}) waits for {m['namespace']}/{m['key']}"
                          for m in d.get("cycle", []))
        print(f"[events] #{event.sequence} {event.kind}: victim transaction {d.get('victim_transaction_id')} "
              f"by policy {d.get('policy')}; cycle: {cycle}", flush=True)
        seen.append(event)
        return  # one deadlock is all this sample makes


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dls", help="start a single-node server with this dls binary")
    ap.add_argument("--endpoints", default=os.environ.get("DLS_ENDPOINTS", "127.0.0.1:7070"))
    ap.add_argument("role", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:  # a service process: NAME FIRST SECOND
        sys.exit(service(*args.role))

    server, data = None, None
    if args.dls:
        data = tempfile.mkdtemp(prefix="caerus-deadlock-")
        args.endpoints = f"127.0.0.1:{free_port()}"
        server = subprocess.Popen([args.dls, "serve", "--listen", args.endpoints, "--data-dir", data],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = dict(os.environ, DLS_ENDPOINTS=args.endpoints)
    os.environ["DLS_ENDPOINTS"] = args.endpoints
    try:
        if server:  # wait until the server answers
            subprocess.run([args.dls, "lock", "--wait-timeout", "5s", "--endpoints", args.endpoints,
                            "deadlock-sample", "ready", "--", "true"], check=True, env=env, timeout=30)
        seen = []
        watcher = threading.Thread(target=watch, args=(args.endpoints, seen), daemon=True)
        watcher.start()
        time.sleep(0.3)
        me = os.path.abspath(__file__)
        services = [subprocess.Popen([sys.executable, me, "payments", "alice", "bob"], env=env),
                    subprocess.Popen([sys.executable, me, "refunds", "bob", "alice"], env=env)]
        codes = sorted(p.wait(timeout=60) for p in services)
        watcher.join(timeout=5)
        ok = codes == [0, 4] and len(seen) == 1
        print(f"[sample] exit codes {codes}, deadlock events seen: {len(seen)} -> {'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        if server:
            server.kill()
            server.wait()
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

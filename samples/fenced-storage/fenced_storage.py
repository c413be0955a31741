#!/usr/bin/env python3
"""Fenced storage sample: report workers write to SQLite through the fencing guard
(caerus.fence), so a worker that stalls past its lease cannot overwrite the next holder's
work.

1. Worker A takes the lock reports/2024-05 (lease 1 s), writes the report's "totals" part
   with its fencing token, and freezes (SIGSTOP, as in a long GC pause) before "details".
2. Its lease expires; worker B gets the lock with a higher token and writes both parts.
3. A is resumed (SIGCONT) and, still believing it holds the lock, writes "details": the
   guard refuses it (StaleTokenError) and B's report stays as B wrote it.

  python3 fenced_storage.py --dls /path/to/dls          # starts its own single-node server
  python3 fenced_storage.py --endpoints 127.0.0.1:7070  # or uses a running cluster

Exit status 0 when A's late write was refused and the report is B's.
"""

import argparse
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

NAMESPACE, KEY = "reports", "2024-05"
RESOURCE = f"{NAMESPACE}/{KEY}"  # the guard's resource: one per lock, named after it
LEASE_MS = 1000


def open_db(path):
    conn = sqlite3.connect(path, timeout=10)
    conn.execute("CREATE TABLE IF NOT EXISTS report (month TEXT, part TEXT, body TEXT, writer TEXT, token INTEGER,"
                 " PRIMARY KEY (month, part))")
    from caerus import fence

    fence.install(conn)  # the caerus_fence table: last accepted token per resource
    return conn


def worker(name, db_path, stall):
    """Takes the lock and writes the report's two parts, each through the guard. With
    `stall`, waits on stdin between them: the point where the demo freezes this process.
    Exit 0 when done, 3 when the storage refused a write as stale."""
    from caerus import fence, sync
    from caerus.fence import StaleTokenError

    def say(msg):
        print(f"[{name}] {msg}", flush=True)

    conn = open_db(db_path)
    tx = sync.DlsClient().begin_transaction(timeout_ms=LEASE_MS, name=f"report-{name}")
    lock = tx.acquire_lock(NAMESPACE, KEY, timeout_ms=15000)
    say(f"holds {RESOURCE}, fencing token {lock.fencing_token}")
    for part in ("totals", "details"):
        try:
            # One SQLite transaction: the token check (refused if a later holder wrote),
            # then the write; committed together or not at all.
            with fence.fenced(conn, RESOURCE, lock.fencing_token) as cur:
                cur.execute("INSERT OR REPLACE INTO report VALUES (?, ?, ?, ?, ?)",
                            (KEY, part, f"{part} computed by {name}", name, lock.fencing_token))
        except StaleTokenError as e:
            say(f"write of {part!r} refused: {e}")
            return 3
        say(f"wrote {part!r}")
        if stall and part == "totals":
            say("stalling before the next write")
            sys.stdin.readline()
            say("woke up; writing on, unaware that the lease is gone")
    try:
        tx.commit()
    except Exception as e:  # a stalled worker's transaction is gone by now
        say(f"commit failed: {e}")
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(args):
    work = tempfile.mkdtemp(prefix="caerus-fenced-storage-")
    db_path = os.path.join(work, "reports.db")
    me = os.path.abspath(__file__)
    env = dict(os.environ, DLS_ENDPOINTS=args.endpoints)
    server, a = None, None
    try:
        if args.dls:
            server = subprocess.Popen([args.dls, "serve", "--listen", args.endpoints, "--data-dir",
                                       os.path.join(work, "dls")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run([args.dls, "lock", "--wait-timeout", "5s", "--endpoints", args.endpoints,
                            "fenced-storage-sample", "ready", "--", "true"], check=True, env=env, timeout=30)
        open_db(db_path).close()

        a = subprocess.Popen([sys.executable, me, "--worker", "A", "--db", db_path, "--stall"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for line in a.stdout:
            print(line, end="", flush=True)
            if "stalling" in line:
                break
        os.kill(a.pid, signal.SIGSTOP)  # no heartbeats from here on: the lease runs out
        print("[sample] A frozen (SIGSTOP)", flush=True)
        started = time.monotonic()
        b = subprocess.run([sys.executable, me, "--worker", "B", "--db", db_path], env=env, timeout=60)
        print(f"[sample] B done after {time.monotonic() - started:.1f} s, exit {b.returncode}", flush=True)
        os.kill(a.pid, signal.SIGCONT)
        print("[sample] A resumed (SIGCONT)", flush=True)
        a.stdin.write("\n")
        a.stdin.flush()
        for line in a.stdout:
            print(line, end="", flush=True)
        a_code = a.wait(timeout=30)

        conn = sqlite3.connect(db_path)
        rows = conn.execute("SELECT part, writer, token FROM report ORDER BY part").fetchall()
        last = conn.execute("SELECT last_token FROM caerus_fence WHERE resource = ?", (RESOURCE,)).fetchone()[0]
        for part, writer, token in rows:
            print(f"[sample] report {KEY} {part}: by {writer} (token {token})")
        print(f"[sample] caerus_fence: {RESOURCE} last_token {last}")
        ok = a_code == 3 and b.returncode == 0 and [w for _, w, _ in rows] == ["B", "B"]
        print(f"[sample] A exit {a_code} (3 = refused), B exit {b.returncode}; report all by B -> "
              f"{'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        if a and a.poll() is None:  # a failed run must not leave a frozen worker behind
            os.kill(a.pid, signal.SIGCONT)
            a.kill()
            a.wait()
        if server:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dls", help="start a single-node server with this dls binary")
    ap.add_argument("--endpoints", default=os.environ.get("DLS_ENDPOINTS", "127.0.0.1:7070"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--stall", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.db, args.stall)
    if args.dls:
        args.endpoints = f"127.0.0.1:{free_port()}"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

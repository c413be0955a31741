"""Three "hosts", each a Celery worker with its own beat (`celery worker -B`), fire the same
task every 2 s; `caerus.scheduling.once_per` runs it once per 6-second slot. Checks at the
end that no slot ran twice and that several slots ran.

  python run.py --dls /path/to/dls          # starts its own single-node server
  python run.py --endpoints 127.0.0.1:7070  # against a running cluster
"""

import argparse
import collections
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HOSTS = ["host-a", "host-b", "host-c"]
HERE = os.path.dirname(os.path.abspath(__file__))


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
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="caerus-celery-")
    runs_file = os.path.join(work, "runs.log")
    procs = []
    try:
        if args.dls:
            args.endpoints = f"127.0.0.1:{free_port()}"
            procs.append(subprocess.Popen([args.dls, "serve", "--listen", args.endpoints, "--data-dir",
                                           os.path.join(work, "dls")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            subprocess.run([args.dls, "lock", "--wait-timeout", "5s", "--endpoints", args.endpoints,
                            "samples", "ready", "--", "true"], check=True, timeout=30)
        celery = os.path.join(os.path.dirname(sys.executable), "celery")
        for host in HOSTS:
            env = dict(os.environ, DLS_ENDPOINTS=args.endpoints, HOST=host, RUNS_FILE=runs_file,
                       BROKER_DIR=os.path.join(work, host, "broker"))
            # Each host its own broker and beat: three deployments of the same app, as after a
            # failover that left two beats running, or one beat per region.
            procs.append(subprocess.Popen(
                [celery, "-A", "tasks", "worker", "-B", "--pool", "solo", "-l", "info", "-n", f"{host}@%h",
                 "-s", os.path.join(work, host, "beat-schedule")],
                cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=None if os.environ.get("VERBOSE") else subprocess.DEVNULL))
        print(f"[sample] {len(HOSTS)} Celery workers with beat, every 2 s, once per 6 s slot; running {args.seconds:.0f} s", flush=True)
        time.sleep(args.seconds)
    finally:
        # The workers first (a warm shutdown finishes the task at hand), the server last.
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    try:
        with open(runs_file) as f:
            runs = [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        runs = []
    finally:
        shutil.rmtree(work, ignore_errors=True)
    by_slot = collections.defaultdict(list)
    for slot, host in runs:
        by_slot[int(slot)].append(host)
    for slot in sorted(by_slot):
        print(f"slot {slot}: ran on {', '.join(by_slot[slot])}")
    twice = {s: h for s, h in by_slot.items() if len(h) > 1}
    ok = len(by_slot) >= 2 and not twice
    print(f"[sample] {len(runs)} runs in {len(by_slot)} slots, slots run more than once: {twice or 'none'} -> {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

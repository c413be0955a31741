#!/usr/bin/env python3
"""Wait until a dls node answers /readyz with 200 on its HTTP port, while its process lives.

Usage: scripts/wait-ready.py HTTP_PORT PID SECONDS
Exits 0 when ready; non-zero, saying why, when the process exited or the time ran out.
"""
import os
import sys
import time
import urllib.request


def main():
    port, pid, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("dls exited")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1).status == 200:
                return 0
        except Exception:
            pass
        time.sleep(0.1)
    sys.exit(f"not ready within {seconds:g} s")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Monthly billing worker (Python, synchronous caerus API).

Takes billing-jobs/monthly-billing-job exclusively, asks the ledger which customers of the
cycle are already charged, charges the others with the lock's fencing token, and commits.
Settings and exit codes: see README.md (the same as the Rust and Node workers).
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

from caerus import LockMode, LockTimeout
from caerus.sync import DlsClient

NAMESPACE, KEY = "billing-jobs", "monthly-billing-job"
RESOURCE = f"{NAMESPACE}/{KEY}"
# The subscriptions billed every cycle: customer and monthly price in cents.
SUBSCRIPTIONS = [("acme", 4900), ("globex", 2900), ("initech", 9900),
                 ("umbrella", 1900), ("hooli", 4900), ("stark", 14900)]
EXIT_FENCED, EXIT_BUSY = 3, 75


def http(ledger, method, path, body=None):
    """One request to the ledger: (status, parsed JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(ledger.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:  # 4xx/5xx still carry a JSON body
        return e.code, json.load(e)


def main():
    cycle = os.environ.get("CYCLE") or sys.exit("set CYCLE, e.g. CYCLE=2026-11")
    ledger = os.environ.get("LEDGER_URL", "http://127.0.0.1:8080")
    name = os.environ.get("WORKER_NAME") or f"python-{os.getpid()}"
    lease_ms = int(os.environ.get("LEASE_MS", "15000"))
    wait_ms = int(os.environ.get("LOCK_WAIT_MS", "60000"))
    delay = int(os.environ.get("CHARGE_DELAY_MS", "0")) / 1000

    def say(msg):
        print(f"[{name}] cycle {cycle}: {msg}", flush=True)

    client = DlsClient()  # endpoints from $DLS_ENDPOINTS, key from $CAERUS_API_KEY
    tx = client.begin_transaction(timeout_ms=lease_ms, name=f"{name} {cycle}")
    say(f"waiting for {RESOURCE} (transaction {tx.id})")
    try:
        lock = tx.acquire_lock(NAMESPACE, KEY, LockMode.EXCLUSIVE, timeout_ms=wait_ms)
    except LockTimeout:
        say(f"lock still busy after {wait_ms} ms; giving up")
        tx.abort()
        return EXIT_BUSY
    token = lock.fencing_token
    say(f"lock acquired, fencing token {token}")

    # Which subscriptions of this cycle are already charged (by an earlier holder)?
    status, listing = http(ledger, "GET", f"/charges?cycle={cycle}")
    if status != 200:
        tx.abort()
        raise RuntimeError(f"ledger answered {status} to the listing: {listing}")
    charged = {c["customer"] for c in listing["charges"]}
    todo = [(c, amount) for c, amount in SUBSCRIPTIONS if c not in charged]
    if not todo:
        say("already billed; skipping")
        tx.commit()
        return 0
    if charged:
        say(f"{len(charged)} of {len(SUBSCRIPTIONS)} already charged by an earlier holder; resuming")

    for customer, amount_cents in todo:
        time.sleep(delay)
        # No "is my lock still mine?" check before writing: it could pass and the process be
        # paused right after. The ledger's fencing check is what protects.
        status, answer = http(ledger, "POST", "/charges", {
            "resource": RESOURCE, "customer": customer, "amount_cents": amount_cents,
            "cycle": cycle, "fencing_token": token})
        if status == 201:
            say(f"charged {customer} {amount_cents} cents (token {token})")
        elif status == 409:
            say(f"ledger REJECTED the charge of {customer} with 409: token {token} is stale "
                f"(last accepted {answer.get('last_token')}); another worker took over, stopping")
            tx.abort()
            return EXIT_FENCED
        else:
            tx.abort()
            raise RuntimeError(f"ledger answered {status} to a charge: {answer}")
    tx.commit()
    say("billed; committed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Latency of one cheap call through the Python SDK (caerus), for the binding-overhead table
of bench/sdk/overhead.sh: begins a transaction, then calls ``transaction_status`` on it
sequentially (``--warmup`` untimed calls, then ``--calls`` timed ones) through the blocking
API (``caerus.sync``) or the asyncio API (``caerus``), and prints one JSON line.

``--table FILE`` instead reads the JSON lines of every language's runs and prints the
markdown table: p50 per run, the median, and the median p50 minus the lowest Rust median
p50 (the binding's per-call overhead over the floor of the call in Rust), and minus the Rust
row that hands each result to a thread outside tokio (the hand-over every binding pays).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time


def summary(api: str, ns: list[int]) -> dict:
    ns.sort()

    def pct(p: float) -> float:
        i = min(max(math.ceil(p * len(ns)), 1), len(ns)) - 1
        return round(ns[i] / 1000.0, 1)

    return {
        "language": "python",
        "api": api,
        "call": "transaction_status",
        "calls": len(ns),
        "p50_us": pct(0.50),
        "p90_us": pct(0.90),
        "p99_us": pct(0.99),
    }


def run_sync(endpoints: list[str], warmup: int, calls: int) -> dict:
    from caerus.sync import DlsClient

    client = DlsClient(endpoints=endpoints)
    tx = client.begin_transaction()
    for _ in range(warmup):
        client.transaction_status(tx.id)
    ns = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        client.transaction_status(tx.id)
        ns.append(clock() - t0)
    tx.abort()
    return summary("caerus.sync (blocking)", ns)


async def run_asyncio(endpoints: list[str], warmup: int, calls: int) -> dict:
    from caerus import DlsClient

    client = DlsClient(endpoints=endpoints)
    tx = await client.begin_transaction()
    for _ in range(warmup):
        await client.transaction_status(tx.id)
    ns = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        t0 = clock()
        await client.transaction_status(tx.id)
        ns.append(clock() - t0)
    await tx.abort()
    return summary("caerus (asyncio)", ns)


ORDER = ["rust", "python", "node", "kotlin"]


def table(path: str) -> str:
    runs: dict[tuple[str, str], list[dict]] = {}
    for line in open(path):
        if line.lstrip().startswith("{"):
            r = json.loads(line)
            runs.setdefault((r["language"], r["api"]), []).append(r)
    keys = sorted(runs, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else len(ORDER), k[1]))
    med = {k: statistics.median(r["p50_us"] for r in runs[k]) for k in keys}
    rust = min((med[k] for k in keys if k[0] == "rust"), default=None)
    # The Rust row whose result crosses to a thread outside tokio, as every binding's does.
    hand_over = next((med[k] for k in keys if k[0] == "rust" and "outside tokio" in k[1]), None)
    out = [
        "| language | API | p50 per run (µs) | p50 median | p90 median | p99 median | p50 over Rust's lowest "
        "| p50 over Rust's hand-over |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for k in keys:
        rs = runs[k]
        per_run = " / ".join(f"{r['p50_us']:.0f}" for r in rs)
        p90 = statistics.median(r["p90_us"] for r in rs)
        p99 = statistics.median(r["p99_us"] for r in rs)
        over = "–" if rust is None else f"{med[k] - rust:+.0f} µs"
        over_hand = "–" if hand_over is None else f"{med[k] - hand_over:+.0f} µs"
        out.append(f"| {k[0]} | {k[1]} | {per_run} | {med[k]:.0f} | {p90:.0f} | {p99:.0f} | {over} | {over_hand} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--api", choices=["sync", "asyncio"], default="sync")
    ap.add_argument("--endpoints", default="127.0.0.1:7070", help="comma-separated host:port list")
    ap.add_argument("--calls", type=int, default=5000, help="timed calls (default 5000)")
    ap.add_argument("--warmup", type=int, default=1000, help="untimed calls first (default 1000)")
    ap.add_argument("--table", metavar="FILE", help="print the table of the JSON lines in FILE and exit")
    args = ap.parse_args()
    if args.table:
        sys.stdout.write(table(args.table))
        return 0
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]
    if args.api == "sync":
        result = run_sync(endpoints, args.warmup, args.calls)
    else:
        result = asyncio.run(run_asyncio(endpoints, args.warmup, args.calls))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

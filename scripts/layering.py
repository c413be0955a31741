#!/usr/bin/env python3
"""Check that no file of the server imports a file of a higher layer (exit 1 if one does).

The server's files are layered, lowest first. A file may name files of its own layer or of
lower ones; an arrow that runs up the layers (the raft storage naming the engine, say) is
the start of a tangle even before it closes a circle (scripts/import-circles.py catches
those). Edges are computed as in import-circles.py. A file belongs to the most specific
entry naming it (a file beats its directory). lib.rs and main.rs, the roots, are not layered.
A new top-level module must be given a layer here.

Usage: scripts/layering.py
"""
import importlib.util
import os
import sys

LAYERS = [
    # What any part of a node uses: addresses, certificates and secrets, TLS, the accept
    # loops' bounds, the metrics text format, the wake-ups applied effects send.
    ("base", ["listeners.rs", "certs.rs", "secret_files.rs", "tls.rs", "exposition.rs", "conn",
              "key_wakeups.rs", "txn_wakeups.rs", "platform"]),
    # Raft storage and network, what bounds the proposals, the feature levels, metrics, and
    # what every layer above knows of a request (who, and how it fails).
    ("raft", ["raft", "limits.rs", "security.rs", "metrics", "metrics.rs", "telemetry", "request",
              "versions"]),
    # One node: raft, timers and membership wired together, and what drives it.
    ("node", ["node.rs", "lease.rs", "members.rs", "handoff.rs", "versions/watch.rs"]),
    # The one way into the lock table.
    ("engine", ["engine"]),
    # The edges clients reach: gRPC, HTTP, webhooks.
    ("edge", ["api", "http", "webhooks"]),
    # Flags into a running node: configuration and the ports' routers.
    ("wiring", ["config.rs", "serve"]),
]
SERVER_SRC = "server/src"


def load_import_circles(top):
    spec = importlib.util.spec_from_file_location("import_circles", os.path.join(top, "scripts", "import-circles.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def layer_of(rel):
    """(index, name) of the most specific LAYERS entry for a path relative to src/, or None."""
    best = None
    for i, (name, entries) in enumerate(LAYERS):
        for entry in entries:
            if rel == entry or rel.startswith(entry.rstrip("/") + "/"):
                if best is None or len(entry) > best[2]:
                    best = (i, name, len(entry))
    return best and best[:2]


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = os.path.join(top, SERVER_SRC)
    _, graph = load_import_circles(top).circles(src)
    problems = []
    for path in sorted(graph):
        rel = os.path.relpath(path, src)
        if rel in ("lib.rs", "main.rs"):
            continue
        here = layer_of(rel)
        if here is None:
            problems.append(f"{SERVER_SRC}/{rel} has no layer: add it to LAYERS in scripts/layering.py")
            continue
        for target in sorted(graph[path]):
            trel = os.path.relpath(target, src)
            there = layer_of(trel)
            if trel in ("lib.rs", "main.rs") or there is None:
                continue
            if there[0] > here[0]:
                problems.append(f"{SERVER_SRC}/{rel} ({here[1]}) imports {trel} ({there[1]}): an arrow up the layers")
    for p in problems:
        print(p)
    print(f"{len(problems)} layering problem(s) in {SERVER_SRC}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Check that every cargo build CI runs resolves dependencies with the features of `cargo test`.

Cargo picks a dependency's features per invocation. When `cargo build -p caerus-node` (napi)
enables fewer features of, say, tower than `cargo test` does, tower and everything above it
are compiled a second time; on a fresh machine that was minutes per SDK build. The crate
`workspace-hack/` lists the union so all builds agree; this script fails when one drifts and
prints the lines to add there.

Workspace crates are left out of the comparison: the Python build turns on caerus-types'
`pyo3` feature on purpose, which rebuilds only our own small crates.

Usage: scripts/feature-drift.py   (from the repository root; runs `cargo tree`, offline-safe)
"""
import json
import re
import subprocess
import sys

# What CI compiles, one cargo invocation each (Makefile, bindings/*/Makefile, samples, chaos,
# bench, conformance/run.sh); the first is the baseline every other must match.
BUILDS = [
    ("cargo test (make test-rust)", ["-e", "all"]),
    ("dls (make dls-debug)", ["-p", "caerus-cli"]),
    # The server's suite alone; the dls it starts is built by testkit with `-p caerus-cli`.
    ("server tests (cargo test -p caerus-server)", ["-p", "caerus-server", "-e", "all"]),
    ("Python SDK (maturin)", ["-p", "caerus-python", "--features", "pyo3/extension-module"]),
    ("Node SDK (napi build)", ["-p", "caerus-node"]),
    ("Kotlin/Swift SDK (uniffi)", ["-p", "caerus-uniffi"]),
    ("samples", ["-p", "ledger", "-p", "billing-worker-rust"]),
    ("chaos", ["-p", "caerus-chaos"]),
    ("bench", ["-p", "caerus-bench", "-p", "caerus-testkit"]),
    ("conformance", ["-p", "caerus-conformance", "-p", "caerus-testkit"]),
]

LINE = re.compile(r"^(\S+) v(\S+)(?: \((.*?)\))? \[(.*)\]$")


def workspace_members():
    meta = json.loads(subprocess.check_output(["cargo", "metadata", "--no-deps", "--format-version", "1"]))
    return {p["name"] for p in meta["packages"]}


def features(args):
    """{(name, version): the feature sets it is built with} over the invocation's graph.

    A crate can be built twice in one invocation, for the target and for the host (build
    scripts, proc-macros) with other features; both must match."""
    out = subprocess.check_output(
        ["cargo", "tree", "--prefix", "none", "-f", "{p} [{f}]", "-e", "normal,build", *args],
        text=True,
        stderr=subprocess.DEVNULL,
    )
    found = {}
    for line in out.splitlines():
        line = line.replace(" (*)", "").replace(" (proc-macro)", "")
        m = LINE.match(line.strip())
        if m:
            found.setdefault((m[1], m[2]), set()).add(frozenset(f for f in m[4].split(",") if f))
    return found


def show(sets):
    return " and ".join("[" + ",".join(sorted(s)) + "]" for s in sorted(sets, key=sorted))


def main():
    members = workspace_members()
    (base_name, base_args), *others = BUILDS
    base = features(base_args)
    drift = {}
    for name, args in others:
        for pkg, feats in features(args).items():
            if pkg[0] in members or pkg not in base or feats == base[pkg]:
                continue
            drift.setdefault(pkg, []).append((name, feats))
    if not drift:
        print(f"feature drift: none ({len(BUILDS)} builds resolve dependencies like {base_name})")
        return 0
    print("feature drift: these builds resolve dependencies with other features than", base_name)
    print("(each difference compiles the crate and its dependents again). Add the missing features to")
    print("workspace-hack/Cargo.toml: [dependencies] for the target, [build-dependencies] for the host.\n")
    for (pkg, version), rows in sorted(drift.items()):
        print(f"  {pkg} {version}: {base_name}: {show(base[(pkg, version)])}")
        for name, feats in rows:
            print(f"  {' ' * len(pkg)} {' ' * len(version)}  {name}: {show(feats)}")
        print()
    return 1


if __name__ == "__main__":
    sys.exit(main())

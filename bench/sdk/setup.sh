#!/usr/bin/env bash
# Installs what the SDK drivers run with, outside the checkout, from the packages just built:
#   $SDK_BENCH_PY   virtualenv: the caerus wheel (bindings/python/dist, reinstalled every run,
#                   so a fresh `make wheel` is what gets measured) and python/requirements.txt
#   $SDK_BENCH_NODE npm project: @caerus-dev/sdk + @caerus-dev/sdk-linux-x64-gnu from the
#                   tarballs of `make npm-pack` (reinstalled every run), etcd3 and ioredis
#                   (package-lock.json), and the driver scripts copied beside node_modules
# Usage: bench/sdk/setup.sh [python] [node]   (default both)
# Environment: CAERUS_TOOLS_DIR (default ~/.cache/caerus-dls/tools), SDK_BENCH_PY, SDK_BENCH_NODE.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TOOLS=${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}
SDK_BENCH_PY=${SDK_BENCH_PY:-$TOOLS/sdk-bench-py}
SDK_BENCH_NODE=${SDK_BENCH_NODE:-$TOOLS/sdk-bench-node}
WHEEL_DIR=${WHEEL_DIR:-$REPO/bindings/python/dist}
NPM_DIST=${NPM_DIST:-$REPO/bindings/node/dist}
langs=("$@"); [ ${#langs[@]} -gt 0 ] || langs=(python node)

for lang in "${langs[@]}"; do
  case $lang in
  python)
    wheel=$(ls -t "$WHEEL_DIR"/caerus_dls-*.whl 2>/dev/null | head -1 || true)
    [ -n "$wheel" ] || { echo "no caerus wheel in $WHEEL_DIR: run 'make wheel' first" >&2; exit 1; }
    if [ ! -x "$SDK_BENCH_PY/bin/python" ]; then
      echo "==> creating the driver virtualenv $SDK_BENCH_PY"
      python3 -m venv "$SDK_BENCH_PY"
    fi
    stamp="$SDK_BENCH_PY/.requirements"
    if ! cmp -s "$HERE/python/requirements.txt" "$stamp"; then
      echo "==> installing python-etcd3, redis-py and their pins (bench/sdk/python/requirements.txt)"
      "$SDK_BENCH_PY/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/python/requirements.txt"
      cp "$HERE/python/requirements.txt" "$stamp"
    fi
    echo "==> installing $(basename "$wheel") into $SDK_BENCH_PY"
    "$SDK_BENCH_PY/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
    ;;
  node)
    tarballs=("$NPM_DIST"/caerus-dev-sdk-*.tgz)
    [ -f "${tarballs[0]}" ] || { echo "no @caerus-dev/sdk tarballs in $NPM_DIST: run 'make npm-pack' first" >&2; exit 1; }
    mkdir -p "$SDK_BENCH_NODE"
    if ! cmp -s "$HERE/node/package-lock.json" "$SDK_BENCH_NODE/package-lock.json" ||
       [ ! -d "$SDK_BENCH_NODE/node_modules/etcd3" ]; then
      echo "==> npm ci of etcd3 and ioredis into $SDK_BENCH_NODE"
      cp "$HERE/node/package.json" "$HERE/node/package-lock.json" "$SDK_BENCH_NODE/"
      (cd "$SDK_BENCH_NODE" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    echo "==> installing $(cd "$NPM_DIST" && echo caerus-dev-sdk-*.tgz) into $SDK_BENCH_NODE"
    (cd "$SDK_BENCH_NODE" && npm install --no-save --no-audit --no-fund --loglevel=error "${tarballs[@]}")
    cp "$HERE"/node/*.mjs "$SDK_BENCH_NODE/"
    ;;
  *) echo "usage: setup.sh [python] [node]" >&2; exit 2 ;;
  esac
done

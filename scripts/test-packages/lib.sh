# Shared by the package tests (python.sh, node.sh): a work directory removed on exit, a
# real dls node started through the test kit's dls-cluster, and a PATH without Rust.
# Source it after setting `name` (used in log lines).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
DLS_BIN="${DLS_BIN:-$target/debug/dls}"
KIT_BIN="${KIT_BIN:-$target/debug/dls-cluster}"

log() { echo "==> $name: $*" >&2; }
fail() { echo "FAIL $name: $*" >&2; exit 1; }

# shellcheck source=../../testkit/dls-cluster.sh
. "$repo/testkit/dls-cluster.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/caerus-$name-package.XXXXXX")"
cleanup() {
  dls_cluster_stop
  rm -rf "$work"
}
trap cleanup EXIT

# Starts one node on free ports (data in $work/cluster) and exports DLS_ENDPOINTS, the
# variable the SDKs read when no endpoints are given. The node is open (no API keys: the
# quick starts as printed run against a node started as `make run` starts one), so
# CAERUS_API_KEY, which the examples pass, is any string.
start_dls() {
  export CAERUS_API_KEY=unused-on-an-open-node
  dls_cluster_start "$KIT_BIN" "$DLS_BIN" "$work" || fail "no dls node came up"
  export DLS_ENDPOINTS
  log "dls on $DLS_ENDPOINTS"
}

# PATH without any directory holding cargo or rustc (~/.cargo/bin, rustup toolchains), so
# that an install which tried to compile Rust would fail here instead of passing quietly.
no_rust_path() {
  local dir out=()
  IFS=: read -r -a dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do
    [ -z "$dir" ] || [ -x "$dir/cargo" ] || [ -x "$dir/rustc" ] || out+=("$dir")
  done
  (IFS=:; echo "${out[*]}")
}

# Runs a command with the Rust-free PATH and asserts that neither tool is reachable.
without_rust() {
  PATH="$(no_rust_path)" bash -c 'if command -v cargo || command -v rustc; then echo "Rust still on PATH" >&2; exit 1; fi; exec "$@"' _ "$@"
}

# The README's (and docs/es's) marked code blocks: `snippets show NAME`, `snippets extract
# DIR NAME...`, `snippets list` (scripts/readme_snippets.py; SNIPPETS_ROOT=DIR reads another
# checkout's Markdown, to show a test failing on what it printed).
snippets() { python3 "$repo/scripts/readme_snippets.py" "$@"; }

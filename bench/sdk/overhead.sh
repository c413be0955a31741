#!/usr/bin/env bash
# `make bench-binding`: the per-call overhead of each binding. Starts one single-node release
# dls (the test kit's dls-cluster, free ports), then REPEAT times in turn: N sequential
# transaction_status calls on a running transaction through the Rust core (dls-call-overhead),
# the Python SDK (blocking and asyncio), the Node SDK and the Kotlin SDK. Prints the table
# (p50 per run, medians, p50 minus Rust's) and writes it to <target dir>/bench-results/binding.md.
#
# Picks up the packages last built: the wheel and npm tarballs through bench/sdk/setup.sh,
# the Kotlin SDK from the local Maven repository (make maven-install).
#
# Environment: DLS_BIN, KIT_BIN, CALL_BIN (dls-call-overhead) required; CALLS (5000), WARMUP
# (1000), REPEAT (3), LANGS (rust python node kotlin), SDK_BENCH_PY, SDK_BENCH_NODE,
# CAERUS_DLS_VERSION, MVN, RESULTS (default $RESULTS_DIR/binding.md), RUN_DIR.
set -euo pipefail
: "${DLS_BIN:?DLS_BIN must point at a dls binary}"
: "${KIT_BIN:?KIT_BIN must point at the dls-cluster binary of the test kit}"
: "${CALL_BIN:?CALL_BIN must point at dls-call-overhead}"
HERE=$(cd "$(dirname "$0")" && pwd)
TOOLS=${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}
SDK_BENCH_PY=${SDK_BENCH_PY:-$TOOLS/sdk-bench-py}
SDK_BENCH_NODE=${SDK_BENCH_NODE:-$TOOLS/sdk-bench-node}
CALLS=${CALLS:-5000}; WARMUP=${WARMUP:-1000}; REPEAT=${REPEAT:-3}
LANGS=${LANGS:-rust python node kotlin}
RESULTS_DIR=${RESULTS_DIR:-${CARGO_TARGET_DIR:-$HERE/../../target}/bench-results}
RESULTS=${RESULTS:-$RESULTS_DIR/binding.md}
mkdir -p "$(dirname "$RESULTS")"
read -ra mvn <<<"${MVN:-mvn}"
OWN_RUN_DIR=no
if [ -z "${RUN_DIR:-}" ]; then RUN_DIR=$(mktemp -d /tmp/dls-binding.XXXXXX); OWN_RUN_DIR=yes; fi
mkdir -p "$RUN_DIR"
KIT_PID=""
log() { echo "[binding $(date +%H:%M:%S)] $*" >&2; }
cleanup() {
  [ -n "$KIT_PID" ] || return 0
  kill "$KIT_PID" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$KIT_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$KIT_PID" 2>/dev/null || true
  KIT_PID=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

env_file="$RUN_DIR/dls-cluster.env"
"$KIT_BIN" --dls "$DLS_BIN" --nodes 1 --dir "$RUN_DIR/dls" >"$env_file" 2>"$RUN_DIR/dls-cluster.log" &
KIT_PID=$!
for _ in $(seq 1 600); do grep -q '^DLS_DIR=' "$env_file" 2>/dev/null && break; sleep 0.1; done
grep -q '^DLS_DIR=' "$env_file" || { log "dls did not start: see $RUN_DIR/dls-cluster.log"; exit 1; }
# shellcheck disable=SC1090
. "$env_file"
log "dls (release, 1 node) at $DLS_ENDPOINTS; $CALLS timed calls after $WARMUP, $REPEAT runs per binding"

if [[ " $LANGS " == *" kotlin "* ]]; then
  version=${CAERUS_DLS_VERSION:-0.1.0}
  log "compiling bench/sdk/kotlin against dev.caerus:caerus-dls:$version (local Maven repository) in $RUN_DIR/kotlin"
  mkdir -p "$RUN_DIR/kotlin" && cp -r "$HERE/kotlin/pom.xml" "$HERE/kotlin/src" "$RUN_DIR/kotlin/"
  (cd "$RUN_DIR/kotlin" && "${mvn[@]}" -q -B -Dstyle.color=never -Dcaerus-dls.version="$version" compile) >&2
fi

out="$RUN_DIR/overhead.jsonl"
: >"$out"
CRASHES=()
one() { # one LABEL COMMAND... → appends the command's JSON line
  local label=$1 line rc=0
  log "run $r/$REPEAT: $label"
  shift
  "$@" >"$RUN_DIR/one.out" || rc=$?
  # Maven leaves colour resets on its output lines.
  line=$(sed 's/\x1b\[[0-9;]*m//g' "$RUN_DIR/one.out" | grep '^{' | tail -1) || { log "FAILED (exit $rc, no result): $*"; exit 1; }
  # A crash after the result was printed (e.g. at interpreter shutdown) keeps the figures but is reported.
  [ "$rc" -eq 0 ] || { log "WARNING: $label exited with status $rc after printing its result"; CRASHES+=("$label (run $r): exit $rc after its result"); }
  echo "$line" >>"$out"
  echo "  $line" >&2
}
for r in $(seq 1 "$REPEAT"); do
  for lang in $LANGS; do
    case $lang in
    rust)
      for rt in current-thread multi-thread foreign; do
        one "rust $rt" "$CALL_BIN" --runtime "$rt" --endpoints "$DLS_ENDPOINTS" --calls "$CALLS" --warmup "$WARMUP"
      done ;;
    python)
      for api in sync asyncio; do
        one "python $api" "$SDK_BENCH_PY/bin/python" "$HERE/python/call_overhead.py" --api "$api" \
          --endpoints "$DLS_ENDPOINTS" --calls "$CALLS" --warmup "$WARMUP"
      done ;;
    node) one node node "$SDK_BENCH_NODE/call-overhead.mjs" --endpoints "$DLS_ENDPOINTS" --calls "$CALLS" --warmup "$WARMUP" ;;
    kotlin)
      one kotlin bash -c 'cd "$1" && shift && "$@"' _ "$RUN_DIR/kotlin" "${mvn[@]}" -q -B -Dstyle.color=never \
        -Dcaerus-dls.version="$version" exec:java -Dexec.args="$DLS_ENDPOINTS $CALLS $WARMUP" ;;
    *) log "unknown language $lang (rust python node kotlin)"; exit 2 ;;
    esac
  done
done
cleanup

table=$(python3 "$HERE/python/call_overhead.py" --table "$out")
crashes=""
for c in "${CRASHES[@]}"; do crashes+="- $c"$'\n'; done
[ -z "$crashes" ] || table+=$'\n\n'"Processes that crashed after printing their result:"$'\n'"$crashes"
echo
echo "$table"
mkdir -p "$(dirname "$RESULTS")"
{
  echo "# Binding overhead"
  echo
  echo "Produced by \`${BENCH_COMMAND:-make bench-binding}\` on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPU(s), $(uname -sr):"
  echo "$CALLS sequential transaction_status calls on a running transaction (after $WARMUP untimed), against"
  echo "one release dls node on 127.0.0.1; $REPEAT runs per binding, interleaved."
  echo
  echo "$table"
  echo
  echo '```json'
  cat "$out"
  echo '```'
} >"$RESULTS"
log "wrote $RESULTS"
[ "$OWN_RUN_DIR" = yes ] && rm -rf "$RUN_DIR"
exit 0

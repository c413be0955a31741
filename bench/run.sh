#!/usr/bin/env bash
# Orchestration of `make -C bench smoke|all`: starts the servers on 127.0.0.1 with free
# ports, runs dls-bench, stops everything it started (only its own pids), prints progress.
#
#   run.sh smoke   a few seconds of every workload against one DLS node, then of the Python
#                  and Node SDK drivers where the debug SDK builds exist
#   run.sh all     3-node DLS, Redis (appendfsync always), 3-node etcd if installed;
#                  every workload at CLIENTS (1 16 64); table + $RESULTS_DIR/latest.md (+ .jsonl)
#   run.sh sdk     the same servers, driven by the Python and Node SDK drivers (bench/sdk/,
#                  installed by bench/sdk/setup.sh): SDK_WORKLOADS (uncontended contended) at
#                  SDK_CLIENTS (1 32); tables (with the Rust rows of RUST_JSONL, default
#                  $RESULTS_DIR/latest.jsonl, when it exists) + $RESULTS_DIR/sdk.md
#   run.sh profile a flamegraph of the leader of 3 nodes under PROFILE_WORKLOAD at PROFILE_CLIENTS
#                  (perf + inferno) into $RESULTS_DIR/profiles/
#
# Environment: DLS_BIN, BENCH_BIN, KIT_BIN (dls-cluster, testkit/; all required), DURATION, WARMUP, CLIENTS,
# WORKLOADS, TARGETS, RESULTS_DIR (default <target dir>/bench-results: run output stays out of
# the tree), RESULTS (output .md), RUN_DIR; sdk: SDK_LANGS (python node), SDK_CLIENTS,
# SDK_WORKLOADS, SDK_BENCH_PY (virtualenv), SDK_BENCH_NODE (npm project with the drivers), RUST_JSONL.
set -euo pipefail

MODE=${1:?usage: run.sh smoke|all|sdk|profile}
RESULTS_DIR=${RESULTS_DIR:-${CARGO_TARGET_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target}/bench-results}
: "${DLS_BIN:?DLS_BIN must point at a dls binary}"
: "${BENCH_BIN:?BENCH_BIN must point at a dls-bench binary}"
: "${KIT_BIN:?KIT_BIN must point at the dls-cluster binary of the test kit}"
HERE=$(cd "$(dirname "$0")" && pwd)
OWN_RUN_DIR=no
if [ -z "${RUN_DIR:-}" ]; then RUN_DIR=$(mktemp -d /tmp/dls-bench.XXXXXX); OWN_RUN_DIR=yes; fi
mkdir -p "$RUN_DIR"
PIDS=()

log() { echo "[bench $(date +%H:%M:%S)] $*" >&2; }

cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  PIDS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() { "$BENCH_BIN" --free-ports "$1"; }

# wait_for LOGFILE PATTERN SECONDS
wait_for() {
  local i
  for i in $(seq 1 $(($3 * 10))); do
    if grep -q "$2" $1 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  log "timed out waiting for '$2' in $1"; tail -20 $1 >&2 || true
  return 1
}

# start_dls N → sets DLS_ENDPOINTS, DLS_PIDS, DLS_METRICS (the nodes' HTTP ports). The test
# kit's dls-cluster starts them (free ports, data in $RUN_DIR/dls) and stops them on SIGTERM.
start_dls() {
  local n=$1 env="$RUN_DIR/dls-cluster.env"
  "$KIT_BIN" --dls "$DLS_BIN" --nodes "$n" --dir "$RUN_DIR/dls" >"$env" 2>"$RUN_DIR/dls-cluster.log" &
  PIDS+=($!)
  wait_for "$env" "^DLS_DIR=" 60
  # shellcheck disable=SC1090
  . "$env"
  PIDS+=(${DLS_PIDS//,/ })
  DLS_METRICS=$DLS_HTTP
  log "DLS: $n node(s) at $DLS_ENDPOINTS (pids $DLS_PIDS), data and logs in $DLS_DIR"
}

start_redis() {
  local port; port=$(free_ports 1)
  mkdir -p "$RUN_DIR/redis"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync always \
    --dir "$RUN_DIR/redis" --daemonize no >"$RUN_DIR/redis.log" 2>&1 &
  PIDS+=($!); REDIS_PID=$!
  REDIS_ENDPOINTS="127.0.0.1:$port"
  wait_for "$RUN_DIR/redis.log" "Ready to accept connections" 15
  log "Redis at $REDIS_ENDPOINTS (pid $REDIS_PID), appendonly yes, appendfsync always"
}

start_etcd() {
  local ports cluster="" id
  read -r -a ports <<<"$(free_ports 6)"
  for id in 1 2 3; do cluster+="${cluster:+,}e$id=http://127.0.0.1:${ports[$((id + 2))]}"; done
  ETCD_ENDPOINTS=""; ETCD_PIDS=""
  for id in 1 2 3; do
    local client=${ports[$((id - 1))]} peer=${ports[$((id + 2))]}
    etcd --name "e$id" --data-dir "$RUN_DIR/etcd-$id" \
      --listen-client-urls "http://127.0.0.1:$client" --advertise-client-urls "http://127.0.0.1:$client" \
      --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token dls-bench \
      >"$RUN_DIR/etcd-$id.log" 2>&1 &
    PIDS+=($!); ETCD_PIDS+="${ETCD_PIDS:+,}$!"
    ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}127.0.0.1:$client"
  done
  wait_for "$RUN_DIR/etcd-*.log" "became leader" 30
  log "etcd: 3 nodes at $ETCD_ENDPOINTS (pids $ETCD_PIDS), default fsync"
}

# bench TARGET WORKLOAD CLIENTS ENDPOINTS PIDS LABEL [METRICS] → appends a JSON line to $RESULTS_JSONL
bench() {
  local out rc=0
  log "$1 / $2 / $3 clients"
  out=$("$BENCH_BIN" --target "$1" --workload "$2" --clients "$3" --duration "$DURATION" --warmup "$WARMUP" \
    --endpoints "$4" --pids "$5" --label "$6" ${7:+--metrics "$7"} --json) || rc=$?
  [ -n "$out" ] && echo "$out" >>"$RESULTS_JSONL"
  if [ "$rc" -ne 0 ]; then
    log "FAILED: $1 / $2 / $3 clients (exit $rc)"
    FAILURES+=("$1/$2/$3 (exit $rc)")
  fi
}

# check_host_cpu: every Rust-harness DLS run in the results measured its host (the CPU
# states add up to 100 %), and each lock-cycle run has a CPU cost per cycle for its clients
# and for the DLS node, so `make bench`'s host columns cannot go silently empty.
check_host_cpu() {
  python3 - "$RESULTS_JSONL" <<'PY' || FAILURES+=("host CPU figures")
import json, sys
bad = []
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r.get("target") != "dls" or "language" in r:
        continue
    h = r.get("host_cpu") or {}
    shares = sum(h.get(k) or 0 for k in ("busy_pct", "idle_pct", "steal_pct"))
    ok = (h.get("cpus") or 0) >= 1 and abs(shares - 100) < 1
    if r["workload"] != "heartbeat":
        ok = ok and (h.get("clients_us_per_cycle") or 0) > 0 and (h.get("servers_us_per_cycle") or 0) > 0
    if not ok:
        bad.append(f"{r['workload']}: {h}")
if bad:
    sys.exit("dls-bench's host_cpu is missing or does not add up: " + "; ".join(bad))
print("host CPU figures present in every DLS run", file=sys.stderr)
PY
}

ensure_pkg() { # ensure_pkg COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing $2 (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; } >"$RUN_DIR/apt-$2.log" 2>&1 || true
  fi
  command -v "$1" >/dev/null
}

# start_target NAME → starts that system; sets eps, pids, metrics, label. Returns 3 when it is
# not installed (skipped), 1 when it did not start.
start_target() {
  case $1 in
  dls)
    start_dls 3; eps=$DLS_ENDPOINTS; pids=$DLS_PIDS; metrics=$DLS_METRICS
    label="raft (3 nodes), log fdatasync before ack" ;;
  redis)
    if ! ensure_pkg redis-server redis-server; then log "SKIP redis: redis-server not installed"; return 3; fi
    start_redis; eps=$REDIS_ENDPOINTS; pids=$REDIS_PID; metrics=""
    label="single node, appendonly yes, appendfsync always" ;;
  etcd)
    if ! ensure_pkg etcd etcd-server; then log "SKIP etcd: etcd not installed"; return 3; fi
    if [ "$MODE" = all ] && [ "${BENCH_ETCD:-yes}" != yes ]; then
      log "SKIP etcd: dls-bench built without the etcd feature (no protoc)"; return 3
    fi
    start_etcd; eps=$ETCD_ENDPOINTS; pids=$ETCD_PIDS; metrics=""
    label="raft (3 nodes), default fsync" ;;
  *) log "unknown target $1"; exit 1 ;;
  esac
}

# start_targets → starts every one of $TARGETS that is installed, side by side, and lists
# them in LIVE; use_target NAME then sets eps, pids, metrics and label to that one's. The runs
# go target after target within each (workload, clients), so a change in the host's speed
# (this guest's hypervisor takes CPU time in bursts: the `stolen` column) falls on every
# target's figure in that row rather than on whichever target ran in that hour. The targets
# not measured sit idle meanwhile (their heartbeats cost the host 1–4 % of its CPU, measured).
declare -A T_EPS T_PIDS T_METRICS T_LABEL
LIVE=()
start_targets() {
  local t
  for t in $TARGETS; do
    start_target "$t" || { [ $? -eq 3 ] || FAILURES+=("$t: did not start"); continue; }
    T_EPS[$t]=$eps; T_PIDS[$t]=$pids; T_METRICS[$t]=$metrics; T_LABEL[$t]=$label
    LIVE+=("$t")
  done
}
use_target() { eps=${T_EPS[$1]}; pids=${T_PIDS[$1]}; metrics=${T_METRICS[$1]}; label=${T_LABEL[$1]}; }

# sdk_bench LANG TARGET WORKLOAD CLIENTS → one driver run, its JSON line appended to $RESULTS_JSONL.
# The drivers run with $SDK_PYTHON and $SDK_NODE_DRIVER (the copy next to its node_modules).
sdk_bench() {
  local out rc=0 cmd
  case $1 in
  python) cmd=("$SDK_PYTHON" "$HERE/sdk/python/sdk_bench.py") ;;
  node) cmd=(node "$SDK_NODE_DRIVER") ;;
  *) log "unknown SDK language $1"; exit 1 ;;
  esac
  log "$1 / $2 / $3 / $4 clients"
  out=$("${cmd[@]}" --target "$2" --workload "$3" --clients "$4" --duration "$DURATION" --warmup "$WARMUP" \
    --endpoints "$eps" --pids "$pids" --label "$label") || rc=$?
  [ -n "$out" ] && echo "$out" >>"$RESULTS_JSONL"
  if [ "$rc" -ne 0 ]; then
    log "FAILED: $1 / $2 / $3 / $4 clients (exit $rc)"
    FAILURES+=("$1/$2/$3/$4 (exit $rc)")
  fi
}

# write_results: $RESULTS from the header on stdin, $table and the raw JSON lines; the lines
# also to $RESULTS with .jsonl for .md (run.sh sdk reads the Rust harness's from there).
write_results() {
  mkdir -p "$(dirname "$RESULTS")"
  {
    cat
    echo
    echo "$table"
    echo
    echo "Raw results (one JSON object per run):"
    echo
    echo '```json'
    cat "$RESULTS_JSONL"
    echo '```'
  } >"$RESULTS"
  cp "$RESULTS_JSONL" "${RESULTS%.md}.jsonl"
  log "wrote $RESULTS and ${RESULTS%.md}.jsonl"
}

FAILURES=()
RESULTS_JSONL="$RUN_DIR/results.jsonl"
: >"$RESULTS_JSONL"
WORKLOADS=${WORKLOADS:-uncontended contended shared deadlock heartbeat}

case "$MODE" in
smoke)
  DURATION=${DURATION:-2}; WARMUP=${WARMUP:-0.5}
  start_dls 1
  for w in $WORKLOADS; do bench dls "$w" 4 "$DLS_ENDPOINTS" "$DLS_PIDS" "smoke" "$DLS_METRICS"; done
  check_host_cpu
  # The SDK drivers against the same node, through the debug builds `make test-python` and
  # `make test-node` leave in the checkout; skipped (said so) where those are not built.
  eps=$DLS_ENDPOINTS; pids=$DLS_PIDS; label=smoke
  REPO=$(cd "$HERE/.." && pwd)
  SDK_PYTHON=${SDK_PYTHON:-$REPO/bindings/python/.venv/bin/python}
  if [ -x "$SDK_PYTHON" ] && "$SDK_PYTHON" -c 'import caerus' 2>/dev/null; then
    "$SDK_PYTHON" "$HERE/sdk/python/sdk_bench.py" --self-test || FAILURES+=("python checker self-test")
    for w in uncontended contended; do sdk_bench python dls "$w" 4; done
  else
    log "SKIP python SDK driver: no caerus in $SDK_PYTHON (make test-python builds it)"
  fi
  if [ -f "$REPO/bindings/node/caerus.linux-x64-gnu.node" ]; then
    export CAERUS_SDK_MODULE=$REPO/bindings/node/index.mjs
    SDK_NODE_DRIVER=$HERE/sdk/node/sdk-bench.mjs
    node "$SDK_NODE_DRIVER" --self-test || FAILURES+=("node checker self-test")
    for w in uncontended contended; do sdk_bench node dls "$w" 4; done
  else
    log "SKIP node SDK driver: no bindings/node/caerus.linux-x64-gnu.node (make test-node builds it)"
  fi
  "$BENCH_BIN" --report "$RESULTS_JSONL"
  ;;
all)
  DURATION=${DURATION:-5}; WARMUP=${WARMUP:-1}
  CLIENTS=${CLIENTS:-1 16 64}
  TARGETS=${TARGETS:-dls redis etcd}
  RESULTS=${RESULTS:-$RESULTS_DIR/latest.md}
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  start_targets
  for w in $WORKLOADS; do
    for c in $CLIENTS; do
      for t in "${LIVE[@]}"; do use_target "$t"; bench "$t" "$w" "$c" "$eps" "$pids" "$label" "$metrics"; done
    done
  done
  cleanup
  table=$("$BENCH_BIN" --report "$RESULTS_JSONL")
  echo
  echo "$table"
  {
    echo "# dls-bench results"
    echo
    echo "Produced by \`${BENCH_COMMAND:-make -C bench all}\` (DURATION=$DURATION s measured after WARMUP=$WARMUP s, clients: $CLIENTS),"
    echo "started $started on $(nproc) CPU(s), $(uname -sr), everything on 127.0.0.1."
    echo
    echo "Durability: **dls** raft on 3 nodes, each log entry fdatasynced (leader and the follower that makes the quorum) before the ack;"
    echo "**redis** one node, appendonly yes, appendfsync always (no replication);"
    echo "**etcd** $(etcd --version 2>/dev/null | head -1 | sed 's/etcd Version: //') 3 nodes, default fsync of its WAL."
    echo
    echo "Cells: lock cycles/s · p50/p99 latency of a whole cycle (begin, acquire, commit/release)."
    echo "deadlock: cycles that finished, and 'dl' = cycles broken by a victim abort (dls) or a 1 s"
    echo "wait timeout (redis, etcd). heartbeat: idle transactions still alive at the end and the"
    echo "busiest server process's CPU. Ratios are throughput ratios. Every target runs for the whole"
    echo "run, idle but for the one measured; each row's targets are measured one after the other."
  } | write_results
  ;;
sdk)
  DURATION=${DURATION:-5}; WARMUP=${WARMUP:-1}
  SDK_CLIENTS=${SDK_CLIENTS:-1 32}
  SDK_LANGS=${SDK_LANGS:-python node}
  SDK_WORKLOADS=${SDK_WORKLOADS:-uncontended contended}
  TARGETS=${TARGETS:-dls redis etcd}
  TOOLS=${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}
  SDK_BENCH_PY=${SDK_BENCH_PY:-$TOOLS/sdk-bench-py}
  SDK_BENCH_NODE=${SDK_BENCH_NODE:-$TOOLS/sdk-bench-node}
  SDK_PYTHON=$SDK_BENCH_PY/bin/python
  SDK_NODE_DRIVER=$SDK_BENCH_NODE/sdk-bench.mjs
  RESULTS=${RESULTS:-$RESULTS_DIR/sdk.md}
  RUST_JSONL=${RUST_JSONL:-$RESULTS_DIR/latest.jsonl}
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  start_targets
  for lang in $SDK_LANGS; do
    for w in $SDK_WORKLOADS; do
      for c in $SDK_CLIENTS; do
        for t in "${LIVE[@]}"; do use_target "$t"; sdk_bench "$lang" "$t" "$w" "$c"; done
      done
    done
  done
  cleanup
  combined="$RUN_DIR/combined.jsonl"
  rust_note="no Rust rows: $RUST_JSONL does not exist (make bench writes it)"
  if [ -f "$RUST_JSONL" ]; then
    rust_note="Rust rows: $RUST_JSONL (modified $(date -u -r "$RUST_JSONL" +%Y-%m-%dT%H:%M:%SZ))"
    cat "$RUST_JSONL" "$RESULTS_JSONL" >"$combined"
  else
    cp "$RESULTS_JSONL" "$combined"
  fi
  table=$("$BENCH_BIN" --report "$combined")
  echo
  echo "$table"
  {
    echo "# dls-bench results through the SDKs"
    echo
    echo "Produced by \`${BENCH_COMMAND:-make -C bench sdk}\` (DURATION=$DURATION s measured after WARMUP=$WARMUP s,"
    echo "clients: $SDK_CLIENTS), started $started on $(nproc) CPU(s), $(uname -sr), everything on 127.0.0.1; $rust_note."
    echo "Servers as in latest.md: dls raft on 3 nodes (fdatasync before ack), redis one node"
    echo "(appendfsync always), etcd $(etcd --version 2>/dev/null | head -1 | sed 's/etcd Version: //') 3 nodes."
    echo "Python: forked processes, one client each; Node: async workers in one process sharing one client."
  } | write_results
  ;;
profile)
  # A flamegraph of the leader under load: PROFILE_WORKLOAD (contended) at PROFILE_CLIENTS (64)
  # on a 3-node cluster; perf samples the leader with DWARF call graphs for PROFILE_SECONDS
  # inside the measured window, inferno folds and draws them into
  # $RESULTS_DIR/profiles/leader-WORKLOAD-CLIENTS.svg (kept out of the tree, like every result).
  : "${INFERNO_BIN:?INFERNO_BIN must name the directory with inferno-collapse-perf and inferno-flamegraph}"
  command -v perf >/dev/null || { log "no perf: install Debian's linux-perf"; exit 1; }
  w=${PROFILE_WORKLOAD:-contended}; c=${PROFILE_CLIENTS:-64}; secs=${PROFILE_SECONDS:-8}
  DURATION=${DURATION:-$((secs + 4))}; WARMUP=${WARMUP:-2}
  start_dls 3
  # In the background while perf samples; a failed run shows in the subshell's exit status.
  (bench dls "$w" "$c" "$DLS_ENDPOINTS" "$DLS_PIDS" "profile" "$DLS_METRICS"; [ "${#FAILURES[@]}" -eq 0 ]) &
  bench_pid=$!
  # The leader: the node whose /metrics says dls_is_leader 1 (polled: the election may still run).
  read -r -a pids <<<"${DLS_PIDS//,/ }"; read -r -a https <<<"${DLS_HTTP//,/ }"
  leader=""
  for _ in $(seq 1 100); do
    for i in "${!https[@]}"; do
      if curl -sf "http://${https[$i]}/metrics" | grep -q '^dls_is_leader 1'; then leader=${pids[$i]}; fi
    done
    [ -n "$leader" ] && break
    sleep 0.1
  done
  [ -n "$leader" ] || { log "no leader among $DLS_HTTP"; exit 1; }
  sleep "$WARMUP"
  mkdir -p "$RESULTS_DIR/profiles"
  svg="$RESULTS_DIR/profiles/leader-$w-$c.svg"
  log "perf record of the leader (pid $leader) for $secs s"
  perf record -F 997 --call-graph dwarf,16384 -p "$leader" -o "$RUN_DIR/perf.data" -- sleep "$secs" 2>"$RUN_DIR/perf.log" ||
    { log "perf record failed: $(tail -3 "$RUN_DIR/perf.log")"; exit 1; }
  wait "$bench_pid" || FAILURES+=("dls/$w/$c under perf")
  perf script -i "$RUN_DIR/perf.data" 2>/dev/null | "$INFERNO_BIN/inferno-collapse-perf" >"$RUN_DIR/folded"
  "$INFERNO_BIN/inferno-flamegraph" --title "dls leader, $w, $c clients" <"$RUN_DIR/folded" >"$svg"
  log "wrote $svg ($(wc -l <"$RUN_DIR/folded") stacks)"
  "$BENCH_BIN" --report "$RESULTS_JSONL"
  ;;
*) echo "usage: run.sh smoke|all|sdk|profile" >&2; exit 2 ;;
esac

if [ "${#FAILURES[@]}" -gt 0 ]; then
  log "failed runs: ${FAILURES[*]} (server logs in $RUN_DIR)"
  exit 1
fi
log "$MODE: ok"
# Keep the servers' logs and data only when something failed (or RUN_DIR was given).
cleanup
[ "$OWN_RUN_DIR" = yes ] && rm -rf "$RUN_DIR"
exit 0

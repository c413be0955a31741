#!/usr/bin/env bash
# Orchestration of `make -C bench smoke|all`: starts the servers on 127.0.0.1 with free
# ports, runs dls-bench, stops everything it started (only its own pids), prints progress.
#
#   run.sh smoke   a few seconds of every workload against one DLS node
#   run.sh all     3-node DLS, Redis (appendfsync always), 3-node etcd if installed;
#                  every workload at CLIENTS (1 16 64); table + results/latest.md
#
# Environment: DLS_BIN, BENCH_BIN, KIT_BIN (dls-cluster, testkit/; all required), DURATION, WARMUP, CLIENTS,
# WORKLOADS, TARGETS, RESULTS (output .md), RUN_DIR.
set -euo pipefail

MODE=${1:?usage: run.sh smoke|all}
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

ensure_pkg() { # ensure_pkg COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing $2 (apt-get)"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; } >"$RUN_DIR/apt-$2.log" 2>&1 || true
  fi
  command -v "$1" >/dev/null
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
  "$BENCH_BIN" --report "$RESULTS_JSONL"
  ;;
all)
  DURATION=${DURATION:-5}; WARMUP=${WARMUP:-1}
  CLIENTS=${CLIENTS:-1 16 64}
  TARGETS=${TARGETS:-dls redis etcd}
  RESULTS=${RESULTS:-$HERE/results/latest.md}
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for t in $TARGETS; do
    case $t in
    dls)
      start_dls 3; eps=$DLS_ENDPOINTS; pids=$DLS_PIDS; metrics=$DLS_METRICS
      label="raft (3 nodes), log fdatasync before ack" ;;
    redis)
      if ! ensure_pkg redis-server redis-server; then log "SKIP redis: redis-server not installed"; continue; fi
      start_redis; eps=$REDIS_ENDPOINTS; pids=$REDIS_PID; metrics=""
      label="single node, appendonly yes, appendfsync always" ;;
    etcd)
      if ! ensure_pkg etcd etcd-server; then log "SKIP etcd: etcd not installed"; continue; fi
      if [ "${BENCH_ETCD:-yes}" != yes ]; then log "SKIP etcd: dls-bench built without the etcd feature (no protoc)"; continue; fi
      start_etcd; eps=$ETCD_ENDPOINTS; pids=$ETCD_PIDS; metrics=""
      label="raft (3 nodes), default fsync" ;;
    *) log "unknown target $t"; exit 1 ;;
    esac
    for w in $WORKLOADS; do
      for c in $CLIENTS; do bench "$t" "$w" "$c" "$eps" "$pids" "$label" "$metrics"; done
    done
    cleanup
  done
  table=$("$BENCH_BIN" --report "$RESULTS_JSONL")
  echo
  echo "$table"
  mkdir -p "$(dirname "$RESULTS")"
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
    echo "busiest server process's CPU. Ratios are throughput ratios."
    echo
    echo "$table"
    echo
    echo "Raw results (one JSON object per run):"
    echo
    echo '```json'
    cat "$RESULTS_JSONL"
    echo '```'
  } >"$RESULTS"
  log "wrote $RESULTS"
  ;;
*) echo "usage: run.sh smoke|all" >&2; exit 2 ;;
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

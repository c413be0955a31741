# Shell side of the test kit, sourced by shell test runners (conformance/run.sh): starts the
# kit's dls-cluster (ports bound by the nodes, nodes started and killed the way every Rust
# harness does) and waits until it prints its assignments, which it does once every node serves.
#
#   . testkit/dls-cluster.sh
#   dls_cluster_start DLS_CLUSTER_BIN DLS_BIN WORKDIR [dls-cluster flags...]
#       sets DLS_ENDPOINTS, DLS_HTTP, DLS_PIDS, DLS_LEADER, DLS_DIR (see dls-cluster) and DLS_CLUSTER_PID;
#       returns non-zero, having printed why, if the cluster does not come up within 30 s
#   dls_cluster_stop            stops it (call it from the runner's EXIT trap)
#   dls_cluster_log_tail [N]    the last N lines of node 1's log (for a failure report)

dls_cluster_start() {
  local cluster_bin="$1" dls_bin="$2" work="$3"
  shift 3
  [ -x "$dls_bin" ] || { echo "no dls binary at $dls_bin (set DLS_BIN, or run make dls-debug)" >&2; return 1; }
  [ -x "$cluster_bin" ] || { echo "no dls-cluster at $cluster_bin (cargo build -p caerus-testkit --bin dls-cluster)" >&2; return 1; }
  "$cluster_bin" --dls "$dls_bin" --dir "$work/cluster" "$@" >"$work/cluster.env" 2>"$work/cluster.log" &
  DLS_CLUSTER_PID=$!
  DLS_CLUSTER_WORK="$work"
  for _ in $(seq 1 150); do
    grep -q '^DLS_DIR=' "$work/cluster.env" 2>/dev/null && break
    kill -0 "$DLS_CLUSTER_PID" 2>/dev/null || { echo "dls-cluster exited:" >&2; cat "$work/cluster.log" >&2; return 1; }
    sleep 0.2
  done
  grep -q '^DLS_DIR=' "$work/cluster.env" || { echo "no leader after 30 s:" >&2; dls_cluster_log_tail 20 >&2; return 1; }
  # shellcheck disable=SC1091
  . "$work/cluster.env"
}

dls_cluster_stop() {
  if [ -n "${DLS_CLUSTER_PID:-}" ] && kill -0 "$DLS_CLUSTER_PID" 2>/dev/null; then
    kill "$DLS_CLUSTER_PID" && wait "$DLS_CLUSTER_PID" 2>/dev/null || true
  fi
}

dls_cluster_log_tail() {
  tail -"${1:-40}" "${DLS_CLUSTER_WORK:-.}/cluster/node-1.log"
}

#!/usr/bin/env bash
# What recovery costs at the start of a node holding MIB MiB of raft log (issue 38): the
# time from the node's first log line to "dls serving" (segments read and checked against
# raft-meta, the snapshot loaded, raft's state rebuilt), page cache warm and
# dropped. With OLD_DLS=path/to/dls of v0.1.0 (commit ca59f73) the same on its layout, and
# this build's first start on that layout (the migration from sled).
#
#   scripts/measure-recovery.sh [MIB]        MIB defaults to 1024
#   env: PROFILE (release), DLS (this build's dls), OLD_DLS, CARGO_TARGET_DIR
# A script, not a test: the figures depend on the disk and the page cache.
set -euo pipefail
MIB=${1:-1024}
PROFILE=${PROFILE:-release}
TARGET=${CARGO_TARGET_DIR:-$(pwd)/target}
cargo build --profile "$PROFILE" -p caerus-cli -p caerus-server --bin dls --example recovery_log >&2
PROFILE_DIR=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
DLS=${DLS:-$TARGET/$PROFILE_DIR/dls}
GEN=$TARGET/$PROFILE_DIR/examples/recovery_log
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start LABEL BINARY DATA_DIR CACHE: one start, prints the seconds to the recovery line.
start() {
  local label=$1 bin=$2 data=$3 cache=$4
  local log
  log="$WORK/start-$RANDOM.log"
  sync
  if [ "$cache" = cold ]; then
    echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || { echo "$label: cannot drop caches (needs root)"; return; }
  fi
  "$bin" serve --data-dir "$data" --listen "127.0.0.1:$(free_port)" --http-listen "127.0.0.1:$(free_port)" >"$log" 2>&1 &
  PID=$!
  for _ in $(seq 1 1200); do
    grep -qs "dls serving" "$log" && break
    kill -0 "$PID" 2>/dev/null || { echo "$label: exited"; tail -3 "$log"; PID=; return; }
    sleep 0.1
  done
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
  python3 - "$log" "$label" <<'EOF'
import sys, datetime
lines = open(sys.argv[1]).read().splitlines()
ts = lambda l: datetime.datetime.fromisoformat(l.split()[0].rstrip("Z"))
stamped = [l for l in lines if l[:4].isdigit()]
done = next(l for l in stamped if "dls serving" in l)
print(f"{sys.argv[2]:<44} {(ts(done) - ts(stamped[0])).total_seconds():7.2f} s")
EOF
}

"$GEN" "$WORK/new" "$MIB" >&2
for cache in warm cold; do
  cp -a --sparse=always "$WORK/new" "$WORK/run"
  start "this build, $MIB MiB, $cache cache" "$DLS" "$WORK/run" "$cache"
  rm -rf "$WORK/run"
done
if [ -n "${OLD_DLS:-}" ]; then
  "$GEN" "$WORK/old" "$MIB" v0.1.0 >&2
  for cache in warm cold; do
    cp -a --sparse=always "$WORK/old" "$WORK/run"
    start "v0.1.0, $MIB MiB, $cache cache" "$OLD_DLS" "$WORK/run" "$cache"
    rm -rf "$WORK/run"
    cp -a --sparse=always "$WORK/old" "$WORK/run"
    start "this build on v0.1.0's layout, $cache cache" "$DLS" "$WORK/run" "$cache"
    rm -rf "$WORK/run"
  done
fi

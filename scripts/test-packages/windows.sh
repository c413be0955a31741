#!/usr/bin/env bash
# The Windows dls.exe under wine64: serves a single-node cluster, takes a lock from the Linux
# `dls lock` and from `wine64 dls.exe lock`, stops, starts again on the same data directory
# (its raft log, metadata and a snapshot written and read back on Windows) and takes a lock
# with a higher fencing token. The stop kills the wine process (no Ctrl+C to send): the
# restart is a crash recovery. Skipped, saying why, without wine64 or without the .exe.
#
#   [ZIG="python -m ziglang"] scripts/test-packages/windows.sh DLS_EXE [LINUX_DLS]
set -euo pipefail
name=windows
repo="$(cd "$(dirname "$0")/../.." && pwd)"
log() { echo "==> $name: $*" >&2; }
fail() { echo "FAIL $name: $*" >&2; exit 1; }

exe="${1:?usage: windows.sh DLS_EXE [LINUX_DLS]}"
linux_dls="${2:-${DLS_BIN:-}}"
# Debian's wine64 package puts its loader in /usr/lib/wine; `wine` (package wine) runs it.
wine="$(command -v wine64 || command -v wine || true)"
wineserver="$(command -v wineserver || ls /usr/lib/wine/wineserver 2>/dev/null || true)"
if [ -z "$wine" ] || [ -z "$wineserver" ]; then
  echo "SKIP $name: wine64 is not installed (Debian: apt-get install wine64 wine)" >&2
  exit 0
fi
[ -f "$exe" ] || { echo "SKIP $name: no $exe (make test-windows builds it)" >&2; exit 0; }

work="$(mktemp -d "${TMPDIR:-/tmp}/caerus-windows.XXXXXX")"
export WINEPREFIX="${WINEPREFIX:-$work/wineprefix}" WINEDEBUG=-all
server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -z "$server_pid" ] || wait "$server_pid" 2>/dev/null || true
  "$wineserver" -k 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port="$(free_port)"
http="$(free_port)"
endpoint="127.0.0.1:$port"
data='Z:'"${work//\//\\}"'\data'   # the Windows path of $work/data in wine's Z: drive

log "wine: $("$wine" --version 2>/dev/null || echo "$wine")"
log "starting the prefix (first run of wine takes a while)"
"$wine" wineboot --init >/dev/null 2>&1 || true
system32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -f "$system32/bcryptprimitives.dll" ]; then
  # wine 8.0 has no bcryptprimitives.dll (ProcessPrng), which every Rust .exe imports: a
  # shim (scripts/test-packages/wine/bcryptprimitives.c) in this prefix only.
  zig="${ZIG:-zig}"
  command -v "${zig%% *}" >/dev/null || { echo "SKIP $name: wine lacks bcryptprimitives.dll and no zig (ZIG=...) builds the shim" >&2; exit 0; }
  log "wine lacks bcryptprimitives.dll: building the ProcessPrng shim with $zig"
  $zig cc -target x86_64-windows-gnu -shared -O2 -o "$work/bcryptprimitives.dll" \
    "$(dirname "$0")/wine/bcryptprimitives.c" -ladvapi32
  cp "$work/bcryptprimitives.dll" "$system32/"
fi

start() {
  log "wine dls.exe serve on $endpoint, data $data"
  # --snapshot-every 10 (the least): a few locks make a snapshot file, read back at restart.
  "$wine" "$exe" serve --listen "$endpoint" --http-listen "127.0.0.1:$http" --data-dir "$data" \
    --snapshot-every 10 >>"$work/server.log" 2>&1 &
  server_pid=$!
  # wine's first start sets up its prefix: 120 s
  "$repo/scripts/wait-ready.py" "$http" "$server_pid" 120 || { cat "$work/server.log" >&2; fail "dls.exe did not become ready"; }
}

stop() {
  log "stopping dls.exe"
  kill "$server_pid" 2>/dev/null || true
  "$wine" taskkill /IM dls.exe >/dev/null 2>&1 || true
  for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$server_pid" 2>/dev/null && "$wineserver" -k 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  # wineserver exits some time after its last process: the data files are closed then.
  "$wineserver" -w 2>/dev/null || true
}

# Prints the fencing token a lock on KEY got: the command run under it echoes it.
token_linux() {
  "$linux_dls" lock --endpoints "$endpoint" --timeout 30 demo "$1" -- sh -c 'echo "$DLS_FENCING_TOKEN"'
}
token_wine() {
  "$wine" "$exe" lock --endpoints "$endpoint" --timeout 30 demo "$1" -- cmd /c echo %DLS_FENCING_TOKEN% | tr -d '\r'
}

start
tokens=()
if [ -n "$linux_dls" ] && [ -x "$linux_dls" ]; then
  t="$(token_linux job)" || fail "Linux dls lock on dls.exe failed"
  log "Linux dls lock job: fencing token $t"; tokens+=("$t")
else
  log "no Linux dls given: only dls.exe locks"
fi
t="$(token_wine job)" || fail "wine dls.exe lock failed"
log "wine dls.exe lock job: fencing token $t"; tokens+=("$t")
# dls.exe lock on Windows: the command's exit code is its own, and a lost lock (an operator
# abort) ends the command (taskkill /T, then /F /T after --kill-grace) with exit 76.
set +e
"$wine" "$exe" lock --endpoints "$endpoint" --timeout 30 demo code -- cmd /c exit 3
rc=$?
set -e
[ "$rc" = 3 ] || fail "dls.exe lock exited $rc, not the command's 3"
if [ -n "$linux_dls" ] && [ -x "$linux_dls" ]; then
  ( set +e; "$wine" "$exe" lock --endpoints "$endpoint" --kill-grace 2s demo long -- ping -n 120 127.0.0.1 \
      >/dev/null 2>"$work/long.err"; echo "$?" >"$work/long.rc" ) &
  txn=
  for _ in $(seq 1 60); do
    txn="$("$linux_dls" locks --endpoints "$endpoint" --json | python3 -c '
import json, sys
print(next((h["transaction_id"] for l in json.load(sys.stdin)["locks"] if l["key"] == "long" for h in l["holders"]), ""))')"
    [ -n "$txn" ] && break
    sleep 0.5
  done
  [ -n "$txn" ] || fail "dls.exe lock demo long never held its lock"
  "$linux_dls" txn abort --endpoints "$endpoint" "$txn" >/dev/null
  for _ in $(seq 1 60); do [ -s "$work/long.rc" ] && break; sleep 0.5; done
  [ "$(cat "$work/long.rc" 2>/dev/null)" = 76 ] || { cat "$work/long.err" >&2; fail "a lost lock did not end dls.exe lock with 76 within 30 s"; }
  log "dls.exe lock: exit code 3 passed through; a lost lock ended the command (ping) and exited 76"
  tokens+=("$(token_linux job)")
fi
# More locks until dls.exe has written a snapshot (its log compacted), so that the restart
# reads one back.
for _ in $(seq 1 20); do
  ls "$work/data/snapshots/"*.snap >/dev/null 2>&1 && break
  t="$(token_wine job)" || fail "wine dls.exe lock failed"
  tokens+=("$t")
done
snap="$(ls "$work/data/snapshots/"*.snap 2>/dev/null | head -1)" || true
[ -n "$snap" ] || fail "no snapshot file after ${#tokens[@]} locks with --snapshot-every 10"
log "snapshot written: $(basename "$snap") after ${#tokens[@]} locks (tokens ${tokens[*]})"
stop

start
t="$(token_wine job)" || fail "wine dls.exe lock after the restart failed"
log "after the restart, wine dls.exe lock job: fencing token $t"; tokens+=("$t")
if [ -n "$linux_dls" ] && [ -x "$linux_dls" ]; then
  t="$(token_linux job)" || fail "Linux dls lock after the restart failed"
  log "after the restart, Linux dls lock job: fencing token $t"; tokens+=("$t")
fi
stop

prev=0
for t in "${tokens[@]}"; do
  [[ "$t" =~ ^[0-9]+$ ]] || fail "not a fencing token: $t"
  [ "$t" -gt "$prev" ] || fail "fencing tokens do not increase: ${tokens[*]}"
  prev="$t"
done
echo "ok $name: dls.exe under wine served locks before and after a restart, tokens ${tokens[*]}"

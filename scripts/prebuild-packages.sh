#!/usr/bin/env bash
# The release packaging build (`make release-portable python-portable`: dls, the Node addon, the
# JVM library and the Python extension, optimized, linked by zig) in the background, at the idle
# CPU class (`chrt --idle`: it runs only on CPU time no other process wants).
#
# On a fresh machine that build is ~7 minutes of both cores. CI starts it before `make lint`,
# whose downloads and clippy run leave gaps it fills, and waits for it before `make test`; when
# the target dir is warm it is a no-op. Not beside the test suites: even at the idle class it
# slowed their timing-bound tests (shared disk, caches and host threads), the overload test's
# sustained rate from 280-300 to 186 cycles/s.
#
# Usage: scripts/prebuild-packages.sh TARGET_DIR start|wait|stop
#   start  start the build unless it is running (log: TARGET_DIR/prebuild-packages.log)
#   wait   wait for a started build to end, printing its progress; says how it ended (if it
#          failed, the foreground `make` that follows builds again and shows the error)
#   stop   end a running build (CI does on exit, so nothing outlives a failed run)
set -euo pipefail

dir=${1:?usage: prebuild-packages.sh TARGET_DIR start|wait|stop}
action=${2:?usage: prebuild-packages.sh TARGET_DIR start|wait|stop}
pidfile=$dir/prebuild-packages.pid
rcfile=$dir/prebuild-packages.rc
log=$dir/prebuild-packages.log
root=$(cd "$(dirname "$0")/.." && pwd)

# The build is still running (its process group's leader is the pid in the file).
running() {
  [[ -f $pidfile && ! -f $rcfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

case $action in
  start)
    if running; then
      echo "prebuild: the release packaging build is already running (pid $(cat "$pidfile"), log $log)"
      exit 0
    fi
    mkdir -p "$dir"
    rm -f "$rcfile"
    # A process group of its own (job control), so stop ends all of it, but the caller's
    # session: with the kernel's autogroup scheduling a new session (setsid) would be a new
    # group that gets an equal share of the CPU whatever the idle class says. No make
    # jobserver of the caller's either.
    set -m
    MAKEFLAGS= MFLAGS= chrt --idle 0 bash -c \
      'make -C "$1" --no-print-directory release-portable python-portable; echo $? > "$2"' \
      prebuild "$root" "$rcfile" >"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    echo "prebuild: release packaging build started in the background at idle CPU priority (pid $!, log $log)"
    ;;
  wait)
    [[ -f $pidfile ]] || exit 0
    start=$SECONDS
    while running; do
      echo "prebuild: waiting for the background release packaging build ($((SECONDS - start)) s): $(grep -a 'Compiling\|==>' "$log" | tail -n 1 | sed 's/^ *//')"
      for _ in $(seq 30); do running || break; sleep 1; done
    done
    if [[ -f $rcfile && $(cat "$rcfile") == 0 ]]; then
      echo "prebuild: the background release packaging build finished (log $log)"
    else
      echo "prebuild: the background release packaging build did not finish (exit $(cat "$rcfile" 2>/dev/null || echo '?')); last lines of $log:"
      tail -n 20 "$log" | sed 's/^/  /'
      echo "prebuild: building in the foreground instead"
    fi
    rm -f "$pidfile"
    ;;
  stop)
    if running; then
      kill -- "-$(cat "$pidfile")" 2>/dev/null || true
      echo "prebuild: stopped the background release packaging build"
    fi
    rm -f "$pidfile"
    ;;
  *)
    echo "prebuild-packages.sh: unknown action '$action' (start, wait or stop)" >&2
    exit 2
    ;;
esac

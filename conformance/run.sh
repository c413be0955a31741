#!/usr/bin/env bash
# Starts one real dls node through the test kit (dls-cluster: free ports, a temporary data
# directory), runs the five conformance runners against it (Rust caerus-core, raw Go, raw
# Python grpcio, raw grpc-java, raw Ruby grpc), stops it. Exits non-zero if any runner
# failed. Used by `make test-conformance`. Needs Java 17+ and Maven (the Java runner) and
# Debian's ruby and ruby-grpc (the Ruby runner).
#
#   DLS_BIN=/path/to/dls conformance/run.sh
#   CONFORMANCE_ENDPOINT=127.0.0.1:7070 conformance/run.sh   # use a running server instead
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
target="${CARGO_TARGET_DIR:-$repo/target}"
DLS_BIN="${DLS_BIN:-$target/debug/dls}"
CARGO="${CARGO:-cargo}"
log() { echo "conformance: $*" >&2; }
# shellcheck source=../testkit/dls-cluster.sh
. "$repo/testkit/dls-cluster.sh"

work="$(mktemp -d)"
cleanup() {
  dls_cluster_stop
  rm -rf "$work"
}
trap cleanup EXIT

# The Python runner's grpcio/protobuf, pinned to the generator of sdks/python; reinstalled
# only when requirements.txt changes.
venv="$here/python/.venv"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/python/requirements.txt" "$venv/requirements.installed"; then
  log "installing the Python runner's pinned grpcio and protobuf into conformance/python/.venv (PyPI)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/python/requirements.txt"
  cp "$here/python/requirements.txt" "$venv/requirements.installed"
fi

# Fail before the build, naming what to install, rather than after it with a missing command.
for tool in mvn java ruby; do
  command -v "$tool" >/dev/null || { log "$tool is not installed: apt-get install maven openjdk-17-jdk-headless ruby ruby-grpc"; exit 1; }
done
ruby -e 'require "grpc"; require "google/protobuf"' 2>/dev/null ||
  { log "the Ruby runner needs the grpc and google-protobuf gems: apt-get install ruby-grpc"; exit 1; }

log "building the Rust runner (caerus-conformance), the test kit's dls-cluster and the Go runner"
"$CARGO" build -q -p caerus-conformance -p caerus-testkit --bins
(cd "$here/go" && go build -o "$work/conformance-go" .)
log "building the Java runner and the sdks/java stubs it uses (mvn package in conformance/java)"
read -ra mvn <<<"${MVN:-mvn}" # may carry options, e.g. MVN="mvn -o"
(cd "$here/java" && "${mvn[@]}" -q -B package >"$work/mvn.log" 2>&1) || { cat "$work/mvn.log" >&2; exit 1; }
java_cp="$here/java/runner/target/classes:$(cat "$here/java/runner/target/classpath")"

endpoint="${CONFORMANCE_ENDPOINT:-}"
if [ -z "$endpoint" ]; then
  dls_cluster_start "$target/debug/dls-cluster" "$DLS_BIN" "$work" || exit 1
  endpoint="$DLS_ENDPOINTS"
  log "dls on $endpoint (HTTP $DLS_HTTP, data and log in $DLS_DIR)"
fi

failed=()
run() { # name command...
  local name="$1"
  shift
  log "running the $name runner against $endpoint"
  if ! "$@"; then failed+=("$name"); fi
}
run "Rust caerus-core" "$target/debug/caerus-conformance" --endpoint "$endpoint"
run "Go raw" "$work/conformance-go" --endpoint "$endpoint" --scenarios "$here/scenarios.json"
run "Python raw grpcio" "$venv/bin/python" "$here/python/runner.py" --endpoint "$endpoint"
run "Java raw grpc-java" java -cp "$java_cp" dev.caerus.conformance.Runner --endpoint "$endpoint" --scenarios "$here/scenarios.json"
run "Ruby raw grpc" ruby "$here/ruby/runner.rb" --endpoint "$endpoint" --scenarios "$here/scenarios.json"

if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  if [ -n "${DLS_CLUSTER_PID:-}" ]; then log "server log:"; dls_cluster_log_tail 40 >&2; fi
  exit 1
fi
log "all five runners passed"

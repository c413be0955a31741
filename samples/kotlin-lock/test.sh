#!/usr/bin/env bash
# The Maven sample as a user would run it: copies this project into a fresh directory, starts
# one real dls node (the test kit's dls-cluster: free ports, a temporary data directory),
# and runs the sample twice (`mvn compile exec:java`, then `mvn exec:java`) on a PATH without
# cargo or rustc. It passes if each run prints its fencing token, the second one higher, and
# commits.
# dev.caerus:caerus-dls must be in the local Maven repository (make maven-install).
#
#   DLS_BIN=/path/to/dls DLS_CLUSTER=/path/to/dls-cluster CAERUS_DLS_VERSION=0.1.0 samples/kotlin-lock/test.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
log() { echo "test-maven-sample: $*" >&2; }
: "${DLS_BIN:?set DLS_BIN to a dls binary (make test-maven-sample does)}"
: "${DLS_CLUSTER:?set DLS_CLUSTER to the test kit dls-cluster binary (cargo build -p caerus-testkit --bin dls-cluster)}"
version="${CAERUS_DLS_VERSION:-0.1.0}"
# MVN may carry options, e.g. MVN="mvn -Dmaven.repo.local=/tmp/m2".
read -ra mvn <<<"${MVN:-mvn}"

# shellcheck source=../../testkit/dls-cluster.sh
. "$here/../../testkit/dls-cluster.sh"
work="$(mktemp -d)"
cleanup() {
  dls_cluster_stop
  rm -rf "$work"
}
trap cleanup EXIT
dls_cluster_start "$DLS_CLUSTER" "$DLS_BIN" "$work" || exit 1
log "dls on $DLS_ENDPOINTS"

# What a user's machine has: Java and Maven, no Rust toolchain, nothing pointing at this checkout.
clean_path="$(echo "$PATH" | tr ':' '\n' | grep -v -e cargo -e rustup | paste -sd: -)"
if PATH="$clean_path" command -v cargo >/dev/null || PATH="$clean_path" command -v rustc >/dev/null; then
  log "cargo or rustc is still on the stripped PATH ($clean_path): the step would not prove the artifact works without Rust"
  exit 1
fi
mkdir -p "$work/project" && cp -r "$here/pom.xml" "$here/src" "$work/project/"

run_sample() { # maven goals... -> prints the sample's output (less the colour resets Maven's console leaves)
  (cd "$work/project" && env -u LD_LIBRARY_PATH -u JAVA_TOOL_OPTIONS PATH="$clean_path" \
    "${mvn[@]}" -q -B -Dstyle.color=never -Dcaerus-dls.version="$version" "$@" \
    -Dexec.args="$DLS_ENDPOINTS samples-test kotlin-lock") | sed 's/\x1b\[[0-9;]*m//g'
}
token_of() { sed -n 's/^locked .* with fencing token \([0-9][0-9]*\)$/\1/p' <<<"$1"; }

log "running the sample (mvn compile exec:java, dev.caerus:caerus-dls:$version from the local repository) on PATH=$clean_path"
first="$(run_sample compile exec:java)" || { log "the sample failed:"; echo "$first" >&2; exit 1; }
echo "$first"
second="$(run_sample exec:java)" || { log "the sample failed on its second run:"; echo "$second" >&2; exit 1; }
echo "$second"
t1="$(token_of "$first")"
t2="$(token_of "$second")"
for out in "$first" "$second"; do
  grep -qx 'committed: samples-test/kotlin-lock released' <<<"$out" ||
    { log "expected 'committed: samples-test/kotlin-lock released' in the output above"; exit 1; }
done
[ -n "$t1" ] && [ -n "$t2" ] || { log "expected 'locked samples-test/kotlin-lock with fencing token N' in each run"; exit 1; }
[ "$t2" -gt "$t1" ] || { log "the second grant's fencing token ($t2) is not higher than the first ($t1)"; exit 1; }
log "the sample took samples-test/kotlin-lock twice (fencing tokens $t1 < $t2) without Rust on PATH"
echo "maven-sample: 1 passed, 0 failed"

#!/usr/bin/env bash
# The Kotlin SDK as a Maven user gets it: samples/kotlin-lock, a separate Maven project that
# depends on dev.caerus:caerus-dls from the local repository (make maven-install), copied into
# a fresh directory and run twice (`mvn compile exec:java`, then `mvn exec:java`) with no
# cargo or rustc on PATH and no LD_LIBRARY_PATH, against a real dls node: the native library
# can only come from the jar. Each run must print its fencing token and commit, the second
# token above the first. Then the README's Kotlin quick start as printed (extracted by
# scripts/readme_snippets.py): its Main.kt in the same fresh project, run with its
# endpoints from DLS_ENDPOINTS, and its <dependency> block checked against the sample's.
# Used by `make test-maven-sample`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster CAERUS_DLS_VERSION=0.1.0 scripts/test-packages/maven.sh
#   MVN="mvn -Dmaven.repo.local=/tmp/m2" ...   # Maven with options (the same repository as maven-install)
#   SNIPPETS_ROOT=/old/checkout ...             # the snippets of another checkout's README (e.g. an old one)
name=maven
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

version="${CAERUS_DLS_VERSION:-0.1.0}"
read -ra mvn <<<"${MVN:-mvn}"
sample="$repo/samples/kotlin-lock"

start_dls
mkdir -p "$work/project" && cp -r "$sample/pom.xml" "$sample/src" "$work/project/"
# The README's Main.kt, in the default package beside the sample's own main.
snippets extract "$work/project/src/main/kotlin" kotlin-main
readme_main="$(snippets list | awk '$1 == "kotlin-main" { print $2 }')"
cd "$work/project"

maven() { # maven goals and flags... -> the output, less the colour resets Maven's console leaves
  without_rust env -u LD_LIBRARY_PATH -u JAVA_TOOL_OPTIONS "${mvn[@]}" -q -B -Dstyle.color=never \
    -Dcaerus-dls.version="$version" "$@" | sed 's/\x1b\[[0-9;]*m//g'
}
run_sample() { maven "$@" -Dexec.args="$DLS_ENDPOINTS samples-test kotlin-lock"; }
token_of() { sed -n 's/^locked .* with fencing token \([0-9][0-9]*\)$/\1/p' <<<"$1"; }

log "samples/kotlin-lock in $work/project: dev.caerus:caerus-dls:$version from the local Maven repository, no Rust on PATH"
first="$(run_sample compile exec:java)" || fail "the sample failed: $first"
echo "$first"
second="$(run_sample exec:java)" || fail "the sample failed on its second run: $second"
echo "$second"
for out in "$first" "$second"; do
  grep -qx 'committed: samples-test/kotlin-lock released' <<<"$out" ||
    fail "expected 'committed: samples-test/kotlin-lock released' in: $out"
done
t1="$(token_of "$first")"
t2="$(token_of "$second")"
[ -n "$t1" ] && [ -n "$t2" ] || fail "expected 'locked samples-test/kotlin-lock with fencing token N' in each run"
[ "$t2" -gt "$t1" ] || fail "the second grant's fencing token ($t2) is not above the first ($t1)"
# --- kotlin-lock reads DLS_ENDPOINTS (issue 41): with no argument the node comes from the
# variable every SDK and the CLI read (the sample once read DLS_ENDPOINT and silently dialled
# 127.0.0.1:7070); the old singular variable alone is refused, not ignored.
sample_env() { # env assignments... -> the sample's output with no argument (stderr too)
  without_rust env -u LD_LIBRARY_PATH -u JAVA_TOOL_OPTIONS -u DLS_ENDPOINTS -u DLS_ENDPOINT "$@" \
    "${mvn[@]}" -q -B -Dstyle.color=never -Dcaerus-dls.version="$version" exec:java 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
}
from_env="$(sample_env DLS_ENDPOINTS="127.0.0.1:1 , $DLS_ENDPOINTS")" || fail "the sample failed with DLS_ENDPOINTS: $from_env"
echo "$from_env"
grep -qx 'committed: samples/kotlin-lock released' <<<"$from_env" ||
  fail "expected 'committed: samples/kotlin-lock released' with DLS_ENDPOINTS and no argument in: $from_env"
if singular="$(sample_env DLS_ENDPOINT="$DLS_ENDPOINTS")"; then
  fail "the sample ran with only the singular DLS_ENDPOINT set: $singular"
fi
grep -q 'set DLS_ENDPOINTS' <<<"$singular" || fail "expected the refusal of DLS_ENDPOINT to name DLS_ENDPOINTS in: $singular"
# --- end of the DLS_ENDPOINTS block

log "ok: the sample took samples-test/kotlin-lock twice through the installed jar (fencing tokens $t1 < $t2)"

log "the README's <dependency> is the sample's (dev.caerus:caerus-dls:$version)"
dep="$(snippets show kotlin-dependency | tr -d ' \n')"
[ "$dep" = "<dependency><groupId>dev.caerus</groupId><artifactId>caerus-dls</artifactId><version>$version</version></dependency>" ] ||
  fail "the README's dependency block is not dev.caerus:caerus-dls:$version: $(snippets show kotlin-dependency)"

log "the README's $readme_main (exec.mainClass=${readme_main%.kt}Kt), endpoints from DLS_ENDPOINTS, no CAERUS_API_KEY"
readme="$(unset CAERUS_API_KEY; maven exec:java -Dexec.mainClass="${readme_main%.kt}Kt")" ||
  fail "the README's $readme_main failed: $readme"
echo "$readme"
t3="$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<<"$readme")"
[ -n "$t3" ] || fail "the README's $readme_main printed no 'Lock acquired. Fencing token: N': $readme"
grep -qx "charging with fencing token $t3" <<<"$readme" || fail "chargeSubscriptions did not get token $t3: $readme"
[ "$t3" -gt "$t2" ] || fail "the README's grant ($t3) is not above the sample's ($t2)"
log "ok: the README's Kotlin quick start took billing-jobs/monthly-billing-job (fencing token $t3)"
echo "maven-sample: 2 passed, 0 failed"

#!/usr/bin/env bash
# The Python package as a user gets it: a fresh virtualenv in a temp dir, `pip install` of
# the wheel file alone (no index), and the README's quick start run from a script with no
# cargo or rustc on PATH, against a real dls node. Used by `make test-wheel`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/python.sh [DIST_DIR]
name=python
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

dist="${1:-$repo/bindings/python/dist}"
wheels=("$dist"/caerus_dls-*.whl)
[ -f "${wheels[0]}" ] && [ "${#wheels[@]}" -eq 1 ] || fail "expected one caerus_dls-*.whl in $dist (run make wheel)"
wheel="${wheels[0]}"

log "checking $(basename "$wheel"): tags, typing files, glibc symbol versions"
python3 "$here/python/check_wheel.py" "$dist"

start_dls

log "fresh virtualenv in $work/venv, pip install of the wheel file (no index, no Rust on PATH)"
without_rust python3 -m venv "$work/venv"
without_rust "$work/venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"

log "running the README quick start ($here/python/quickstart.py) with no Rust on PATH"
sed "s/127\.0\.0\.1:7070/$DLS_ENDPOINTS/" "$here/python/quickstart.py" >"$work/quickstart.py"
cd "$work"
out="$(BILLING_RECORD="$work/billing.txt" without_rust "$work/venv/bin/python" quickstart.py)"
echo "$out"
where="$(without_rust "$work/venv/bin/python" -c 'import caerus._native as n; print(n.__file__)')"
case "$where" in "$work/venv/"*) ;; *) fail "caerus was imported from $where, not the virtualenv" ;; esac

token="$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<<"$out")"
[ -n "$token" ] && [ "$token" -ge 1 ] || fail "no fencing token in the output: $out"
[ "$(cat "$work/billing.txt")" = "int $token" ] || fail "charge() got '$(cat "$work/billing.txt")', expected 'int $token'"
log "ok: the installed wheel took billing-jobs/monthly-billing-job with fencing token $token"

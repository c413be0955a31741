#!/usr/bin/env bash
# The Python package as a user gets it: a fresh virtualenv in a temp dir, `pip install` of
# the wheel file alone (no index), and the README's quick start run from a script with no
# cargo or rustc on PATH, against a real dls node. Used by `make test-wheel`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/python.sh [DIST_DIR]
#   PYTHONS="python3.9 python3.13" ...   # each interpreter gets its own virtualenv (default: python3)
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

sed "s/127\.0\.0\.1:7070/$DLS_ENDPOINTS/" "$here/python/quickstart.py" >"$work/quickstart.py"
cd "$work"
last=0
for python in ${PYTHONS:-python3}; do
  venv="$work/venv-$(basename "$python")"
  log "$("$python" --version): fresh virtualenv, pip install of the wheel file (no index, no Rust on PATH)"
  without_rust "$python" -m venv "$venv"
  without_rust "$venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$wheel"
  where="$(without_rust "$venv/bin/python" -c 'import caerus._native as n; print(n.__file__)')"
  case "$where" in "$venv/"*) ;; *) fail "caerus was imported from $where, not the virtualenv" ;; esac

  log "running the README quick start ($here/python/quickstart.py) with no Rust on PATH"
  out="$(BILLING_RECORD="$work/billing.txt" without_rust timeout 60 "$venv/bin/python" quickstart.py)" ||
    fail "the quick start failed: $out"
  echo "$out"
  token="$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<<"$out")"
  [ -n "$token" ] || fail "no fencing token in the output: $out"
  [ "$(cat "$work/billing.txt")" = "int $token" ] || fail "charge() got '$(cat "$work/billing.txt")', expected 'int $token'"
  [ "$token" -gt "$last" ] || fail "fencing token $token is not above the previous run's $last"
  last="$token"
done
log "ok: the installed wheel took billing-jobs/monthly-billing-job (last fencing token $last)"

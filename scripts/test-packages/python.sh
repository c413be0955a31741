#!/usr/bin/env bash
# The Python package as a user gets it, with the README's Python quick start as printed
# (extracted by scripts/readme_snippets.py): a fresh virtualenv in a temp dir, the README's
# `pip install` line run from a stand-in checkout holding only the wheel, then its two
# scripts (asyncio and caerus.sync) with no cargo or rustc on PATH, against a real dls node.
# Used by `make test-wheel`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/python.sh [DIST_DIR]
#   PYTHONS="python3.9 python3.13" ...   # each interpreter gets its own virtualenv (default: python3)
#   SNIPPETS_ROOT=/old/checkout ...      # the snippets of another checkout's README (e.g. an old one)
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
unset CAERUS_API_KEY # as after `make run`: the scripts take the key from it, none here

# The install block: `make wheel` (which `make test-wheel` ran), then a `pip install` of the
# wheel by its path in the checkout; run from a stand-in checkout holding only that wheel,
# so the printed file name must be the one `make wheel` made.
snippets show python-install >"$work/install.sh"
grep -q '^make wheel' "$work/install.sh" || fail "python-install does not start with make wheel: $(cat "$work/install.sh")"
grep '^pip install ' "$work/install.sh" >"$work/pip.sh" || fail "python-install has no pip install line"
mkdir -p "$work/checkout/bindings/python/dist"
cp "$wheel" "$work/checkout/bindings/python/dist/"
snippets extract "$work" python-worker python-sync
worker="$(snippets list | awk '$1 == "python-worker" { print $2 }')"
sync_worker="$(snippets list | awk '$1 == "python-sync" { print $2 }')"

last=0
check_run() { # script output [billing text]
  echo "$2"
  local token
  token="$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<<"$2")"
  [ -n "$token" ] || fail "$1 printed no 'Lock acquired. Fencing token: N': $2"
  [ -z "${3:-}" ] || grep -qx "$3 $token" <<<"$2" || fail "$1: charge() did not get token $token: $2"
  [ "$token" -gt "$last" ] || fail "$1: fencing token $token is not above the previous run's $last"
  last="$token"
}

for python in ${PYTHONS:-python3}; do
  venv="$work/venv-$(basename "$python")"
  log "$("$python" --version): fresh virtualenv, the README's $(cat "$work/pip.sh" | cut -c1-60)... (no index, no Rust on PATH)"
  without_rust "$python" -m venv "$venv"
  (cd "$work/checkout" && PATH="$venv/bin:$PATH" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    without_rust bash -euo pipefail "$work/pip.sh" >"$work/pip.log" 2>&1) ||
    fail "the README's pip install failed: $(cat "$work/pip.log")"
  where="$(without_rust "$venv/bin/python" -c 'import caerus._native as n; print(n.__file__)')"
  case "$where" in "$venv/"*) ;; *) fail "caerus was imported from $where, not the virtualenv" ;; esac

  for script in "$worker" "$sync_worker"; do
    log "running the README's $script with no Rust on PATH"
    out="$(cd "$work" && without_rust timeout 60 "$venv/bin/python" "$script" 2>&1)" ||
      fail "$script failed: $out"
    if [ "$script" = "$worker" ]; then check_run "$script" "$out" "charging with fencing token"; else check_run "$script" "$out"; fi
  done
done
log "ok: the installed wheel ran the README's Python scripts as printed (last fencing token $last)"

#!/usr/bin/env bash
# Fails if a shared library needs glibc symbol versions newer than MAX (default 2.17, the
# manylinux2014 baseline: CentOS 7, Debian 8, Ubuntu 14.04 and everything later) — what
# auditwheel checks, for any .so or .node file.
#
#   scripts/test-packages/check-glibc.sh FILE [MAX]
set -euo pipefail
file="${1:?usage: check-glibc.sh FILE [MAX]}"
max="${2:-2.17}"
[ -f "$file" ] || { echo "check-glibc: no file $file" >&2; exit 2; }

versions="$(objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV)"
newest="$(tail -1 <<<"$versions")"
[ -n "$newest" ] || { echo "check-glibc: $file has no GLIBC symbol versions (not a glibc build?)" >&2; exit 1; }
too_new="$(printf '%s\n' "$max" $versions | sort -uV | sed "1,/^${max//./\\.}\$/d")"
if [ -n "$too_new" ]; then
  echo "check-glibc: $(basename "$file") needs GLIBC_$newest, newer than $max:" >&2
  for v in $too_new; do objdump -T "$file" | grep -F "(GLIBC_$v)" | awk '{print "  " $NF "@GLIBC_'"$v"'"}' >&2; done
  exit 1
fi
echo "check-glibc: $(basename "$file") needs at most GLIBC_$newest (<= $max)"

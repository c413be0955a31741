#!/usr/bin/env bash
# Builds the dls binary of an earlier release once and prints its path. The build is kept
# in a cache outside the checkout, keyed by the commit, so `make test-upgrade` pays for it
# only the first time:
#   $CAERUS_CACHE_DIR/releases/<commit>/dls   (CAERUS_CACHE_DIR defaults to /var/cache/caerus-dls,
#   or ~/.cache/caerus-dls for a user who cannot write there)
# Usage: scripts/old-release.sh COMMIT
set -euo pipefail

commit=${1:?usage: $0 COMMIT}
default_cache=/var/cache/caerus-dls
if ! mkdir -p "$default_cache" 2>/dev/null || [ ! -w "$default_cache" ]; then
  default_cache=$HOME/.cache/caerus-dls
fi
cache=${CAERUS_CACHE_DIR:-$default_cache}/releases/$commit
bin=$cache/dls
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$cache"
src=$(mktemp -d "$cache/src.XXXXXX")
trap 'rm -rf "$src"' EXIT
# The release's own tree and lock file: nothing of the current checkout leaks into it.
git -C "$repo" archive "$commit" | tar -x -C "$src"
echo "building dls at $commit in $src (target $cache/target)..." >&2
# The binary's crate is the release's own: caerus-cli (cli/) since issue 42, caerus-server before.
package=caerus-server
[ -f "$src/cli/Cargo.toml" ] && package=caerus-cli
(cd "$src" && DLS_GIT_COMMIT="$commit" CARGO_TARGET_DIR="$cache/target" cargo build -p "$package" --bin dls >&2)
# Copied, then renamed into place: a build cut short never leaves a binary behind.
cp "$cache/target/debug/dls" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"

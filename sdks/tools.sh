#!/usr/bin/env bash
# Installs the pinned generators of sdks/tools.env into $CAERUS_TOOLS_DIR (default
# ~/.cache/caerus-dls/tools), each from its package registry, and prints the PATH to use.
# Idempotent: a tool already present at its pinned version is not fetched again.
# Usage: sdks/tools.sh            (install, then print "export PATH=...")
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tools.env
. "$here/tools.env"
TOOLS="${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}"
mkdir -p "$TOOLS"
log() { echo "tools: $*" >&2; }

buf_dir="$TOOLS/buf-$BUF_VERSION"
if [ ! -x "$buf_dir/node_modules/.bin/buf" ]; then
  log "installing buf $BUF_VERSION (npm @bufbuild/buf)"
  npm install --silent --no-audit --no-fund --prefix "$buf_dir" "@bufbuild/buf@$BUF_VERSION" >&2
fi

# One bin dir per pinned pair of Go plugins, so a version bump never reuses an old binary.
gobin="$TOOLS/go-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION/bin"
if [ ! -x "$gobin/protoc-gen-go" ] || [ ! -x "$gobin/protoc-gen-go-grpc" ]; then
  command -v go >/dev/null || { log "go not found: install Go (Debian golang-go or newer)"; exit 1; }
  log "installing protoc-gen-go $PROTOC_GEN_GO_VERSION and protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION (go install)"
  GOBIN="$gobin" GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION" >&2
  GOBIN="$gobin" GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION" >&2
fi

# A Maven Central executable, fetched with Maven itself and renamed to what buf looks for.
mvn_exe() { # artifact version name
  local dir="$TOOLS/$3-$2/bin"
  if [ ! -x "$dir/$3" ]; then
    command -v mvn >/dev/null || { log "mvn not found: install maven"; exit 1; }
    log "fetching $1:$2:exe:linux-x86_64 (Maven Central)"
    mkdir -p "$dir"
    mvn -q -B -Dstyle.color=never dependency:copy "-Dartifact=$1:$2:exe:linux-x86_64" "-DoutputDirectory=$dir" >&2
    mv "$dir/"*.exe "$dir/$3"
    chmod +x "$dir/$3"
  fi
  echo "$dir"
}
protoc_bin="$(mvn_exe com.google.protobuf:protoc "$PROTOC_VERSION" protoc)"

py_dir="$TOOLS/grpcio-tools-$GRPCIO_TOOLS_VERSION"
if [ ! -x "$py_dir/bin/python" ] || ! "$py_dir/bin/python" -c 'import grpc_tools.protoc' 2>/dev/null; then
  log "installing grpcio-tools $GRPCIO_TOOLS_VERSION (PyPI) into a virtualenv"
  rm -rf "$py_dir"
  python3 -m venv "$py_dir"
  "$py_dir/bin/pip" install -q "grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
fi

# Ruby's gRPC plugin comes from Debian; check it is the pinned release line.
if ! command -v grpc_ruby_plugin >/dev/null; then
  log "grpc_ruby_plugin not found: apt-get install protobuf-compiler-grpc (Debian 12: $DEBIAN_GRPC_PLUGINS_VERSION)"
  exit 1
fi
deb_ver="$(dpkg-query -W -f='${Version}' protobuf-compiler-grpc 2>/dev/null || echo unknown)"
case "$deb_ver" in
  "$DEBIAN_GRPC_PLUGINS_VERSION"*) ;;
  *) log "protobuf-compiler-grpc is $deb_ver, expected $DEBIAN_GRPC_PLUGINS_VERSION: Ruby/C# output may differ" ;;
esac

# grpc_csharp_plugin, built from Debian's grpc source with a private apt configuration (only
# deb-src lists in the tools dir; the system's apt setup is left alone).
cs_dir="$TOOLS/grpc-csharp-plugin-$DEBIAN_GRPC_SOURCE_VERSION"
if [ ! -x "$cs_dir/bin/grpc_csharp_plugin" ]; then
  [ -e /usr/include/google/protobuf/compiler/plugin.h ] || { log "libprotoc-dev missing: apt-get install libprotoc-dev"; exit 1; }
  command -v g++ >/dev/null || { log "g++ missing: apt-get install g++"; exit 1; }
  log "building grpc_csharp_plugin from Debian source grpc $DEBIAN_GRPC_SOURCE_VERSION"
  rm -rf "$cs_dir" && mkdir -p "$cs_dir/apt/lists/partial" "$cs_dir/src" "$cs_dir/bin"
  echo "deb-src http://deb.debian.org/debian bookworm main" > "$cs_dir/apt/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$cs_dir/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$cs_dir/apt/lists" -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq >&2
  (cd "$cs_dir/src" && apt-get "${apt_opts[@]}" source --download-only -qq "grpc=$DEBIAN_GRPC_SOURCE_VERSION" >&2)
  tar -xzf "$cs_dir/src/grpc_${DEBIAN_GRPC_SOURCE_VERSION%-*}.orig.tar.gz" -C "$cs_dir/src" --wildcards '*/src/compiler/*' \
    '*/include/grpc/impl/codegen/port_platform.h' '*/include/grpcpp/impl/codegen/config_protobuf.h'
  (cd "$cs_dir/src/grpc-${DEBIAN_GRPC_SOURCE_VERSION%-*}" && g++ -O1 -std=c++17 -I. -Iinclude \
    src/compiler/csharp_plugin.cc src/compiler/csharp_generator.cc \
    -o "$cs_dir/bin/grpc_csharp_plugin" -lprotoc -lprotobuf -pthread >&2)
  rm -rf "$cs_dir/src" "$cs_dir/apt"
fi

# buf (for protoc_builtin) and protoc-gen-* are found on PATH; ours come first so Debian's
# older /usr/bin/protoc is never used.
echo "export PATH=\"$cs_dir/bin:$protoc_bin:$gobin:$buf_dir/node_modules/.bin:$py_dir/bin:\$PATH\""

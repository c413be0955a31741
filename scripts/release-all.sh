#!/usr/bin/env bash
# `make release-all`: every package for every platform, cross-built here with zig
# (cargo-zigbuild) into OUT (default <target dir>/release-all):
#   server/  caerus-dls-<version>-<platform>.tar.gz (.zip with bin/dls.exe on Windows)
#   python/  one abi3 wheel per platform, tagged manylinux2014 / musllinux_1_2 / macosx / win_amd64
#   npm/     @caerus-dev/sdk (optionalDependencies: every platform package) and one platform
#            package per target, napi-rs names (linux-arm64-gnu, darwin-x64, win32-x64-gnu, ...)
#   jvm/     ONE jar with every platform's library where JNA looks (linux-x86-64/, darwin-aarch64/, ...)
#   SHA256SUMS
#
#   scripts/release-all.sh [TARGET...]     (default: every target below, in that order)
#   RELEASE_PARTS="dls wheel npm"          (what to build; default all of dls wheel npm jvm)
#   RELEASE_PROFILE=ci                     (cargo profile; default dist, what ships; `make test-cross`
#                                           builds profile ci, a fraction of dist's compile time)
#
# One loop over the targets; each runs the packaging the linux-x86_64 release already uses
# (deploy/dist.sh, scripts/build-wheel.py, bindings/node's stage-release.mjs and npm pack,
# bindings/uniffi's maven-install), parameterised by platform. A target that fails is named
# at the end and the others still build (exit 1). The builds share <target dir>/zig with
# `make dist`, so x86_64-unknown-linux-gnu.2.17 is the same build as the existing packages.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

ALL_TARGETS=(
  aarch64-unknown-linux-musl     # first: CI runs it under qemu (make test-cross, profile ci)
  x86_64-unknown-linux-gnu.2.17  # zig links against glibc 2.17 symbols (CentOS 7 and later)
  aarch64-unknown-linux-gnu.2.17
  x86_64-unknown-linux-musl
  x86_64-pc-windows-gnu          # no MSVC toolchain here; MinGW ABI, see win32-x64-gnu below
  aarch64-apple-darwin           # macOS 11.0 and later
  x86_64-apple-darwin            # macOS 10.12 and later
)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")
parts=" ${RELEASE_PARTS:-dls wheel npm jvm} "
want() { [[ $parts == *" $1 "* ]]; }
profile=${RELEASE_PROFILE:-dist}

target_dir=$(mkdir -p "${CARGO_TARGET_DIR:-target}" && cd "${CARGO_TARGET_DIR:-target}" && pwd)
out=${RELEASE_ALL_DIR:-$target_dir/release-all}
zig_dir=$target_dir/zig
# The Node addon and Python extension for musl are shared objects, which Rust builds only
# without crt-static; those flags would rebuild the static dls' tree each time, so they get
# a tree of their own.
zig_dylib_dir=$target_dir/zig-musl-dylib
venv=${ZIGBUILD_VENV:?set ZIGBUILD_VENV (the Makefile does: make release-all)}
host_dls=${HOST_DLS:-$target_dir/debug/dls}
mkdir -p "$out"/{server,python,npm,jvm}

log() { echo "release-all: $*" >&2; }

# macOS: openraft's chrono asks for the CoreFoundation framework (iana-time-zone reads the
# system time zone through it). zig links Mach-O without Apple's SDK but has no frameworks,
# so it gets a text stub (.tbd) naming the few functions used and the library every macOS
# has; the binary then links /System/Library/Frameworks/CoreFoundation.framework as Xcode's would.
macos_stubs=$target_dir/macos-stubs
write_macos_stubs() {
  local fw=$macos_stubs/CoreFoundation.framework
  mkdir -p "$fw"
  cat > "$fw/CoreFoundation.tbd" << 'EOF'
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation'
current-version: 1971
exports:
  - targets:     [ x86_64-macos, arm64-macos ]
    symbols:     [ _CFRelease, _CFStringGetBytes, _CFStringGetCStringPtr, _CFStringGetLength,
                   _CFTimeZoneCopySystem, _CFTimeZoneGetName, _CFTimeZoneResetSystem ]
...
EOF
}

# Per target: the names each ecosystem gives the platform.
describe() {
  triple=${1%.2.17}
  case $triple in
    x86_64-*) arch=x86_64 node_arch=x64 jna_arch=x86-64 ;;
    aarch64-*) arch=aarch64 node_arch=arm64 jna_arch=aarch64 ;;
    *) log "unknown architecture in $1"; return 1 ;;
  esac
  exe=dls lib_prefix=lib jna= deploy_env=()
  case $triple in
    *-linux-gnu)
      platform=linux-$arch npm=linux-$node_arch-gnu lib_ext=so jna=linux-$jna_arch
      wheel_tags=(manylinux2014_$arch manylinux_2_17_$arch) ;;
    *-linux-musl)
      platform=linux-$arch-musl npm=linux-$node_arch-musl lib_ext=so
      wheel_tags=(musllinux_1_2_$arch) ;;
    *-apple-darwin)
      platform=macos-$arch npm=darwin-$node_arch lib_ext=dylib jna=darwin-$jna_arch
      # Rust's own minimum for each (rustc's default deployment target), stated so the wheel tag
      # and the binaries' LC_BUILD_VERSION agree.
      if [ "$arch" = x86_64 ]; then macos_min=10.12; else macos_min=11.0; fi
      wheel_tags=("macosx_${macos_min/./_}_${arch/aarch64/arm64}")
      deploy_env=(MACOSX_DEPLOYMENT_TARGET="$macos_min"
        "CARGO_TARGET_$(echo "$triple" | tr a-z- A-Z_)_RUSTFLAGS=-C link-arg=-F$macos_stubs") ;;
    x86_64-pc-windows-gnu)
      platform=windows-$arch npm=win32-$node_arch-gnu lib_ext=dll lib_prefix= jna=win32-$jna_arch exe=dls.exe
      wheel_tags=(win_amd64) ;;
    *) log "no packaging rules for $1"; return 1 ;;
  esac
}

zigbuild() { # DIR SUBCOMMAND [cargo-zigbuild args...] (the options go before them, so that
  # rustc's after a `--` stay last)
  local dir=$1 sub=$2
  shift 2
  env PATH="$venv/bin:$PATH" CARGO_ZIGBUILD_PYTHON_PATH="$venv/bin/python" "${deploy_env[@]}" \
    cargo-zigbuild "$sub" --profile "$profile" --target "$target" --target-dir "$dir" "$@"
}

# Shipped libraries carry no debug info; ELF ones no symbol table either (.dynsym stays).
strip_to() { # IN OUT
  case $lib_ext in
    so) llvm-strip --strip-all -o "$2" "$1" ;;
    *) llvm-strip --strip-debug -o "$2" "$1" ;;
  esac
}

build_target() {
  local dist=$zig_dir/$triple/$profile dylib_dist=$zig_dylib_dir/$triple/$profile
  local libs=(-p caerus-node)
  want jvm && [ -n "$jna" ] && libs+=(-p caerus-uniffi)
  if [[ $triple == *-musl ]]; then
    if want dls; then
      log "$target: dls (static, musl)"
      zigbuild "$zig_dir" zigbuild -p caerus-cli --bin dls --no-default-features
    fi
    if want npm; then
      log "$target: the Node addon (musl, shared object)"
      RUSTFLAGS="-C target-feature=-crt-static" zigbuild "$zig_dylib_dir" zigbuild "${libs[@]}" --lib
    fi
    lib_dist=$dylib_dist
  else
    local what=()
    want dls && what+=(-p caerus-cli --bin dls)
    want npm || want jvm && what+=("${libs[@]}" --lib)
    if [ ${#what[@]} -gt 0 ]; then
      log "$target: ${what[*]}"
      zigbuild "$zig_dir" zigbuild "${what[@]}" --no-default-features
    fi
    lib_dist=$dist
  fi
  if want wheel; then
    log "$target: the Python extension (abi3)"
    local dir=$zig_dir extra=()
    if [[ $triple == *-musl ]]; then dir=$zig_dylib_dir; fi
    # CPython provides the C API to the extension at load time: on macOS the linker must be
    # told (maturin passes the same flags). On Windows pyo3 (0.29 and later) links python3.dll
    # with raw-dylib, so neither a Windows Python nor an import library is needed to cross-build
    # (pyo3's feature generate-import-lib is deprecated and does nothing).
    case $triple in
      *-apple-darwin) extra=(-- -C link-arg=-undefined -C link-arg=dynamic_lookup) ;;
    esac
    if [[ $triple == *-musl ]]; then
      RUSTFLAGS="-C target-feature=-crt-static" PYO3_PYTHON=python3 zigbuild "$dir" rustc \
        -p caerus-python --lib --crate-type cdylib --features pyo3/extension-module "${extra[@]}"
    else
      PYO3_PYTHON=python3 zigbuild "$dir" rustc \
        -p caerus-python --lib --crate-type cdylib --features pyo3/extension-module "${extra[@]}"
    fi
    py_dist=$dir/$triple/$profile
  fi
}

pack_target() {
  local dist=$zig_dir/$triple/$profile stage
  stage=$(mktemp -d)
  if want dls; then
    local host=$host_dls
    # Binaries for this machine (x86_64 Linux, glibc or static musl) make their own man pages.
    [[ $triple == x86_64-unknown-linux-* ]] && [ "$(uname -m)" = x86_64 ] && host=$dist/dls
    DIST_HOST_DLS=$host deploy/dist.sh "$dist/$exe" "$out/server" "$platform"
  fi
  if want wheel; then
    local ext=$lib_prefix"caerus_native.$lib_ext"
    strip_to "$py_dist/$ext" "$stage/$ext"
    local args=()
    for tag in "${wheel_tags[@]}"; do args+=(--platform "$tag"); done
    python3 scripts/build-wheel.py --extension "$stage/$ext" --out "$out/python" "${args[@]}"
  fi
  if want npm; then
    local addon=$lib_prefix"caerus_node.$lib_ext"
    cp -r "bindings/node/npm/$npm" "$stage/npm"
    strip_to "$lib_dist/$addon" "$stage/npm/caerus.$npm.node"
    (cd "$stage/npm" && npm pack --silent --pack-destination "$out/npm" > /dev/null)
    log "$target: packed @caerus-dev/sdk-$npm"
  fi
  if want jvm && [ -n "$jna" ]; then
    local lib=$lib_prefix"caerus_uniffi.$lib_ext"
    mkdir -p "$out/jvm-native/$jna"
    strip_to "$lib_dist/$lib" "$out/jvm-native/$jna/$lib"
  fi
  case $triple in
    *-linux-gnu)
      for f in "$dist/$exe" "$lib_dist/libcaerus_node.so" "$py_dist/libcaerus_native.so"; do
        [ -f "$f" ] && { scripts/test-packages/check-glibc.sh "$f" || return 1; }
      done ;;
    *-apple-darwin)
      for f in "$dist/dls" "$lib_dist/libcaerus_node.dylib" "$py_dist/libcaerus_native.dylib" \
        "$lib_dist/libcaerus_uniffi.dylib"; do
        [ -f "$f" ] && { scripts/test-packages/check-macho.py "$f" "$arch" "$macos_min" || return 1; }
      done ;;
  esac
  rm -rf "$stage"
}

ok=() failed=() host_built=
[[ " ${targets[*]} " == *apple-darwin* ]] && write_macos_stubs
for target in "${targets[@]}"; do
  py_dist= lib_dist= macos_min=
  describe "$target" || { failed+=("$target"); continue; }
  start=$SECONDS
  if command -v rustup > /dev/null && ! rustup target list --installed | grep -qx "$triple"; then
    rustup target add "$triple"
  fi
  # A subshell outside any `if`/`&&`, so that errexit stops it at the first failing command
  # (bash ignores set -e inside a function called as a condition).
  set +e
  (
    set -e
    build_target
    pack_target
  )
  rc=$?
  set -e
  if [ $rc = 0 ]; then
    ok+=("$target ($((SECONDS - start)) s)")
    [ "$triple" = x86_64-unknown-linux-gnu ] && host_built=1
  else
    log "$target FAILED (see above); going on with the others"
    failed+=("$target")
  fi
done

# One jar for every platform: the Kotlin is generated from the x86_64 Linux library (uniffi
# reads the same metadata from every platform's), the others go in beside it. Only when this
# run built that library: one left from an older checkout would not match today's Kotlin.
if want jvm; then
  host_lib=$zig_dir/x86_64-unknown-linux-gnu/$profile/libcaerus_uniffi.so
  if [ -n "$host_built" ] && [ -f "$host_lib" ]; then
    rm -rf "$out/jvm-native/linux-x86-64"
    make -C bindings/uniffi maven-install RELEASE_LIB="$host_lib" NATIVE_OTHERS="$out/jvm-native"
    cp bindings/uniffi/kotlin/target/caerus-dls-*.jar "$out/jvm/"
    unzip -l "$out"/jvm/caerus-dls-*.jar | grep -E ' (linux|darwin|win32)-[a-z0-9-]+/[a-z_]*caerus_uniffi\.' >&2
  else
    log "jvm: x86_64-unknown-linux-gnu.2.17 not among the targets built: no jar"
  fi
fi
if want npm; then
  (cd bindings/node && node scripts/stage-release.mjs "$out/npm/sdk" > /dev/null &&
    cd "$out/npm/sdk" && npm pack --silent --pack-destination .. > /dev/null)
  rm -rf "$out/npm/sdk"
fi

(cd "$out" && find server python npm jvm -type f | LC_ALL=C sort | xargs -r sha256sum > SHA256SUMS)
log "built: ${ok[*]:-none}"
log "artifacts in $out:"
(cd "$out" && find server python npm jvm -type f | LC_ALL=C sort | xargs -r ls -l) >&2
if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]}"
  exit 1
fi

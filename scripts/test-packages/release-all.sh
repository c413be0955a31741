#!/usr/bin/env bash
# Runs what `make release-all` built wherever this x86_64 Linux machine can run it:
#   - Linux arm64 under qemu-aarch64-static (Debian's qemu-user-static): the static musl dls
#     as is; the glibc dls, the wheel in an arm64 CPython and the Node addon in an arm64 Node
#     with Debian's arm64 packages (apt-get download, dpkg -x) as the root (-L) of qemu;
#   - Windows: the archive's bin/dls.exe under wine, by make test-windows' script (windows.sh:
#     locks from both clients, a restart on the same data); ZIG builds wine's missing DLL;
#   - Linux x86_64 (glibc and musl): natively; the musl wheels and Node packages by what they
#     need from the loader (no musl CPython or Node here);
#   - macOS: no Mac here; the binaries' load commands (scripts/test-packages/check-macho.py);
#   - the Windows wheel: no Windows CPython here; its tag and import table (check-pe.py).
# Each dls serves a one-node cluster and takes a lock through the Linux dls client and through
# itself. Every check says what it ran; a platform whose artifact is missing is named as
# skipped, a platform that was built but fails fails the script.
#
#   scripts/test-packages/release-all.sh [TARGET...]   (default: every archive in RELEASE_ALL_DIR)
# Used by `make test-release-all` and (one target) `make test-cross`.
name=release-all
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
out=${RELEASE_ALL_DIR:-$target/release-all}
[ -d "$out/server" ] || fail "no $out/server: run make release-all"
version=$("$DLS_BIN" --version | awk '{print $2}')
ran=() skipped=()
server_pid=

stop_server() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2> /dev/null || true; wait "$server_pid" 2> /dev/null || true; fi
  server_pid=
}
trap 'stop_server; cleanup' EXIT

free_ports() { # N
  python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])' "$1"
}

# The arm64 root for qemu (-L): Debian 12's arm64 packages, fetched with apt-get download and
# unpacked with dpkg -x (nothing installed): libc for the glibc dls, CPython 3.11 for the
# wheel, Node 18 for the addon, and what they load. apt cannot resolve them for us: the
# simulated install conflicts with the machine's own python3.11.
ARM64_DEBS="libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g libssl3 libbrotli1 libc-ares2 libicu72 libnghttp2-14
  libnode108 libuv1 nodejs libexpat1 libpython3.11-minimal python3.11-minimal libpython3.11-stdlib libffi8
  libbz2-1.0 liblzma5 libsqlite3-0 libuuid1 libcrypt1 libncursesw6 libtinfo6 libreadline8 libnsl2 libtirpc3
  libdb5.3 libgdbm6 libzstd1"
ARM64_ALL_DEBS="node-acorn node-cjs-module-lexer node-undici node-busboy node-xtend"
arm64_root=
arm64_root() {
  [ -n "$arm64_root" ] && return 0
  local root=${CAERUS_TOOLS_DIR:-$HOME/.cache/caerus-dls/tools}/debian-arm64-root
  if [ ! -x "$root/usr/bin/python3.11" ] || [ ! -x "$root/usr/bin/node" ]; then
    [ "$(id -u)" = 0 ] || { log "not root: cannot fetch Debian's arm64 packages"; return 1; }
    log "fetching Debian's arm64 libc, CPython and Node (apt-get download) into $root"
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    apt-get update -qq
    local debs=$work/debs pkg
    mkdir -p "$debs" "$root"
    # shellcheck disable=SC2046,SC2086
    (cd "$debs" && apt-get download $(for pkg in $ARM64_DEBS; do echo "$pkg:arm64"; done) $ARM64_ALL_DEBS \
      > /dev/null 2>&1) || { log "apt-get download of the arm64 packages failed"; return 1; }
    for deb in "$debs"/*.deb; do dpkg -x "$deb" "$root"; done
  fi
  arm64_root=$root
}

# start_server LABEL RUNNER... -- DLS: a one-node cluster of DLS run through RUNNER (none:
# natively), ready; sets client_port.
start_server() {
  local label=$1 runner=()
  shift
  while [ "$1" != -- ]; do runner+=("$1"); shift; done
  local dls=$2 http
  read -r client_port http < <(free_ports 2)
  log "$label: ${runner[*]} $(basename "$dls") serve (gRPC :$client_port, HTTP :$http)"
  "${runner[@]}" "$dls" serve --listen "127.0.0.1:$client_port" --http-listen "127.0.0.1:$http" \
    --data-dir "$work/data-$label" > "$work/$label.log" 2>&1 &
  server_pid=$!
  # wine's first start sets up its prefix: 120 s
  "$repo/scripts/wait-ready.py" "$http" "$server_pid" 120 || { tail -20 "$work/$label.log" >&2; fail "$label: dls did not become ready"; }
}

# serve_and_lock LABEL RUNNER... -- DLS: start_server, a lock through the Linux client, then
# one through DLS itself (its fencing token must be the later one), then a restart on the same
# data and a lock with a later token still.
serve_and_lock() {
  local label=$1 args=("$@")
  start_server "$@"
  local runner=("${args[@]:1:${#args[@]}-3}") dls=${args[-1]}
  local token token2 token3 own=(sh -c 'echo "$DLS_FENCING_TOKEN"')
  token=$("$DLS_BIN" lock --endpoints "127.0.0.1:$client_port" release-all "$label" -- sh -c 'echo "$DLS_FENCING_TOKEN"')
  [[ $token =~ ^[0-9]+$ ]] && [ "$token" -gt 0 ] || fail "$label: the Linux client got no fencing token: '$token'"
  [[ $dls == *.exe ]] && own=(cmd /c echo %DLS_FENCING_TOKEN%)
  token2=$("${runner[@]}" "$dls" lock --endpoints "127.0.0.1:$client_port" release-all "$label" -- "${own[@]}" | tr -d '\r')
  [[ $token2 =~ ^[0-9]+$ ]] && [ "$token2" -gt "$token" ] ||
    fail "$label: its own dls lock got no later fencing token: '$token2' after $token"
  stop_server
  # The same data directory again: the log and metadata this platform wrote, read back; the
  # tokens go on rising.
  start_server "$@"
  token3=$("$DLS_BIN" lock --endpoints "127.0.0.1:$client_port" release-all "$label" -- sh -c 'echo "$DLS_FENCING_TOKEN"')
  [[ $token3 =~ ^[0-9]+$ ]] && [ "$token3" -gt "$token2" ] ||
    fail "$label: after a restart on its data the lock got no later fencing token: '$token3' after $token2"
  stop_server
  ran+=("$label: dls serve + lock (Linux client: token $token; its own dls lock: token $token2; after a restart: token $token3) via ${runner[*]:-native}")
}

unpack() { # ARCHIVE -> prints the unpacked root
  local dir=$work/unpacked
  mkdir -p "$dir"
  case $1 in
    *.zip) (cd "$dir" && unzip -q -o "$1") ;;
    *) tar -xzf "$1" -C "$dir" ;;
  esac
  echo "$dir/$(basename "${1%.tar.gz}" .zip)"
}

server_check() { # TARGET
  local t=${1%.2.17} platform archive root
  case $t in
    x86_64-unknown-linux-gnu) platform=linux-x86_64 ;;
    aarch64-unknown-linux-gnu) platform=linux-aarch64 ;;
    x86_64-unknown-linux-musl) platform=linux-x86_64-musl ;;
    aarch64-unknown-linux-musl) platform=linux-aarch64-musl ;;
    x86_64-apple-darwin) platform=macos-x86_64 ;;
    aarch64-apple-darwin) platform=macos-aarch64 ;;
    x86_64-pc-windows-gnu) platform=windows-x86_64 ;;
    *) fail "unknown target $1" ;;
  esac
  archive=$(ls "$out/server/caerus-dls-$version-$platform".{tar.gz,zip} 2> /dev/null | head -1 || true)
  if [ -z "$archive" ]; then
    # Every platform's archive has its dls (Windows too, since dls.exe builds): a platform
    # whose libraries were built but whose archive is missing lost its server.
    if [ "$platform" = windows-x86_64 ] && { compgen -G "$out/python/*-win_amd64.whl" ||
      compgen -G "$out/npm/caerus-dev-sdk-win32-x64-*.tgz"; } > /dev/null; then
      fail "$platform: release-all built its wheel or npm package but no server archive (bin/dls.exe)"
    fi
    skipped+=("$platform: no server archive")
    return 0
  fi
  root=$(unpack "$archive")
  local exe=bin/dls
  [ "$platform" = windows-x86_64 ] && exe=bin/dls.exe
  for f in $exe etc/dls.toml share/man/man1/dls.1 share/completions/dls.bash; do
    [ -f "$root/$f" ] || fail "$(basename "$archive") lacks $f"
  done
  case $platform in
    linux-x86_64-musl)
      # Static, so it runs on any x86_64 Linux (Alpine's and distroless images included).
      file -b "$root/bin/dls" | grep -q 'static' || fail "$platform: bin/dls is not static: $(file -b "$root/bin/dls")"
      serve_and_lock "$platform" -- "$root/bin/dls" ;;
    linux-x86_64) serve_and_lock "$platform" -- "$root/bin/dls" ;;
    linux-aarch64-musl)
      file -b "$root/bin/dls" | grep -q 'statically linked' || fail "$platform: bin/dls is not static: $(file -b "$root/bin/dls")"
      serve_and_lock "$platform" qemu-aarch64-static -- "$root/bin/dls" ;;
    linux-aarch64)
      if arm64_root; then
        serve_and_lock "$platform" qemu-aarch64-static -L "$arm64_root" -- "$root/bin/dls"
      else skipped+=("$platform: no arm64 root for its glibc"); fi ;;
    windows-x86_64)
      file -b "$root/bin/dls.exe" | grep -q 'PE32+ executable.*x86-64' || fail "$platform: bin/dls.exe is not a Windows x64 executable: $(file -b "$root/bin/dls.exe")"
      if command -v wine > /dev/null; then
        # make test-windows' script: serves, locks from Linux and from dls.exe, a lost lock's
        # command ended, a restart on the same data with higher tokens (and wine's missing DLL).
        local res last
        res=$("$here/windows.sh" "$root/bin/dls.exe" "$DLS_BIN" 2>&1) || { echo "$res" >&2; fail "$platform: bin/dls.exe under wine"; }
        last=${res##*$'\n'}
        case $last in
          ok\ *) ran+=("$platform: bin/dls.exe (scripts/test-packages/windows.sh): ${last#ok windows: }") ;;
          *) skipped+=("$platform: $last") ;;
        esac
      else skipped+=("$platform: no wine (scripts/install-deps.sh --release-all)"); fi ;;
    macos-*)
      local arch=${platform#macos-} min=11.0
      [ "$arch" = x86_64 ] && min=10.12
      scripts/test-packages/check-macho.py "$root/bin/dls" "$arch" "$min" || fail "$platform: bin/dls"
      ran+=("$platform: bin/dls load commands (llvm-objdump): $arch, macOS >= $min, system libraries only") ;;
  esac
}

# The arm64 wheel in Debian's arm64 CPython 3.11 under qemu: the README's quick start.
wheel_check_arm64() {
  local wheel site=$work/site-arm64 res token
  wheel=$(ls "$out"/python/*-manylinux2014_aarch64*.whl 2> /dev/null | head -1 || true)
  [ -n "$wheel" ] || { skipped+=("linux-aarch64 wheel: not built"); return 0; }
  arm64_root || { skipped+=("linux-aarch64 wheel: no arm64 CPython"); return 0; }
  mkdir -p "$site" && (cd "$site" && unzip -q "$wheel")
  start_server wheel-host -- "$DLS_BIN"
  sed "s/127\.0\.0\.1:7070/127.0.0.1:$client_port/" "$here/python/quickstart.py" > "$work/quickstart.py"
  res=$(PYTHONPATH=$site BILLING_RECORD=$work/billing.txt CAERUS_API_KEY=unused \
    qemu-aarch64-static -L "$arm64_root" "$arm64_root/usr/bin/python3.11" -c \
    'import platform, runpy; assert platform.machine() == "aarch64"; runpy.run_path("'"$work"'/quickstart.py")') ||
    fail "linux-aarch64 wheel: the quick start in arm64 CPython failed: $res"
  token=$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<< "$res")
  [ -n "$token" ] || fail "linux-aarch64 wheel: no fencing token in: $res"
  stop_server
  ran+=("linux-aarch64 wheel: the README quick start in Debian's arm64 CPython 3.11 under qemu, token $token")
}

# The arm64 Node addon in Debian's arm64 Node 18 under qemu: @caerus-dev/sdk and its
# linux-arm64-gnu package unpacked as npm lays them out, a lock through the SDK.
node_check_arm64() {
  local sdk addon app=$work/app-arm64 res
  sdk=$(ls "$out"/npm/caerus-dev-sdk-[0-9]*.tgz 2> /dev/null | head -1 || true)
  addon=$(ls "$out"/npm/caerus-dev-sdk-linux-arm64-gnu-*.tgz 2> /dev/null | head -1 || true)
  [ -n "$sdk" ] && [ -n "$addon" ] || { skipped+=("linux-arm64-gnu npm package: not built"); return 0; }
  arm64_root || { skipped+=("linux-arm64-gnu npm package: no arm64 Node"); return 0; }
  mkdir -p "$app/node_modules/@caerus-dev/sdk" "$app/node_modules/@caerus-dev/sdk-linux-arm64-gnu"
  tar -xzf "$sdk" -C "$app/node_modules/@caerus-dev/sdk" --strip-components 1
  tar -xzf "$addon" -C "$app/node_modules/@caerus-dev/sdk-linux-arm64-gnu" --strip-components 1
  start_server node-host -- "$DLS_BIN"
  res=$(cd "$app" && CAERUS_API_KEY=unused DLS_ENDPOINTS=127.0.0.1:$client_port \
    qemu-aarch64-static -L "$arm64_root" "$arm64_root/usr/bin/node" -e "
      const { Dls } = require('@caerus-dev/sdk');
      if (process.arch !== 'arm64') throw new Error(process.arch);
      const addon = Object.keys(require.cache).find((f) => f.endsWith('.node'));
      new Dls.DlsClient({ apiKey: process.env.CAERUS_API_KEY }).withTransaction(async (tx) => {
        const lock = await tx.acquireLock('release-all', 'node-arm64', 'EXCLUSIVE', { timeoutMs: 10000 });
        console.log(addon, lock.fencingToken);
      }, { timeoutMs: 15000 }).catch((e) => { console.error(e); process.exit(1); });") ||
    fail "linux-arm64-gnu npm package: the lock from arm64 Node failed: $res"
  [[ $res == */@caerus-dev/sdk-linux-arm64-gnu/caerus.linux-arm64-gnu.node\ [0-9]* ]] ||
    fail "linux-arm64-gnu npm package: unexpected output (addon path, token): $res"
  stop_server
  ran+=("linux-arm64-gnu npm package: a lock through the SDK in Debian's arm64 Node 18 under qemu, token ${res##* }")
}

# The musl wheels and Node packages: no musl CPython or Node here (Debian and PyPI have none;
# the npm registry's Node builds are glibc ones), so what their loader would need: only musl's
# libc (and libgcc_s, which Rust's unwinder uses in a shared object), no glibc symbol version.
musl_so_check() { # LABEL FILE
  local needed bad
  [ -f "$2" ] || fail "$1: no $(basename "$2")"
  needed=$(readelf -d "$2" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  bad=$(tr ' ' '\n' <<< "$needed" | grep -Evx '(libc\.so|libc\.musl-[a-z0-9_]+\.so\.1|ld-musl-[a-z0-9_]+\.so\.1|libgcc_s\.so\.1)?' || true)
  [ -z "$bad" ] || fail "$1: $(basename "$2") needs $bad, which a musl system may not have"
  [ "$(objdump -T "$2" | grep -c 'GLIBC_' || true)" = 0 ] || fail "$1: $(basename "$2") has glibc symbol versions"
  ran+=("$1: $(basename "$2") needs only ${needed% } (not run: no musl CPython or Node here)")
}
musl_check() {
  local f d arch
  for f in "$out"/python/*-musllinux_1_2_*.whl; do
    [ -f "$f" ] || continue
    d=$work/wheel-$(basename "$f")
    mkdir -p "$d" && (cd "$d" && unzip -q "$f" 'caerus/_native*')
    musl_so_check "$(basename "$f")" "$d"/caerus/_native.abi3.so
  done
  for arch in x64 arm64; do
    f=$(ls "$out"/npm/caerus-dev-sdk-linux-$arch-musl-*.tgz 2> /dev/null | head -1 || true)
    [ -n "$f" ] || continue
    d=$work/npm-$(basename "$f")
    mkdir -p "$d" && tar -xzf "$f" -C "$d"
    musl_so_check "$(basename "$f")" "$d"/package/caerus.linux-$arch-musl.node
  done
}

# The Windows wheel: no Windows CPython here (none in Debian or PyPI), so its tag and the
# extension's import table: python3.dll (the stable ABI, any CPython >= 3.9) and system DLLs,
# no python3NN.dll, no MinGW runtime DLL.
wheel_check_windows() {
  local wheel d
  wheel=$(ls "$out"/python/*-cp39-abi3-win_amd64.whl 2> /dev/null | head -1 || true)
  [ -n "$wheel" ] || { skipped+=("windows-x86_64 wheel: not built"); return 0; }
  d=$work/wheel-windows
  mkdir -p "$d" && (cd "$d" && unzip -q "$wheel")
  grep -qx 'Tag: cp39-abi3-win_amd64' "$d"/caerus_dls-*.dist-info/WHEEL || fail "$(basename "$wheel"): WHEEL lacks Tag: cp39-abi3-win_amd64"
  [ -f "$d/caerus/_native.pyd" ] || fail "$(basename "$wheel"): no caerus/_native.pyd"
  "$here/check-pe.py" "$d/caerus/_native.pyd" python3.dll >&2 || fail "$(basename "$wheel"): caerus/_native.pyd"
  ran+=("$(basename "$wheel"): tag win_amd64, _native.pyd imports python3.dll and system DLLs only (not run: no Windows CPython)")
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl
    x86_64-pc-windows-gnu x86_64-apple-darwin aarch64-apple-darwin)
fi
for t in "${targets[@]}"; do server_check "$t"; done
if [ $# -eq 0 ]; then
  wheel_check_arm64
  node_check_arm64
  musl_check
  wheel_check_windows
  for f in "$out"/python/*macosx*.whl; do
    [ -f "$f" ] || continue
    d=$work/wheel-$(basename "$f")
    mkdir -p "$d" && (cd "$d" && unzip -q "$f" 'caerus/_native*')
    case $f in *x86_64*) a=x86_64 m=10.12 ;; *) a=aarch64 m=11.0 ;; esac
    scripts/test-packages/check-macho.py "$d"/caerus/_native.abi3.so "$a" "$m" || fail "$(basename "$f")"
    ran+=("$(basename "$f"): extension's load commands")
  done
  for f in "$out"/npm/caerus-dev-sdk-darwin-*.tgz; do
    [ -f "$f" ] || continue
    d=$work/npm-$(basename "$f")
    mkdir -p "$d" && tar -xzf "$f" -C "$d"
    case $f in *x64*) a=x86_64 m=10.12 ;; *) a=aarch64 m=11.0 ;; esac
    scripts/test-packages/check-macho.py "$d"/package/*.node "$a" "$m" || fail "$(basename "$f")"
    ran+=("$(basename "$f"): addon's load commands")
  done
fi

log "ran:"
printf '    %s\n' "${ran[@]}" >&2
[ ${#skipped[@]} -eq 0 ] || { log "skipped (not built or cannot run here):"; printf '    %s\n' "${skipped[@]}" >&2; }
[ ${#ran[@]} -gt 0 ] || fail "nothing ran"

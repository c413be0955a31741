#!/usr/bin/env bash
# Builds the container image caerus-dls:<version> (and :latest) from a dls binary built here,
# with no registry: deploy/image.sh DLS_BINARY STAGING_DIR   (`make image`)
#
# The image is FROM scratch. Into it go the binary `make release-portable` builds for
# `make dist` (glibc >= 2.17, zig linker; the same build, not another one) and, from this
# machine's Debian packages, what it needs to run: the shared libraries `ldd` names (libc,
# libm, libgcc_s, the loader), the CA certificates (outgoing HTTPS: webhooks, OTLP), and
# dash as /bin/sh (the Kubernetes StatefulSet derives each pod's node id from its name in a
# shell line, and the CronJob sample's job is a shell command). /etc/passwd and /etc/group
# name the user dls (uid/gid 10001) that owns /data, the data directory and volume.
#
# Needs a running Docker engine (DOCKER_HOST as usual); deploy/engine.sh starts Debian's
# when none runs and stops it after. The build context is STAGING_DIR/context: one tarball
# with exact owners and modes (a COPY would make everything root's) and the Dockerfile.
set -euo pipefail

bin=$(realpath "${1:?usage: deploy/image.sh DLS_BINARY STAGING_DIR}")
stage=${2:?usage: deploy/image.sh DLS_BINARY STAGING_DIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "image: FAILED: $*" >&2; exit 1; }
# shellcheck source=engine.sh
. "$repo/deploy/engine.sh"

# "dls 0.1.0 (commit 1a2b3c4d5e6f)": the labels say what the binary says of itself.
read -r version commit < <("$bin" --version | sed -n 's/^dls \([^ ]*\) (commit \([^)]*\))$/\1 \2/p') \
  || fail "$bin --version did not print 'dls VERSION (commit HASH)'"

rm -rf "$stage" && mkdir -p "$stage/rootfs" "$stage/context"
root=$stage/rootfs
put() { # source path-in-image mode
  install -D -m "$3" "$(realpath "$1")" "$root$2"
}
put "$bin" /usr/local/bin/dls 0755
# As in the tarball (deploy/dist.sh): no debug sections, the symbol table kept for backtraces.
if command -v strip > /dev/null; then strip --strip-debug "$root/usr/local/bin/dls"; fi
put /bin/dash /bin/sh 0755
# The libraries both need, each where the loader looks for it (the path ldd resolved).
libs=$({ ldd "$bin"; ldd /bin/dash; } | sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' | sort -u)
[ -n "$libs" ] || fail "ldd found no libraries for $bin or /bin/dash"
for lib in $libs; do put "$lib" "$lib" 0755; done
put /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt 0644
put "$repo/deploy/docker.toml" /etc/dls/dls.toml 0644
printf 'root:x:0:0:root:/root:/sbin/nologin\ndls:x:10001:10001:Caerus DLS:/data:/sbin/nologin\n' > "$stage/passwd"
printf 'root:x:0:\ndls:x:10001:\n' > "$stage/group"
put "$stage/passwd" /etc/passwd 0644
put "$stage/group" /etc/group 0644

python3 - "$root" "$stage/context/rootfs.tar" << 'EOF'
import os, sys, tarfile
root, out = sys.argv[1], sys.argv[2]
def owned(info, uid=0, mode=None):
    info.uid = info.gid = uid
    info.uname = info.gname = "dls" if uid else "root"
    info.mtime = 0  # the same binary gives the same layer
    if mode is not None:
        info.mode = mode
    return info
with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
    for name in sorted(os.listdir(root)):
        tar.add(os.path.join(root, name), arcname=name, filter=owned)
    # /data: the data directory, the dls user's alone; /tmp for anything that wants one.
    for path, uid, mode in [("data", 10001, 0o700), ("tmp", 0, 0o1777)]:
        info = tarfile.TarInfo(path)
        info.type = tarfile.DIRTYPE
        tar.addfile(owned(info, uid, mode))
EOF
cp "$repo/deploy/Dockerfile" "$stage/context/Dockerfile"

engine_up || fail "no Docker engine: $engine_why"
trap engine_down EXIT
echo "==> docker build caerus-dls:$version (commit $commit) from $stage/context ($(du -sh "$stage/context/rootfs.tar" | cut -f1) rootfs)"
# The classic builder (it warns that it is deprecated): Debian's engine has no buildx
# plugin, and FROM scratch with one ADD needs nothing more.
DOCKER_BUILDKIT=0 docker build --quiet --build-arg "DLS_VERSION=$version" --build-arg "DLS_GIT_COMMIT=$commit" \
  -t "caerus-dls:$version" -t caerus-dls:latest "$stage/context"
docker image ls caerus-dls

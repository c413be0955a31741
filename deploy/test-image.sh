#!/usr/bin/env bash
# Tests the container image as an operator runs it: deploy/test-image.sh DLS_BINARY  (`make test-image`)
#
# Starts Debian's Docker engine when none runs (deploy/engine.sh; stopped again at the end),
# builds the image from DLS_BINARY (deploy/image.sh), and checks what it is: no root, the
# labels, the files. Then runs a three-node cluster of its containers (host network, ports
# chosen now, each node's data in its own volume), waits for each container's HEALTHCHECK
# (`dls health`) to say healthy, takes a lock from the host with `dls lock`, stops the
# leader's container and takes another lock from the two left. The image it runs is the one
# the Kubernetes manifests name; the StatefulSet's pod command line and the CronJob sample's
# container command run in it too.
#
# When no engine can start (not root, no docker.io to install, dockerd refused), it says the
# test was skipped and why, and exits 0. The image is FROM scratch: no registry is needed.
set -euo pipefail

bin=$(realpath "${1:?usage: deploy/test-image.sh DLS_BINARY}")
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
run=caerus-test-image-$$ # the prefix of this run's containers and volumes
fail() {
  echo "test-image: FAILED: $*" >&2
  for c in $(docker ps -aq --filter "name=$run" 2> /dev/null); do
    echo "--- logs of $(docker inspect -f '{{.Name}}' "$c")" >&2
    docker logs --tail 20 "$c" >&2 2>&1 || true
  done
  exit 1
}
# shellcheck source=engine.sh
. "$repo/deploy/engine.sh"
cleanup() {
  if docker info > /dev/null 2>&1; then
    docker ps -aq --filter "name=$run" | xargs -r docker rm -f > /dev/null
    docker volume ls -q --filter "name=$run" | xargs -r docker volume rm > /dev/null
  fi
  engine_down
  rm -rf "$work"
}
trap cleanup EXIT
started=$SECONDS

if ! engine_up; then
  echo "test-image: SKIPPED: no Docker engine could start: $engine_why"
  exit 0
fi

python3 -c 'import yaml' 2> /dev/null \
  || fail "python3 cannot import yaml, needed to read the Kubernetes manifests: apt-get install python3-yaml"
image=$(python3 - "$repo" << 'EOF'
import sys, yaml
repo = sys.argv[1]
docs = list(yaml.safe_load_all(open(f"{repo}/deploy/kubernetes/dls.yaml")))
(sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
server = sts["spec"]["template"]["spec"]["containers"][0]["image"]
(cron,) = yaml.safe_load_all(open(f"{repo}/samples/k8s-cronjob/cronjob.yaml"))
job = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
assert server == job, f"deploy/kubernetes/dls.yaml runs {server} but samples/k8s-cronjob/cronjob.yaml {job}"
print(server)
EOF
) || fail "the Kubernetes manifests do not name one image"

"$repo/deploy/image.sh" "$bin" "$work/image" || fail "the image did not build"
build_done=$SECONDS
version=$("$bin" --version | sed -n 's/^dls \([^ ]*\) .*/\1/p')

echo "==> the image: $image (the manifests' name) is caerus-dls:$version, not root, labelled"
[ "$(docker image inspect -f '{{.Id}}' "$image")" = "$(docker image inspect -f '{{.Id}}' "caerus-dls:$version")" ] \
  || fail "$image is not the image just built (caerus-dls:$version)"
[ "$(docker image inspect -f '{{.Config.User}}' "$image")" = "10001:10001" ] || fail "the image does not run as 10001:10001"
[ "$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}}' "$image")" = "$version" ] \
  || fail "the version label is not $version"
docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$image" | grep -Eq '^[0-9a-f]{7,}$' \
  || fail "the revision label is not a commit"
docker image inspect -f '{{json .Config.Volumes}}' "$image" | grep -q '"/data"' || fail "/data is not a volume"
docker image inspect -f '{{json .Config.Healthcheck.Test}}' "$image" | grep -q 'dls","health' || fail "no dls health HEALTHCHECK"
# Nothing but the files below is started in it; dash checks them from inside (no network).
docker run --rm --network none --entrypoint /bin/sh "$image" -c '
  set -e
  test -s /etc/ssl/certs/ca-certificates.crt
  test -s /etc/dls/dls.toml
  test "$DLS_CONFIG" = /etc/dls/dls.toml
  test "$(pwd)" = /data && test -w /data && ! test -w /etc/passwd
  /usr/local/bin/dls --version' > "$work/in-image" 2>&1 || fail "inside the image: $(cat "$work/in-image")"
grep -qx "dls $version (commit .*)" "$work/in-image" || fail "dls --version in the image: $(cat "$work/in-image")"
echo "    $(cat "$work/in-image")"

echo "==> the StatefulSet's pod command line runs in the image (its /bin/sh; node id from the pod name)"
python3 - "$repo/deploy/kubernetes/dls.yaml" "$work" << 'EOF'
import sys, yaml
docs = {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
c = docs["StatefulSet/dls"]["spec"]["template"]["spec"]["containers"][0]
assert c["command"] == ["/bin/sh", "-c"], c["command"]
open(f"{sys.argv[2]}/pod-command", "w").write(c["args"][0])
open(f"{sys.argv[2]}/pod.toml", "w").write(docs["ConfigMap/dls-config"]["data"]["dls.toml"])
EOF
docker run --rm --network none --hostname dls-2 -v "$work/pod.toml:/etc/dls/config/dls.toml:ro" \
  -e DLS_CONFIG=/etc/dls/config/dls.toml --entrypoint /bin/sh "$image" -c "$(cat "$work/pod-command") --print-config" \
  > "$work/pod.out" 2>&1 || fail "the pod's command line fails in the image: $(cat "$work/pod.out")"
grep -qx 'node-id = 3  # flag' "$work/pod.out" || fail "pod dls-2 is not node 3: $(cat "$work/pod.out")"

echo "==> a three-node cluster of containers (host network, a volume each)"
read -r -a ports < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(9)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
client() { echo "${ports[$(($1 - 1))]}"; }
http() { echo "${ports[$(($1 + 2))]}"; }
peer() { echo "${ports[$(($1 + 5))]}"; }
peers=1=127.0.0.1:$(client 1)/$(peer 1),2=127.0.0.1:$(client 2)/$(peer 2),3=127.0.0.1:$(client 3)/$(peer 3)
endpoints=127.0.0.1:$(client 1),127.0.0.1:$(client 2),127.0.0.1:$(client 3)
secret=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
for id in 1 2 3; do
  # Loopback only (the host's, shared with --network host): peers authenticate with the
  # cluster secret, clients need no keys. Settings as DLS_* variables, which the image's
  # HEALTHCHECK (`dls health`) reads as well; it is polled every second here.
  docker run -d --name "$run-$id" --network host -v "$run-$id:/data" --health-interval 1s --health-start-period 30s \
    -e DLS_NODE_ID=$id -e DLS_PEERS="$peers" -e DLS_CLUSTER_SECRET="$secret" -e DLS_LISTEN=127.0.0.1:"$(client $id)" \
    -e DLS_PEER_LISTEN=127.0.0.1:"$(peer $id)" -e DLS_HTTP_LISTEN=127.0.0.1:"$(http $id)" "$image" > /dev/null \
    || fail "docker run of node $id"
done
health() { docker inspect -f '{{.State.Health.Status}}' "$run-$1"; }
deadline=$((SECONDS + 60))
for id in 1 2 3; do
  until [ "$(health $id)" = healthy ]; do
    [ "$(docker inspect -f '{{.State.Running}}' "$run-$id")" = true ] || fail "node $id's container exited"
    [ $SECONDS -lt $deadline ] || fail "node $id is $(health $id) after 60 s: $(docker inspect -f '{{json .State.Health.Log}}' "$run-$id")"
    sleep 0.2
  done
done
for id in 1 2 3; do
  pid=$(docker inspect -f '{{.State.Pid}}' "$run-$id")
  uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
  [ "$uid" = 10001 ] || fail "node $id's dls runs as uid $uid"
done
echo "    3 containers healthy (dls health on /readyz), dls running as uid 10001"

lock() { # key: takes the lock from the host; prints the fencing token
  "$bin" lock --endpoints "$endpoints" --wait-timeout 20s test-image "$1" -- sh -c 'echo "$DLS_FENCING_TOKEN"'
}
first=$(lock first) || fail "dls lock on the cluster"
[[ "$first" =~ ^[0-9]+$ ]] || fail "dls lock printed no fencing token: $first"
echo "    dls lock from the host: fencing token $first"

echo "==> the CronJob sample's container command (dls lock --once-per ... -- /bin/sh -c ...) runs in the image"
mapfile -t cron_command < <(python3 - "$repo/samples/k8s-cronjob/cronjob.yaml" << 'EOF'
import sys, yaml
(cron,) = yaml.safe_load_all(open(sys.argv[1]))
print(*cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"], sep="\n")
EOF
)
# Its TLS and key settings are the manifest's; this cluster speaks plain text on loopback.
docker run --rm --network host --hostname nightly-report-pod-0 -e DLS_ENDPOINTS="$endpoints" \
  --entrypoint "${cron_command[0]}" "$image" "${cron_command[@]:1}" > "$work/cron.out" 2>&1 \
  || fail "the CronJob's command failed in the image: $(cat "$work/cron.out")"
grep -Eq '^slot [0-9]+ attempt 1: nightly report by nightly-report-pod-0 \(token [0-9]+\)$' "$work/cron.out" \
  || fail "the CronJob's job did not run once: $(cat "$work/cron.out")"
echo "    $(cat "$work/cron.out")"

leader=$("$bin" status --endpoints "$endpoints" | sed -n 's/^leader: node \([0-9]\).*/\1/p')
[[ "$leader" =~ ^[1-3]$ ]] || fail "no leader in dls status: $("$bin" status --endpoints "$endpoints" 2>&1)"
echo "==> stopping the leader's container ($run-$leader)"
docker stop "$run-$leader" > /dev/null
second=$(lock second) || fail "dls lock after the leader's container stopped"
[[ "$second" =~ ^[0-9]+$ ]] && [ "$second" -gt "$first" ] || fail "the second lock's token $second is not above $first"
# The status of the two left (the stopped node's row is an error, hence `|| true`).
new_leader=$({ "$bin" status --endpoints "$endpoints" 2> /dev/null || true; } | sed -n 's/^leader: node \([0-9]\).*/\1/p')
[ -n "$new_leader" ] && [ "$new_leader" != "$leader" ] || fail "no new leader after node $leader stopped (status: $new_leader)"
echo "    node $new_leader leads; dls lock from the host: fencing token $second"
for id in 1 2 3; do
  volume=$(docker volume inspect -f '{{.Mountpoint}}' "$run-$id")
  [ -n "$(ls -A "$volume")" ] && [ "$(stat -c %u "$volume")" = 10001 ] || fail "node $id's volume holds no data of uid 10001"
done

echo "==> test-image passed: build $((build_done - started)) s, the rest $((SECONDS - build_done)) s"

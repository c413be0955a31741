#!/usr/bin/env bash
# Tests the server distribution the way an operator uses it: deploy/test-dist.sh TARBALL
#
# Unpacks the tarball into a fresh directory, with no Rust toolchain on PATH, and runs the
# unpacked bin/dls with the shipped example config (ports and data dir moved to free ones
# by a flag and DLS_* variables, which also exercises their precedence over the file);
# takes a lock through `bin/dls lock`; checks that every metric the Grafana dashboard and
# the Prometheus alerts name is exported by that server, the completions, the man pages,
# --version, the JSON logs; then what this machine can check of the systemd unit
# (systemd-analyze), the alerts (promtool) and the Docker and Kubernetes command lines
# (through `dls serve --print-config`; the image itself is `make test-image`'s). A check
# whose tool is missing says so.
set -euo pipefail

tarball=$(realpath "${1:?usage: deploy/test-dist.sh TARBALL}")
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2> /dev/null || true; wait "$server_pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "test-dist: FAILED: $*" >&2; exit 1; }
skipped=()

# An operator's machine has no cargo: nothing below may lean on one.
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -e cargo -e rustup | paste -sd: -)
export PATH
if command -v cargo > /dev/null || command -v rustc > /dev/null; then fail "a Rust toolchain is still on PATH"; fi
# Only the DLS_* variables this script sets reach dls.
while IFS= read -r v; do unset "$v"; done < <(env | sed -n 's/^\(DLS_[A-Z_]*\)=.*/\1/p')

python3 -c 'import yaml' 2> /dev/null \
  || fail "python3 cannot import yaml, needed to read the Kubernetes manifest: apt-get install python3-yaml"

echo "==> unpacking $(basename "$tarball") into $work"
tar -xzf "$tarball" -C "$work"
root=$(echo "$work"/caerus-dls-*)
[ -d "$root" ] || fail "the tarball has no caerus-dls-* directory"
dls=$root/bin/dls
for f in bin/dls etc/dls.toml systemd/dls.service README.md share/man/man1/dls.1 share/man/man1/dls-serve.1 \
  share/completions/dls.bash share/completions/_dls share/completions/dls.fish share/doc/operations.md \
  deploy/grafana/caerus-dls.json deploy/prometheus/alerts.yml deploy/kubernetes/dls.yaml; do
  [ -e "$root/$f" ] || fail "missing $f in the tarball"
done

echo "==> dls --version names the commit"
"$dls" --version | tee "$work/version"
grep -Eq '^dls [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}\)$' "$work/version" \
  || fail "--version has no commit hash: $(cat "$work/version")"

echo "==> completions"
for sub in serve lock locks status members completions man; do
  for f in dls.bash _dls dls.fish; do
    grep -q -- "$sub" "$root/share/completions/$f" || fail "$f does not mention the subcommand $sub"
  done
done
bash -n "$root/share/completions/dls.bash" || fail "the bash completion does not parse"
bash -c "source '$root/share/completions/dls.bash' && complete -p dls" > /dev/null || fail "sourcing dls.bash registers no completion for dls"
if command -v zsh > /dev/null; then zsh -n "$root/share/completions/_dls"; else skipped+=("zsh -n (no zsh)"); fi
if command -v fish > /dev/null; then fish -n "$root/share/completions/dls.fish"; else skipped+=("fish -n (no fish)"); fi

echo "==> man pages are valid roff"
if command -v groff > /dev/null; then
  for page in "$root"/share/man/man1/*.1; do
    warnings=$(groff -k -man -ww -z "$page" 2>&1) || fail "groff rejects $(basename "$page"): $warnings"
    [ -z "$warnings" ] || fail "groff warns on $(basename "$page"): $warnings"
  done
  grep -q 'dls\\-serve' "$root/share/man/man1/dls.1" || fail "dls.1 does not list dls-serve"
else
  skipped+=("man page check (no groff)")
fi

echo "==> the example config: flags > DLS_* environment > file > defaults"
read -r client_port http_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
data_dir=$work/data
export DLS_HTTP_LISTEN=127.0.0.1:$http_port DLS_DATA_DIR=$data_dir DLS_LOG_FORMAT=json
"$dls" serve --config "$root/etc/dls.toml" --listen "127.0.0.1:$client_port" --print-config > "$work/effective.toml"
for line in "listen = \"127.0.0.1:$client_port\"  # flag" "http-listen = \"127.0.0.1:$http_port\"  # env DLS_HTTP_LISTEN" \
  "data-dir = \"$data_dir\"  # env DLS_DATA_DIR" 'node-id = 1  # config file' 'log-format = "json"  # env DLS_LOG_FORMAT' \
  'heartbeat-ms = 50  # default'; do
  grep -qxF "$line" "$work/effective.toml" || fail "--print-config lacks: $line"$'\n'"$(cat "$work/effective.toml")"
done
printf 'data_dir = "/x"\n' > "$work/bad.toml"
if "$dls" serve --config "$work/bad.toml" --print-config > /dev/null 2> "$work/bad.err"; then fail "an unknown key was accepted"; fi
grep -q '"data_dir"' "$work/bad.err" || fail "the unknown-key error does not name the key: $(cat "$work/bad.err")"

echo "==> running the unpacked bin/dls serve --config etc/dls.toml (client :$client_port, HTTP :$http_port)"
"$dls" serve --config "$root/etc/dls.toml" --listen "127.0.0.1:$client_port" 2> "$work/server.log" &
server_pid=$!
"$repo/scripts/wait-ready.py" "$http_port" "$server_pid" 30 || { cat "$work/server.log" >&2; fail "the server did not become ready"; }
[ -d "$data_dir" ] || fail "the data dir from DLS_DATA_DIR was not used"

echo "==> bin/dls lock takes a lock on it"
token=$("$dls" lock --endpoints "127.0.0.1:$client_port" dist smoke -- sh -c 'echo "$DLS_FENCING_TOKEN"')
[[ "$token" =~ ^[0-9]+$ ]] && [ "$token" -gt 0 ] || fail "dls lock ran the command without a fencing token: '$token'"
echo "    fencing token $token"

echo "==> JSON logs, and every metric the dashboard and the alerts name is exported"
python3 - "$work/server.log" "$http_port" "$root/deploy/grafana/caerus-dls.json" "$root/deploy/prometheus/alerts.yml" << 'EOF'
import json, re, sys, urllib.request
log, port, files = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = [l for l in open(log) if l.strip()]
assert lines, "the server logged nothing"
for l in lines:
    entry = json.loads(l)  # every line is one JSON object
    assert "level" in entry and "message" in entry, f"a log line lacks level or message: {l}"
assert any(e["level"] == "INFO" and "dls serving" in e["message"] for e in map(json.loads, lines)), "no 'dls serving' line"
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
referenced = set()
for f in files:
    referenced |= set(re.findall(r"\bdls_[a-z0-9_]+", open(f).read()))
assert len(referenced) > 20, f"found only {sorted(referenced)}"
missing = []
for name in sorted(referenced):
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    if name not in families and families.get(base) != "histogram":
        missing.append(name)
assert not missing, f"referenced but not exported by /metrics: {missing}"
print(f"    {len(lines)} log lines parse as JSON; {len(referenced)} metric names referenced, all exported")
EOF
kill "$server_pid"; wait "$server_pid" 2> /dev/null || true; server_pid=
unset DLS_HTTP_LISTEN DLS_DATA_DIR DLS_LOG_FORMAT

echo "==> Prometheus rules"
if command -v promtool > /dev/null; then
  promtool check rules "$root/deploy/prometheus/alerts.yml"
  (cd "$root/deploy/prometheus" && promtool test rules alerts_test.yml)
  # The dashboard's queries, with its variables filled in, must parse as PromQL.
  python3 - "$root/deploy/grafana/caerus-dls.json" > "$work/dashboard-rules.yml" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])] + [a["expr"] for a in d["annotations"]["list"]]
subst = {"$__rate_interval": "1m", "$__range": "1h", "$job": "caerus-dls", "$instance": ".*", "$namespace": ".*"}
rules = []
for i, e in enumerate(exprs):
    for k, v in subst.items():
        e = e.replace(k, v)
    rules.append({"record": f"dashboard:query_{i}", "expr": e})
print(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
EOF
  promtool check rules "$work/dashboard-rules.yml" > /dev/null || fail "a dashboard query is not valid PromQL"
  echo "    the dashboard's $(grep -o '"record"' "$work/dashboard-rules.yml" | wc -l) queries parse"
else
  skipped+=("promtool checks (apt-get install prometheus)")
fi

echo "==> systemd unit"
if command -v systemd-analyze > /dev/null; then
  # verify wants ExecStart to exist: point it at the unpacked binary, and man: at its pages.
  mkdir -p "$work/unit"
  sed "s#/usr/local/bin/dls#$dls#" "$root/systemd/dls.service" > "$work/unit/dls.service"
  out=$(MANPATH=$root/share/man systemd-analyze verify "$work/unit/dls.service" 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
  exposure=$(systemd-analyze security --offline=yes "$work/unit/dls.service" 2>&1 | sed -n 's/.*Overall exposure level for dls.service: \([0-9.]*\).*/\1/p')
  [ -n "$exposure" ] || fail "systemd-analyze security gave no exposure level"
  python3 -c "import sys; sys.exit(float('$exposure') > 2.0)" || fail "the unit's exposure level is $exposure (want <= 2.0)"
  echo "    verify clean; exposure level $exposure"
  grep -qx 'DynamicUser=yes' "$root/systemd/dls.service" && grep -qx 'StateDirectory=dls' "$root/systemd/dls.service" \
    && grep -qx 'ProtectSystem=strict' "$root/systemd/dls.service" || fail "the unit lost its own user or state directory"
  grep -q '^data-dir = "/var/lib/dls"' "$root/etc/dls.toml" || fail "the example config does not use the StateDirectory"
else
  skipped+=("systemd-analyze verify (no systemd)")
fi

echo "==> Kubernetes manifest: parses, and each pod's dls command line is accepted"
python3 - "$root/deploy/kubernetes/dls.yaml" "$work/k8s" << 'EOF'
import os, sys, yaml
docs = {d["kind"] + "/" + d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1]))}
sts, headless = docs["StatefulSet/dls"], docs["Service/dls"]
assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"] is True
assert sts["spec"]["serviceName"] == "dls"
assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["data"]
c = sts["spec"]["template"]["spec"]["containers"][0]
assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
os.makedirs(sys.argv[2], exist_ok=True)
open(os.path.join(sys.argv[2], "dls.toml"), "w").write(docs["ConfigMap/dls-config"]["data"]["dls.toml"])
open(os.path.join(sys.argv[2], "command"), "w").write(c["args"][0])
open(os.path.join(sys.argv[2], "replicas"), "w").write(str(sts["spec"]["replicas"]))
EOF
replicas=$(cat "$work/k8s/replicas")
for ordinal in $(seq 0 $((replicas - 1))); do
  command=$(sed "s#/usr/local/bin/dls#$dls#" "$work/k8s/command")
  HOSTNAME=dls-$ordinal DLS_CONFIG=$work/k8s/dls.toml sh -c "$command --print-config" > "$work/k8s/pod-$ordinal.toml" \
    2> "$work/k8s/err" || fail "pod dls-$ordinal's command line is refused: $(cat "$work/k8s/err")"
  grep -qx "node-id = $((ordinal + 1))  # flag" "$work/k8s/pod-$ordinal.toml" || fail "pod dls-$ordinal is not node $((ordinal + 1))"
  grep -q "^peers = \".*$((ordinal + 1))=dls-$ordinal.dls:7070/7080.*\"  # config file" "$work/k8s/pod-$ordinal.toml" \
    || fail "the peers list does not name pod dls-$ordinal by its stable DNS name"
done
echo "    $replicas pods: node ids and peers check out"
if command -v kubectl > /dev/null && kubectl version > /dev/null 2>&1; then
  kubectl apply --dry-run=server -f "$root/deploy/kubernetes/dls.yaml"
else
  skipped+=("kubectl apply --dry-run=server (no Kubernetes API server)")
fi

echo "==> Docker image's command line (deploy/Dockerfile, deploy/docker.toml)"
grep -qx 'ENV DLS_CONFIG=/etc/dls/dls.toml' "$repo/deploy/Dockerfile" || fail "the Dockerfile does not set DLS_CONFIG"
grep -qx 'CMD \["serve"\]' "$repo/deploy/Dockerfile" || fail "the Dockerfile's CMD changed; update this check"
export DLS_CONFIG=$repo/deploy/docker.toml DLS_DATA_DIR=$work/docker-data
"$dls" serve --print-config > "$work/docker.toml.out" || fail "the image's config is refused"
grep -qx 'listen = "0.0.0.0:7070"  # config file' "$work/docker.toml.out" || fail "the image does not listen on all interfaces"
# All interfaces and no keys: the image must refuse to start until it is given keys and TLS
# (on free ports, should it start anyway).
if DLS_LISTEN=0.0.0.0:$client_port DLS_HTTP_LISTEN=0.0.0.0:$http_port timeout 10 "$dls" serve 2> "$work/docker.err"; then
  fail "the image's default config started without keys or TLS"
fi
grep -q 'refusing to start' "$work/docker.err" || fail "the image's refusal does not say why: $(cat "$work/docker.err")"
unset DLS_CONFIG DLS_DATA_DIR
# Building and running the image is `make test-image`'s (it needs an engine, and root to
# start one): this test runs the same wherever it runs, engine or not.
skipped+=("the image itself (make test-image builds it and runs a cluster of it)")

echo "==> test-dist passed"
for s in "${skipped[@]}"; do echo "    not checked here: $s"; done

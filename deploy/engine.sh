# A Docker engine for deploy/image.sh and deploy/test-image.sh (sourced by both).
#
# engine_up uses the engine that answers (DOCKER_HOST, else the default socket). When none
# does, it starts Debian's, installing docker.io first when it is missing (as root, as
# `make deps` installs what the tests need), as `dockerd --iptables=false --bridge=none`:
# this machine allows neither, and the containers use the host's network (`--network
# host`) or none. On failure it returns 1 with the reason in $engine_why. engine_down
# stops only an engine engine_up started, so a machine's own engine keeps running.

engine_pid=
engine_why=
engine_log=

engine_up() {
  if docker info > /dev/null 2>&1; then return 0; fi
  if [ -n "${DOCKER_HOST:-}" ]; then
    engine_why="the engine at DOCKER_HOST=$DOCKER_HOST does not answer"
    return 1
  fi
  if [ "$(id -u)" != 0 ]; then
    engine_why="none is running and starting one (dockerd) needs root"
    return 1
  fi
  engine_log=$(mktemp)
  if ! command -v dockerd > /dev/null || ! command -v docker > /dev/null; then
    echo "==> installing Debian's Docker engine (apt-get install docker.io)"
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io; } > "$engine_log" 2>&1; then
      engine_why="apt-get install docker.io failed: $(tail -n 3 "$engine_log")"
      return 1
    fi
  fi
  echo "==> starting Debian's Docker engine: dockerd --iptables=false --bridge=none (log $engine_log)"
  dockerd --iptables=false --bridge=none > "$engine_log" 2>&1 &
  engine_pid=$!
  local deadline=$((SECONDS + 30))
  until docker info > /dev/null 2>&1; do
    if ! kill -0 "$engine_pid" 2> /dev/null || [ $SECONDS -ge $deadline ]; then
      engine_why="dockerd did not start within 30 s: $(tail -n 3 "$engine_log")"
      engine_down
      return 1
    fi
    sleep 0.2
  done
}

engine_down() {
  [ -n "$engine_pid" ] || return 0
  echo "==> stopping the Docker engine it started (pid $engine_pid)"
  kill "$engine_pid" 2> /dev/null || true
  # dockerd stops its containerd and containers first; a hung one is killed after 30 s.
  local deadline=$((SECONDS + 30))
  while kill -0 "$engine_pid" 2> /dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill -9 "$engine_pid" 2> /dev/null || true
  wait "$engine_pid" 2> /dev/null || true
  engine_pid=
  rm -f "$engine_log"
}

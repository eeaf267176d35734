#!/usr/bin/env bash
# What the compose stack test needs, installed where it is missing (.ci/run calls this; root):
# Debian's docker.io (the engine) and debootstrap (the stand-in base images, bases.sh); Docker
# Compose v2, built from its Go module (Debian ships only Compose v1.29, which refuses the
# compose file's `name:`) into Docker's plugin folder; the daemon, started when none answers.
set -euo pipefail
COMPOSE_VERSION=v2.28.1
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} (Debian)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! docker compose version >/dev/null 2>&1; then
  echo "building Docker Compose $COMPOSE_VERSION from the Go module proxy (a few minutes, once)" >&2
  bin=$(mktemp -d)
  GOFLAGS=-mod=mod GOBIN="$bin" go install \
    -ldflags "-X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
    "github.com/docker/compose/v2/cmd@$COMPOSE_VERSION"
  install -D -m 755 "$bin/cmd" /usr/local/lib/docker/cli-plugins/docker-compose
  rm -rf "$bin"
fi
# A machine restored from a snapshot keeps /run's pid files: dockerd then takes whatever process
# now has its old containerd's pid for containerd "still running" and waits on a socket nobody
# serves. A pid file whose process is not the daemon it names is stale: remove it.
drop_stale_pid() { # file, the daemon's command name
  local pid
  [ -f "$1" ] || return 0
  pid=$(tr -dc 0-9 < "$1")
  if [ -z "$pid" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$2" ]; then
    echo "removing the stale pid file $1" >&2
    rm -f "$1"
  fi
}
if ! docker info >/dev/null 2>&1; then
  for attempt in 1 2; do
    drop_stale_pid /var/run/docker/containerd/containerd.pid containerd
    drop_stale_pid /var/run/docker.pid dockerd
    echo "starting the Docker daemon (log: /var/log/solr-rag-dockerd.log)" >&2
    nohup dockerd > /var/log/solr-rag-dockerd.log 2>&1 &
    daemon=$!
    for _ in $(seq 1 90); do
      docker info >/dev/null 2>&1 && break 2
      kill -0 "$daemon" 2>/dev/null || break
      sleep 1
    done
    echo "the Docker daemon did not answer (attempt $attempt); its log ends with:" >&2
    tail -n 15 /var/log/solr-rag-dockerd.log >&2 || true
    kill "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
    pkill -f "containerd --config /var/run/docker/containerd/containerd.toml" 2>/dev/null || true
    rm -f /var/run/docker/containerd/containerd.pid /var/run/docker.pid
  done
fi
docker info --format 'Docker engine {{.ServerVersion}}' && docker compose version

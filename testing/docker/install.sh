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
if ! docker info >/dev/null 2>&1; then
  echo "starting the Docker daemon (log: /var/log/solr-rag-dockerd.log)" >&2
  nohup dockerd > /var/log/solr-rag-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info --format 'Docker engine {{.ServerVersion}}' && docker compose version

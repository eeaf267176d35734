#!/usr/bin/env bash
# Stand-ins for the public images the Dockerfile and docker-compose.yml name, built from Debian's
# packages: CI reaches Debian, PyPI and Maven Central, but no container image registry.
#
#   solr-rag-ci/debian:bookworm   debootstrap --variant=minbase, Debian's CA certificates and
#                                 this machine's own (its TLS chain to the registries needs them)
#   solr-rag-ci/python:3.11       for python:3.11-slim (Debian bookworm's python3 is 3.11)
#   solr-rag-ci/maven:3           for maven:3.9-eclipse-temurin-17 (Debian's maven, OpenJDK 17)
#   solr-rag-ci/solr:9.8          for solr:9.8: Solr 9.8 from our Maven Central jars
#                                 (solr/local/pom.xml), `solr-foreground` and `solr zk` as the
#                                 image has them (testing/docker/solr/)
#
# Each image is built once: it is labelled with a hash of what it is built from, and rebuilt
# when that changes. Needs root, debootstrap and a running Docker daemon (install.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# the hash of the given files' contents (and of this script): the image's "recipe"
recipe() { cat "${BASH_SOURCE[0]}" "$@" | sha256sum | cut -c1-16; }

# up_to_date IMAGE RECIPE: the image exists and was built from RECIPE
up_to_date() {
  [ "$(docker image inspect -f '{{ index .Config.Labels "solr-rag.recipe" }}' "$1" 2>/dev/null)" = "$2" ]
}

debian() {
  local image=solr-rag-ci/debian:bookworm want
  local cas=(/usr/local/share/ca-certificates/*.crt)
  want=$(recipe "${cas[@]}" 2>/dev/null || recipe)
  if up_to_date "$image" "$want"; then return 0; fi
  echo "bootstrapping Debian bookworm (minbase) into $image ..." >&2
  local rootfs; rootfs=$(mktemp -d /tmp/solr-rag-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' RETURN
  debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs" "$mirror" >/dev/null
  if [ -e "${cas[0]}" ]; then
    cp "${cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
    chroot "$rootfs" update-ca-certificates >/dev/null
  fi
  # what the machine's own tools are told: the system bundle, which holds its certificates
  local bundle=/etc/ssl/certs/ca-certificates.crt
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change "ENV PIP_CERT=$bundle REQUESTS_CA_BUNDLE=$bundle SSL_CERT_FILE=$bundle" \
    --change "LABEL solr-rag.recipe=$want" \
    --change 'CMD ["bash"]' - "$image" >/dev/null
}

# from_dockerfile IMAGE DOCKERFILE [FILES...]: `docker build` of a stand-in, the repository as
# its context
from_dockerfile() {
  local image=$1 dockerfile=$2 want; shift 2
  want=$(recipe "$dockerfile" "$@" <(docker image inspect -f '{{.Id}}' solr-rag-ci/debian:bookworm))
  if up_to_date "$image" "$want"; then return 0; fi
  echo "building $image ..." >&2
  docker build -q -f "$dockerfile" --label "solr-rag.recipe=$want" -t "$image" "$root" >/dev/null
}

debian
from_dockerfile solr-rag-ci/python:3.11 "$here/python.Dockerfile"
from_dockerfile solr-rag-ci/maven:3 "$here/maven.Dockerfile"
from_dockerfile solr-rag-ci/solr:9.8 "$here/solr.Dockerfile" "$root/solr/local/pom.xml" \
  "$here"/solr/*
docker images --format '{{.Repository}}:{{.Tag}}  {{.Size}}' 'solr-rag-ci/*' >&2

#!/usr/bin/env bash
# Local Solr from Maven Central jars: fetch | start | stop | status | start-node K | stop-node K.
#   solr/local/solr.sh start [--port 8983] [--dir .solr-data] [--nodes 1 --shards 1 --replicas 1]
#                            [--version 9.8.1] [--vectors float|quantized]
#                            [--text-to-vector http://127.0.0.1:8090/v1/]
#                            [--security security.json] [--tls DIR]
#   solr/local/solr.sh stop  [--dir .solr-data]
#   solr/local/solr.sh fetch [--version 9.10.1]
# --version V (or SOLR_VERSION): which Solr, 9.8.1 unless told (9.10.1 is tested too); each
# version's jars in a folder of their own (9.8.1: solr/local/lib, another: solr/local/lib-V),
# our plugins built against it. A data folder remembers the newest version that wrote it, and
# an older one is refused there (Lucene cannot read an index written by a newer Lucene).
# --vectors quantized (or SOLR_VECTORS): VectorMain, when made, is made of the VectorMainQuantized
# configset (scalar-quantized HNSW, our plugin's field type; docs/operations.md "Quantized
# vectors"); float: of VectorMain's own; unset, an existing VectorMain keeps the one it has.
# Node K (K >= 2) runs in a process of its own on port + K - 1: stop-node/start-node K take it down
# and back, to see the cluster (and the service) live through a node failure.
# --text-to-vector URL: VectorMain embeds passages and queries itself (our plugin) through the
# OpenAI-compatible embeddings API at URL (rag.properties solr.embeddings.mode).
# --security FILE: Solr's security.json (BasicAuth...); --tls DIR: https (SolrLauncher.java says
# what DIR holds). ZooKeeper ACLs: Solr's zk* system properties in SOLR_JAVA_OPTS.
# Environment: SOLR_VERSION, SOLR_VECTORS, SOLR_PORT, SOLR_DATA_DIR, SOLR_NODES, SOLR_SHARDS,
# SOLR_REPLICAS, SOLR_JAVA_OPTS (default -Xms256m -Xmx1g, per node).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
default_version=9.8.1  # what users asked for; solr/local/pom.xml's default too
version=${SOLR_VERSION:-$default_version}
vectors=${SOLR_VECTORS:-}
port=${SOLR_PORT:-8983}
dir=${SOLR_DATA_DIR:-$root/.solr-data}
nodes=${SOLR_NODES:-1}
shards=${SOLR_SHARDS:-1}
replicas=${SOLR_REPLICAS:-1}
text_to_vector=
security=
tls=
wait_seconds=120

usage() { sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

command=${1:-}; [ -n "$command" ] || usage; shift
node=
case "$command" in
  start-node|stop-node) node=${1:-}; shift || true
    [[ "$node" =~ ^[0-9]+$ ]] && [ "$node" -ge 2 ] || { echo "solr.sh: $command takes a node number >= 2" >&2; exit 2; } ;;
esac
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --vectors) vectors=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --wait) wait_seconds=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    --text-to-vector) text_to_vector=$2; shift 2
      [[ "$text_to_vector" =~ ^https?://[^[:space:]]+$ ]] || { echo "solr.sh: --text-to-vector takes the embeddings API's http(s) URL, not '$text_to_vector'" >&2; exit 2; } ;;
    --security) security=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2
      [ -f "$security" ] || { echo "solr.sh: --security takes a security.json file" >&2; exit 2; } ;;
    --tls) tls=$(cd "$2" && pwd); shift 2
      [ -f "$tls/solr.p12" ] || { echo "solr.sh: --tls takes a folder with solr.p12, trust.p12 and password" >&2; exit 2; } ;;
    *) echo "solr.sh: unknown option $1" >&2; usage ;;
  esac
done
for count in "$nodes" "$shards" "$replicas"; do
  [[ "$count" =~ ^[1-9][0-9]?$ ]] || { echo "solr.sh: --nodes, --shards and --replicas take 1 to 99, not '$count'" >&2; exit 2; }
done
case "$vectors" in
  '') configset=() ;;
  float) configset=(--configset VectorMain=VectorMain) ;;
  quantized) configset=(--configset VectorMain=VectorMainQuantized) ;;
  *) echo "solr.sh: --vectors (SOLR_VECTORS) takes float or quantized, not '$vectors'" >&2; exit 2 ;;
esac
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "solr.sh: --version (SOLR_VERSION) takes a full Solr version such as 9.8.1 or 9.10.1, not '$version'" >&2; exit 2; }
# use_version V: each version's jars in their own folder (9.8.1's keeps the historical lib/), as
# pom.xml's profiles name them; our plugins' build folders likewise (solr/plugins/*/pom.xml)
use_version() {
  version=$1
  if [ "$version" = "$default_version" ]; then lib="$here/lib" target=target
  else lib="$here/lib-$version" target="target-$version"; fi
}
use_version "$version"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

fetch() { fetch_jars; build_plugins; }

fetch_jars() {
  # The jars are fetched once per pom.xml and version: the stamp holds their checksum.
  local stamp="$lib/.pom.sha256" want
  want=$( (cat "$here/pom.xml"; echo "$version") | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  command -v mvn >/dev/null || { echo "solr.sh: Maven (mvn) is needed to fetch the Solr jars" >&2; exit 1; }
  echo "Fetching the Solr $version jars from Maven Central into solr/local/${lib##*/} ..." >&2
  # into a new folder, swapped in whole with our plugins' jars kept: a Solr running from the
  # old one keeps finding every jar of its class path
  local fresh="$lib.new" old="$lib.old"
  rm -rf "$fresh" "$old"
  (cd "$here" && quiet_mvn -Dsolr.version="$version" -Dsolr.lib="$fresh" dependency:copy-dependencies)
  [ -f "$fresh/solr-core-$version.jar" ] || { echo "solr.sh: Maven did not fetch solr-core $version (is it on Maven Central?)" >&2; exit 1; }
  if [ -d "$lib" ]; then
    cp -p "$lib"/solr-rag-*.jar "$lib/.plugins.sha256" "$fresh/" 2>/dev/null || true
    mv "$lib" "$old"
  fi
  mv "$fresh" "$lib"
  rm -rf "$old"
  echo "$want" > "$stamp"
}

# Maven, quiet: Maven 3.8 prints colour resets (ESC[0m) even in batch mode, which show as noise
quiet_mvn() {
  mvn -q -B "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'
}

# Our Solr plugins (solr/plugins/*), built against this version's Solr into its lib/ beside
# Solr's jars, so every node can load them; rebuilt when a plugin's pom or sources change.
build_plugins() {
  local plugins="$root/solr/plugins" stamp="$lib/.plugins.sha256" want
  want=$( (cd "$plugins" && find . -name pom.xml -o -path '*/src/main/*' -type f | sort | xargs sha256sum; echo "$version") | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  echo "Building our Solr plugins (solr/plugins) for Solr $version ..." >&2
  for pom in "$plugins"/*/pom.xml; do
    (cd "$(dirname "$pom")" && quiet_mvn package -DskipTests -Dsolr.version="$version")
    # a new file renamed into place: a Solr running from this folder keeps reading the old one
    local jar
    for jar in "$(dirname "$pom")/$target"/solr-rag-*.jar; do
      cp "$jar" "$lib/.${jar##*/}.new" && mv -f "$lib/.${jar##*/}.new" "$lib/${jar##*/}"
    done
  done
  echo "$want" > "$stamp"
}

# A data folder keeps the newest Solr version that ran on it: an older one cannot read its index
# (9.10's Lucene 9.12 writes segments 9.8's Lucene 9.11 does not know)
check_version() {
  local file="$dir/solr.version" before
  before=$(cat "$file" 2>/dev/null || true)
  if [ -n "$before" ] && [ "$before" != "$version" ] \
     && [ "$(printf '%s\n%s\n' "$before" "$version" | sort -V | tail -n 1)" = "$before" ]; then
    echo "solr.sh: $dir was written by Solr $before; Solr $version cannot read its index:" \
      "start $before there (--version $before, SOLR_VERSION) or give $version another --dir" >&2
    exit 1
  fi
  echo "$version" > "$file"
}

# Node 1 (ZooKeeper and the collections) keeps the historical names solr.pid / .out / .log.
pidfile() { if [ "$1" = 1 ]; then echo "$dir/solr.pid"; else echo "$dir/node$1.pid"; fi; }
outfile() { if [ "$1" = 1 ]; then echo "$dir/solr.out"; else echo "$dir/node$1.out"; fi; }
logname() { if [ "$1" = 1 ]; then echo "solr.log"; else echo "node$1.log"; fi; }

running_pid() {
  local file; file=$(pidfile "$1")
  [ -f "$file" ] || return 1
  local pid; pid=$(cat "$file")
  kill -0 "$pid" 2>/dev/null || return 1
  # a killed node whose parent has not reaped it yet (a zombie, state Z) runs no more
  local state; state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)
  [ "$state" != Z ] && echo "$pid"
}

# launch K ARGS...: the launcher as node K, in the background, its pid and output in $dir
launch() {
  local k=$1; shift
  command -v java >/dev/null || { echo "solr.sh: Java 17+ is needed" >&2; exit 1; }
  : > "$(outfile "$k")"
  # VectorMain's text-to-vector plugin, when start turned it on (its endpoint kept in $dir)
  local embeds=()
  if [ -s "$dir/text-to-vector" ]; then
    embeds=(-Dtext.to.vector.enabled=true "-Dtext.to.vector.endpoint=$(cat "$dir/text-to-vector")")
  fi
  # https, when start was given --tls (the folder kept in $dir for the nodes started later)
  if [ -s "$dir/tls" ]; then set -- "$@" --tls "$(cat "$dir/tls")"; fi
  # Solr reads SOLR_* variables as its own settings (SOLR_DATA_DIR would be every core's data
  # folder): the launcher's are not passed on
  # shellcheck disable=SC2086
  nohup env -u SOLR_DATA_DIR -u SOLR_PORT java ${SOLR_JAVA_OPTS:--Xms256m -Xmx1g} ${embeds[@]+"${embeds[@]}"} \
    -Dsolr.log.dir="$dir" -Dsolr.log.file="$(logname "$k")" -Dlog4j2.configurationFile="$here/log4j2.xml" \
    -cp "$lib/*" "$here/SolrLauncher.java" --dir "$dir/cluster" "$@" \
    >> "$(outfile "$k")" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$k")"
}

# await K PATTERN: until node K's output has a line starting with PATTERN (printed)
await() {
  local k=$1 pattern=$2 out; out=$(outfile "$k")
  local deadline=$((SECONDS + wait_seconds))
  until grep -q "^$pattern" "$out"; do
    if ! running_pid "$k" >/dev/null; then
      echo "solr.sh: Solr node $k exited during start-up; its output ($out):" >&2
      tail -n 30 "$out" >&2; rm -f "$(pidfile "$k")"
      # the launcher's own reason, when it gave one, last (the line a caller reads)
      grep "^SOLR FAILED" "$out" | tail -n 1 | sed 's/^SOLR FAILED /solr.sh: /' >&2
      exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "solr.sh: Solr node $k did not get ready within ${wait_seconds}s; see $out and $dir/solr.log" >&2
      stop; exit 1
    fi
    sleep 0.3
  done
  grep "^$pattern" "$out" | tail -n 1
}

start_node() {
  local k=$1 pid zk
  if pid=$(running_pid "$k"); then echo "Solr node $k already running (pid $pid)"; return 0; fi
  running_pid 1 >/dev/null || { echo "solr.sh: node 1 (ZooKeeper) is not running; use start" >&2; exit 1; }
  # a node joins with the cluster's version (node 1's, kept in the folder), whatever it was told
  if [ -s "$dir/solr.version" ]; then use_version "$(cat "$dir/solr.version")"; fi
  zk=$(grep "^ZK READY" "$(outfile 1)" | tail -n 1 | cut -d' ' -f3)
  launch "$k" --join "$zk" --node "$k" --port $((port + k - 1))
  await "$k" "SOLR NODE READY"
}

start() {
  fetch
  if pid=$(running_pid 1); then
    local running; running=$(cat "$dir/solr.port" 2>/dev/null || echo "$port")
    if [ "$running" != "$port" ]; then
      echo "solr.sh: the Solr of $dir already runs on port $running (pid $pid), not $port:" \
        "stop it (solr-rag solr stop) or give this one another --dir" >&2
      exit 1
    fi
    local runs; runs=$(cat "$dir/solr.version" 2>/dev/null || echo "$version")
    if [ "$runs" != "$version" ]; then
      echo "solr.sh: the Solr of $dir already runs Solr $runs (pid $pid), not $version:" \
        "stop it (solr-rag solr stop) or give this one another --dir" >&2
      exit 1
    fi
    echo "Solr already running (pid $pid) at http://127.0.0.1:$port/solr"; return 0
  fi
  check_version
  if [ -n "$text_to_vector" ]; then echo "$text_to_vector" > "$dir/text-to-vector"; else rm -f "$dir/text-to-vector"; fi
  if [ -n "$tls" ]; then echo "$tls" > "$dir/tls"; else rm -f "$dir/tls"; fi
  launch 1 --port "$port" --configsets "$root/solr/configsets" \
    --nodes "$nodes" --shards "$shards" --replicas "$replicas" ${security:+--security "$security"} \
    ${configset[@]+"${configset[@]}"}
  echo "$port" > "$dir/solr.port"  # what a later start on another port is told
  await 1 "ZK READY" >/dev/null
  for k in $(seq 2 "$nodes"); do start_node "$k"; done
  await 1 "SOLR READY"
}

stop_node() {
  local k=$1 pid
  if ! pid=$(running_pid "$k"); then echo "Solr node $k is not running"; rm -f "$(pidfile "$k")"; return 0; fi
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$(pidfile "$k")"
  echo "Solr node $k stopped"
}

stop() {
  # further nodes first: ZooKeeper (node 1) goes last, so they leave the cluster cleanly
  local file
  for file in "$dir"/node*.pid; do
    [ -e "$file" ] || continue
    file=${file##*/node}; stop_node "${file%.pid}"
  done
  if ! running_pid 1 >/dev/null; then echo "Solr is not running"; rm -f "$(pidfile 1)"; return 0; fi
  stop_node 1 >/dev/null
  rm -f "$dir/solr.port"
  echo "Solr stopped"
}

case "$command" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  start-node) start_node "$node" ;;
  stop-node) stop_node "$node" ;;
  status) if pid=$(running_pid 1); then echo "running (pid $pid)"; else echo "stopped"; exit 3; fi ;;
  *) usage ;;
esac

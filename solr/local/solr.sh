#!/usr/bin/env bash
# Local Solr 9.8 from Maven Central jars: fetch | start | stop | status.
#   solr/local/solr.sh start [--port 8983] [--dir .solr-data] [--wait 120]
#   solr/local/solr.sh stop  [--dir .solr-data]
# Environment: SOLR_PORT, SOLR_DATA_DIR, SOLR_JAVA_OPTS (default -Xms256m -Xmx1g).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
lib="$here/lib"
port=${SOLR_PORT:-8983}
dir=${SOLR_DATA_DIR:-$root/.solr-data}
wait_seconds=120

usage() { sed -n '2,4p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2; }

command=${1:-}; [ -n "$command" ] || usage; shift
while [ $# -gt 0 ]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --wait) wait_seconds=$2; shift 2 ;;
    *) echo "solr.sh: unknown option $1" >&2; usage ;;
  esac
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
pidfile="$dir/solr.pid"
out="$dir/solr.out"

fetch() {
  # The jars are fetched once per pom.xml: the stamp holds the pom's checksum.
  local stamp="$lib/.pom.sha256" want
  want=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return 0; fi
  command -v mvn >/dev/null || { echo "solr.sh: Maven (mvn) is needed to fetch the Solr jars" >&2; exit 1; }
  echo "Fetching the Solr 9.8 jars from Maven Central into solr/local/lib ..." >&2
  rm -rf "$lib"
  (cd "$here" && mvn -q -B dependency:copy-dependencies)
  echo "$want" > "$stamp"
}

running_pid() {
  [ -f "$pidfile" ] || return 1
  local pid; pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start() {
  fetch
  if pid=$(running_pid); then
    echo "Solr already running (pid $pid) at http://127.0.0.1:$port/solr"; return 0
  fi
  command -v java >/dev/null || { echo "solr.sh: Java 17+ is needed" >&2; exit 1; }
  : > "$out"
  # shellcheck disable=SC2086
  nohup java ${SOLR_JAVA_OPTS:--Xms256m -Xmx1g} \
    -Dsolr.log.dir="$dir" -Dlog4j2.configurationFile="$here/log4j2.xml" \
    -cp "$lib/*" "$here/SolrLauncher.java" \
    --port "$port" --dir "$dir/cluster" --configsets "$root/solr/configsets" \
    >> "$out" 2>&1 < /dev/null &
  echo $! > "$pidfile"
  local deadline=$((SECONDS + wait_seconds))
  until grep -q "^SOLR READY" "$out"; do
    if ! running_pid >/dev/null; then
      echo "solr.sh: Solr exited during start-up; its output ($out):" >&2
      tail -n 30 "$out" >&2; rm -f "$pidfile"; exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "solr.sh: Solr did not get ready within ${wait_seconds}s; see $out and $dir/solr.log" >&2
      stop; exit 1
    fi
    sleep 0.3
  done
  grep "^SOLR READY" "$out"
}

stop() {
  local pid
  if ! pid=$(running_pid); then echo "Solr is not running"; rm -f "$pidfile"; return 0; fi
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  rm -f "$pidfile"
  echo "Solr stopped"
}

case "$command" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) if pid=$(running_pid); then echo "running (pid $pid)"; else echo "stopped"; exit 3; fi ;;
  *) usage ;;
esac

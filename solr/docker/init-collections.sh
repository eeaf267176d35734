#!/usr/bin/env bash
# One-shot init for docker-compose: uploads our configsets to the SolrCloud node's embedded
# ZooKeeper and creates a collection per configset: FileShare, VectorMain, AnswerCache (the same
# configsets the local launcher uses).
# Idempotent: a collection that exists is reloaded with the uploaded configset.
# SOLR_SHARDS and SOLR_REPLICAS give a new collection its shape (default 1 x 1), as the local
# launcher's --shards/--replicas do; a configset's collection.properties adds its own CREATE
# parameters (VectorMain: router.field=parent_id).
set -euo pipefail
SOLR_URL=${SOLR_URL:-http://solr:8983/solr}
ZK_HOST=${ZK_HOST:-solr:9983}
CONFIGSETS=${CONFIGSETS:-/configsets}
SOLR_SHARDS=${SOLR_SHARDS:-1}
SOLR_REPLICAS=${SOLR_REPLICAS:-1}

http_get() {
  if command -v curl >/dev/null; then curl -fsS "$1"; else wget -qO- "$1"; fi
}

for dir in "$CONFIGSETS"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/conf/solrconfig.xml" ] || continue
  echo "uploading configset $name"
  solr zk upconfig -z "$ZK_HOST" -n "$name" -d "$dir/conf"
  if http_get "$SOLR_URL/admin/collections?action=LIST&wt=json" | grep -q "\"$name\""; then
    echo "reloading collection $name"
    http_get "$SOLR_URL/admin/collections?action=RELOAD&name=$name&wt=json" >/dev/null
  else
    echo "creating collection $name"
    extra=
    if [ -f "$dir/collection.properties" ]; then
      extra=$( (grep -v '^[[:space:]]*\(#\|$\)' "$dir/collection.properties" || true) | tr -d ' ' | sed 's/^/\&/' | tr -d '\n')
    fi
    http_get "$SOLR_URL/admin/collections?action=CREATE&name=$name&collection.configName=$name&numShards=$SOLR_SHARDS&replicationFactor=$SOLR_REPLICAS$extra&wt=json" >/dev/null
  fi
done
echo "collections ready"

#!/usr/bin/env bash
# One-shot init for docker-compose: uploads our configsets to the SolrCloud node's embedded
# ZooKeeper and creates a collection per configset: FileShare, VectorMain, AnswerCache (the same
# configsets the local launcher uses).
# Idempotent: a collection that exists is reloaded with the uploaded configset.
# SOLR_SECURITY_JSON: Solr's security.json (solr-rag solr-credentials wrote it, with the admin's
# password beside it in solr-admin.password), put in ZooKeeper before anything else; the
# Collections API is then asked as that admin.
# SOLR_SHARDS and SOLR_REPLICAS give a new collection its shape (default 1 x 1), as the local
# launcher's --shards/--replicas do; a configset's collection.properties adds its own CREATE
# parameters (VectorMain: router.field=parent_id).
# A configset with a file `variant-of` (VectorMainQuantized) is uploaded but makes no collection
# of its own: VECTORS=quantized makes a new VectorMain of it (scalar-quantized vectors; an
# existing VectorMain keeps the configset it was made of, as the local launcher does).
set -euo pipefail
SOLR_URL=${SOLR_URL:-http://solr:8983/solr}
ZK_HOST=${ZK_HOST:-solr:9983}
CONFIGSETS=${CONFIGSETS:-/configsets}
SOLR_SHARDS=${SOLR_SHARDS:-1}
SOLR_REPLICAS=${SOLR_REPLICAS:-1}
VECTORS=${VECTORS:-float}
case "$VECTORS" in
  float) vector_configset=VectorMain ;;
  quantized) vector_configset=VectorMainQuantized ;;
  *) echo "VECTORS is float or quantized, not '$VECTORS'" >&2; exit 2 ;;
esac

SOLR_SECURITY_JSON=${SOLR_SECURITY_JSON:-}  # Solr's security.json, put in ZooKeeper first
SOLR_ADMIN_USER=${SOLR_ADMIN_USER:-solr-admin}
admin_password=
if [ -n "$SOLR_SECURITY_JSON" ]; then
  admin_password=$(cat "$(dirname "$SOLR_SECURITY_JSON")/$SOLR_ADMIN_USER.password")
fi

# the Collections API, as the admin when Solr is secured (curl, or wget where there is none)
http_get() {
  if [ -n "$admin_password" ]; then
    if command -v curl >/dev/null; then curl -fsS -u "$SOLR_ADMIN_USER:$admin_password" "$1"
    else wget -qO- --user "$SOLR_ADMIN_USER" --password "$admin_password" "$1"; fi
  elif command -v curl >/dev/null; then curl -fsS "$1"; else wget -qO- "$1"; fi
}

if [ -n "$SOLR_SECURITY_JSON" ]; then
  echo "securing Solr: $SOLR_SECURITY_JSON into ZooKeeper (anonymous requests refused)"
  solr zk cp "file:$SOLR_SECURITY_JSON" zk:/security.json -z "$ZK_HOST"
fi

for dir in "$CONFIGSETS"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/conf/solrconfig.xml" ] || continue
  echo "uploading configset $name"
  solr zk upconfig -z "$ZK_HOST" -n "$name" -d "$dir/conf"
done
for dir in "$CONFIGSETS"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/conf/solrconfig.xml" ] && [ ! -f "$dir/variant-of" ] || continue
  configset=$name
  if [ "$name" = VectorMain ]; then configset=$vector_configset; fi
  if http_get "$SOLR_URL/admin/collections?action=LIST&wt=json" | grep -q "\"$name\""; then
    echo "reloading collection $name"
    http_get "$SOLR_URL/admin/collections?action=RELOAD&name=$name&wt=json" >/dev/null
  else
    echo "creating collection $name (configset $configset)"
    extra=
    if [ -f "$CONFIGSETS/$configset/collection.properties" ]; then
      extra=$( (grep -v '^[[:space:]]*\(#\|$\)' "$CONFIGSETS/$configset/collection.properties" || true) | tr -d ' ' | sed 's/^/\&/' | tr -d '\n')
    fi
    http_get "$SOLR_URL/admin/collections?action=CREATE&name=$name&collection.configName=$configset&numShards=$SOLR_SHARDS&replicationFactor=$SOLR_REPLICAS$extra&wt=json" >/dev/null
  fi
done
echo "collections ready"

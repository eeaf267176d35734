"""Where the 1M kNN indexes lose their questions' nearest neighbours (issue 82): the
collections bench.scale_vectors built (Scale_quantized, Scale_dense...), read by Lucene alone
(bench/lucene/QuantizedProbe.java, Solr 9.10.1's jars) with Solr stopped: recall@10 apart for
the hidden SQuAD/FAQ passages (the needles) and the distractors, and how far the index's own
scores of the exact top 20 are from the floats' cosine (for quantized vectors: the integers'
error).

    python -m bench.quantized_probe [--size 1000000] [--variants quantized,dense] [--depth 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.scale import DATA, questions
from service.models.encoder import load_encoder

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("lucene") / "QuantizedProbe.java"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--variants", default="quantized,dense")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--version", default="9.10.1")
    args = parser.parse_args(argv)
    cores = args.data / f"vectors-{args.version}-{args.size}" / "solr"
    jars = ROOT / "solr" / "local" / f"lib-{args.version}"
    if not jars.is_dir():
        sys.exit(f"quantized_probe: no {jars}: solr/local/solr.sh fetch --version {args.version}")
    asked = questions(300)[: args.questions]
    vectors = load_encoder().encode([q["text"] for q in asked]).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        queries = Path(scratch) / "questions.f32"
        vectors.tofile(queries)
        for variant in args.variants.split(","):
            index = next(cores.rglob(f"Scale_{variant}_shard1_replica_n1/data/index"), None)
            if index is None:
                sys.exit(f"quantized_probe: no Scale_{variant} under {cores}: bench.scale_vectors")
            done = subprocess.run(
                ["java", "-Xmx5g", "-cp", f"{jars}/*", str(PROBE), str(index), str(queries),
                 str(len(asked)), str(args.depth)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            results[variant] = json.loads(done.stdout)
            print(f"{variant}: {json.dumps(results[variant])}", flush=True)
    out = args.data / f"quantized-probe-{args.size}-{args.depth}.json"
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Exact search against the graph under each ACL filter (issue 82): on a collection
bench.scale_vectors built, Solr's kNN at several depths beside scoring every passage the
filter keeps (`{!func}vectorSimilarity(...)` with the same fq: exact, recall 1.0), p50/p95 ms.
A selective filter may be answered faster exactly than by the graph at the depth the broad
filters need.

    python -m bench.scale_exact [--size 1000000] [--collection Scale_dense-capped]
                                [--depths 100,400,2400] [--questions 40]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import httpx

from bench.scale import DATA, SCOPES, questions
from bench.support import percentile
from service.models.encoder import load_encoder
from service.retrieval.scope import EVERYTHING, Scope
from testing.solr import LocalSolr

EXACT = "{!func}vectorSimilarity(FLOAT32, COSINE, vector_384, VECTOR)"


def knn(depth: int) -> str:
    return f"{{!knn f=vector_384 topK={depth}}}VECTOR"


def timed(http: httpx.Client, url: str, query: str, group: str, literals: list[str]) -> dict:
    """p50/p95 ms of `query` (its VECTOR each question's) under `group`'s filter."""
    scope = EVERYTHING if SCOPES[group] is None else Scope(groups=SCOPES[group], security="groups")
    ms = []
    for literal in literals:
        query_now = query.replace("VECTOR", literal)
        params = {"q": query_now, "defType": "lucene", "rows": 10, "fl": "id"}
        began = time.perf_counter()
        http.post(url, data={**params, **scope.params()}).raise_for_status()
        ms.append((time.perf_counter() - began) * 1000)
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(percentile(ms, 0.95), 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--collection", default="Scale_dense-capped")
    parser.add_argument("--depths", default="100,400,2400")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--port", type=int, default=8994)
    parser.add_argument("--heap", default="3g")
    parser.add_argument("--version", default="9.10.1")
    args = parser.parse_args(argv)
    here = args.data / f"vectors-{args.version}-{args.size}"
    solr = LocalSolr(
        args.port, here / "solr", java_opts=f"-Xms{args.heap} -Xmx{args.heap}", version=args.version
    )
    solr.start()
    try:
        vectors = load_encoder().encode([q["text"] for q in questions(300)[: args.questions]])
        literals = ["[" + ",".join(f"{x:.7g}" for x in vector) + "]" for vector in vectors]
        url = f"{solr.url}/{args.collection}/select"
        with httpx.Client(timeout=120) as http:
            timed(http, url, knn(100), "none", literals)  # warm
            print("| filter | method | p50 ms | p95 ms |\n|---|---|---|---|")
            for group in SCOPES:
                rows = [("exact", EXACT)] + [
                    (f"kNN depth {d}", knn(d)) for d in (int(d) for d in args.depths.split(","))
                ]
                for method, query in rows:
                    got = timed(http, url, query, group, literals)
                    print(f"| {group} | {method} | {got['p50_ms']} | {got['p95_ms']} |", flush=True)
    finally:
        solr.stop()


if __name__ == "__main__":
    main()

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
import asyncio

from bench.scale import questions
from bench.scale_vectors import latency, solr_arguments, solr_of, timed
from service.models.encoder import load_encoder


def exact(literal: str) -> dict[str, str]:
    return {"q": f"{{!func}}vectorSimilarity(FLOAT32, COSINE, vector_384, {literal})"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    solr_arguments(parser)
    parser.add_argument("--collection", default="Scale_dense-capped")
    parser.add_argument("--depths", default="100,400,2400")
    parser.add_argument("--questions", type=int, default=40)
    args = parser.parse_args(argv)
    _, solr = solr_of(args)
    solr.start()
    try:
        vectors = load_encoder().encode([q["text"] for q in questions(300)[: args.questions]])
        asyncio.run(latency(solr.url, args.collection, vectors, 100))  # warm
        measured = {"exact": asyncio.run(timed(solr.url, args.collection, vectors, exact))}
        for depth in (int(d) for d in args.depths.split(",")):
            measured[f"kNN depth {depth}"] = asyncio.run(
                latency(solr.url, args.collection, vectors, depth)
            )
        print("| filter | method | p50 ms | p95 ms |\n|---|---|---|---|")
        for method, by_filter in measured.items():
            for group, got in by_filter.items():
                print(f"| {group} | {method} | {got['p50_ms']} | {got['p95_ms']} |")
    finally:
        solr.stop()


if __name__ == "__main__":
    main()

"""How deep the service's kNN must look at a size bench.scale built (issue 82): for each
`knn.depth`, Solr's kNN recall@10 against exact search under each ACL filter, and the
service's kNN and hybrid latency p50/p95 under the same filters, the depths interleaved
question by question (a busy box slows them alike). Also the answer cache's index-state
query, the one per-question read whose cost grows with the index, cached and not.

    python -m bench.scale_depth [--size 1000000] [--depths 100,200,400,800] [--questions 100]

Reads the index bench.scale left in --data (it builds nothing); writes
results-depths-SIZE.json there and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from bench.scale import (
    _NEEDLE_IDS,
    DATA,
    DOCUMENTS,
    PASSAGES,
    SCOPES,
    _embeddings,
    _needle_ids,
    _settings,
    latency_sample,
    questions,
    recall,
)
from bench.support import model_server, percentile
from service.retrieval import SolrClient
from service.retrieval.factory import build_retriever
from service.retrieval.scope import EVERYTHING, Scope
from service.text import sanitize_query
from testing.solr import LocalSolr

METHODS = {"knn": "vector", "hybrid": "hybrid"}


async def latencies(
    solr_url: str, embeddings_url: str, asked: list[dict], depths: list[int]
) -> dict:
    """{method: {scope: {depth: {p50_ms, p95_ms}}}}, each question asked at every depth in
    turn."""
    out: dict = {}
    async with httpx.AsyncClient(timeout=120) as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        for method, name in METHODS.items():
            for scope_name, groups in SCOPES.items():
                scope = EVERYTHING if groups is None else Scope(groups=groups, security="groups")
                retrievers = {}
                for depth in depths:
                    overrides = {"retrieval.method": name, "knn.depth": str(depth)}
                    settings = _settings(solr_url, embeddings_url, overrides)
                    retrievers[depth] = build_retriever(
                        settings.retrieval,
                        settings.solr,
                        solr,
                        _embeddings(http, embeddings_url, settings),
                        scope=scope,
                        reads=settings.embeddings.reads(),
                    )
                took: dict[int, list[float]] = {depth: [] for depth in depths}
                for retriever in retrievers.values():
                    await retriever.run(sanitize_query(asked[0]["text"]))  # warm
                for q in asked:
                    for depth, retriever in retrievers.items():
                        started = time.perf_counter()
                        await retriever.run(sanitize_query(q["text"]))
                        took[depth].append((time.perf_counter() - started) * 1000)
                row = {
                    depth: {
                        "p50_ms": round(statistics.median(ms), 1),
                        "p95_ms": round(percentile(ms, 0.95), 1),
                    }
                    for depth, ms in took.items()
                }
                out.setdefault(method, {})[scope_name] = row
                print(f"  {method} {scope_name}: {row}", file=sys.stderr, flush=True)
    return out


def index_state_cost(solr_url: str, rounds: int = 5) -> dict:
    """The answer cache's index-state query (service.retrieval.cache_entries), its first run
    after a new searcher (not cached: {!cache=false}) and its cached runs, ms."""
    out = {}
    for collection in (DOCUMENTS, PASSAGES):
        for label, q in (("uncached", "{!cache=false}*:*"), ("cached", "*:*")):
            ms = []
            for _ in range(rounds):
                started = time.perf_counter()
                httpx.get(
                    f"{solr_url}/{collection}/select",
                    params={"q": q, "rows": 1, "fl": "_version_", "sort": "_version_ desc"},
                    timeout=120,
                ).raise_for_status()
                ms.append((time.perf_counter() - started) * 1000)
            out[f"{collection} {label}"] = round(statistics.median(ms), 1)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--depths", default="100,200,400,800")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--port", type=int, default=8990)
    parser.add_argument("--heap", default="4g")
    args = parser.parse_args(argv)
    depths = [int(depth) for depth in args.depths.split(",")]
    folder = args.data
    solr = LocalSolr(args.port, folder / "solr", java_opts=f"-Xms{args.heap} -Xmx{args.heap}")
    solr.start()
    asked = questions(300)
    try:
        result: dict = {"size": args.size, "depths": depths}
        result["index_state_ms"] = index_state_cost(solr.url)
        print(f"  index state: {result['index_state_ms']}", file=sys.stderr, flush=True)
        _NEEDLE_IDS.update(_needle_ids(solr.url, np.load(folder / "needles.npz")))
        with model_server() as embeddings_url:
            result["recall"], result["selectivity"] = asyncio.run(
                recall_at(solr.url, folder, args.size, asked[: args.questions], depths)
            )
            sample = latency_sample(asked)[: args.questions]
            result["latency"] = asyncio.run(latencies(solr.url, embeddings_url, sample, depths))
    finally:
        solr.stop()
    (folder / f"results-depths-{args.size}.json").write_text(json.dumps(result, indent=1))
    print(table(result))


async def recall_at(
    solr_url: str, folder: Path, size: int, asked: list[dict], depths: list[int]
) -> tuple[dict, dict]:
    async with httpx.AsyncClient(timeout=120) as http:
        return await recall(http, solr_url, folder, size, asked, tuple(depths), PASSAGES)


def table(result: dict) -> str:
    depths = result["depths"]
    lines = [
        "| knn.depth | "
        + " | ".join(f"recall {s}" for s in SCOPES)
        + " | "
        + " | ".join(f"hybrid p95 {s}" for s in SCOPES)
        + " | knn p95 none |",
        "|---" * (2 + 2 * len(SCOPES)) + "|",
    ]
    for depth in depths:
        recalls = [result["recall"][s][f"topK{depth}"] for s in SCOPES]
        hybrid = [result["latency"]["hybrid"][s][depth]["p95_ms"] for s in SCOPES]
        knn = result["latency"]["knn"]["none"][depth]["p95_ms"]
        lines.append(
            f"| {depth} | "
            + " | ".join(str(r) for r in recalls)
            + " | "
            + " | ".join(str(h) for h in hybrid)
            + f" | {knn} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Retrieval quality on the Cranfield collection: BM25, vector and hybrid, through the real
ingestion path and a real Solr.

1,400 aeronautics abstracts, 225 queries and the collection authors' relevance judgments
(`bench/data/cranfield`, copied unchanged from the shared datasets). Documents go through the
service's own ingestion (FileShare + embedded VectorMain passages), queries through its own
retrievers with the shipped settings: nothing here is tuned to this collection.

Metrics (per query, averaged): nDCG@10 with gain 5 - grade for grades 1..4 and 0 for -1;
recall@10 over the documents graded 1..4; MRR@10. Vector and hybrid rank passages; a
document's rank is that of its best passage.

    python -m bench.cranfield [--solr-url URL] [--embeddings-url URL] [--queries N]
                              [--set ai.embeddings.model=bge-small-en-v1.5] [--no-ingest]
                              [--llm-url URL --llm-model NAME --multi-query 3]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.support import ROOT, fresh_solr, given_or_started, model_server, save_results
from service.chains import PromptLibrary
from service.chains.expand import QueryExpander
from service.config import Settings, settings_from_mapping
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.ingest.progress import ProgressLine
from service.llm import ChatClient, EmbeddingsClient, LLMOptions
from service.retrieval import RetrievedDocument, SolrClient
from service.retrieval.factory import build_retriever
from service.retrieval.fusion import MultiQueryRetriever
from service.text import sanitize_query

DATA = Path(__file__).resolve().parent / "data" / "cranfield"
DEPTH = 10
CANDIDATES = 100  # passages fetched per query before they are folded into documents


@dataclass(frozen=True)
class Query:
    position: int  # 1..225: what the judgments refer to (not the .I number)
    text: str


def parse_records(text: str) -> Iterator[dict[str, str]]:
    for record in re.split(r"^\.I\s+", text, flags=re.M)[1:]:
        number, _, body = record.partition("\n")
        fields = {"I": number.strip()}
        for match in re.finditer(r"^\.([TAWB])\n(.*?)(?=^\.[TAWB]\n|\Z)", body, re.M | re.S):
            fields[match.group(1)] = " ".join(match.group(2).split())
        yield fields


def load_documents() -> list[SourceDocument]:
    text = (DATA / "cran.all.1400").read_text(encoding="utf-8", errors="replace")
    return [
        SourceDocument(
            id=record["I"], title=record.get("T", ""), url="", content=record.get("W", "")
        )
        for record in parse_records(text)
    ]


def load_queries() -> list[Query]:
    text = (DATA / "cran.qry").read_text(encoding="utf-8", errors="replace")
    return [Query(n, r.get("W", "")) for n, r in enumerate(parse_records(text), start=1)]


def load_judgments() -> dict[int, dict[str, int]]:
    """query position -> {document id: gain}, gain = 5 - grade (grades 1..4), else 0."""
    judgments: dict[int, dict[str, int]] = {}
    for line in (DATA / "cranqrel").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 3:
            grade = int(parts[2])
            gain = 5 - grade if 1 <= grade <= 4 else 0
            judgments.setdefault(int(parts[0]), {})[parts[1]] = gain
    return judgments


def ndcg(ranked: list[str], gains: dict[str, int]) -> float:
    dcg = sum(gains.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:DEPTH]))
    ideal = sorted(gains.values(), reverse=True)[:DEPTH]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: list[str], gains: dict[str, int]) -> float:
    relevant = {doc for doc, gain in gains.items() if gain > 0}
    return len(relevant & set(ranked[:DEPTH])) / len(relevant) if relevant else 0.0


def reciprocal_rank(ranked: list[str], gains: dict[str, int]) -> float:
    for i, doc in enumerate(ranked[:DEPTH]):
        if gains.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def settings_for(
    solr_url: str, embeddings_url: str, method: str, overrides: dict[str, str] | None = None
) -> Settings:
    return settings_from_mapping(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": embeddings_url,
            "retrieval.method": method,
            "chunking.maxFiles": str(CANDIDATES),
            "solr.topK": str(CANDIDATES),
            **(overrides or {}),
        },
        source="bench",
        env={},
    )


async def score(
    retrieve: Callable[[str], Awaitable[list[RetrievedDocument]]],
    queries: list[Query],
    judgments: dict[int, dict[str, int]],
) -> dict[str, float]:
    """The metrics of one retrieval method over the queries that have relevant documents."""
    scores: dict[str, list[float]] = {"ndcg": [], "recall": [], "mrr": [], "ms": []}
    for query in queries:
        gains = judgments.get(query.position, {})
        if not any(gain > 0 for gain in gains.values()):
            continue
        started = time.perf_counter()
        hits = await retrieve(sanitize_query(query.text))
        scores["ms"].append((time.perf_counter() - started) * 1000)
        ranked = list(dict.fromkeys(hit.source_id for hit in hits))
        scores["ndcg"].append(ndcg(ranked, gains))
        scores["recall"].append(recall(ranked, gains))
        scores["mrr"].append(reciprocal_rank(ranked, gains))
    return {
        "queries": len(scores["ndcg"]),
        "ndcg@10": statistics.fmean(scores["ndcg"]),
        "recall@10": statistics.fmean(scores["recall"]),
        "mrr@10": statistics.fmean(scores["mrr"]),
        "p50_ms": statistics.median(scores["ms"]),
        "p95_ms": sorted(scores["ms"])[int(0.95 * (len(scores["ms"]) - 1))],
    }


async def evaluate(
    solr_url: str,
    embeddings_url: str,
    limit: int | None,
    *,
    ingest: bool = True,
    overrides: dict[str, str] | None = None,
    llm_url: str | None = None,
    llm_model: str = "",
    query_count: int = 3,
) -> dict[str, dict]:
    """BM25, vector and hybrid; with `llm_url`, also hybrid with multi-query (the queries
    written by that LLM)."""
    documents = load_documents()
    queries = load_queries()[:limit]
    judgments = load_judgments()
    async with httpx.AsyncClient(timeout=120) as http:
        solr = SolrClient(http, solr_url, read_timeout=120)
        model = (overrides or {}).get("ai.embeddings.model", "all-MiniLM-L6-v2")
        embeddings = EmbeddingsClient(
            http, LLMOptions(endpoint=embeddings_url, model=model, read_timeout=600)
        )
        summary = None
        if ingest:
            for collection in ("FileShare", "VectorMain"):
                await solr.delete_by_query(collection, "*:*")
            print(f"Ingesting {len(documents)} documents through the service's indexer ...")
            settings = settings_for(solr_url, embeddings_url, "bm25", overrides)
            indexer = indexer_for(settings, solr, embeddings)
            summary = await indexer.run(documents, ProgressLine())
            print(f"\n  {summary}")

        table: dict[str, dict] = {}
        for method in ("bm25", "vector", "hybrid"):
            settings = settings_for(solr_url, embeddings_url, method, overrides)
            retriever = build_retriever(settings.retrieval, settings.solr, solr, embeddings)
            table[method] = await score(retriever.run, queries, judgments)
            print(f"  {method}: done")
        if llm_url:
            settings = settings_for(solr_url, embeddings_url, "hybrid", overrides)
            fused = MultiQueryRetriever(
                build_retriever(settings.retrieval, settings.solr, solr, embeddings),
                k=settings.retrieval.rrf_k,
                limit=CANDIDATES,
            )
            llm = ChatClient(http, LLMOptions(endpoint=llm_url, model=llm_model, max_tokens=120))
            expander = QueryExpander(llm, PromptLibrary(ROOT / "prompts"))
            fallbacks = 0

            async def expanded(text: str) -> list[RetrievedDocument]:
                nonlocal fallbacks
                expansion = await expander.run(text, text, (), count=query_count)
                fallbacks += expansion.fell_back
                return await fused.run([q for q in map(sanitize_query, expansion.queries) if q])

            name = f"hybrid+{query_count}q"
            table[name] = await score(expanded, queries, judgments)
            table[name]["fallbacks"] = fallbacks
            print(f"  {name}: done ({fallbacks} answers unusable: the question alone searched)")
        if summary:
            table["_ingestion"] = {
                "documents": summary.documents,
                "passages": summary.passages,
                "seconds": summary.seconds,
            }
        return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--queries", type=int, help="only the first N queries")
    parser.add_argument(
        "--no-ingest", action="store_true", help="search what --solr-url already holds"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a rag.properties key"
    )
    parser.add_argument("--llm-url", help="an OpenAI-compatible /v1 for a multi-query row")
    parser.add_argument("--llm-model", default="", help="its model name")
    parser.add_argument("--multi-query", type=int, default=3, help="queries per question")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)

    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        table = asyncio.run(
            evaluate(
                solr_url,
                embeddings_url,
                args.queries,
                ingest=not args.no_ingest,
                overrides=overrides,
                llm_url=args.llm_url,
                llm_model=args.llm_model,
                query_count=args.multi_query,
            )
        )

    print(
        f"\n{'method':<10} {'nDCG@10':>8} {'recall@10':>9} {'MRR@10':>7} "
        f"{'p50 ms':>7} {'p95 ms':>7}"
    )
    for method in [name for name in table if not name.startswith("_")]:
        row = table[method]
        print(
            f"{method:<10} {row['ndcg@10']:>8.3f} {row['recall@10']:>9.3f} {row['mrr@10']:>7.3f} "
            f"{row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f}"
        )
    print(f"({table['bm25']['queries']} queries with at least one relevant document)")
    save_results("cranfield", table)


if __name__ == "__main__":
    main()

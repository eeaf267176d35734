"""Retrieval quality on several collections at once: a default must hold on all of them.

Cranfield (1,400 aeronautics abstracts, 225 graded queries), CISI (1,460 information-science
abstracts, the 50 queries with judgments, binary), the retrieval side of SQuAD 2.0 (708
Wikipedia paragraphs; a seeded sample of answerable questions, the one gold paragraph relevant)
and, when `../shared/datasets/french-qa` is there, the French CNIL and CRPA FAQs (551 answers,
704 questions; read from there, never copied: its README), and Debian's French manuals (98
pages of 1,000+ words, 63 questions written against them: bench/data/french-pages). Each
collection goes through the service's own ingestion into a Solr started for the run (or
`--solr-url`), then every configuration through the service's own retrievers: nDCG@10,
recall@10, MRR@10 (a document's rank is that of its best passage), p50/p95 ms, and the mean
over the collections.

    python -m bench.retrieval [--solr-url URL] [--embeddings-url URL] [--squad N]
                              [--only NAME ...] [--rerank] [--rerank-tokens 512 [128 ...]]
                              [--rerank-depth 30 [10 ...]]

`--rerank`: each row also reranked by the local cross-encoder (service.models.reranker:
ms-marco-MiniLM-L-12-v2), scored once per query over the row's first `--rerank-depth` hits
(30; the service reranks the `solr.topK` passages it retrieved, 10 as shipped), then
judged in several orders: the cross-encoder's alone (`+ rerank`), and fused with retrieval's
by reciprocal rank (`+ rerank rrf`) or by weighted z-scores (`+ rerank blend`). Several
cuts (`--rerank-tokens`, a pair's tokens at most) or depths give a row each, named
`@ TOKENS/DEPTH` when more than one is asked (a cut written `128n` gives `@ 128/DEPTH
nearest`: a passage longer than the cut is cut to its sentences nearest the question,
service.models.nearest, rather than at its end), with the cross-encoder's CPU ms a query
(`ce_cpu_ms`: the process's CPU time, every onnxruntime thread counted; wall is noisy on a
shared box).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import cranfield, french_pages
from bench.support import fresh_solr, given_or_started, model_server, save_results
from service.config import settings_from_mapping
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.ingest.progress import ProgressLine
from service.llm import EmbeddingsClient, LLMOptions
from service.models.reranker import CrossEncoder
from service.retrieval import SolrClient
from service.retrieval.factory import build_retriever
from service.retrieval.fusion import blended
from service.text import sanitize_query

DATA = Path(__file__).resolve().parent / "data"
FRENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "french-qa"
CANDIDATES = cranfield.CANDIDATES
RERANK_DEPTH = 30  # hits the cross-encoder scores a query (--rerank-depth)
RRF_K = 60

# every configuration measured: name -> rag.properties overrides (shipped values otherwise)
EQUAL = {"retrieval.method": "hybrid", "hybrid.weight.vector": "1"}
CONFIGURATIONS: dict[str, dict[str, str]] = {
    "bm25": {"retrieval.method": "bm25"},
    "vector": {"retrieval.method": "vector"},
    "vector, no floor": {"retrieval.method": "vector", "retrieval.similarity.min": "0"},
    "hybrid score, weights 1/1": EQUAL,
    "hybrid score 1/1, no floor": {**EQUAL, "retrieval.similarity.min": "0"},
    "hybrid rrf k=60": {**EQUAL, "hybrid.fusion": "rrf"},
    "hybrid rrf k=20": {**EQUAL, "hybrid.fusion": "rrf", "hybrid.rrf.k": "20"},
    "hybrid score, vector x1.25": {**EQUAL, "hybrid.weight.vector": "1.25"},
    "hybrid score, vector x1.5 (shipped)": {"retrieval.method": "hybrid"},
    "hybrid score, vector x2": {**EQUAL, "hybrid.weight.vector": "2"},
    "hybrid rrf k=60, vector x2": {**EQUAL, "hybrid.fusion": "rrf", "hybrid.weight.vector": "2"},
    # issue 60: a question the encoder does not read (ai.embeddings.languages) leans on BM25
    "hybrid shipped, foreign vector x1.5, no floor": {
        "retrieval.method": "hybrid",
        "hybrid.weight.vector.foreign": "1.5",
    },
    "hybrid shipped, foreign vector x0.5": {
        "retrieval.method": "hybrid",
        "hybrid.weight.vector.foreign": "0.5",
    },
    # issue 60: a flat kNN top (best and last cosine within hybrid.flat.spread) leans on BM25
    **{
        f"hybrid shipped, flat < {spread}": {
            "retrieval.method": "hybrid",
            "hybrid.flat.spread": spread,
        }
        for spread in ("0.05", "0.1", "0.15", "0.2")
    },
    "hybrid shipped, foreign vector x0.25": {
        "retrieval.method": "hybrid",
        "hybrid.weight.vector.foreign": "0.25",
    },
}


@dataclass(frozen=True)
class Collection:
    name: str
    documents: list[SourceDocument]
    queries: list[tuple[str, str]]  # (key, text): only queries with a relevant document
    judgments: dict[str, dict[str, int]]  # key -> document id -> gain (0: not relevant)


def load_cranfield() -> Collection:
    judgments = {str(k): v for k, v in cranfield.load_judgments().items()}
    queries = [(str(q.position), q.text) for q in cranfield.load_queries()]
    return _judged(Collection("cranfield", cranfield.load_documents(), queries, judgments))


def _records(text: str) -> Iterator[tuple[str, dict[str, str]]]:
    """SMART-format records: `.I n`, then fields `.T`, `.A`, `.W`, `.X`..."""
    for block in re.split(r"^\.I\s+", text, flags=re.M)[1:]:
        number, _, body = block.partition("\n")
        fields = {}
        for match in re.finditer(r"^\.([A-Z])\n(.*?)(?=^\.[A-Z]\n|\Z)", body, re.M | re.S):
            fields[match.group(1)] = " ".join(match.group(2).split())
        yield number.strip(), fields


def load_cisi() -> Collection:
    folder = DATA / "cisi"
    read = lambda name: (folder / name).read_text(encoding="utf-8", errors="replace")  # noqa: E731
    documents = [
        SourceDocument(id=number, title=f.get("T", ""), url="", content=f.get("W", ""))
        for number, f in _records(read("CISI.ALL"))
    ]
    queries = [(number, f.get("W", "")) for number, f in _records(read("CISI.QRY"))]
    judgments: dict[str, dict[str, int]] = {}
    for line in read("CISI.REL").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            judgments.setdefault(parts[0], {})[parts[1]] = 1
    return _judged(Collection("cisi", documents, queries, judgments))


def load_squad(count: int) -> Collection:
    folder = DATA / "squad2"
    rows = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
    documents = [SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"])
                 for r in rows]  # fmt: skip
    asked = [json.loads(line) for line in (folder / "questions.jsonl").open(encoding="utf-8")]
    answerable = [q for q in asked if q["answerable"]]
    sample = random.Random(37).sample(answerable, min(count, len(answerable)))
    queries = [(q["id"], q["question"]) for q in sample]
    judgments = {q["id"]: {q["gold_doc"]: 1} for q in sample}
    return Collection("squad", documents, queries, judgments)


def load_french() -> Collection | None:
    """The French FAQs, read from ../shared (evaluation only: never copied); None without."""
    if not (FRENCH / "corpus.jsonl").is_file():
        return None
    rows = [json.loads(line) for line in (FRENCH / "corpus.jsonl").open(encoding="utf-8")]
    documents = [SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"],
                                language="fr") for r in rows]  # fmt: skip
    asked = [json.loads(line) for line in (FRENCH / "questions.jsonl").open(encoding="utf-8")]
    queries = [(q["id"], q["question"]) for q in asked]
    judgments = {q["id"]: {q["gold_doc"]: 1} for q in asked}
    return Collection("french", documents, queries, judgments)


def load_french_pages() -> Collection:
    """Debian's French manuals, 98 long pages, and 63 questions written against them
    (bench/data/french-pages, its README)."""
    pages, asked = french_pages.load()
    documents = [SourceDocument(id=p["id"], title=p["title"], url=p["url"], content=p["content"],
                                language="fr") for p in pages]  # fmt: skip
    queries = [(q["id"], q["question"]) for q in asked]
    judgments = {q["id"]: {q["gold_doc"]: 1} for q in asked}
    return Collection("french-pages", documents, queries, judgments)


def _judged(collection: Collection) -> Collection:
    """Only the queries with at least one relevant document (the others score nothing)."""
    queries = [
        (key, text)
        for key, text in collection.queries
        if any(gain > 0 for gain in collection.judgments.get(key, {}).values())
    ]
    return Collection(collection.name, collection.documents, queries, collection.judgments)


async def measure(
    collection: Collection,
    solr_url: str,
    embeddings_url: str,
    names: list[str],
    encoder: CrossEncoder | None = None,
    cuts: tuple[tuple[int, int, bool], ...] = ((512, RERANK_DEPTH, False),),
    model: str = "all-MiniLM-L6-v2",
    overrides: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    base = {"solr.url": solr_url, "ai.embeddings.endpoint": embeddings_url,
            "ai.embeddings.model": model,
            "chunking.maxFiles": str(CANDIDATES), "solr.topK": str(CANDIDATES),
            **(overrides or {})}  # fmt: skip
    rows: dict[str, dict[str, float]] = {}
    # "" (retrieval's order) or (order, (tokens, depth)): each reranked row
    orders: list[tuple[str, tuple[int, int, bool] | None]] = [("", None)]
    if encoder is not None:
        orders += [(order, cut) for cut in cuts for order in RERANKED]
    async with httpx.AsyncClient(timeout=120) as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        settings = settings_from_mapping(base, source="bench", env={})
        embeddings = EmbeddingsClient(
            http,
            LLMOptions(endpoint=embeddings_url, model=model, read_timeout=600),
            prefixes=settings.embeddings.prefixes(),
        )
        for name in ("FileShare", "VectorMain"):
            await solr.delete_by_query(name, "*:*")
        print(f"{collection.name}: ingesting {len(collection.documents)} documents", flush=True)
        line = ProgressLine()
        await indexer_for(settings, solr, embeddings).run(collection.documents, line)
        line.done()
        for name in names:
            settings = settings_from_mapping(
                {**base, **CONFIGURATIONS[name]}, source="bench", env={}
            )
            retriever = build_retriever(
                settings.retrieval,
                settings.solr,
                solr,
                embeddings,
                reads=settings.embeddings.reads(),
            )
            scores = {
                row_name("", order, cut, cuts): {"ndcg": [], "recall": [], "mrr": [], "ms": [],
                                                 "cpu": []}
                for order, cut in orders
            }  # fmt: skip
            spreads: list[float] = []  # the kNN ranking's best minus last cosine (vector rows)
            for key, text in collection.queries:
                gains = collection.judgments[key]
                started = time.perf_counter()
                hits = await retriever.run(sanitize_query(text))
                took = (time.perf_counter() - started) * 1000
                if settings.retrieval.method == "vector" and len(hits) > 1:
                    spreads.append(2 * (hits[0].score - min(hit.score for hit in hits)))
                for order, cut in orders:
                    ranking, extra_ms, cpu_ms = [hit.source_id for hit in hits], 0.0, 0.0
                    if cut is not None:
                        ranking, extra_ms, cpu_ms = reranked(encoder, text, hits, order, *cut)
                    ranked = list(dict.fromkeys(ranking))
                    judged = scores[row_name("", order, cut, cuts)]
                    judged["ms"].append(took + extra_ms)
                    judged["cpu"].append(cpu_ms)
                    judged["ndcg"].append(cranfield.ndcg(ranked, gains))
                    judged["recall"].append(cranfield.recall(ranked, gains))
                    judged["mrr"].append(cranfield.reciprocal_rank(ranked, gains))
            for order, judged in scores.items():
                ms = sorted(judged["ms"])
                row = f"{name}{order}"
                rows[row] = {
                    "ndcg@10": round(statistics.fmean(judged["ndcg"]), 4),
                    "recall@10": round(statistics.fmean(judged["recall"]), 4),
                    "mrr@10": round(statistics.fmean(judged["mrr"]), 4),
                    "p50_ms": round(statistics.median(ms), 1),
                    "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
                }
                if order:
                    rows[row]["ce_cpu_ms"] = round(statistics.fmean(judged["cpu"]), 1)
                if spreads:  # hybrid.flat.spread's scale: its quartiles on this collection
                    cut = statistics.quantiles(spreads, n=4)
                    rows[row]["knn_spread_quartiles"] = [round(value, 3) for value in cut]
                print(f"  {collection.name} {row}: {rows[row]}", flush=True)
    return rows


RERANKED = (" + rerank", " + rerank rrf", " + rerank blend")
_SCORED: dict[tuple[str, tuple[str, ...], int, bool], tuple[list[float], float, float]] = {}


def row_name(name: str, order: str, cut: tuple[int, int, bool] | None, cuts: tuple) -> str:
    """`name` and its order, and the cut (`@ tokens/depth`, ` nearest` when the passages
    were cut to their sentences nearest the question) when several are measured."""
    if cut is None or len(cuts) == 1:
        return f"{name}{order}"
    return f"{name}{order} @ {cut[0]}/{cut[1]}{' nearest' if cut[2] else ''}"


def reranked(
    encoder: CrossEncoder,
    question: str,
    hits: list,
    order: str,
    tokens: int = 512,
    depth: int = RERANK_DEPTH,
    nearest: bool = False,
) -> tuple[list[str], float, float]:
    """The hits' documents in `order` (RERANKED), and the cross-encoder's wall and CPU
    milliseconds (the first `depth` hits scored once, each pair cut to `tokens`, whatever the
    order asked)."""
    top = hits[:depth]
    texts = tuple(f"{hit.title}\n{hit.content}" if hit.title else hit.content for hit in top)
    key = (question, texts, tokens, nearest)
    if key not in _SCORED:
        if any(other[0] != question for other in _SCORED):
            _SCORED.clear()  # one query's scores kept: its orders are judged together
        started, cpu = time.perf_counter(), time.process_time()
        found = (
            encoder.scores(question, list(texts), tokens, nearest=nearest).scores if texts else []
        )
        took = (time.perf_counter() - started) * 1000
        _SCORED[key] = (found, took, (time.process_time() - cpu) * 1000)
    ce, ms, cpu_ms = _SCORED[key]
    positions = range(len(top))
    if order == " + rerank":
        chosen = sorted(positions, key=lambda i: -ce[i])
    elif order == " + rerank rrf":
        by_ce = {i: r for r, i in enumerate(sorted(positions, key=lambda i: -ce[i]))}
        chosen = sorted(positions, key=lambda i: -(1 / (RRF_K + i) + 1 / (RRF_K + by_ce[i])))
    else:  # blend: z-scores, the cross-encoder's and retrieval's, weighted equally
        chosen = blended([float(hit.score) for hit in top], ce)
    ranking = [top[i].source_id for i in chosen] + [hit.source_id for hit in hits[depth:]]
    return ranking, ms, cpu_ms


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--squad", type=int, default=300, help="answerable SQuAD questions")
    parser.add_argument("--only", nargs="*", choices=list(CONFIGURATIONS), help="these rows")
    parser.add_argument("--sample", type=int, help="a seeded sample of each collection's queries")
    parser.add_argument("--rerank", action="store_true", help="rows reranked too (module doc)")
    parser.add_argument("--rerank-tokens", nargs="+", default=["512"],
                        help="a pair's tokens at most (several: a row each); 128n: a long "
                        "passage cut to its sentences nearest the question")  # fmt: skip
    parser.add_argument("--rerank-depth", type=int, nargs="+", default=[RERANK_DEPTH],
                        help="hits reranked (several: a row each)")  # fmt: skip
    parser.add_argument(
        "--collections",
        nargs="*",
        default=["cranfield", "cisi", "squad", "french", "french-pages"],
    )
    parser.add_argument("--embeddings-model", default="all-MiniLM-L6-v2",
                        help="ai.embeddings.model (multilingual-e5-small: French too)")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="rag.properties values for ingestion and every row "
                        "(vector.chunk.size=500, ai.embeddings.query.prefix=none...)")  # fmt: skip
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    names = args.only or list(CONFIGURATIONS)
    loaders = {"cranfield": load_cranfield, "cisi": load_cisi,
               "squad": lambda: load_squad(args.squad), "french": load_french,
               "french-pages": load_french_pages}  # fmt: skip
    collections = [c for c in (loaders[n]() for n in args.collections) if c is not None]
    if args.sample:  # the same queries for every row: a cheaper run of costly rows
        collections = [
            Collection(c.name, c.documents, random.Random(70).sample(
                c.queries, min(args.sample, len(c.queries))), c.judgments)
            for c in collections
        ]  # fmt: skip
    encoder = CrossEncoder(cache_size=0) if args.rerank else None  # each cut costed in full
    cuts = tuple(
        (int(t.rstrip("n")), d, t.endswith("n"))
        for t in args.rerank_tokens
        for d in args.rerank_depth
    )
    rows: list[str] = []
    for name in names:
        rows.append(name)
        if encoder is not None:
            rows += [row_name(name, o, cut, cuts) for cut in cuts for o in RERANKED]
    table: dict[str, dict[str, dict[str, float]]] = {}
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        for collection in collections:
            print(f"{collection.name}: {len(collection.queries)} judged queries", flush=True)
            table[collection.name] = asyncio.run(
                measure(
                    collection,
                    solr_url,
                    embeddings_url,
                    names,
                    encoder,
                    cuts,
                    args.embeddings_model,
                    overrides,
                )
            )
    save_results("retrieval", table)
    header = "".join(f" {c.name:>22}" for c in collections)
    print(f"\nnDCG@10 / recall@10 / MRR@10{header} {'mean nDCG':>10} {'p50 ms':>7}")
    for name in rows:
        cells = [table[c.name][name] for c in collections]
        text = "".join(
            f" {r['ndcg@10']:.3f}/{r['recall@10']:.3f}/{r['mrr@10']:.3f}".rjust(23) for r in cells
        )
        mean = statistics.fmean(r["ndcg@10"] for r in cells)
        p50 = statistics.fmean(r["p50_ms"] for r in cells)
        print(f"{name:<42}{text} {mean:>10.3f} {p50:>7.1f}")


if __name__ == "__main__":
    main()

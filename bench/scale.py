"""A Datafari-sized index (issue 82): the service's retrieval over 10k, 100k and 1M passages.

One Solr node on this box holds FileShare (a document per five passages: 200,000 documents
at 1M) and VectorMain (the passages, their vectors given). The distractors are real sentences
recombined (bench/scale_corpus.py says how, and how their vectors are made); hidden among them
are the needles: SQuAD 2.0's paragraphs and the French FAQ's answers, ingested through the
service's own indexer (chunked and embedded by the shipped encoder). The ACLs are a crawler's:
every document allows `everyone`, 1%, 10% and 50% of them allow g1, g10 and g50, and 2% deny
g10, another 2% g50.

At each size (0 distractors: the needles alone, the "small index"), measured:
- ingestion: passages (vectors given) and documents a second, Solr's time alone;
- disk: each collection's index; the vectors' and the HNSW graph's files (what the page cache
  must hold for kNN not to read the disk); Solr's heap in use;
- latency p50/p95 and the service's own CPU (its thread, the embedding server's left out) of
  the service's BM25 (FileShare), kNN and hybrid (VectorMain) retrieval, no filter and each
  group's ACL filter, the query embedded by the local model server (the LLM left out);
- kNN recall@10 against exact search (numpy over every vector, the same filter);
- the needles' questions (SQuAD's and the French FAQ's dev halves, bench/data/splits.json):
  gold document in the top 10 and nDCG@10.

Every step is resumable: the data lives in --data (default ~/.cache/solr-rag/scale, outside
the repository), a stopped run goes on where it stopped, a size measured is not measured again
(--again SIZE to redo it).

    python -m bench.scale [--sizes 0,10000,100000,1000000] [--data DIR] [--port 8990]
                          [--heap 4g] [--queries 300]
    python -m bench.scale --serve [--data DIR] [--port 8990]   # its Solr, as it stands
    python -m bench.scale --sizes 1000000 --again 1000000 --set knn.exact.max=0  # A/B
    python -m bench.scale --data ~/.cache/solr-rag/scale-dense --layout dense-capped \
                          --merge 8 --sizes 1000000 --set knn.depth=2400

`--layout dense-capped` builds VectorMain with a denser graph in segments capped near 125k
passages (bench/scale_layout.py), in a --data of its own; `--merge N` force-merges it to N
segments before measuring (what an operator's optimize, or months of a crawler, ends as).

`--serve` starts the Solr of --data and keeps it up until Ctrl-C (or SIGTERM), for what asks
questions of the index as it stands: the answers among a million are
`python -m bench.answers --solr-url http://127.0.0.1:8990/solr --no-ingest ...`, the same
command without those two options the small index's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from bench import cranfield, splits
from bench.scale_corpus import (
    EVERYONE,
    PASSAGES_PER_DOCUMENT,
    Pool,
    build_sentences,
    embed_pool,
)
from bench.scale_layout import LAYOUTS, force_merge
from bench.support import model_server, percentile
from service.config import Settings, settings_from_mapping
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.ingest.progress import ProgressLine
from service.llm import EmbeddingsClient, LLMOptions
from service.models.encoder import load_encoder
from service.retrieval import SolrClient
from service.retrieval.factory import build_retriever
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.vector import vector_literal
from service.text import sanitize_query
from testing.solr import LocalSolr, upload_configset

DATA = Path.home() / ".cache" / "solr-rag" / "scale"
SQUAD = Path(__file__).resolve().parent / "data" / "squad2"
FRENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "french-qa"
DOCUMENTS, PASSAGES = "FileShare", "VectorMain"
BATCH = 200  # documents a request (1,000 passages)
DIMENSIONS = 384
# the ACL filters measured: the caller's groups (None: security off)
SCOPES: dict[str, tuple[str, ...] | None] = {
    "none": None,
    "everyone": (EVERYONE,),
    "g50": ("g50",),
    "g10": ("g10",),
    "g1": ("g1",),
}
METHODS = {"bm25": "bm25", "knn": "vector", "hybrid": "hybrid"}
LATENCY_QUERIES = 150  # of the questions, asked under each filter
RECALL_QUERIES = 100


# ---------------------------------------------------------------- the needles and questions


def needle_documents() -> list[SourceDocument]:
    """SQuAD's paragraphs and the French FAQ's answers (read from ../shared, never copied)."""
    rows = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    documents = [
        SourceDocument(
            id=r["id"], title=r["title"], url="", content=r["content"], allowed_groups=(EVERYONE,)
        )
        for r in rows
    ]
    if (FRENCH / "corpus.jsonl").is_file():
        rows = [json.loads(line) for line in (FRENCH / "corpus.jsonl").open(encoding="utf-8")]
        documents += [
            SourceDocument(
                id=r["id"],
                title=r["title"],
                url="",
                content=r["content"],
                language="fr",
                allowed_groups=(EVERYONE,),
            )
            for r in rows
        ]
    return documents


def questions(count: int) -> list[dict]:
    """`count` SQuAD dev-half answerable questions and half as many French dev-half ones
    (a seeded sample, alike each run): {text, gold, language}."""
    squad = [
        q
        for q in splits.in_half("squad2", splits.questions("squad2", SQUAD), "dev", SQUAD)
        if q["answerable"]
    ]
    asked = [
        {"text": q["question"], "gold": q["gold_doc"], "language": "en"}
        for q in random.Random(82).sample(squad, min(count, len(squad)))
    ]
    if (FRENCH / "questions.jsonl").is_file():
        french = splits.in_half("french-qa", splits.questions("french-qa", FRENCH), "dev", FRENCH)
        sample = random.Random(82).sample(french, min(count // 2, len(french)))
        asked += [{"text": q["question"], "gold": q["gold_doc"], "language": "fr"} for q in sample]
    return asked


def latency_sample(asked: list[dict]) -> list[dict]:
    """Two thirds English, one third French, of the questions asked under each filter."""
    english = [q for q in asked if q["language"] == "en"]
    french = [q for q in asked if q["language"] == "fr"]
    return english[: LATENCY_QUERIES * 2 // 3] + french[: LATENCY_QUERIES // 3]


# ---------------------------------------------------------------- building


class Build:
    """The collections grown to a size, resumably: `progress.json` holds the documents
    written (every batch is idempotent: ids are the document's number) and each stage's
    Solr time."""

    def __init__(self, folder: Path, solr_url: str, pool: Pool) -> None:
        self.folder = folder
        self.solr_url = solr_url
        self.pool = pool
        self.progress_path = folder / "progress.json"
        self.progress = (
            json.loads(self.progress_path.read_text()) if self.progress_path.is_file() else {}
        )
        self.progress.setdefault("documents", 0)
        self.progress.setdefault("stages", {})

    def save(self) -> None:
        self.progress_path.with_suffix(".tmp").write_text(json.dumps(self.progress, indent=1))
        self.progress_path.with_suffix(".tmp").rename(self.progress_path)

    def vectors(self, documents: int) -> np.memmap:
        """vectors.f32: every distractor passage's vector, row document * 5 + passage."""
        path = self.folder / "vectors.f32"
        rows = documents * PASSAGES_PER_DOCUMENT
        have = path.stat().st_size // (4 * DIMENSIONS) if path.is_file() else 0
        if have < rows:
            with path.open("ab") as out:
                out.truncate((rows) * 4 * DIMENSIONS)
        return np.memmap(path, dtype=np.float32, mode="r+", shape=(rows, DIMENSIONS))

    def groups(self, documents: int) -> np.ndarray:
        """groups.u8: a document's ACL bits (g1, g10, g50 allowed; g10, g50 denied)."""
        path = self.folder / "groups.u8"
        have = path.stat().st_size if path.is_file() else 0
        if have < documents:
            with path.open("ab") as out:
                out.truncate(documents)
        return np.memmap(path, dtype=np.uint8, mode="r+", shape=(documents,))

    def grow(self, passages: int) -> None:
        documents = passages // PASSAGES_PER_DOCUMENT
        done = self.progress["documents"]
        if done >= documents:
            return
        vectors, groups = self.vectors(documents), self.groups(documents)
        stage = self.progress["stages"].setdefault(
            str(passages),
            {"passages_seconds": 0.0, "documents_seconds": 0.0, "passages": 0, "documents": 0},
        )
        began = time.perf_counter()
        with httpx.Client(timeout=600) as http, ThreadPoolExecutor(1) as sender:
            pending: Future[tuple[float, float]] | None = None
            for start in range(done, documents, BATCH):
                numbers = range(start, min(start + BATCH, documents))
                files, chunks = [], []
                for n in numbers:
                    document = self.pool.document(n)
                    file, passages_ = document.solr(self.pool)
                    files.append(file)
                    chunks += passages_
                    rows = slice(n * PASSAGES_PER_DOCUMENT, (n + 1) * PASSAGES_PER_DOCUMENT)
                    vectors[rows] = document.vectors(self.pool)
                    groups[n] = _bits(document.allowed, document.denied)
                body_files, body_chunks = json.dumps(files), json.dumps(chunks)
                if pending is not None:
                    self._account(stage, *pending.result())
                pending = sender.submit(self._post, http, body_files, body_chunks, len(numbers))
                self.progress["documents"] = numbers.stop
                if numbers.stop % 10_000 == 0 or numbers.stop == documents:
                    rate = (numbers.stop - done) / (time.perf_counter() - began)
                    print(
                        f"scale: {numbers.stop:,}/{documents:,} documents, {rate:.0f}/s",
                        file=sys.stderr,
                        flush=True,
                    )
            if pending is not None:
                self._account(stage, *pending.result())
            vectors.flush()
            groups.flush()
            started = time.perf_counter()
            for collection in (DOCUMENTS, PASSAGES):
                http.get(
                    f"{self.solr_url}/{collection}/update", params={"commit": "true"}
                ).raise_for_status()
            stage["commit_seconds"] = round(time.perf_counter() - started, 1)
        self.save()

    def _account(self, stage: dict, took: tuple[float, float], batch: int) -> None:
        stage["documents_seconds"] += took[0]
        stage["passages_seconds"] += took[1]
        stage["documents"] += batch
        stage["passages"] += batch * PASSAGES_PER_DOCUMENT
        self.save()

    def _post(
        self, http: httpx.Client, files: str, chunks: str, count: int
    ) -> tuple[tuple[float, float], int]:
        took = []
        for collection, body in ((DOCUMENTS, files), (PASSAGES, chunks)):
            started = time.perf_counter()
            response = http.post(
                f"{self.solr_url}/{collection}/update",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            response.raise_for_status()
            took.append(time.perf_counter() - started)
        return (took[0], took[1]), count


def _bits(allowed: tuple[str, ...], denied: tuple[str, ...]) -> int:
    return (
        ("g1" in allowed)
        | ("g10" in allowed) << 1
        | ("g50" in allowed) << 2
        | ("g10" in denied) << 3
        | ("g50" in denied) << 4
    )


def visible(bits: np.ndarray, groups: tuple[str, ...] | None) -> np.ndarray:
    """Which documents a caller in `groups` sees (every one sees `everyone`'s)."""
    if groups is None or groups == (EVERYONE,):
        return np.ones(len(bits), dtype=bool)
    (group,) = groups
    allow = {"g1": 1, "g10": 2, "g50": 4}[group]
    deny = {"g1": 0, "g10": 8, "g50": 16}[group]
    return ((bits & allow) != 0) & ((bits & deny) == 0)


async def ingest_needles(solr_url: str, embeddings_url: str, folder: Path) -> None:
    """The needles through the service's own indexer, once; their passages' vectors kept."""
    if (folder / "needles.npz").is_file():
        return
    async with httpx.AsyncClient(timeout=600) as http:
        solr = SolrClient(http, solr_url, read_timeout=600)
        settings = _settings(solr_url, embeddings_url, {})
        embeddings = _embeddings(http, embeddings_url, settings)
        documents = needle_documents()
        print(f"scale: ingesting {len(documents)} needles", file=sys.stderr)
        line = ProgressLine()
        await indexer_for(settings, solr, embeddings).run(documents, line)
        line.done()
        ids, vectors, cursor = [], [], "*"
        while True:
            body = await solr.select(
                PASSAGES,
                {
                    "q": "-id:scale-*",
                    "defType": "lucene",
                    "fl": "id,parent_id,vector_384",
                    "rows": 1000,
                    "sort": "id asc",
                    "cursorMark": cursor,
                },
            )
            for doc in body["response"]["docs"]:
                ids.append(doc["parent_id"])
                vectors.append(doc["vector_384"])
            if body["nextCursorMark"] == cursor:
                break
            cursor = body["nextCursorMark"]
    np.savez(folder / "needles.npz", parents=np.array(ids), vectors=np.array(vectors, np.float32))


# ---------------------------------------------------------------- measuring


def _settings(solr_url: str, embeddings_url: str, overrides: dict[str, str]) -> Settings:
    return settings_from_mapping(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": embeddings_url,
            "ai.embeddings.model": "all-MiniLM-L6-v2",
            "security.model": "groups",
            **overrides,
        },
        source="bench",
        env={},
    )


def _embeddings(http: httpx.AsyncClient, url: str, settings: Settings) -> EmbeddingsClient:
    return EmbeddingsClient(
        http,
        LLMOptions(endpoint=url, model="all-MiniLM-L6-v2", read_timeout=600),
        prefixes=settings.embeddings.prefixes(),
    )


async def measure(
    size: int,
    solr_url: str,
    embeddings_url: str,
    folder: Path,
    asked: list[dict],
    stage: dict,
    overrides: dict[str, str] | None = None,
) -> dict:
    result: dict = {"passages": size, "documents": size // PASSAGES_PER_DOCUMENT}
    if stage.get("passages"):
        result["ingest"] = {
            "passages_per_s": round(stage["passages"] / stage["passages_seconds"]),
            "documents_per_s": round(stage["documents"] / stage["documents_seconds"]),
            "commit_s": stage.get("commit_seconds"),
        }
    result.update(disk(folder / "solr"))
    result["heap_used_mb"], result["heap_max_mb"] = heap(solr_url)
    sample = latency_sample(asked)
    async with httpx.AsyncClient(timeout=120) as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        result["latency"], result["gold"] = {}, {}
        for method, name in METHODS.items():
            result["latency"][method] = {}
            for scope_name, groups in SCOPES.items():
                scope = EVERYTHING if groups is None else Scope(groups=groups, security="groups")
                settings = _settings(
                    solr_url, embeddings_url, {**(overrides or {}), "retrieval.method": name}
                )
                embeddings = _embeddings(http, embeddings_url, settings)
                retriever = build_retriever(
                    settings.retrieval,
                    settings.solr,
                    solr,
                    embeddings,
                    scope=scope,
                    reads=settings.embeddings.reads(),
                )
                questions_ = asked if scope_name == "none" else sample
                ms, cpu, ranks = [], [], []
                await retriever.run(sanitize_query(sample[0]["text"]))  # warm
                for q in questions_:
                    started, thread = time.perf_counter(), time.thread_time()
                    hits = await retriever.run(sanitize_query(q["text"]))
                    cpu.append((time.thread_time() - thread) * 1000)
                    took = (time.perf_counter() - started) * 1000
                    ranked = list(dict.fromkeys(hit.source_id for hit in hits))
                    ranks.append((q, ranked))
                    if q in sample:
                        ms.append(took)
                result["latency"][method][scope_name] = {
                    "p50_ms": round(statistics.median(ms), 1),
                    "p95_ms": round(percentile(ms, 0.95), 1),
                    "cpu_ms": round(statistics.fmean(cpu), 2),
                }
                if scope_name == "none":
                    result["gold"][method] = gold(ranks)
                print(
                    f"  {size} {method} {scope_name}: {result['latency'][method][scope_name]}",
                    file=sys.stderr,
                    flush=True,
                )
            if method in result["gold"]:
                print(f"  {size} {method} gold: {result['gold'][method]}", file=sys.stderr)
        depth = int((overrides or {}).get("knn.depth", 0))  # the graph at the depth asked too
        result["recall"], result["selectivity"] = await recall(
            http,
            solr_url,
            folder,
            size,
            asked[:RECALL_QUERIES],
            (10, 100) + ((depth,) if depth > 100 else ()),
        )
    return result


def gold(ranks: list[tuple[dict, list[str]]]) -> dict:
    by_language: dict[str, dict[str, list[float]]] = {}
    for q, ranked in ranks:
        scores = by_language.setdefault(q["language"], {"top10": [], "ndcg": []})
        scores["top10"].append(float(q["gold"] in ranked[:10]))
        scores["ndcg"].append(cranfield.ndcg(ranked, {q["gold"]: 1}))
    return {
        language: {
            "top10": round(statistics.fmean(s["top10"]), 4),
            "ndcg@10": round(statistics.fmean(s["ndcg"]), 4),
            "questions": len(s["top10"]),
        }
        for language, s in by_language.items()
    }


async def recall(
    http: httpx.AsyncClient,
    solr_url: str,
    folder: Path,
    size: int,
    asked: list[dict],
    depths: tuple[int, ...] = (10, 100),
    collection: str = PASSAGES,
    rescore: bool = False,
) -> tuple[dict, dict]:
    """Solr's kNN top 10 (asked for topK 10, and topK 100: knn.depth's old default) against
    numpy's exact top 10 over every vector the caller may see; `rescore`: the neighbours
    scored again by their float vectors, as knn.rescore asks."""
    needles = np.load(folder / "needles.npz")
    count = len(needles["parents"])
    documents = size // PASSAGES_PER_DOCUMENT
    distractors = np.zeros((0, DIMENSIONS), dtype=np.float32)
    if size:
        vectors = np.memmap(folder / "vectors.f32", dtype=np.float32, mode="r")
        distractors = np.asarray(vectors[: size * DIMENSIONS]).reshape(size, DIMENSIONS)
    every = np.concatenate([needles["vectors"], distractors])
    every /= np.linalg.norm(every, axis=1, keepdims=True)
    bits = np.zeros(0, dtype=np.uint8)
    if documents:
        bits = np.asarray(np.memmap(folder / "groups.u8", dtype=np.uint8, mode="r")[:documents])
    seen = {  # the needles allow `everyone` alone
        name: np.concatenate(
            [
                np.full(count, groups is None or groups == (EVERYONE,)),
                visible(bits, groups).repeat(PASSAGES_PER_DOCUMENT),
            ]
        )
        for name, groups in SCOPES.items()
    }
    selectivity = {
        name: round(float(mask[count:].mean()), 4) if size else 1.0 for name, mask in seen.items()
    }
    queries = load_encoder().encode([q["text"] for q in asked])
    found: dict[str, dict[int, list[float]]] = {n: {d: [] for d in depths} for n in SCOPES}
    for query in queries:
        scores = every @ query
        literal = vector_literal(query)
        for name, groups in SCOPES.items():
            rows = np.flatnonzero(seen[name])
            if not len(rows):
                continue  # nothing to find
            best = rows[np.argsort(-scores[rows])[:10]]
            exact = {_passage_key(int(i), count) for i in best}
            scope = EVERYTHING if groups is None else Scope(groups=groups, security="groups")
            for top_k, kept in found[name].items():
                params = {
                    "q": f"{{!knn f=vector_384 topK={top_k}}}{literal}",
                    "defType": "lucene",
                    "rows": 10,
                    "fl": "id",
                    **scope.params(),
                    **(rescored(top_k, literal) if rescore else {}),
                }
                response = await http.post(f"{solr_url}/{collection}/select", data=params)
                response.raise_for_status()
                got = {doc["id"] for doc in response.json()["response"]["docs"]}
                kept.append(len(got & exact) / len(exact))
    recalls = {
        name: {f"topK{k}": round(statistics.fmean(v), 4) if v else None for k, v in by_k.items()}
        for name, by_k in found.items()
    }
    for name in SCOPES:
        print(
            f"  {size} recall {name}: {recalls[name]} (sees {selectivity[name]:.1%})",
            file=sys.stderr,
            flush=True,
        )
    return recalls, selectivity


def rescored(depth: int, literal: str) -> dict[str, str]:
    """knn.rescore's parameters (service/retrieval/vector.py): the `depth` neighbours scored
    again by their float vectors."""
    return {
        "rq": f"{{!rerank reRankQuery=$rescore_q reRankDocs={depth} reRankWeight=1 "
        "reRankOperator=replace}",
        "rescore_q": f"{{!func}}vectorSimilarity(vector_384,{literal})",
    }


_NEEDLE_IDS: dict[int, str] = {}


def _passage_key(row: int, needles: int) -> str:
    """A row of the exact search's matrix -> the Solr id of its passage."""
    if row >= needles:
        n, k = divmod(row - needles, PASSAGES_PER_DOCUMENT)
        return f"scale-{n}_{k}"
    return _NEEDLE_IDS[row]


def disk(solr_folder: Path) -> dict:
    """Each collection's index on disk, and VectorMain's vector and graph files."""
    sizes: dict = {}
    for collection in (DOCUMENTS, PASSAGES):
        index = next(solr_folder.rglob(f"{collection}_shard1_replica_n1/data/index"), None)
        if index is None:
            index = next(solr_folder.rglob(f"{collection}*/data/index"))
        files = [path for path in index.iterdir() if path.is_file()]
        sizes[f"{collection}_disk_mb"] = round(sum(p.stat().st_size for p in files) / 2**20, 1)
        if collection == PASSAGES:
            sizes["vectors_mb"] = _megabytes(files, ".vec")
            sizes["graph_mb"] = _megabytes(files, ".vex", ".vem")
            sizes["quantized_mb"] = _megabytes(files, ".veq", ".vemq")
            sizes["segments"] = len([p for p in files if p.suffix == ".si"])
    return sizes


def _megabytes(files: list[Path], *suffixes: str) -> float:
    return round(sum(p.stat().st_size for p in files if p.suffix in suffixes) / 2**20, 1)


def heap(solr_url: str) -> tuple[float, float]:
    body = httpx.get(f"{solr_url}/admin/info/system", params={"wt": "json"}, timeout=60).json()
    raw = body["jvm"]["memory"]["raw"]
    return round(raw["used"] / 2**20), round(raw["max"] / 2**20)


# ---------------------------------------------------------------- the table and the plot


def table(results: list[dict]) -> str:
    lines = [
        "| passages | docs | ingest passages/s | VectorMain MB | FileShare MB | vectors MB | "
        "graph MB | heap MB | method | p50/p95 ms no filter | p95 everyone | p95 g50 | p95 g10 | "
        "p95 g1 | CPU ms | gold@10 en | gold@10 fr | nDCG@10 en | nDCG@10 fr |",
        "|" + "---|" * 20,
    ]
    for r in results:
        for method, rows in r["latency"].items():
            g = r["gold"].get(method, {})
            lines.append(
                f"| {r['passages']:,} | {r['documents']:,} | "
                f"{r.get('ingest', {}).get('passages_per_s', '-')} | {r['VectorMain_disk_mb']} | "
                f"{r['FileShare_disk_mb']} | {r['vectors_mb']} | {r['graph_mb']} | "
                f"{r['heap_used_mb']} | {method} | "
                f"{rows['none']['p50_ms']}/{rows['none']['p95_ms']} | "
                + " | ".join(str(rows[s]["p95_ms"]) for s in ("everyone", "g50", "g10", "g1"))
                + f" | {rows['none']['cpu_ms']} | "
                + " | ".join(str(g.get(lang, {}).get("top10", "-")) for lang in ("en", "fr"))
                + " | "
                + " | ".join(str(g.get(lang, {}).get("ndcg@10", "-")) for lang in ("en", "fr"))
                + " |"
            )
    lines += [
        "",
        "| passages | kNN recall@10 (topK 10 / topK 100) | " + " | ".join(SCOPES) + " |",
        "|---|---|" + "---|" * len(SCOPES),
    ]
    for r in results:
        cells = [
            f"{r['recall'][s]['topK10']} / {r['recall'][s]['topK100']} ({r['selectivity'][s]:.0%})"
            for s in SCOPES
        ]
        lines.append(f"| {r['passages']:,} | (share seen) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    """p95 (no filter, and g1) of each method against the index size, log-log, as SVG."""
    import math

    points = [r for r in results if r["passages"] > 0]
    if len(points) < 2:
        return
    width, height, pad = 640, 400, 60
    xs = [math.log10(r["passages"]) for r in points]
    values = [r["latency"][m][s]["p95_ms"] for r in points for m in METHODS for s in ("none", "g1")]
    top = max(values) * 1.1
    x = lambda v: pad + (v - min(xs)) / (max(xs) - min(xs)) * (width - 2 * pad)  # noqa: E731
    y = lambda v: height - pad - v / top * (height - 2 * pad)  # noqa: E731
    colours = {"bm25": "#1f77b4", "knn": "#d62728", "hybrid": "#2ca02c"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="{pad}" y="20">retrieval p95 (ms) by passages; dashed: ACL filter g1 (1%)</text>',
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
    ]
    for r, v in zip(points, xs, strict=True):
        parts.append(f'<text x="{x(v) - 20}" y="{height - pad + 18}">{r["passages"]:,}</text>')
    for tick in range(0, int(top) + 1, max(1, int(top) // 5)):
        parts.append(f'<text x="10" y="{y(tick) + 4}">{tick}</text>')
    for method, colour in colours.items():
        for scope, dash in (("none", ""), ("g1", ' stroke-dasharray="5,4"')):
            line = " ".join(
                f"{x(v)},{y(r['latency'][method][scope]['p95_ms'])}"
                for r, v in zip(points, xs, strict=True)
            )
            parts.append(f'<polyline points="{line}" fill="none" stroke="{colour}"{dash}/>')
        last = y(points[-1]["latency"][method]["none"]["p95_ms"])
        parts.append(f'<text x="{width - pad + 5}" y="{last}" fill="{colour}">{method}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts))


# ---------------------------------------------------------------- the command


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,10000,100000,1000000")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--port", type=int, default=8990)
    parser.add_argument("--heap", default="4g")
    parser.add_argument(
        "--queries", type=int, default=300, help="SQuAD dev questions (French: half)"
    )
    parser.add_argument("--again", type=int, action="append", default=[], help="measure SIZE again")
    parser.add_argument("--serve", action="store_true", help="keep its Solr up until Ctrl-C")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="shipped")
    parser.add_argument("--merge", type=int, default=0, help="force-merge VectorMain to N segments")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a rag.properties key for the retrieval measured (results-SIZE-KEY=VALUE.json)",
    )
    args = parser.parse_args(argv)
    if any("=" not in item for item in args.set):
        parser.error("--set takes KEY=VALUE, a rag.properties key and its value")
    overrides = dict(item.split("=", 1) for item in args.set)
    folder = args.data
    if args.serve:
        serve(folder, args.port, args.heap)
        return
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "sentences.jsonl").is_file():
        build_sentences(folder / "sentences.jsonl")
    embed_pool(folder)
    pool = Pool.load(folder)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    solr = LocalSolr(args.port, folder / "solr", java_opts=f"-Xms{args.heap} -Xmx{args.heap}")
    (folder / "solr").mkdir(exist_ok=True)
    print(f"scale: starting Solr on {args.port} (data in {folder / 'solr'})", file=sys.stderr)
    solr.start()
    asked = questions(args.queries)
    results = []
    try:
        apply_layout(solr.url, folder, args.layout)
        with model_server() as embeddings_url:
            asyncio.run(ingest_needles(solr.url, embeddings_url, folder))
            needles = np.load(folder / "needles.npz")
            _NEEDLE_IDS.update(_needle_ids(solr.url, needles))
            build = Build(folder, solr.url, pool)
            for size in sizes:
                named = "".join(f"-{key}={value}" for key, value in sorted(overrides.items()))
                out = folder / f"results-{size}{named}.json"
                build.grow(size)
                if args.merge:
                    merge(solr.url, args.merge)
                if out.is_file() and size not in args.again:
                    results.append(json.loads(out.read_text()))
                    continue
                stage = build.progress["stages"].get(str(size), {})
                print(f"scale: measuring at {size:,} passages", file=sys.stderr, flush=True)
                result = asyncio.run(
                    measure(size, solr.url, embeddings_url, folder, asked, stage, overrides)
                )
                result["machine"], result["settings"] = _machine(), overrides
                out.write_text(json.dumps(result, indent=1))
                results.append(result)
    finally:
        solr.stop()
    print(table(results))
    (folder / "scale.md").write_text(table(results) + "\n")
    plot(results, folder / "scale.svg")


def apply_layout(solr_url: str, folder: Path, name: str) -> None:
    """VectorMain made of layout `name`'s configset (`scale-<name>`, VectorMain's edited) and
    reloaded; a folder keeps the layout it was first built with (its `layout` file)."""
    kept = folder / "layout"
    built = kept.read_text().strip() if kept.is_file() else ""
    if not built:
        # a folder built before layouts had names holds the layout before (sparse)
        built = "sparse" if (folder / "needles.npz").is_file() else name
        kept.write_text(built + "\n")
    if built != name:
        raise SystemExit(
            f"scale: {folder} holds the {built} layout, not {name}: use another --data"
        )
    if name == "shipped":
        return
    configset = f"scale-{name}"
    known = httpx.get(f"{solr_url}/admin/configs", params={"action": "LIST"}, timeout=60)
    if configset not in known.json()["configSets"]:
        with tempfile.TemporaryDirectory() as made:
            upload_configset(solr_url, configset, LAYOUTS[name].write(Path(made)).parent)
    for action in (
        {"action": "MODIFYCOLLECTION", "collection": PASSAGES, "collection.configName": configset},
        {"action": "RELOAD", "name": PASSAGES},
    ):
        httpx.get(f"{solr_url}/admin/collections", params=action, timeout=300).raise_for_status()
    print(f"scale: VectorMain laid out as {name}", file=sys.stderr, flush=True)


def merge(solr_url: str, segments: int) -> None:
    """VectorMain force-merged to at most `segments` segments (Lucene rebuilds their graphs)."""
    cores = httpx.get(f"{solr_url}/{PASSAGES}/admin/segments", timeout=60).json()
    if len(cores.get("segments", {})) <= segments:
        return
    print(f"scale: merging VectorMain to {segments} segments", file=sys.stderr, flush=True)
    took = force_merge(solr_url, PASSAGES, segments)
    print(f"scale: merged in {took:.0f} s", file=sys.stderr, flush=True)


def serve(folder: Path, port: int, heap: str) -> None:
    """The Solr of `folder` up, as the last run left it, until Ctrl-C or SIGTERM."""
    if not (folder / "solr").is_dir():
        raise SystemExit(f"scale: no index in {folder / 'solr'}: run python -m bench.scale first")
    solr = LocalSolr(port, folder / "solr", java_opts=f"-Xms{heap} -Xmx{heap}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    solr.start()
    try:
        print(f"scale: Solr of {folder} at {solr.url} (Ctrl-C stops it)", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        solr.stop()


def _needle_ids(solr_url: str, needles: np.lib.npyio.NpzFile) -> dict[int, str]:
    """The needles' passage ids in needles.npz's row order (sorted by id at saving)."""
    ids, cursor = [], "*"
    while True:
        body = httpx.get(
            f"{solr_url}/{PASSAGES}/select",
            params={
                "q": "-id:scale-*",
                "defType": "lucene",
                "fl": "id",
                "rows": 1000,
                "sort": "id asc",
                "cursorMark": cursor,
            },
            timeout=60,
        ).json()
        ids += [doc["id"] for doc in body["response"]["docs"]]
        if body["nextCursorMark"] == cursor:
            break
        cursor = body["nextCursorMark"]
    if len(ids) != len(needles["parents"]):
        raise SystemExit("scale: the needles in Solr are not needles.npz's: remove needles.npz")
    return dict(enumerate(ids))


def _machine() -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "",
    )
    load = os.getloadavg()[0]
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    java = java.split("\n")[0]
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load1": round(load, 2),
        "java": java,
        "date": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()

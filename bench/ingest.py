"""Ingestion throughput: documents and passages per second into a real Solr, with and without
embeddings, through the service's own Indexer.

The 1,400 Cranfield abstracts (bench/data/cranfield) are ingested into a Solr started for the
run (or `--solr-url`): FileShare documents only; documents and their passages without
vectors; documents and embedded passages (the local model server's all-MiniLM-L6-v2, or
`--embeddings-url`), each from empty collections; then the same documents again, unchanged
(nothing to embed); then again with one document changed (only its passages embedded); last,
from empty again, with Solr embedding the passages as they arrive (solr.embeddings.mode=solr:
our text-to-vector plugin, calling the same model server, in a VectorMain created for it).

    python -m bench.ingest [--solr-url URL] [--embeddings-url URL] [--documents N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import replace
from pathlib import Path

import httpx

from bench.cranfield import load_documents
from bench.support import fresh_solr, given_or_started, model_server, save_results
from service.config import settings_from_mapping
from service.ingest.indexer import Indexer, IngestSummary, PassageIndex
from service.ingest.passages import PassageSplitter
from service.ingest.progress import ProgressLine
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import SolrClient
from service.retrieval.embedding_mode import EmbeddingMode
from testing.solr import create_collection, delete_collection

MODES = (
    "documents only",
    "+ passages",
    "+ embedded passages",
    "re-ingest, unchanged",
    "re-ingest, 1 changed",
    "+ passages Solr embeds",
)
FROM_EMPTY = (*MODES[:3], MODES[5])
SOLR_EMBEDS = "VectorMainSolrEmbeds"  # a VectorMain whose text-to-vector plugin is on


def create_solr_embedding_collection(solr_url: str, embeddings_url: str) -> None:
    """VectorMain's configset with its text-to-vector plugin on, calling `embeddings_url`."""
    delete_collection(solr_url, SOLR_EMBEDS)
    properties = {
        "text.to.vector.enabled": "true",
        "text.to.vector.endpoint": embeddings_url,
        # as many texts per call as the service sends (the model server sorts by length)
        "text.to.vector.batch": "512",
        "text.to.vector.timeout": "600",
    }
    create_collection(solr_url, SOLR_EMBEDS, "VectorMain", properties=properties)


async def ingest(
    mode: str, solr_url: str, embeddings_url: str, count: int, group_passages: int = 512
) -> IngestSummary:
    documents = load_documents()[:count]
    if mode == MODES[4]:
        documents[0] = replace(documents[0], content=documents[0].content + " Revised.")
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        passages_collection = SOLR_EMBEDS if mode == MODES[5] else "VectorMain"
        if mode in FROM_EMPTY:
            for collection in ("FileShare", passages_collection):
                await solr.delete_by_query(collection, "*:*")
        embeddings = EmbeddingsClient(
            http, LLMOptions(endpoint=embeddings_url, model="all-MiniLM-L6-v2", read_timeout=600)
        )
        passages = None
        if mode != MODES[0]:
            layout = settings_from_mapping(
                {"solr.collection.passages": passages_collection, "solr.embeddings.mode": "solr"},
                source="bench",
                env={},
            ).solr
            passages = PassageIndex(
                collection=passages_collection,
                splitter=PassageSplitter(1000, 100),
                vector_field="vector_384",
                embeddings=None if mode == MODES[1] else embeddings,
                model="all-MiniLM-L6-v2",
                mode=EmbeddingMode(layout, "all-MiniLM-L6-v2") if mode == MODES[5] else None,
            )
        indexer = Indexer(solr, "FileShare", passages=passages, group_passages=group_passages)
        summary = await indexer.run(documents, ProgressLine())
        sys.stderr.write("\n")
        return summary


def passage_bytes(solr_url: str) -> str:
    """What one VectorMain passage costs on disk, merged into one segment: its vector (.vec),
    its HNSW graph (.vex), and the rest (stored text, terms, metadata), from the files of the
    index's latest commit."""
    core = f"{solr_url}/VectorMain"
    params = {"wt": "json"}
    httpx.post(f"{core}/update", params={"optimize": "true", "maxSegments": "1"}, timeout=600)
    version = httpx.get(f"{core}/replication", params={"command": "indexversion", **params})
    generation = version.json()["generation"]
    listing = httpx.get(
        f"{core}/replication",
        params={"command": "filelist", "generation": generation, **params},
    ).json()
    sizes = {"vectors (.vec)": 0, "HNSW graph (.vex)": 0, "the rest": 0}
    for entry in listing["filelist"]:
        name, size = entry["name"], int(entry["size"])
        key = {".vec": "vectors (.vec)", ".vex": "HNSW graph (.vex)"}.get(Path(name).suffix)
        sizes[key or "the rest"] += size
    found = httpx.get(f"{core}/select", params={"q": "*:*", "rows": 0, **params}).json()
    passages = max(int(found["response"]["numFound"]), 1)
    parts = ", ".join(f"{what} {size / passages:.0f}" for what, size in sizes.items())
    total = sum(sizes.values()) / passages
    return f"VectorMain on disk, bytes per passage ({passages} passages): {total:.0f} = {parts}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--documents", type=int, default=1400)
    parser.add_argument(
        "--group-passages", type=int, default=512, help="passages embedded together (Indexer)"
    )
    args = parser.parse_args(argv)
    rows = []
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        create_solr_embedding_collection(solr_url, embeddings_url)
        for mode in MODES:
            print(f"{mode}...", flush=True)
            summary = asyncio.run(
                ingest(mode, solr_url, embeddings_url, args.documents, args.group_passages)
            )
            seen = summary.documents + summary.unchanged
            rows.append(
                {
                    "mode": mode,
                    "documents": summary.documents,
                    "unchanged": summary.unchanged,
                    "passages": summary.passages,
                    "embedded": summary.embedded,
                    "seconds": round(summary.seconds, 2),
                    "documents_per_s": round(seen / summary.seconds, 1),
                }
            )
        on_disk = passage_bytes(solr_url)
    print(
        f"\n{'mode':<22} {'written':>7} {'unchanged':>9} {'passages':>8} {'embedded':>8} "
        f"{'seconds':>8} {'docs/s':>8}"
    )
    for row in rows:
        print(
            f"{row['mode']:<22} {row['documents']:>7} {row['unchanged']:>9} {row['passages']:>8} "
            f"{row['embedded']:>8} {row['seconds']:>8} {row['documents_per_s']:>8}"
        )
    print(on_disk)
    save_results("ingest", rows)


if __name__ == "__main__":
    main()

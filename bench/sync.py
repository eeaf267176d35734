"""`solr-rag sync` on Cranfield: the passages of 1,400 documents a crawler wrote.

The Cranfield abstracts (bench/data/cranfield) are posted to a FileShare of Datafari's schema
by plain Solr updates (as ManifoldCF would), then PassageSync makes the passages of a
Datafari VectorMain (testing/configsets): a first sync from empty; a second with nothing
changed (nothing should be embedded); a third after one document changed and one was deleted.
Embeddings: the local model server's all-MiniLM-L6-v2, or `--embeddings-url`.

    python -m bench.sync [--solr-url URL] [--embeddings-url URL] [--documents N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import httpx

import testing
from bench.cranfield import load_documents
from bench.support import fresh_solr, given_or_started, model_server, save_results
from service.config import settings_from_mapping
from service.ingest.progress import ProgressLine
from service.ingest.sync import PassageSync, SyncSummary
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.solr import create_collection, delete_collection, upload_configset

CONFIGSETS = Path(testing.__file__).parent / "configsets"
DOCUMENTS, PASSAGES = "SyncFileShare", "SyncVectorMain"
RUNS = ("first sync", "nothing changed", "1 changed, 1 deleted")


def crawled(count: int) -> list[dict[str, object]]:
    """The documents as a crawler posts them to Datafari's FileShare."""
    return [
        {
            "id": d.id,
            "title": [d.title],
            "content": [d.content],
            "content_en": d.content,
            "url": f"https://cranfield.example/{d.id}",
            "language": "en",
        }
        for d in load_documents()[:count]
    ]


def post(solr_url: str, body: object) -> None:
    httpx.post(
        f"{solr_url}/{DOCUMENTS}/update", params={"commit": "true"}, json=body, timeout=300
    ).raise_for_status()


async def sync(solr_url: str, embeddings_url: str, checkpoint: Path) -> SyncSummary:
    settings = settings_from_mapping(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": embeddings_url,
            "solr.collection.documents": DOCUMENTS,
            "solr.collection.passages": PASSAGES,
            "solr.documents.fields": "title=title_{lang}|title,content=content_{lang}|content",
            "solr.passages.fields": "text=embedded_content,parent=parent_doc",
        },
        source="bench",
        env={},
    )
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        line = ProgressLine()
        summary = await PassageSync(
            solr, settings, embeddings_client(http, settings), checkpoint=checkpoint
        ).run(line)
        line.done()
        return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr 9.8 (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--documents", type=int, default=1400)
    args = parser.parse_args(argv)
    rows = []
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
        tempfile.TemporaryDirectory(prefix="bench-sync-") as folder,
    ):
        for name in ("DatafariFileShare", "DatafariVectorMain"):
            upload_configset(solr_url, name, CONFIGSETS / name)
        for collection, configset in ((DOCUMENTS, "DatafariFileShare"),
                                      (PASSAGES, "DatafariVectorMain")):  # fmt: skip
            delete_collection(solr_url, collection)
            create_collection(solr_url, collection, configset)
        documents = crawled(args.documents)
        post(solr_url, documents)
        checkpoint = Path(folder) / "sync.json"
        for run in RUNS:
            if run == RUNS[2]:
                changed = {**documents[0], "content": [f"{documents[0]['content'][0]} Revised."]}
                post(solr_url, [changed])
                post(solr_url, {"delete": {"id": documents[1]["id"]}})
            print(f"{run}...", file=sys.stderr, flush=True)
            summary = asyncio.run(sync(solr_url, embeddings_url, checkpoint))
            rows.append(
                {
                    "run": run,
                    "documents": summary.documents,
                    "changed": summary.changed,
                    "passages": summary.passages,
                    "embedded": summary.embedded,
                    "removed": summary.removed,
                    "seconds": round(summary.seconds, 2),
                    "documents_per_s": round(summary.documents / summary.seconds, 1),
                }
            )
        if args.solr_url:  # a Solr started for the run goes with it
            for collection in (DOCUMENTS, PASSAGES):
                delete_collection(solr_url, collection)
    print(
        f"\n{'run':<22} {'read':>6} {'changed':>7} {'passages':>8} {'embedded':>8} "
        f"{'removed':>7} {'seconds':>8} {'docs/s':>8}"
    )
    for row in rows:
        print(
            f"{row['run']:<22} {row['documents']:>6} {row['changed']:>7} {row['passages']:>8} "
            f"{row['embedded']:>8} {row['removed']:>7} {row['seconds']:>8} "
            f"{row['documents_per_s']:>8}"
        )
    save_results("sync", rows)


if __name__ == "__main__":
    main()

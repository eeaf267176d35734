"""`solr-rag sync` on a crawler's share: what a run reads, and how long it takes.

Cranfield (the default): the 1,400 abstracts (bench/data/cranfield) are posted to a FileShare
of Datafari's schema by plain Solr updates (as ManifoldCF would), then PassageSync makes the
passages of a Datafari VectorMain (testing/configsets): a first sync from empty; a second with
nothing changed (nothing should be embedded); a third after one document changed and one was
deleted. Embeddings: the local model server's all-MiniLM-L6-v2, or `--embeddings-url`.

    python -m bench.sync [--solr-url URL] [--embeddings-url URL] [--documents N]

A large share (`--changed`): N synthetic documents (bench.sync_share: Cranfield's sentences
recombined), made once and kept with their Solr (a node of its own on --solr-port, data in
--data, ~/.cache/solr-rag/sync-bench: a rerun reuses both and its sync's checkpoint), then
timed: the first sync (every document read; its encoder a stand-in at no cost) or the catch-up
of a rerun, then syncs after nothing changed, after C files changed, after R files crawled
again unchanged, after D deleted, and once more with nothing changed. Each row says what Solr
returned to the sync (searches, documents, documents with their text, passages with their
vector: testing.solr_reads). Building 200,000 takes about 15 minutes on 2 cores.

    python -m bench.sync --documents 200000 --changed 100 [--rewritten 10000] [--deleted 100]
                         [--settle 0] [--data DIR] [--solr-port 8986] [--solr-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

import testing
from bench.cranfield import load_documents
from bench.support import fresh_solr, given_or_started, model_server, save_results
from bench.sync_share import SentencePool, Share, stand_in
from service.config import Settings, settings_from_mapping
from service.ingest.progress import ProgressLine
from service.ingest.sync import PassageSync, SyncSummary
from service.ingest.sync_state import SETTLE_SECONDS
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.servers import serve_in_thread
from testing.solr import LocalSolr, create_collection, delete_collection, upload_configset
from testing.solr_reads import SolrReads

CONFIGSETS = Path(testing.__file__).parent / "configsets"
DOCUMENTS, PASSAGES = "SyncFileShare", "SyncVectorMain"
RUNS = ("first sync", "nothing changed", "1 changed, 1 deleted")
SHARE_DOCUMENTS, SHARE_PASSAGES = "ShareFileShare", "ShareVectorMain"
DATA = Path.home() / ".cache" / "solr-rag" / "sync-bench"
SOLR_HEAP = "-Xms1g -Xmx3g"


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


def sync_settings(solr_url: str, embeddings_url: str, documents: str, passages: str) -> Settings:
    return settings_from_mapping(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": embeddings_url,
            "solr.collection.documents": documents,
            "solr.collection.passages": passages,
            "solr.documents.fields": "title=title_{lang}|title,content=content_{lang}|content",
            "solr.passages.fields": "text=embedded_content,parent=parent_doc",
        },
        source="bench",
        env={},
    )


async def sync(
    settings: Settings,
    checkpoint: Path,
    *,
    settle: float = SETTLE_SECONDS,
    reads: SolrReads | None = None,
) -> SyncSummary:
    """One sync, with a progress line (`reads`: what Solr returned to it, counted)."""
    hooks = reads.hooks if reads else {}
    async with httpx.AsyncClient() as http, httpx.AsyncClient(event_hooks=hooks) as to_solr:
        solr = SolrClient(to_solr, settings.solr.url, read_timeout=300)
        line = ProgressLine()
        try:
            return await PassageSync(solr, settings, embeddings_client(http, settings),
                                     checkpoint=checkpoint, settle=settle).run(line)  # fmt: skip
        finally:
            line.done()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr 9.8 (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--documents", type=int, default=1400)
    parser.add_argument("--changed", type=int, help="a large share: files changed between runs")
    parser.add_argument("--rewritten", type=int, default=10_000, help="crawled again unchanged")
    parser.add_argument("--deleted", type=int, default=100, help="files deleted")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="PassageSync's settle seconds (0: one node, every write committed "
                        "at once; the CLI's default is 300)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=DATA, help="the share's Solr and state")
    parser.add_argument("--solr-port", type=int, default=8986, help="the share's Solr")
    args = parser.parse_args(argv)
    if args.changed is None:
        cranfield_runs(args)
    else:
        share_runs(args)


def cranfield_runs(args: argparse.Namespace) -> None:
    """The 1,400 abstracts: three syncs."""
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
        settings = sync_settings(solr_url, embeddings_url, DOCUMENTS, PASSAGES)
        for run in RUNS:
            if run == RUNS[2]:
                changed = {**documents[0], "content": [f"{documents[0]['content'][0]} Revised."]}
                post(solr_url, [changed])
                post(solr_url, {"delete": {"id": documents[1]["id"]}})
            print(f"{run}...", file=sys.stderr, flush=True)
            summary = asyncio.run(sync(settings, checkpoint, settle=args.settle))
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


@contextmanager
def kept_solr(folder: Path, port: int) -> Iterator[str]:
    """A Solr node whose data stays in `folder` between runs (on the same port: SolrCloud
    names a node by it)."""
    solr = LocalSolr(port, folder, java_opts=SOLR_HEAP)
    solr.start()
    try:
        yield solr.url
    finally:
        solr.stop()


@dataclass(frozen=True)
class Step:
    """A change made to the share before a sync: `kind` revise, rewrite, delete or none."""

    name: str
    kind: str = "none"
    numbers: tuple[int, ...] = ()


def share_runs(args: argparse.Namespace) -> None:
    """The large share: made once (kept), then a sync after each kind of change."""
    size, data = args.documents, args.data
    data.mkdir(parents=True, exist_ok=True)
    checkpoint = data / "sync.json"
    deleted_file = data / "deleted.txt"  # the files the last run deleted: posted back now
    with (
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
        given_or_started(args.solr_url, lambda: kept_solr(data / "solr", args.solr_port)) as url,
    ):
        pool = SentencePool.load(data, embeddings_url)
        made = prepare(url, pool, size, deleted_file, checkpoint)
        draw = random.Random(time.time_ns())
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        rewritten = min(args.rewritten, size)
        steps = [
            Step("first sync (all read)" if made else "catch-up of the last run"),
            Step("nothing changed"),
            Step(f"{args.changed} changed", "revise", pick(draw, size, args.changed)),
            Step(f"{rewritten} written again unchanged", "rewrite", pick(draw, size, rewritten)),
            Step(f"{args.deleted} deleted", "delete", pick(draw, size, args.deleted)),
            Step("nothing changed (after the deletions)"),
        ]
        share = Share(url, SHARE_DOCUMENTS, pool)
        rows = []
        with serve_in_thread(stand_in(pool)) as stand_in_url:
            for number, step in enumerate(steps):
                numbers = list(step.numbers)
                if step.kind == "revise":
                    share.revise(numbers, f"Revised on {stamp}.")
                elif step.kind == "rewrite":
                    share.rewrite(numbers)
                elif step.kind == "delete":
                    share.delete(numbers)
                    deleted_file.write_text("\n".join(map(str, numbers)))
                encoder = f"{stand_in_url}/v1/" if number == 0 and made else embeddings_url
                settings = sync_settings(url, encoder, SHARE_DOCUMENTS, SHARE_PASSAGES)
                print(f"{step.name}...", file=sys.stderr, flush=True)
                reads = SolrReads()
                summary = asyncio.run(sync(settings, checkpoint, settle=args.settle, reads=reads))
                rows.append(share_row(step.name, size, summary, reads))
                print(share_line(rows[-1]), file=sys.stderr, flush=True)
    print()
    print(share_table(rows))
    save_results(f"sync-{size}", rows)


def pick(draw: random.Random, size: int, count: int) -> tuple[int, ...]:
    return tuple(draw.sample(range(size), min(count, size)))


def prepare(url: str, pool: SentencePool, size: int, deleted: Path, checkpoint: Path) -> bool:
    """The share's collections, holding `size` documents (made now the first time, the last
    run's deleted ones posted back); True when they were made now (the first sync follows)."""
    for name in ("DatafariFileShare", "DatafariVectorMain"):
        upload_configset(url, name, CONFIGSETS / name)
    listed = httpx.get(f"{url}/admin/collections", params={"action": "LIST"}, timeout=60).json()
    made = SHARE_DOCUMENTS not in listed.get("collections", [])
    if made:
        create_collection(url, SHARE_DOCUMENTS, "DatafariFileShare")
        delete_collection(url, SHARE_PASSAGES)
        create_collection(url, SHARE_PASSAGES, "DatafariVectorMain")
        checkpoint.unlink(missing_ok=True)
    share = Share(url, SHARE_DOCUMENTS, pool)
    held = share.count()
    if held < size and deleted.exists():
        share.fill([int(n) for n in deleted.read_text().split()])
        held = share.count()
    if held < size:  # a first run (or one stopped while filling): every document posted
        started = time.perf_counter()

        def said(done: int, total: int) -> None:
            rate = done / (time.perf_counter() - started)
            print(f"\rposting {done}/{total} documents ({rate:.0f}/s)", end="", file=sys.stderr)

        share.fill(range(size), said)
        print(file=sys.stderr)
        made = True
    deleted.unlink(missing_ok=True)
    return made and not checkpoint.exists()


def share_row(step: str, size: int, summary: SyncSummary, reads: SolrReads) -> dict[str, object]:
    documents, passages = SHARE_DOCUMENTS, SHARE_PASSAGES
    return {
        "run": step,
        "share": size,
        "seconds": round(summary.seconds, 2),
        "read": summary.documents,
        "changed": summary.changed,
        "embedded": summary.embedded,
        "removed": summary.removed,
        "ids_compared": summary.compared,
        "solr_searches": reads.searches[documents] + reads.searches[passages],
        "documents_returned": reads.documents[documents],
        "documents_with_text": reads.carrying(documents, "content"),
        "passages_returned": reads.documents[passages],
        "passages_with_vector": reads.carrying(passages, "vector_384"),
    }


COLUMNS = (
    ("run", 38), ("seconds", 8), ("read", 7), ("changed", 7), ("embedded", 8), ("removed", 7),
    ("ids_compared", 12), ("solr_searches", 13), ("documents_returned", 18),
    ("documents_with_text", 19), ("passages_returned", 17), ("passages_with_vector", 20),
)  # fmt: skip


def share_line(row: dict[str, object]) -> str:
    return "  ".join(f"{name}={row[name]}" for name, _ in COLUMNS)


def share_table(rows: list[dict[str, object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(name.replace("_", " ") for name, _ in COLUMNS) + " |"]
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    lines += ["| " + " | ".join(str(row[name]) for name, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""`solr-rag ingest` (files, folders, the samples; --sync deletes what is gone) and `solr-rag
samples`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from service import __version__, tracing
from service.cli.common import (
    CONFIG_HELP,
    DEFAULT_CONFIG,
    REPO_ROOT,
    Commands,
    upstream_failed,
)
from service.config import Settings
from service.errors import ExtractionFailed, TechnicalError
from service.retrieval.access import SolrPools
from service.retrieval.solr import SolrClient

if TYPE_CHECKING:
    from service.ingest.extract import SourceDocument
    from service.ingest.indexer import Indexer

# where the sample corpus is written to be ingested: the checkout's .cache, or $SOLR_RAG_CACHE
# where the code is installed read-only (the image)
CACHE = (
    Path(os.environ["SOLR_RAG_CACHE"]) if os.environ.get("SOLR_RAG_CACHE") else REPO_ROOT / ".cache"
)
SAMPLES_FOLDER = CACHE / "samples" / "python-reference"


def add(commands: Commands) -> None:
    """ingest and samples."""
    what = "index files: text, Markdown, HTML, PDF and DOCX (folders: every such file)"
    ingest = commands.add_parser("ingest", help=what, description=what[0].upper() + what[1:])
    ingest.add_argument("paths", nargs="*", type=Path, help="files or folders")
    ingest.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    ingest.add_argument(
        "--language", default="", help="ISO code of the documents' language (default: detected)"
    )
    ingest.add_argument("--samples", action="store_true", help="ingest the sample corpus")
    ingest.add_argument(
        "--if-empty", action="store_true", help="do nothing when the collection has documents"
    )
    ingest.add_argument(
        "--source",
        metavar="NAME",
        help="what each id starts with (default: the folder's name: docs/a.txt for docs/a.txt "
        'ingested as the folder docs; "": the bare path, as earlier versions gave); two '
        "folders of one source may replace each other's files, two sources never do",
    )
    ingest.add_argument(
        "--force",
        action="store_true",
        help="write and embed every document again, even those Solr holds unchanged",
    )
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="keep the index in step with the folders (a cron job's): new and changed files "
        "are indexed (unchanged ones, by content hash, are not), and the documents of each "
        "folder's source whose file is gone are deleted with their passages",
    )
    ingest.set_defaults(run=_ingest)

    samples = commands.add_parser("samples", help="write the sample corpus into a folder")
    samples.add_argument("folder", type=Path)
    samples.set_defaults(run=_samples)


def _ingest(args: argparse.Namespace) -> int:
    from service.config import load_settings

    paths = list(args.paths)
    if not paths and not args.samples:
        print("solr-rag ingest: name files or folders, or use --samples", file=sys.stderr)
        return 2
    settings = load_settings(args.config, os.environ)
    # one trace, when tracing is on (observability.tracing.*, OTEL_*)
    traced = tracing.installed(settings.observability, version=__version__)
    try:
        with traced, tracing.span("ingest", {"solr_rag.sync": args.sync}, root=True):
            return asyncio.run(
                ingest_into_solr(
                    settings,
                    paths,
                    args.language,
                    args.samples,
                    args.if_empty,
                    force=args.force,
                    source=args.source,
                    sync=args.sync,
                )
            )
    except TechnicalError as error:  # Solr or the embeddings API, after their retries
        return upstream_failed(
            "ingest",
            error,
            "Nothing written is lost: run the same command again once it answers (what Solr "
            "already holds unchanged is skipped)",
        )


async def ingest_into_solr(
    settings: Settings,
    paths: list[Path],
    language: str,
    samples: bool,
    if_empty: bool,
    *,
    force: bool = False,
    source: str | None = None,
    sync: bool = False,
) -> int:
    """Files (and the sample corpus) into FileShare, their embedded passages into VectorMain;
    ids start with `source` (default: each folder's name); `sync`: each source's documents
    whose file is gone are deleted."""
    from service.ingest import Refused, source_files
    from service.ingest.folder import document_of
    from service.ingest.indexer import indexer_for, with_source
    from service.ingest.progress import ProgressLine
    from service.ingest.samples import export_samples
    from service.llm.embeddings import embeddings_client
    from service.retrieval.embedding_mode import EmbeddingMode

    if samples:
        export_samples(SAMPLES_FOLDER)
        paths = [*paths, SAMPLES_FOLDER]
    async with httpx.AsyncClient() as http, SolrPools() as pools:
        solr = SolrClient.of(settings.solr, pools, patient=True)
        collection = settings.solr.documents_collection
        mode = EmbeddingMode.of(settings)
        embeddings = embeddings_client(http, settings)
        indexer = indexer_for(settings, solr, embeddings, force=force, mode=mode)
        if if_empty and await indexer.count() > 0:
            print(f"{collection} already holds documents: nothing to ingest")
            return 0
        documents, skipped, passed_over = [], 0, 0
        for root, item in source_files(paths):
            if isinstance(item, Refused):  # only an unreadable one may still be there
                skipped += item.unreadable
                passed_over += not item.unreadable
                print(f"skipped {root / item.relative}: {item.reason}", file=sys.stderr)
                continue
            try:
                document = document_of(item, root, language=language, source=source)
            except ExtractionFailed as error:  # UnsupportedFile too
                skipped += 1
                print(f"skipped {root / item.relative}: {error}", file=sys.stderr)
                continue
            if root == SAMPLES_FOLDER:  # no link to this machine's files for anonymous callers
                document = replace(document, url="")
            named = root.resolve().name if source is None else source
            documents.append(with_source(document, named or "files"))
        if sync and skipped:  # a file that could not be read is not a file that is gone
            print(
                "solr-rag ingest --sync: some files were skipped; nothing deleted", file=sys.stderr
            )
            sync = False
        line = ProgressLine()
        try:
            summary = await indexer.run(documents, line)
        finally:
            line.done()
        print(f"Ingested {summary} into {collection} and {settings.solr.passages_collection}")
        if sync:
            await _delete_gone(indexer, documents, paths, source)
        if summary.replaced:
            print(summary.replacements(), file=sys.stderr)
        if skipped or passed_over:
            print(f"{skipped + passed_over} file(s) skipped (see above)")
        return 0


async def _delete_gone(
    indexer: Indexer, documents: list[SourceDocument], paths: list[Path], source: str | None
) -> None:
    """The documents of each synced source that no file of it is now (deleted with their
    passages)."""
    present = {document.id for document in documents}
    sources = {(source if source is not None else path.resolve().name) or "files" for path in paths}
    gone = [await indexer.delete_gone(name, present) for name in sorted(sources)]
    print(f"Deleted {sum(gone)} document(s) whose file is gone")


def _samples(args: argparse.Namespace) -> int:
    from service.ingest.samples import export_samples

    count = export_samples(args.folder)
    print(f"wrote {count} sample documents into {args.folder}")
    return 0

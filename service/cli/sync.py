"""`solr-rag sync`: the passages collection follows the documents collection, whoever writes
it (once, or every INTERVAL)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import httpx

from service import __version__, tracing
from service.cli.common import CONFIG_HELP, DEFAULT_CONFIG, Commands, upstream_failed
from service.config import Settings
from service.errors import TechnicalError
from service.ingest.sync_state import SETTLE_SECONDS
from service.retrieval.access import SolrPools
from service.retrieval.solr import SolrClient


def add(commands: Commands) -> None:
    """sync."""
    what = (
        "make the passages collection follow the documents collection, whoever writes it: "
        "new and changed documents split and embedded, passages of deleted ones removed"
    )
    sync = commands.add_parser("sync", help=what, description=what[0].upper() + what[1:])
    sync.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    sync.add_argument(
        "--every",
        type=_interval,
        metavar="INTERVAL",
        help="run again after each run, this long after it ended (30s, 5m, 1h); Ctrl-C stops",
    )
    sync.add_argument(
        "--checkpoint",
        type=Path,
        help="where a run keeps its place, to resume after a crash, and where the last run "
        "ended, so the next reads only the documents written since "
        "(default: ~/.cache/solr-rag/sync-<documents>-<passages>.json)",
    )
    sync.add_argument(
        "--restart",
        action="store_true",
        help="read every document again, not only those written since the last run",
    )
    sync.add_argument(
        "--settle",
        type=_settle,
        default=SETTLE_SECONDS,
        metavar="INTERVAL",
        help="how late a write to the documents collection may become visible "
        "(autoSoftCommit, commitWithin, several shards): what was written this long before a "
        "run is read again by the next (default 5m; 0s for one node committing every write)",
    )
    sync.set_defaults(run=_sync)


def _sync(args: argparse.Namespace) -> int:
    from service.config import load_settings

    settings = load_settings(args.config, os.environ)
    # each run a trace of its own, when tracing is on (observability.tracing.*, OTEL_*)
    with tracing.installed(settings.observability, version=__version__):
        return _syncs(args, settings)


def _syncs(args: argparse.Namespace, settings: Settings) -> int:
    from service.config import load_settings

    while True:
        try:
            with tracing.span("sync", root=True):
                asyncio.run(
                    _sync_once(settings, args.checkpoint, restart=args.restart, settle=args.settle)
                )
        except TechnicalError as error:  # Solr or the embeddings API, after their retries
            failed = upstream_failed(
                "sync", error, "Run it again once it answers: it goes on from its checkpoint"
            )
            if args.every is None:
                return failed
        if args.every is None:
            return 0
        print(f"next sync in {args.every:g}s (Ctrl-C stops)", file=sys.stderr, flush=True)
        time.sleep(args.every)
        settings = load_settings(args.config, os.environ)  # an edit is taken at the next run
        args.restart = False


async def _sync_once(
    settings: Settings, checkpoint: Path | None, *, restart: bool, settle: float
) -> None:
    from service.ingest.progress import ProgressLine
    from service.ingest.sync import PassageSync, default_checkpoint
    from service.llm.embeddings import embeddings_client

    async with httpx.AsyncClient() as http, SolrPools() as pools:
        solr = SolrClient.of(settings.solr, pools, patient=True)
        sync = PassageSync(
            solr,
            settings,
            embeddings_client(http, settings),
            checkpoint=checkpoint or default_checkpoint(settings),
            settle=settle,
        )
        if restart:
            sync.checkpoint.clear()
        line = ProgressLine()
        try:
            summary = await sync.run(progress=line)
        finally:
            line.done()
    print(f"synced: {summary}", flush=True)


def _interval(text: str) -> float:
    """30s, 5m, 1h, or seconds: 1s to 7 days."""
    seconds = _seconds(text)
    if not 1 <= seconds <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: an interval is 1s to 7 days")
    return seconds


def _settle(text: str) -> float:
    """0s to 1 day."""
    seconds = _seconds(text)
    if not 0 <= seconds <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: --settle is 0s to 1 day")
    return seconds


def _seconds(text: str) -> float:
    """30s, 5m, 1h, or seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        return float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an interval (30s, 5m, 1h)") from None

"""What the benchmarks share: a Solr of their own, the local model server, percentiles."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from service.models.server import create_model_app
from testing.servers import serve_in_thread
from testing.solr import local_solr

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"


def save_results(name: str, data: object) -> None:
    """bench/results/<name>.json: the run's numbers, for a later look (not committed)."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=1))


def shipped_properties(folder: Path, overrides: dict[str, str]) -> Path:
    """A rag.properties in `folder`: the shipped one, then `overrides` (later keys win)."""
    properties = (ROOT / "rag.properties").read_text(encoding="utf-8")
    path = folder / "rag.properties"
    path.write_text(properties + "\n" + "\n".join(f"{k}={v}" for k, v in overrides.items()) + "\n")
    return path


@contextmanager
def fresh_solr() -> Iterator[str]:
    """A fresh Solr 9.8 with our configsets, on a free port, in a temporary folder."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-solr-") as folder,
        local_solr(Path(folder)) as solr,
    ):
        yield solr.url


@contextmanager
def model_server() -> Iterator[str]:
    """The project's local model server; yields its /v1/ base URL."""
    with serve_in_thread(create_model_app()) as base:
        yield f"{base}/v1/"


@contextmanager
def given_or_started(
    given: str | None, start: Callable[[], AbstractContextManager[str]]
) -> Iterator[str]:
    """The URL given on the command line, or one from a server started for the run."""
    if given:
        yield given
    else:
        with start() as started:
            yield started


def percentile(values: list[float], fraction: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[round(fraction * 100) - 1]


def tree_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its children (the worker
    processes of `solr-rag serve --workers`), from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        process, parent = int(stat.parent.name), int(fields[1])
        if pid in (process, parent):
            total += (int(fields[11]) + int(fields[12])) / tick
    return total

"""The service's own CPU per question: CPU time (user + system, from /proc) of the `solr-rag
serve` process over N sequential /ai/rag requests, so the figure holds on a busy machine.

Solr (started for the run, or `--solr-url`), the local model server (embeddings) and an LLM
that answers at once run in other processes or threads: their CPU is not counted. The corpus
is the test corpus, ingested with its passages (hybrid needs them).

    python -m bench.cpu [--solr-url URL] [--requests 200] [--only bm25 hybrid ...]
                        [--repeat N]      # each configuration N times, in turn: the median
                        [--profile DIR]   # py-spy flame graphs of each configuration
                        [--tracing URL]   # each also traced, spans sent to this collector

Configurations: bm25 and hybrid without grounding, hybrid with grounding (embeddings method),
and the answer cache (hybrid): every question new (a miss) and every question one asked
before (a hit); `bm25 shipped` and `hybrid shipped`: the shipped rag.properties (every
shipped stage: rerank through the model server, grounding by embeddings, the echo check, the
verification, logprobs; jobs, conversations and agents on), only the retrieval method set.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.load import QUERIES, service_command
from bench.support import (
    fresh_solr,
    given_or_started,
    model_server,
    save_results,
    shipped_properties,
    tree_cpu_seconds,
)
from service.config import settings_from_mapping
from service.ingest.indexer import indexer_for
from service.llm.embeddings import embeddings_client
from service.processes import start_server, stop_group
from service.retrieval import SolrClient
from testing.corpus import load_corpus
from testing.llm_server import LLMScript, create_llm_app
from testing.servers import free_port, serve_in_thread

WARM_UP = 20
QUIET = {"LOG_LEVEL": "WARNING"}
CONFIGURATIONS: dict[str, dict[str, str]] = {
    "bm25": {"retrieval.method": "bm25"},
    "hybrid": {"retrieval.method": "hybrid"},
    "hybrid + grounding": {
        "retrieval.method": "hybrid",
        "grounding.enabled": "true",
        "grounding.method": "embeddings",
    },
    "cache miss": {"retrieval.method": "hybrid", "cache.enabled": "true"},
    "cache hit": {"retrieval.method": "hybrid", "cache.enabled": "true"},
    # the shipped rag.properties (rerank, grounding by embeddings, echo check, verification,
    # logprobs, jobs, conversations, agents), the retrieval method aside (issue 70)
    "bm25 shipped": {"retrieval.method": "bm25"},
    "hybrid shipped": {"retrieval.method": "hybrid"},
}
SHIPPED = {"bm25 shipped", "hybrid shipped"}
TRACED = " traced"  # a configuration measured with tracing on (--tracing)


def ingest(solr_url: str, embeddings_url: str) -> None:
    """The test corpus into FileShare and its embedded passages into VectorMain."""
    settings = settings_from_mapping(
        {"solr.url": solr_url, "ai.embeddings.endpoint": embeddings_url}, source="bench", env={}
    )

    async def run() -> None:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            await indexer_for(settings, solr, embeddings_client(http, settings)).run(load_corpus())

    asyncio.run(run())


def question(name: str, n: int) -> str:
    """The n-th question of a run: a new one each time for a cache miss."""
    asked = QUERIES[n % len(QUERIES)]
    return f"{asked} (question {n})" if name == "cache miss" else asked


def measure(
    label: str, base: str, pid: int, requests: int, profile: Path | None
) -> dict[str, float]:
    name = label.removesuffix(TRACED)
    with httpx.Client(timeout=60) as http:
        for n in range(WARM_UP):  # a hit's entries are stored here; caches and JIT warm
            http.post(f"{base}/ai/rag", json={"query": question(name, 10_000 + n)})
        if name == "cache hit":
            time.sleep(1.5)  # the stored answers become searchable (soft commit)
        spy = _py_spy(pid, profile / f"{label.replace(' ', '-')}.txt") if profile else None
        latencies = []
        before = tree_cpu_seconds(pid)
        for n in range(requests):
            started = time.perf_counter()
            response = http.post(f"{base}/ai/rag", json={"query": question(name, n)})
            latencies.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            if name == "cache hit" and response.json().get("cached") is not True:
                raise RuntimeError(f"question {n} was not answered from the cache")
        cpu = tree_cpu_seconds(pid) - before
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
            spy.wait(timeout=60)
    return {
        "configuration": label,
        "service_cpu_ms": round(cpu * 1000 / requests, 2),
        "latency_p50_ms": round(statistics.median(latencies), 1),
        "requests": requests,
    }


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    binary = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(binary).exists():
        print("py-spy is not installed (pip install py-spy): no profile", file=sys.stderr)
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            binary,
            "record",
            "--pid",
            str(pid),
            "--output",
            str(out),
            "--rate",
            "500",
            "--nonblocking",
            "--subprocesses",
            "--format",
            "raw",  # collapsed stacks: one line a stack, then its count
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__)
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: one started)")
    parser.add_argument("--requests", type=int, default=200, help="measured per configuration")
    parser.add_argument("--only", nargs="*", choices=list(CONFIGURATIONS), help="a subset")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, in turn")
    parser.add_argument("--profile", type=Path, help="py-spy flame graphs into this folder")
    parser.add_argument(
        "--tracing",
        metavar="URL",
        help="each configuration measured again with tracing on ('<name> traced'), its spans "
        "sent over OTLP/HTTP to this collector (Phoenix: http://127.0.0.1:6006)",
    )
    args = parser.parse_args(argv)
    names = args.only or list(CONFIGURATIONS)
    if args.tracing:
        names = [label for name in names for label in (name, name + TRACED)]
    runs: dict[str, list[float]] = {name: [] for name in names}
    rows = []
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        model_server() as embeddings_url,
        serve_in_thread(create_llm_app(LLMScript())) as llm_url,
        tempfile.TemporaryDirectory(prefix="bench-cpu-") as folder,
    ):
        ingest(solr_url, embeddings_url)
        for name in [name for _ in range(args.repeat) for name in names]:
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            configuration = dict(CONFIGURATIONS[name.removesuffix(TRACED)])
            if name.endswith(TRACED):
                configuration["observability.tracing.enabled"] = "true"
                configuration["observability.tracing.endpoint"] = args.tracing
            if name.removesuffix(TRACED) in SHIPPED:
                upstreams = _shipped(solr_url, llm_url, embeddings_url)
                config = shipped_properties(Path(folder), {**upstreams, **configuration})
                command = [sys.executable, "-m", "service.cli", "serve", "--config",
                           str(config), "--port", str(port)]  # fmt: skip
            else:
                overrides = {
                    "ai.embeddings.endpoint": embeddings_url,
                    "grounding.enabled": "false",
                    "solr.startup.check": "false",
                    **configuration,
                }
                command = service_command(solr_url, llm_url, Path(folder), port, overrides)
            server = start_server(command, f"{base}/health/live", what="service", env=QUIET)
            try:
                row = measure(name, base, server.pid, args.requests, args.profile)
            finally:
                stop_group(server, timeout=30)
            print(
                f"{name:20} {row['service_cpu_ms']:7.2f} ms CPU a question   "
                f"p50 {row['latency_p50_ms']:6.1f} ms",
                flush=True,
            )
            rows.append(row)
            runs[name].append(row["service_cpu_ms"])
    if args.repeat > 1:
        for name, cpu in runs.items():
            listed = ", ".join(f"{ms:.2f}" for ms in cpu)
            print(f"{name:20} median {statistics.median(cpu):7.2f} ms CPU a question ({listed})")
    save_results("cpu", rows)
    return 0


def _shipped(solr_url: str, llm_url: str, embeddings_url: str) -> dict[str, str]:
    """The shipped rag.properties' upstreams pointed at the run's."""
    return {
        "solr.url": solr_url,
        "solr.startup.check": "false",
        "ai.api.endpoint": f"{llm_url}/v1/",
        "llm.model": "bench",  # a remote LLM: not one of the packaged GGUF models
        "ai.embeddings.endpoint": embeddings_url,
        "rerank.endpoint": embeddings_url,
        "llm.max.concurrent.per.caller": "0",
        "prompt.templates.dir": str(Path(__file__).resolve().parents[1] / "prompts"),
    }


if __name__ == "__main__":
    sys.exit(main())

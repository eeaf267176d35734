"""Capacity (issue 70): how many questions a box answers when the LLM is elsewhere.

The shipped rag.properties (hybrid retrieval, the local cross-encoder reranking through the
model server, grounding by embeddings, the echo check, the verification, logprobs), the
service as its own process, the model server as its own (embeddings and /v1/rerank), a Solr
started for the run holding the test corpus and its passages, and an LLM that answers after
a fixed latency with no CPU of note (testing.llm_server, `--latency`, 300 ms): a remote GPU
server's stand-in. Rising concurrency; at each level every question is a new one (no cache
hit anywhere: not the answer cache's, not the reranker's scores'), and the table gives
questions a second, p50/p95 latency, and the CPU milliseconds a question of the service and
of the model server (process CPU time from /proc: it holds on a busy machine, where wall
numbers do not). The capacity is the best rate at a p95 of at most `--p95` seconds.

    python -m bench.capacity [--latency 0.3] [--concurrency 1 2 4 8 16] [--requests 60]
                             [--set rerank.max.tokens=...] [--profile DIR] [--corpus squad]

`--corpus squad`: SQuAD 2.0's 708 paragraphs (bench/data/squad2, about 1,000 characters
each, so passages of a real corpus's length for the reranker) and their answerable questions,
each asked once, instead of the tests' short documents.

`--profile DIR`: py-spy records the service (collapsed stacks, DIR/service.txt) at the
highest level (pip install py-spy).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench import answers
from bench.cpu import _py_spy, ingest
from bench.load import QUERIES
from bench.support import (
    fresh_solr,
    percentile,
    save_results,
    shipped_properties,
    tree_cpu_seconds,
)
from service.processes import start_server, stop_group
from testing.servers import free_port

QUIET = {"LOG_LEVEL": "WARNING"}
WARM_UP = 4


def question(n: int) -> str:
    """The n-th question of the run, never asked before (no cache answers it)."""
    asked = QUERIES[n % len(QUERIES)]
    return f"{asked[:-1]}, case {n}?"


def squad_questions() -> list[str]:
    """SQuAD 2.0's answerable questions (bench/data/squad2), seeded: each asked once."""
    return [expected.question for expected in answers.sample(10_000, 0, "all")]


async def level(
    base: str, concurrency: int, requests: int, first: int, ask: Callable[[int], str] = question
) -> tuple[list, float]:
    """`requests` questions, `concurrency` in flight; (status, seconds) each, and the wall."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        slots = asyncio.Semaphore(concurrency)

        async def one(n: int) -> tuple[int, float]:
            async with slots:
                started = time.perf_counter()
                try:
                    response = await http.post(f"{base}/ai/rag", json={"query": ask(n)})
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                return status, time.perf_counter() - started

        started = time.perf_counter()
        outcomes = await asyncio.gather(*(one(first + n) for n in range(requests)))
        return list(outcomes), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.3, help="the LLM's, in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--requests", type=int, default=60, help="questions a level")
    parser.add_argument("--p95", type=float, default=2.0, help="seconds: the capacity's bound")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--profile", type=Path, help="py-spy the service at the top level")
    parser.add_argument(
        "--corpus",
        choices=["test", "squad"],
        default="test",
        help="test: the tests' short documents; squad: SQuAD 2.0's 708 paragraphs (about 1,000 "
        "characters each, passages as long) and their questions",
    )
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    rows = []
    with fresh_solr() as solr_url, tempfile.TemporaryDirectory(prefix="bench-cap-") as folder:
        llm_port, models_port, port = free_port(), free_port(), free_port()
        llm_url, models_url = f"http://127.0.0.1:{llm_port}", f"http://127.0.0.1:{models_port}"
        base = f"http://127.0.0.1:{port}"
        llm = [sys.executable, "-m", "testing.llm_server", "--port", str(llm_port)]
        models = [sys.executable, "-m", "service.models", "--port", str(models_port)]
        servers = [
            start_server([*llm, "--delay", str(args.latency)], f"{llm_url}/health", what="LLM",
                         env=QUIET),
            start_server(models, f"{models_url}/health", what="model server", env=QUIET),
        ]  # fmt: skip
        try:
            if args.corpus == "squad":
                squad = squad_questions()
                ask: Callable[[int], str] = lambda n: squad[n % len(squad)]  # noqa: E731
                documents = answers.corpus("squad")
                asyncio.run(answers.ingest(solr_url, f"{models_url}/v1/", documents))
            else:
                ask = question
                ingest(solr_url, f"{models_url}/v1/")
            config = shipped_properties(Path(folder), {
                "solr.url": solr_url,
                "ai.api.endpoint": f"{llm_url}/v1/",
                "llm.model": "bench",  # a remote LLM: not one of the packaged GGUF models
                "ai.embeddings.endpoint": f"{models_url}/v1/",
                "rerank.endpoint": f"{models_url}/v1/",
                "llm.max.concurrent.per.caller": "0",  # every client shares one address
                "prompt.templates.dir": str(Path(__file__).resolve().parents[1] / "prompts"),
                **overrides,
            })  # fmt: skip
            command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config),
                       "--port", str(port)]  # fmt: skip
            service = start_server(command, f"{base}/health/live", what="service", env=QUIET)
            asked = 0
            try:
                with httpx.Client(timeout=120) as http:  # sessions loaded, caches warm
                    for n in range(WARM_UP):
                        http.post(f"{base}/ai/rag", json={"query": ask(n)}).raise_for_status()
                asked = WARM_UP
                for concurrency in args.concurrency:
                    spy = None
                    if args.profile and concurrency == max(args.concurrency):
                        spy = _py_spy(service.pid, args.profile / "service.txt")
                    own, model = tree_cpu_seconds(service.pid), tree_cpu_seconds(servers[1].pid)
                    outcomes, wall = asyncio.run(
                        level(base, concurrency, args.requests, asked, ask)
                    )
                    own = tree_cpu_seconds(service.pid) - own
                    model = tree_cpu_seconds(servers[1].pid) - model
                    if spy is not None:  # py-spy writes its file on Ctrl-C
                        spy.send_signal(signal.SIGINT)
                        spy.wait(timeout=60)
                    asked += args.requests
                    ok = [seconds * 1000 for status, seconds in outcomes if status == 200]
                    row = {
                        "concurrency": concurrency,
                        "questions": len(outcomes),
                        "errors": len(outcomes) - len(ok),
                        "questions_a_second": round(len(ok) / wall, 2),
                        "p50_ms": round(statistics.median(ok), 1) if ok else 0.0,
                        "p95_ms": round(percentile(ok, 0.95), 1),
                        "service_cpu_ms": round(own * 1000 / len(outcomes), 1),
                        "model_server_cpu_ms": round(model * 1000 / len(outcomes), 1),
                    }
                    rows.append(row)
                    print(row, flush=True)
            finally:
                stop_group(service, timeout=30)
        finally:
            for server in servers:
                stop_group(server, timeout=30)
    within = [r for r in rows if r["p95_ms"] <= args.p95 * 1000 and not r["errors"]]
    best = max((r["questions_a_second"] for r in within), default=0.0)
    settings = ", ".join(args.set) or "shipped settings"
    print(f"\nLLM {args.latency * 1000:.0f} ms; {settings}; corpus {args.corpus}")
    print(f"{'clients':>7} {'q/s':>6} {'p50 ms':>8} {'p95 ms':>8} {'errors':>6} "
          f"{'service CPU ms/q':>16} {'model server CPU ms/q':>21}")  # fmt: skip
    for r in rows:
        print(f"{r['concurrency']:>7} {r['questions_a_second']:>6} {r['p50_ms']:>8} "
              f"{r['p95_ms']:>8} {r['errors']:>6} {r['service_cpu_ms']:>16} "
              f"{r['model_server_cpu_ms']:>21}")  # fmt: skip
    print(f"capacity at p95 <= {args.p95:g} s: {best} questions a second")
    save_results(
        "capacity", {"settings": args.set, "corpus": args.corpus, "rows": rows, "capacity": best}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

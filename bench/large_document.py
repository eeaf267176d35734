"""One huge document a crawler wrote, matched by questions: what it costs the service, and
whether everyone else waits meanwhile (issue 45, item 2).

Two documents are written straight into FileShare with plain Solr updates, as a crawler
would (our ingestion's 5M-character cap is never asked): one of --megabytes of words on a
single line, one of 30 MB without a space. The service (`solr-rag serve`, its own process,
BM25, the model server's quoting model as the LLM) is asked --questions questions that match
them, --concurrent at a time, while a prober asks /health/live every 20 ms. Reported: the
questions' seconds, /health/live's p50/p95/max, and the service's peak memory (VmHWM).

    python -m bench.large_document [--solr-url URL] [--megabytes 50] [--questions 9]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.support import fresh_solr, given_or_started, model_server, percentile, save_results
from service.processes import start_server, stop_group
from testing.servers import free_port
from testing.service import write_properties

ROOT = Path(__file__).resolve().parent.parent
IDS = ("bench-huge-words", "bench-huge-nospace")


def write_documents(solr_url: str, megabytes: int) -> None:
    words = "lighthouse keeper log: the lamp was trimmed and the tide was noted. "
    huge = (words * (megabytes * 1_000_000 // len(words) + 1))[: megabytes * 1_000_000]
    nospace = "lighthouse " + "x" * 30_000_000
    for document_id, text in zip(IDS, (huge, nospace), strict=True):
        httpx.post(
            f"{solr_url}/FileShare/update",
            params={"commit": "true"},
            json=[{"id": document_id, "title": "Lighthouse log", "content": text}],
            timeout=300,
        ).raise_for_status()


def peak_memory_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Prober(threading.Thread):
    """GET /health/live every 20 ms until stopped: each answer's seconds."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.seconds: list[float] = []
        self.failures = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as http:
            while not self.stopped.is_set():
                started = time.perf_counter()
                try:
                    ok = http.get("/health/live").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.seconds.append(time.perf_counter() - started)
                self.failures += not ok
                time.sleep(0.02)


async def ask_all(base: str, questions: int, concurrent: int) -> list[tuple[float, int]]:
    gate = asyncio.Semaphore(concurrent)

    async def one(http: httpx.AsyncClient, n: int) -> tuple[float, int]:
        async with gate:
            started = time.perf_counter()
            answer = await http.post("/ai/rag", json={"query": f"lighthouse lamp tide {n}"})
            return time.perf_counter() - started, answer.status_code

    async with httpx.AsyncClient(base_url=base, timeout=600) as http:
        return await asyncio.gather(*(one(http, n) for n in range(questions)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: one started)")
    parser.add_argument("--megabytes", type=int, default=50)
    parser.add_argument("--questions", type=int, default=9)
    parser.add_argument("--concurrent", type=int, default=3)
    args = parser.parse_args(argv)
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        model_server() as models,
        tempfile.TemporaryDirectory(prefix="bench-large-") as folder,
    ):
        write_documents(solr_url, args.megabytes)
        config = write_properties(
            Path(folder) / "rag.properties",
            {"ai.enable.rag": True, "solr.url": solr_url, "retrieval.method": "bm25",
             "ai.api.endpoint": models, "ai.embeddings.endpoint": models,
             "llm.model": "extractive", "prompt.templates.dir": ROOT / "prompts",
             "grounding.enabled": False, "cache.enabled": False},
        )  # fmt: skip
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config)]
        server = start_server(
            [*command, "--port", str(port)], f"{base}/health/live", what="service"
        )
        prober = Prober(base)
        try:
            prober.start()
            started = time.perf_counter()
            asked = asyncio.run(ask_all(base, args.questions, args.concurrent))
            wall = time.perf_counter() - started
            prober.stopped.set()
            prober.join()
            memory = peak_memory_mb(server.pid)
        finally:
            prober.stopped.set()
            stop_group(server)
        seconds = [s for s, _ in asked]
        statuses = sorted({status for _, status in asked})
        live = prober.seconds
        row = {
            "megabytes": args.megabytes,
            "questions": args.questions,
            "concurrent": args.concurrent,
            "statuses": statuses,
            "question_p50_s": percentile(seconds, 0.5),
            "question_max_s": max(seconds),
            "wall_s": wall,
            "live_probes": len(live),
            "live_failures": prober.failures,
            "live_p50_ms": percentile(live, 0.5) * 1000,
            "live_p95_ms": percentile(live, 0.95) * 1000,
            "live_max_ms": max(live) * 1000,
            "peak_rss_mb": memory,
        }
        for key, value in row.items():
            print(f"{key:>16}: {value:.2f}" if isinstance(value, float) else f"{key:>16}: {value}")
        save_results("large_document", row)
    return 0


if __name__ == "__main__":
    sys.exit(main())

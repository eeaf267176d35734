"""The model server under concurrent single-question embeddings (what /ai/rag's questions and
the answer cache send): throughput and latency at each concurrency level.

The server runs in its own process (`python -m service.models`, from `--root`: another
checkout to compare, e.g. a git worktree of an older commit); the clients are asyncio tasks
in this one, each sending one question at a time.

    python -m bench.embed_load [--levels 1 50] [--requests 600] [--root PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

from bench.support import ROOT, percentile, save_results
from service.processes import start_group, stop_group
from testing.servers import free_port

QUESTIONS = [
    "How is the wind turbine gearbox maintained?",
    "Who lit the lighthouse lamp every evening?",
    "What did the glacier survey of the Vatnaj measure?",
    "When are apple trees pruned?",
    "What does the beekeeper inspect in spring?",
]


async def level(base: str, concurrency: int, requests: int) -> dict[str, float]:
    latencies: list[float] = []
    sent = iter(range(requests))

    async def client(http: httpx.AsyncClient) -> None:
        for n in sent:
            body = {"input": f"{QUESTIONS[n % len(QUESTIONS)]} ({n})", "model": "all-MiniLM-L6-v2"}
            started = time.perf_counter()
            response = await http.post(f"{base}/v1/embeddings", json=body)
            response.raise_for_status()
            latencies.append((time.perf_counter() - started) * 1000)

    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        for n in range(20):  # warm-up: the model loaded, connections open
            await http.post(f"{base}/v1/embeddings", json={"input": f"warm {n}"})
        started = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "requests_per_s": round(requests / wall, 1),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
    }


def _wait(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"the model server did not answer {url}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embed_load", description=__doc__)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose server runs")
    args = parser.parse_args(argv)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "service.models", "--port", str(port)]
    # its `service` package is the checkout's; the model files are this one's
    env = {**os.environ, "SOLR_RAG_MODELS": str(ROOT / "models" / "onnx")}
    server = start_group(command, cwd=args.root, env=env)
    _wait(f"{base}/health")
    rows = []
    try:
        for concurrency in args.levels:
            row = asyncio.run(level(base, concurrency, args.requests))
            print(
                f"{concurrency:4} clients: {row['requests_per_s']:7.1f} req/s   "
                f"p50 {row['p50_ms']:6.1f} ms   p99 {row['p99_ms']:6.1f} ms",
                flush=True,
            )
            rows.append(row)
    finally:
        stop_group(server, timeout=30)
    save_results("embed_load", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

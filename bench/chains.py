"""Wall time and LLM calls of stuff, map-reduce and refine for 1, 4 and 16 packs.

The LLM is a local OpenAI-compatible server (real HTTP on 127.0.0.1) that answers every
request after a fixed latency (200 ms by default), so the numbers show the chains' own
scheduling: stuff is one request (given a budget that holds every chunk); refine is
sequential by nature; map-reduce sends its maps concurrently.

    python -m bench.chains [--latency 0.2] [--packs 1 4 16] [--concurrency 4 16]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import httpx

from service.chains import (
    Chunk,
    MapReduceChain,
    PromptBuilder,
    PromptLibrary,
    Question,
    RefineChain,
    StuffChain,
    number_chunks,
)
from service.llm import ChatClient, LLMOptions
from service.retrieval import RetrievedDocument
from testing.llm_server import LLMScript, create_llm_app
from testing.servers import serve_in_thread

ROOT = Path(__file__).resolve().parent.parent
BUDGET = 5000
CHUNK = "The turbine technician checks the gearbox oil and the blade bolts. " * 40  # ~2.7 kB


def chunks(packs: int) -> list:
    """`packs` chunks, each too large to share a request with another."""
    documents = [
        RetrievedDocument(id=f"doc-{n}", title=f"Manual part {n}", url="", content=CHUNK)
        for n in range(packs)
    ]
    return number_chunks([Chunk(doc, doc.content) for doc in documents])


async def run_chain(strategy: str, packs: int, concurrency: int, base: str) -> tuple[int, float]:
    prompts = PromptLibrary(ROOT / "prompts")
    builder = PromptBuilder(prompts, Question("How is the gearbox checked?"))
    async with httpx.AsyncClient() as http:
        llm = ChatClient(http, LLMOptions(endpoint=f"{base}/v1/", model="bench", retries=0))
        if strategy == "stuff":  # everything in one request: a budget that holds it all
            chain = StuffChain(llm, builder, BUDGET * packs)
        elif strategy == "mapreduce":
            chain = MapReduceChain(llm, builder, BUDGET, concurrency=concurrency)
        else:
            chain = RefineChain(llm, builder, BUDGET, answer_reserve=800)
        started = time.perf_counter()
        result = await chain.run(chunks(packs))
        return result.llm_calls, time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--packs", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    args = parser.parse_args(argv)

    script = LLMScript()
    script.delay = args.latency
    script.answer = lambda request: "The gearbox oil is checked at every visit [1]."
    print(f"LLM latency {args.latency * 1000:.0f} ms per request, request budget {BUDGET} chars")
    print(
        f"{'strategy':<10} {'packs':>5} {'concurrency':>11} {'LLM calls':>9} "
        f"{'wall s':>7} {'sequential s':>12} {'speed-up':>8}"
    )
    with serve_in_thread(create_llm_app(script)) as base:
        for packs in args.packs:
            rows = [("stuff", 1), ("refine", 1)] + [("mapreduce", c) for c in args.concurrency]
            for strategy, concurrency in rows:
                calls, wall = asyncio.run(run_chain(strategy, packs, concurrency, base))
                sequential = calls * args.latency
                shown = str(concurrency) if strategy == "mapreduce" else "-"
                print(
                    f"{strategy:<10} {packs:>5} {shown:>11} {calls:>9} {wall:>7.2f} "
                    f"{sequential:>12.2f} {sequential / wall:>7.1f}x"
                )


if __name__ == "__main__":
    main()

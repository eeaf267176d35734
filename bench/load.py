"""Load: many concurrent /ai/rag requests against the real Solr and a fixed-latency LLM.

The service runs as its own process (`solr-rag serve`), exactly as deployed; the LLM is a local
OpenAI-compatible server answering after a fixed latency (100 ms by default); the documents
are the test corpus, in a Solr started for the run (or `--solr-url`). Each concurrency level
sends a bounded number of requests, every one on 127.0.0.1.

Overhead is what the service adds: the client's latency minus Solr's time (`timings.retrieve`)
minus the LLM's (`timings.llm`, wall time with a call in flight), so it includes HTTP, JSON,
prompting and queueing in the service.

    python -m bench.load [--solr-url URL] [--latency 0.1] [--concurrency 1 50 200] [--requests 400]
                         [--set rag.queries.count=3 ...] [--hostile 0.1]
                         [--workers 1 2] [--nodes 1 3] [--cache]

`--workers 1 2 --nodes 1 3`: every combination side by side, in one run: the service with 1
and 2 worker processes, on a one-node Solr and on a three-node cluster (a replica of FileShare
on each node), with the service's CPU time per request (all its processes), which tells
whether the service or Solr is the limit.

`--cache`: the answer cache on (and the local model server, a process of its own, for the
questions' embeddings), each level run twice: every question new (a miss: the cache's lookup
and store on top of the answer) and every question one asked before (a hit: one embedding and
one kNN search in Solr, no retrieval, no LLM call).

`--hostile 0.1`: one request in ten is an attack from the hostile-input corpus (deep JSON,
NaN, lone surrogates, a 38 kB system message, relay attempts, invented methods, ...), and
three attackers run beside the normal clients for the whole level (issue 39):
- bodies: 5 MB JSON arrays of empty objects, anonymous, to a path no route serves and to
  `/ai/rag` (which needs an API key), two senders in a loop;
- slow streams: one caller (its own API key) keeps 200 `/ai/rag` streams open against a slow
  model (the LLM pauses 5 s after the first word of its questions), opening a new one whenever
  one ends, or 1 s after one is refused (a flood of refused requests is a request-rate attack,
  the reverse proxy's to limit);
- schemas: `/v1/chat/completions` with response_format schemas that would cost unbounded
  validation (18 chained anyOf, a $ref cycle, a catastrophic patternProperties).
Normal clients then use API keys of their own (20 keys). They must all succeed, at a p99 under
2 s, and no attack may get a 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.support import ROOT, percentile, save_results, tree_cpu_seconds
from service.models import packaged
from service.processes import start_server, stop_group
from testing.corpus import load_corpus
from testing.hostile_schemas import HOSTILE_SCHEMAS
from testing.llama import llama_server
from testing.servers import free_port
from testing.solr import local_solr

QUERIES = (
    "Who lit the lighthouse lamp?",
    "How is an apple orchard pruned?",
    "What did the glacier survey measure?",
    "How is the wind turbine gearbox maintained?",
    "What happens in the beekeeping calendar?",
)
WARM_UP = 20


def _chat(*messages: dict[str, str], **fields: object) -> bytes:
    return json.dumps({"messages": list(messages), **fields}).encode()


_SYSTEM = {"role": "system", "content": "Be thorough. " * 3000}  # 38 kB
_USER = {"role": "user", "content": "Who lit the lighthouse lamp?"}
_HISTORY = [{"role": "user", "content": "y" * 20_000}] * 6
# (method, path, body): what a hostile client sends
HOSTILE: tuple[tuple[str, str, bytes], ...] = (
    ("POST", "/v1/chat/completions", b"[" * 50_000 + b"]" * 50_000),
    ("POST", "/v1/chat/completions", _chat(_USER).replace(b"]}", b'], "temperature": NaN}')),
    ("POST", "/v1/chat/completions", _chat({"role": "user", "content": "[" + "9" * 5000 + "]"})),
    ("POST", "/v1/chat/completions", _chat(_SYSTEM, _USER, index_name="FileShare")),
    ("POST", "/ai/rag", b'{"query": "light\\ud800house"}'),
    ("POST", "/ai/rag", json.dumps({"query": "x", "history": _HISTORY}).encode()),
    ("POST", "/ai/rag", b'{"query": "lighthouse", "id": ' + b"9" * 5000 + b"}"),
    ("GET", "/static/%00", b""),
    ("GET", "/search/vector?queryrag=%00%01", b""),
    ("BREW", "/ai/rag", b""),
)


@dataclass(frozen=True)
class Outcome:
    status: int
    seconds: float
    hostile: bool = False
    retrieve_ms: float = 0.0
    llm_ms: float = 0.0
    total_ms: float = 0.0
    llm_calls: int = 0
    cache_ms: float = 0.0
    cached: bool = False

    @property
    def overhead_ms(self) -> float:
        return self.seconds * 1000 - self.retrieve_ms - self.llm_ms


def index_corpus(solr_url: str) -> int:
    documents = [document.to_solr() for document in load_corpus()]
    httpx.post(
        f"{solr_url}/FileShare/update", params={"commit": "true"}, json=documents, timeout=60
    ).raise_for_status()
    return len(documents)


def service_command(
    solr_url: str, llm_url: str, folder: Path, port: int, overrides: dict[str, str]
) -> list[str]:
    config = folder / "rag.properties"
    settings = {
        "ai.enable.rag": "true",
        "ai.api.endpoint": f"{llm_url}/v1/",
        "llm.model": "bench",
        "solr.url": solr_url,
        "retrieval.method": "bm25",
        "prompt.chunking.strategy": "stuff",
        "prompt.templates.dir": str(ROOT / "prompts"),
        # every simulated client shares one address: the per-caller cap would refuse them
        "llm.max.concurrent.per.caller": "0",
        **overrides,
    }
    config.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return [
        sys.executable,
        "-m",
        "service.cli",
        "serve",
        "--config",
        str(config),
        "--port",
        str(port),
    ]


NORMAL_KEYS = tuple(f"normal-{i}" for i in range(20))
ATTACKER_KEY = "attacker"
SCHEMA_ATTACKER_KEY = "schema-attacker"
SLOW_WORD = "slowpoke"


# the schema attacker's: a 2**18 expansion, a $ref cycle, a catastrophic patternProperties
SCHEMAS = [
    HOSTILE_SCHEMAS[name][0]
    for name in ("18 chained anyOf", "itself", "a catastrophic key pattern")
]
BIG_BODY = b"[" + b",".join([b"{}"] * 1_700_000) + b"]"  # 5.1 MB


async def one_request(
    http: httpx.AsyncClient, base: str, query: str, key: str | None = None
) -> Outcome:
    started = time.perf_counter()
    headers = {"X-API-Key": key} if key else {}
    try:
        response = await http.post(f"{base}/ai/rag", json={"query": query}, headers=headers)
    except httpx.HTTPError as error:
        print(f"  request failed: {type(error).__name__} {error}", flush=True)
        return Outcome(status=0, seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        print(f"  HTTP {response.status_code}: {response.text[:300]}", flush=True)
        return Outcome(status=response.status_code, seconds=seconds)
    body = response.json()
    timings = body.get("timings", {})
    return Outcome(
        status=200,
        seconds=seconds,
        retrieve_ms=timings.get("retrieve", 0.0),
        llm_ms=timings.get("llm", 0.0),
        total_ms=timings.get("total", 0.0),
        llm_calls=body.get("usage", {}).get("llm_calls", 0),
        cache_ms=timings.get("cache", 0.0),
        cached=bool(body.get("cached")),
    )


async def one_attack(http: httpx.AsyncClient, base: str, n: int) -> Outcome:
    method, path, body = HOSTILE[n % len(HOSTILE)]
    started = time.perf_counter()
    try:
        response = await http.request(
            method, base + path, content=body or None, headers={"Content-Type": "application/json"}
        )
    except httpx.HTTPError as error:
        print(f"  attack {method} {path[:40]} failed: {type(error).__name__}", flush=True)
        return Outcome(status=0, seconds=time.perf_counter() - started, hostile=True)
    if response.status_code >= 500:
        print(f"  attack {method} {path[:40]}: HTTP {response.status_code}", flush=True)
    return Outcome(response.status_code, time.perf_counter() - started, hostile=True)


_NEW_QUESTIONS = itertools.count(1)


def question(n: int, mode: str) -> str:
    """The n-th question: one of QUERIES, or (mode "miss") one never asked before in this run,
    which its number keeps from matching any other in the answer cache."""
    asked = QUERIES[n % len(QUERIES)]
    return f"{asked[:-1]}, case {next(_NEW_QUESTIONS)}?" if mode == "miss" else asked


class Attackers:
    """The three attacks of `--hostile` (module docstring), until `stop` is set; what they
    got back, by attack and status."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.stop = asyncio.Event()
        self.statuses: Counter[tuple[str, int]] = Counter()

    async def run(self) -> None:
        await asyncio.gather(
            self._bodies("/no/such/route"),
            self._bodies("/ai/rag"),
            *(self._slow_stream() for _ in range(200)),
            self._schemas(),
        )

    async def _bodies(self, path: str) -> None:
        headers = {"Content-Type": "application/json"}
        async with httpx.AsyncClient(timeout=60) as http:
            while not self.stop.is_set():
                request = http.post(self.base + path, content=BIG_BODY, headers=headers)
                status = await self._send(request)
                self.statuses[("5 MB body " + path, status)] += 1

    async def _slow_stream(self) -> None:
        body = {"query": f"Who lit the {SLOW_WORD} lighthouse lamp?", "stream": True}
        headers = {"X-API-Key": ATTACKER_KEY}
        async with httpx.AsyncClient(timeout=60) as http:
            while not self.stop.is_set():
                try:
                    async with http.stream(
                        "POST", f"{self.base}/ai/rag", json=body, headers=headers
                    ) as response:
                        async for _ in response.aiter_bytes():
                            if self.stop.is_set():
                                break
                        status = response.status_code
                except httpx.HTTPError:
                    status = 0
                self.statuses[("slow stream", status)] += 1
                if status == 429:  # it retries after 1 s, not the 2 s of Retry-After (a flood
                    await asyncio.sleep(1)  # of refused requests is the proxy's to limit)

    async def _schemas(self) -> None:
        async with httpx.AsyncClient(timeout=60) as http:
            for n in itertools.count():
                if self.stop.is_set():
                    return
                form = {"type": "json_schema", "json_schema": {
                    "name": "x", "schema": SCHEMAS[n % len(SCHEMAS)]}}  # fmt: skip
                body = {"model": "rag", "messages": [{"role": "user", "content": "lamp?"}],
                        "response_format": form}  # fmt: skip
                request = http.post(
                    f"{self.base}/v1/chat/completions",
                    json=body,
                    headers={"X-API-Key": SCHEMA_ATTACKER_KEY},
                )
                self.statuses[("hostile schema", await self._send(request))] += 1

    @staticmethod
    async def _send(request: Awaitable[httpx.Response]) -> int:
        try:
            return (await request).status_code
        except httpx.HTTPError:
            return 0


async def run_level(
    base: str, concurrency: int, requests: int, hostile: float = 0.0, mode: str = "-"
) -> tuple[list[Outcome], float]:
    """`requests` requests, at most `concurrency` in flight at any moment; a `hostile` share
    of them attacks, while the Attackers run. Mode "hit": the warm-up has put every question
    in the answer cache."""
    every = round(1 / hostile) if hostile else 0
    keys = itertools.cycle(NORMAL_KEYS if hostile else [None])
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        for n in range(WARM_UP):
            await one_request(http, base, QUERIES[n % len(QUERIES)], next(keys))
        if mode == "hit":
            await asyncio.sleep(1.5)  # the cache collection's soft commit
        slots = asyncio.Semaphore(concurrency)

        async def bounded(n: int) -> Outcome:
            async with slots:
                if every and n % every == every - 1:
                    return await one_attack(http, base, n // every)
                return await one_request(http, base, question(n + WARM_UP, mode), next(keys))

        attackers = Attackers(base)
        attacking = asyncio.create_task(attackers.run()) if hostile else None
        if attacking:
            await asyncio.sleep(3)  # the slow streams hold their connections first
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(bounded(n) for n in range(requests)))
        wall = time.perf_counter() - started
        if attacking:
            attackers.stop.set()
            await attacking
            for (attack, status), count in sorted(attackers.statuses.items()):
                print(f"  attack {attack}: HTTP {status} x {count}", flush=True)
        return list(outcomes), wall


def summarize(concurrency: int, everything: list[Outcome], wall: float) -> dict[str, float]:
    attacks = [o for o in everything if o.hostile]
    outcomes = [o for o in everything if not o.hostile]
    ok = [o for o in outcomes if o.status == 200]
    latencies = [o.seconds * 1000 for o in ok]
    overheads = [o.overhead_ms for o in ok]
    in_service = [o.total_ms - o.retrieve_ms - o.llm_ms for o in ok]
    return {
        "concurrency": concurrency,
        "requests": len(outcomes),
        "errors": len(outcomes) - len(ok),
        "busy_503": sum(1 for o in outcomes if o.status == 503),
        "timeouts_504": sum(1 for o in outcomes if o.status == 504),
        "attacks": len(attacks),
        "attacks_5xx": sum(1 for o in attacks if o.status >= 500 or o.status == 0),
        "throughput_rps": len(everything) / wall,
        "latency_p50_ms": statistics.median(latencies) if latencies else 0.0,
        "latency_p99_ms": percentile(latencies, 0.99),
        "overhead_p50_ms": statistics.median(overheads) if overheads else 0.0,
        "overhead_p99_ms": percentile(overheads, 0.99),
        "pipeline_overhead_p50_ms": statistics.median(in_service) if in_service else 0.0,
        "solr_p50_ms": statistics.median(o.retrieve_ms for o in ok) if ok else 0.0,
        "llm_p50_ms": statistics.median(o.llm_ms for o in ok) if ok else 0.0,
        "llm_calls_mean": statistics.fmean(o.llm_calls for o in ok) if ok else 0.0,
        "cache_p50_ms": statistics.median(o.cache_ms for o in ok) if ok else 0.0,
        "cached_share": sum(o.cached for o in ok) / len(ok) if ok else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--latency", type=float, default=0.1, help="LLM latency in seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--requests", type=int, default=400, help="requests per level (max)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="service worker processes to compare"
    )
    parser.add_argument(
        "--nodes",
        type=int,
        nargs="+",
        default=[1],
        help="Solr nodes to compare (a local cluster each; FileShare in one shard, a replica "
        "on every node: replicas are what spread reads)",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a rag.properties key"
    )
    parser.add_argument(
        "--hostile", type=float, default=0.0, help="share of requests that attack (0.1: 10%%)"
    )
    parser.add_argument(
        "--cache", action="store_true", help="the answer cache on: misses and hits side by side"
    )
    parser.add_argument(
        "--embedded",
        choices=sorted(packaged.MODELS),
        help="the LLM: llama.cpp serving this packaged model (as make run does), not the "
        "fixed-latency test server",
    )
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.set)
    if args.solr_url and args.nodes != [1]:
        parser.error("--nodes starts local clusters; it cannot be used with --solr-url")

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as folder:
        llm_port = free_port()
        llm_url = f"http://127.0.0.1:{llm_port}"
        llm = [sys.executable, "-m", "testing.llm_server", "--port", str(llm_port)]
        # servers of their own, not threads here: the load generator would steal their CPU
        if args.hostile:  # the slow-stream attacker's questions are slow; keys name callers
            llm += ["--slow-word", SLOW_WORD, "--slow-delay", "5"]
            overrides |= {
                "api.keys": ",".join([*NORMAL_KEYS, ATTACKER_KEY, SCHEMA_ATTACKER_KEY]),
                "llm.max.concurrent.per.caller": "32",  # the shipped default
            }
        servers = []
        embedded = contextlib.ExitStack()
        if args.embedded:  # llama.cpp serving a packaged model: admission on (llm.admission)
            path = packaged.assemble(packaged.MODELS[args.embedded])
            llama = embedded.enter_context(
                llama_server(
                    path, Path(folder) / "llama.log", context_tokens=packaged.CONTEXT_TOKENS
                )
            )
            llm_url = llama.url.removesuffix("/").removesuffix("/v1")
            overrides |= {"llm.model": args.embedded}
        else:
            servers.append(start_server(
                [*llm, "--delay", str(args.latency)], f"{llm_url}/health", what="LLM", env=QUIET
            ))  # fmt: skip
        try:
            if args.cache:
                models_port = free_port()
                models = [sys.executable, "-m", "service.models", "--port", str(models_port)]
                models_url = f"http://127.0.0.1:{models_port}"
                servers.append(
                    start_server(models, f"{models_url}/health", what="model server", env=QUIET)
                )
                overrides |= {
                    "cache.enabled": "true",
                    "ai.embeddings.endpoint": f"{models_url}/v1/",
                }
            modes = ("miss", "hit") if args.cache else ("-",)
            for nodes in args.nodes:
                with solr_for(args.solr_url, nodes, Path(folder) / f"solr-{nodes}") as solr_urls:
                    print(f"{nodes} Solr node(s): indexed {index_corpus(solr_urls[0])} documents")
                    for workers in args.workers:
                        setup = Setup(solr_urls, llm_url, Path(folder), workers, overrides)
                        rows += run_setup(
                            setup, args.concurrency, args.requests, args.hostile, modes
                        )
        finally:
            for server in servers:
                stop_group(server, timeout=30)
            embedded.close()

    settings = ", ".join(args.set) or "shipped defaults, stuff chain"
    if args.embedded:
        settings += f"; the LLM: {args.embedded} on llama.cpp (LLM latency: its own)"
    hostile = f"; {args.hostile:.0%} of requests attack" if args.hostile else ""
    print(f"\nLLM latency {args.latency * 1000:.0f} ms; {settings}{hostile}; times in ms")
    print(
        f"{'nodes':>5} {'workers':>7} {'cache':>5} {'clients':>7} {'requests':>8} {'errors':>6} "
        f"{'attacks':>7} "
        f"{'5xx':>4} {'req/s':>6} {'p50':>7} {'p99':>7} "
        f"{'Solr p50':>8} {'LLM p50':>7} {'overhead p50':>12} {'overhead p99':>12} "
        f"{'CPU/req':>7} {'LLM calls':>9} {'cache p50':>9} {'cached':>6} {'503':>4} {'504':>4}"
    )
    for row in rows:
        print(
            f"{row['nodes']:>5} {row['workers']:>7} {row['cache']:>5} {row['concurrency']:>7} "
            f"{row['requests']:>8} "
            f"{row['errors']:>6} {row['attacks']:>7} {row['attacks_5xx']:>4} "
            f"{row['throughput_rps']:>6.1f} {row['latency_p50_ms']:>7.1f} "
            f"{row['latency_p99_ms']:>7.1f} {row['solr_p50_ms']:>8.1f} {row['llm_p50_ms']:>7.1f} "
            f"{row['overhead_p50_ms']:>12.1f} {row['overhead_p99_ms']:>12.1f} "
            f"{row['service_cpu_ms_per_request']:>7.2f} {row['llm_calls_mean']:>9.1f} "
            f"{row['cache_p50_ms']:>9.1f} {row['cached_share']:>6.0%} "
            f"{row['busy_503']:>4} {row['timeouts_504']:>4}"
        )
    save_results("load", rows)
    return 1 if any(row["errors"] or row["attacks_5xx"] for row in rows) else 0


QUIET = {**os.environ, "LOG_LEVEL": "WARNING"}


@dataclass(frozen=True)
class Setup:
    solr_urls: list[str]
    llm_url: str
    folder: Path
    workers: int
    overrides: dict[str, str]


@contextmanager
def solr_for(given: str | None, nodes: int, folder: Path) -> Iterator[list[str]]:
    """The node URLs of the Solr given, or of a local one of `nodes` nodes started for it."""
    if given:
        yield [given]
        return
    with local_solr(folder, nodes=nodes, replicas=nodes) as solr:
        yield solr.urls


def run_setup(
    setup: Setup, levels: list[int], most: int, hostile: float, modes: tuple[str, ...] = ("-",)
) -> list[dict[str, float]]:
    """Every concurrency level (in each cache mode) against the service with `setup.workers`
    processes."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = service_command(
        ",".join(setup.solr_urls), setup.llm_url, setup.folder, port, setup.overrides
    )
    command += ["--workers", str(setup.workers)]
    server = start_server(command, f"{base}/health/live", what="service", env=QUIET)
    rows = []
    try:
        for concurrency, mode in itertools.product(levels, modes):
            requests = min(most, max(concurrency * 2, 100))
            print(
                f"{len(setup.solr_urls)} node(s), {setup.workers} worker(s), {concurrency} "
                f"concurrent, cache {mode}: {requests} requests...",
                flush=True,
            )
            cpu_before = tree_cpu_seconds(server.pid)
            outcomes, wall = asyncio.run(run_level(base, concurrency, requests, hostile, mode))
            cpu = tree_cpu_seconds(server.pid) - cpu_before
            row = summarize(concurrency, outcomes, wall)
            row.update(
                nodes=len(setup.solr_urls),
                workers=setup.workers,
                cache=mode,
                # warm-up requests included: CPU per request served in the measured window
                service_cpu_ms_per_request=cpu * 1000 / (len(outcomes) + WARM_UP),
            )
            rows.append(row)
    finally:
        stop_group(server, timeout=30)
    return rows


if __name__ == "__main__":
    sys.exit(main())

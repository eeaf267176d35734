"""The keep-alive race: an upstream (uvicorn here, as vLLM's and the model server's; llama.cpp's
and Node's close idle connections after 5 s too) answers bursts of requests whose connections
idle about its keep-alive timeout between them. Counts what the service's wire
(service.transport) gets: answers, and failures it would report as the upstream unreachable.

    python -m bench.keepalive [--wire PATH] [--rounds 12] [--burst 40]

--wire: another transport.py to compare (e.g. `git show REV:service/transport.py > old.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

from fastapi import FastAPI

from bench.support import save_results
from testing.servers import serve_in_thread

KEEP_ALIVE = 5.0  # uvicorn's default timeout_keep_alive, which the upstream runs with


def wire(path: str | None) -> ModuleType:
    if path is None:
        import service.transport

        return service.transport
    spec = importlib.util.spec_from_file_location("compared_transport", Path(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upstream() -> FastAPI:
    app = FastAPI()
    app.get("/health")(lambda: {})
    app.post("/v1/embeddings")(lambda: {"data": []})
    return app


async def bursts(module: ModuleType, base: str, rounds: int, burst: int) -> Counter[str]:
    seen: Counter[str] = Counter()
    async with module.upstream_pool() as http:
        for number in range(rounds):
            sent = [http.post(f"{base}/v1/embeddings", content=b"{}") for _ in range(burst)]
            for result in await asyncio.gather(*sent, return_exceptions=True):
                failed = isinstance(result, Exception)
                seen[type(result).__name__ if failed else "answered"] += 1
            # the idle time: about the upstream's keep-alive timeout, on either side of it
            await asyncio.sleep(KEEP_ALIVE - 0.05 + (number % 4) * 0.02)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wire", help="another transport.py to compare")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--burst", type=int, default=40)
    options = parser.parse_args()
    with serve_in_thread(upstream()) as base:
        seen = asyncio.run(bursts(wire(options.wire), base, options.rounds, options.burst))
    print(f"{options.wire or 'service/transport.py'}: {dict(seen)}")
    save_results("keepalive", {"wire": options.wire, "seen": dict(seen)})


if __name__ == "__main__":
    main()

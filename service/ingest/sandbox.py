"""Uploaded files are extracted in a worker process: off the event loop, bounded in memory and
in time, so one hostile file (a zip bomb, a PDF whose streams inflate to gigabytes) can stall or
starve neither the other requests nor the service.

    >>> extractor = Extractor()
    >>> document = await extractor.run(extract_bytes, name, data, document_id=..., language=...)

The worker's address space is capped (`RLIMIT_AS`): a file that needs more fails there with a
MemoryError, reported as too large; a file that takes longer than `timeout` has its worker
killed and replaced. Either way the service process is untouched.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import resource
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from service.errors import PayloadTooLarge, TechnicalError

log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY_LIMIT = 1 << 30  # bytes of address space one worker may map
TIMEOUT_SECONDS = 60.0
# a new worker's start (a Python process and its imports: seconds on a loaded box) is awaited
# before a file's time starts, up to this long
START_SECONDS = 120.0


def _cap_memory(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class Extractor:
    """A small pool of worker processes (`workers` files at once; more wait their turn)."""

    def __init__(
        self,
        *,
        workers: int = 1,
        memory_limit: int = MEMORY_LIMIT,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        self._workers = workers
        self._memory_limit = memory_limit
        self.timeout = timeout
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._started: concurrent.futures.Future[None] | None = None  # the pool's first call

    async def run(self, function: Callable[..., T], name: str, *args: Any, **kwargs: Any) -> T:
        """`function(name, *args, **kwargs)` in a worker; its own exceptions come back as they
        are raised. PayloadTooLarge when it needs more memory than the worker may have;
        TechnicalError when it runs out of time or the worker dies."""
        pool = await self._started_pool()
        future = pool.submit(function, name, *args, **kwargs)
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.wrap_future(future)
        except MemoryError:
            raise PayloadTooLarge(
                f"{name}: extracting its text needs more than {self._memory_limit >> 20} MB"
            ) from None
        except TimeoutError:
            self._restart(f"{name} took longer than {self.timeout:g}s")
            raise TechnicalError(
                f"{name}: extracting its text took longer than {self.timeout:g}s"
            ) from None
        except BrokenProcessPool:
            self._restart(f"the worker died on {name}")
            raise TechnicalError(f"{name}: the extraction worker died on this file") from None

    def close(self) -> None:
        pool, self._pool, self._started = self._pool, None, None
        if pool is not None:
            _kill(pool)

    async def _started_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        """The pool, its first worker started: a file's time is its extraction's alone (on a
        loaded box the worker that replaced a stopped one took more than a 3 s limit to start,
        and the next file was stopped for it)."""
        if self._pool is None or self._started is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self._workers,
                # spawn: a fork of a process with threads (the event loop's) may deadlock
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_cap_memory,
                initargs=(self._memory_limit,),
            )
            self._started = self._pool.submit(_started)
        pool = self._pool
        try:  # every caller waits for the same start; one called off calls off none
            started = asyncio.shield(asyncio.wrap_future(self._started))
            async with asyncio.timeout(START_SECONDS):
                await started
        except (TimeoutError, BrokenProcessPool):
            if self._pool is pool:
                self._restart("its worker did not start")
            raise TechnicalError(
                f"the extraction worker did not start within {START_SECONDS:g}s"
            ) from None
        return pool

    def _restart(self, why: str) -> None:
        log.warning("extraction worker replaced: %s", why)
        self.close()


def _started() -> None:
    """A worker's first call: nothing, once it runs."""


def _kill(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Ends the pool at once, a worker still busy included (shutdown alone would wait)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.join(timeout=5)

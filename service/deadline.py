"""The time one request has left, shared by all of its stages (`request.timeout`).

Per-call timeouts bound each Solr or LLM call; this bounds their sum, so a map-reduce of many
slow calls or a stream that never ends still finishes in time, with a clear 504.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from service.errors import UpstreamTimeout

T = TypeVar("T")


class Deadline:
    """The seconds one request has left, for every stage it runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._expires = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(self._expires - time.monotonic(), 0.0)

    async def run(self, awaitable: Awaitable[T]) -> T:
        """The awaitable's result, or UpstreamTimeout once the deadline has passed."""
        try:
            async with asyncio.timeout(self.remaining()):
                return await awaitable
        except TimeoutError:
            raise self._expired() from None

    async def stream(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """The items, as long as the deadline allows."""
        while True:
            try:
                item = await self.run(anext(items))
            except StopAsyncIteration:
                return
            yield item

    def _expired(self) -> UpstreamTimeout:
        return UpstreamTimeout(
            f"the answer took longer than request.timeout = {self.seconds:g}s; raise it in "
            "rag.properties, or use a faster model or fewer, smaller chunks"
        )

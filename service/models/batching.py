"""Concurrent embedding requests encoded together: the model server's micro-batching.

A request that finds the encoder idle is encoded at once (no waiting window, so one client
is no slower); requests that arrive while a batch is being encoded wait for it, then go
together in the next batch (at most `max_texts` texts). A small batch costs the encoder
less per text than texts one by one; a large one costs more (padding, and every request of it
waits for the slowest): on 2 cores, batches of up to 8 gave 1.4x the throughput at 50
clients, batches of 64 two thirds of it (bench/RESULTS.md).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import numpy as np

# the texts of one batch, encoded in a worker thread: their vectors and token counts
Encode = Callable[[list[str]], tuple[np.ndarray, list[int]]]
Waiting = tuple[list[str], "asyncio.Future[tuple[np.ndarray, list[int]]]"]


class MicroBatcher:
    """`await batcher.encode(texts)` -> (vectors, token counts) of these texts, encoded with
    whatever other requests are waiting."""

    def __init__(self, encode: Encode, *, max_texts: int = 8) -> None:
        self._encode = encode
        self._max_texts = max_texts
        self._waiting: deque[Waiting] = deque()
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0  # encoder runs, for tests and metrics

    async def encode(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        future: asyncio.Future[tuple[np.ndarray, list[int]]] = (
            asyncio.get_running_loop().create_future()
        )
        self._waiting.append((texts, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())
        return await future

    async def _work(self) -> None:
        while self._waiting:
            batch = self._next_batch()
            texts = [text for item, _ in batch for text in item]
            self.batches += 1
            try:
                vectors, tokens = await asyncio.to_thread(self._encode, texts)
            except Exception as error:  # every request of the batch gets the failure
                for _, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            start = 0
            for item, future in batch:
                end = start + len(item)
                if not future.done():  # a request whose client left is cancelled
                    future.set_result((vectors[start:end], tokens[start:end]))
                start = end

    def _next_batch(self) -> list[Waiting]:
        """The requests waiting longest, up to `max_texts` texts (one request at least)."""
        batch: list[Waiting] = []
        count = 0
        while self._waiting and (not batch or count + len(self._waiting[0][0]) <= self._max_texts):
            item = self._waiting.popleft()
            if item[1].done():  # cancelled while waiting
                continue
            batch.append(item)
            count += len(item[0])
        return batch

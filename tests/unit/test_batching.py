"""The model server's micro-batching: concurrent requests encoded together, each given its
own vectors back, one client never kept waiting."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from service.models.batching import MicroBatcher


class Recorder:
    """An encoder that takes `seconds` a run and says which texts each run got."""

    def __init__(self, seconds: float = 0.05) -> None:
        self.seconds = seconds
        self.runs: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        with self.lock:
            self.runs.append(list(texts))
        time.sleep(self.seconds)
        vectors = np.array([[float(len(text)), float(hash(text) % 97)] for text in texts])
        return vectors, [len(text.split()) for text in texts]


async def test_one_request_alone_is_a_batch_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """No collection window: a lone request is encoded as it comes, in one run; the batcher
    never sleeps to gather others (asserted by what it calls, not by seconds: a time bound
    here failed on busy machines).

    A wait is a timer on the test's own event loop: `asyncio.sleep`, `wait_for` and
    `asyncio.timeout` each set one with `loop.call_at` (`call_later` goes through it), so the
    timers are noted on that loop object alone. Patching the module-wide `asyncio.sleep`
    instead reached every thread of the run: the suite's servers, whose loops then spun without
    ever yielding, grew the process to 22 GB on a slow CI box until the kernel killed it."""
    loop = asyncio.get_running_loop()
    real_call_at, waits = loop.call_at, []

    def noting(when: float, callback: Callable[..., object], *args: object, **kwargs: object):
        waits.append(when - loop.time())
        return real_call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", noting)
    encoder = Recorder(seconds=0)
    batcher = MicroBatcher(encoder)
    vectors, tokens = await batcher.encode(["a lone question"])
    assert waits == [], "the batcher waited to gather requests"
    assert batcher.batches == 1
    assert encoder.runs == [["a lone question"]] and tokens == [3] and vectors.shape == (1, 2)


async def test_concurrent_requests_share_batches_and_get_their_own_vectors() -> None:
    encoder = Recorder()
    batcher = MicroBatcher(encoder, max_texts=16)
    texts = [[f"question number {n}"] for n in range(40)]
    results = await asyncio.gather(*(batcher.encode(t) for t in texts))
    assert len(encoder.runs) < 10  # not 40 runs
    assert max(len(run) for run in encoder.runs) <= 16
    for (vectors, tokens), asked in zip(results, texts, strict=True):
        assert vectors.shape == (1, 2) and vectors[0][0] == len(asked[0]) and tokens == [3]


async def test_a_failed_batch_fails_its_requests_only_and_the_next_works() -> None:
    calls = {"n": 0}

    def flaky(texts: list[str]) -> tuple[np.ndarray, list[int]]:
        calls["n"] += 1
        time.sleep(0.02)
        if calls["n"] == 1:
            raise RuntimeError("the model fell over")
        return np.zeros((len(texts), 2)), [1] * len(texts)

    batcher = MicroBatcher(flaky)
    first = asyncio.create_task(batcher.encode(["one"]))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="fell over"):
        await first
    vectors, _ = await batcher.encode(["two"])
    assert vectors.shape == (1, 2)


async def test_a_cancelled_request_is_left_out() -> None:
    encoder = Recorder()
    batcher = MicroBatcher(encoder)
    busy = asyncio.create_task(batcher.encode(["first"]))
    await asyncio.sleep(0.01)  # "first" is being encoded
    left = asyncio.create_task(batcher.encode(["left"]))
    stays = asyncio.create_task(batcher.encode(["stays"]))
    await asyncio.sleep(0)
    left.cancel()
    await busy
    await stays
    assert ["stays"] in encoder.runs and all("left" not in run for run in encoder.runs)

"""Work asked once for the callers that need it at the same time, and tasks left behind.

`Flights` keeps, per key, the task under way: a second caller of the same key waits for it
rather than sending its own request (the schema's reading, a scope's count). A caller that
gives up (its deadline) leaves the task to the others. `left_behind` takes the failure of a
task nobody may ask for any more, so that it is not logged as "never retrieved".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from functools import partial
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Flights(Generic[K, T]):
    """The tasks under way, by key."""

    def __init__(self) -> None:
        self._under_way: dict[K, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        return len(self._under_way)

    async def join(self, key: K, work: Callable[[], Awaitable[T]]) -> T:
        """`work()`'s result: the task under way for `key` (on this event loop), else a new
        one. A `work()` that joins its own key waits for itself: it must not."""
        task = self._under_way.get(key)
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            # a task of a loop closed before it ended never lands: forgotten here
            self._under_way = {
                k: t for k, t in self._under_way.items() if not t.get_loop().is_closed()
            }
            task = asyncio.ensure_future(work())
            self._under_way[key] = task
            task.add_done_callback(partial(self._landed, key))
        return await asyncio.shield(task)

    def _landed(self, key: K, task: asyncio.Future[T]) -> None:
        if self._under_way.get(key) is task:
            del self._under_way[key]
        left_behind(task)


def left_behind(task: asyncio.Future[object]) -> None:
    """A done task's failure taken: its callers were told, or none is left to be."""
    if not task.cancelled():
        task.exception()

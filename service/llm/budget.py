"""How many LLM calls one request may still make (`llm.max.calls.per.request`).

What a client sends must cost a bounded amount of work: the chains plan their requests within
this budget before the first call, and every call spends from it, so a plan that was wrong
still cannot run past the limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from service.errors import TooManyCalls


class CallBudget:
    """>>> calls = CallBudget(16); calls.spend(); calls.left  # 15"""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        # calls kept for the end of the request: the answer's, and the verification's before
        # it (the pipeline sets it from its stages' `calls_kept`)
        self.kept = 1

    @classmethod
    def unlimited(cls) -> CallBudget:
        """For one-off clients outside a request (the CLI, benchmarks)."""
        return cls(2**31)

    @property
    def left(self) -> int:
        return self.limit - self.used

    @property
    def spare(self) -> int:
        """What a stage before the answer may still spend: what is left past the kept calls."""
        return self.left - self.kept

    @contextmanager
    def reserving(self, count: int) -> Iterator[None]:
        """The budget `count` calls smaller while the block runs: work that plans with what is
        left (a synthesis's summaries) leaves them for what follows (its final request)."""
        self.limit -= count
        try:
            yield
        finally:
            self.limit += count

    def spend(self) -> None:
        """Counts one call; raises TooManyCalls when none is left."""
        if self.used >= self.limit:
            raise TooManyCalls(
                f"answering needs more than llm.max.calls.per.request = {self.limit} LLM calls"
            )
        self.used += 1

"""A circuit breaker per upstream API, so a dead LLM is not hammered by every request.

Closed: calls go through. After `threshold` failed calls in a row (each already retried by the
client), it opens: calls fail at once, without touching the network, for `cooldown` seconds.
Then it is half-open: one trial call goes through; its success closes the breaker, its
failure opens it again for another cooldown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from service.errors import UpstreamUnavailable

State = Literal["closed", "open", "half-open"]


class CircuitBreaker:
    """Pauses calls to an upstream API that keeps being unavailable."""

    def __init__(
        self,
        threshold: int,
        cooldown: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_started: float | None = None

    @classmethod
    def off(cls) -> CircuitBreaker:
        """A breaker that never opens (llm.circuit.failures = 0, one-off clients)."""
        return cls(0, 1.0)

    @property
    def state(self) -> State:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.cooldown:
            return "open"
        return "half-open"

    def before_call(self, where: str) -> None:
        """Raises UpstreamUnavailable while the breaker is open, or while a trial is out."""
        state = self.state
        if state == "closed":
            return
        now = self._clock()
        trial_out = self._trial_started is not None and now - self._trial_started < self.cooldown
        if state == "half-open" and not trial_out:
            self._trial_started = now
            return
        assert self._opened_at is not None
        wait = max(self._opened_at + self.cooldown - now, 0.0)
        raise UpstreamUnavailable(
            f"{where} failed {self._failures} times in a row; calls to it are paused "
            f"(circuit breaker, llm.circuit.failures), next trial in {wait:.0f}s"
        )

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._trial_started = None

    def record_failure(self) -> None:
        self._failures += 1
        self._trial_started = None
        if self.threshold and (self._failures >= self.threshold or self._opened_at is not None):
            self._opened_at = self._clock()

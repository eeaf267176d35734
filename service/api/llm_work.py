"""What one caller's questions may take of what every caller shares (the LLM's connection
pool, its circuit breaker, the workers' time): the counters the door keeps
(service.api.door), and an ASGI middleware around the endpoints that call the LLM.

- Callers: each caller's questions in progress in this worker (HTTP requests, whose streams
  count until their last byte, and WebSocket turns: one count), for
  `llm.max.concurrent.per.caller`; the next one is a 429 with Retry-After, at once, so one
  client opening 200 slow streams cannot take the pool from the others.
- LlmPace: the questions in progress and the rate the LLM has been answering them, for
  `llm.admission` (a question it could not answer within `request.timeout` is a 503 with
  Retry-After at once, rather than a 504 after the whole deadline); `refusal` weighs it with
  what the LLM itself reports of its queue (service.llm.queue.LlmLoad: other workers' and
  replicas' questions included).
- CancelOnDisconnect: when the client leaves before its answer is sent, the request's work
  (Solr, the LLM call) is cancelled instead of running on for nobody; it is logged as 499.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import CallerOverLimit
from service.llm.queue import LlmLoad
from service.observability import Work

# the endpoints whose requests call the LLM (after DatafariPaths has rewritten its aliases)
LLM_PATHS = (
    "/ai/rag",
    "/ai/summarize",
    "/ai",
    "/ai/stream",
    "/ai/agentic",
    "/ai/7/rag",
    "/ai/7/summarize",
    "/v1/chat/completions",
    "/search/select",
    "/mcp",
)
RETRY_AFTER_SECONDS = 2
# the LLM's pace: completions per second of busy time, over about this much recent busy time
PACE_SECONDS = 120.0
MIN_ANSWERED = 3  # questions answered before the pace is trusted (admitted freely till then)
ALWAYS_ADMITTED = 2  # questions in progress never refused: one behind another is no queue
DEADLINE_SHARE = 0.8  # a question must expect its answer within this part of request.timeout
# questions admitted at once before any pace is known: a cold LLM given 32 at once answered
# none in time (issue 81); what it has answered (or not, in time) soon tells more
COLD_ADMITTED = ALWAYS_ADMITTED
COLD_RETRY_AFTER_SECONDS = 5
_NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def calls_the_llm(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["path"] in LLM_PATHS


class Callers(Counter[str]):
    """Each caller's questions in progress in this worker: the HTTP requests the middleware
    counts and the WebSocket turns (service.api.ai_ws), one count."""

    @contextmanager
    def asking(self, caller: str, cap: int) -> Iterator[None]:
        """One more question of `caller` while the block runs; CallerOverLimit at once when
        it has `cap` already (0: no cap)."""
        if cap and self[caller] >= cap:
            raise CallerOverLimit(
                f"{self[caller]} of this caller's questions are being answered, the "
                f"most llm.max.concurrent.per.caller allows ({cap}); retry after one ends",
                retry_after=RETRY_AFTER_SECONDS,
            )
        self[caller] += 1
        try:
            yield
        finally:
            self[caller] -= 1
            if not self[caller]:
                del self[caller]


class CancelOnDisconnect:
    """ASGI middleware: a request to an LLM endpoint is cancelled when its client leaves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not calls_the_llm(scope):
            await self.app(scope, receive, send)
            return
        left = anyio.Event()
        early: list[Message] = []  # what the watcher read before the app asked for it
        watching = False

        try:
            async with anyio.create_task_group() as tasks:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            scope.setdefault("state", {})["client_left"] = True
                            left.set()
                            tasks.cancel_scope.cancel()
                            return
                        early.append(message)

                def start_watching() -> None:
                    nonlocal watching
                    watching = True
                    tasks.start_soon(watch)

                async def app_receive() -> Message:
                    if watching:
                        if early:
                            return early.pop(0)
                        await left.wait()
                        return {"type": "http.disconnect"}
                    message = await receive()
                    if message["type"] == "http.request" and not message.get("more_body", False):
                        start_watching()  # the body is read: what comes next is the disconnect
                    return message

                if scope["method"] in _NO_BODY:
                    start_watching()
                await self.app(scope, app_receive, send)
                tasks.cancel_scope.cancel()  # answered: stop watching
        except BaseExceptionGroup as group:  # the task group wraps what the app raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise


@dataclass
class LlmPace:
    """How many questions are in progress, and the rate at which they have been answered
    while at least one was (completions per busy second, older ones weighing less): Little's
    law then says how long a new one would wait."""

    in_progress: int = 0
    completed: int = 0  # questions answered since the start
    answered: float = 0.0  # completions, decayed
    busy: float = 0.0  # seconds with a question in progress, decayed
    since: float = field(default_factory=time.monotonic)
    calls: float = 0.0  # the LLM calls of the completions, decayed

    def calls_per_question(self) -> float:
        return max(1.0, self.calls / self.answered) if self.answered > 0 else 1.0

    def expected_seconds(self) -> float | None:
        """How long a question admitted now should take to be answered; None until enough
        questions were answered to know the pace."""
        self._advance()
        if self.completed < MIN_ANSWERED or self.busy <= 0:
            return None
        return (self.in_progress + 1) * self.busy / self.answered

    @contextmanager
    def admitted(self, work: Work) -> Iterator[None]:
        """One question in progress while the block runs; answered when it called the LLM
        (one that did not, a search, says nothing of the LLM's pace)."""
        self._advance()
        self.in_progress += 1
        try:
            yield
        finally:
            self._advance()
            self.in_progress -= 1
            if work.llm_calls:
                self.completed += 1
                self.answered += 1
                self.calls += work.llm_calls

    def _advance(self) -> None:
        now = time.monotonic()
        elapsed, self.since = now - self.since, now
        if self.in_progress and elapsed > 0:
            decay = math.exp(-elapsed / PACE_SECONDS)
            self.answered *= decay
            self.calls *= decay
            self.busy = self.busy * decay + elapsed


@dataclass(frozen=True)
class Refusal:
    """Why a question is refused (LlmBusy: a 503), and when to ask again."""

    reason: str
    retry_after: int


def refusal(pace: LlmPace, load: LlmLoad | None, deadline: float) -> Refusal | None:
    """Why one more question would not be answered within `deadline` seconds, or None.

    Its wait: the questions ahead of it (the calls the LLM reports in progress and waiting,
    from every worker and replica, and this worker's questions yet to reach it) times
    the LLM's seconds per question (its seconds per call, as parallel as it delivered them,
    times a question's calls; else this worker's own pace). Before any pace is known, at most
    COLD_ADMITTED questions are ahead of an admitted one, or it is this worker's only one."""
    mine = pace.in_progress
    at_llm = load.ahead() if load else 0  # calls, this worker's in flight included
    sent = load.in_flight if load else 0  # this worker's
    per_call = load.seconds_per_call() if load else None
    own = pace.expected_seconds()
    if own is None and per_call is None:
        ahead = mine + max(0, at_llm - sent)  # this worker's questions and others' calls
        # one question at a time is always tried: else a worker started beside a busy shared
        # LLM would refuse every question, never measure a call, and stay cold for good
        if ahead < COLD_ADMITTED or mine == 0:
            return None
        return Refusal(
            f"the LLM is answering {ahead} questions and has not answered enough yet for its "
            f"pace to be known: no more than {COLD_ADMITTED} are admitted until then; retry "
            "shortly",
            COLD_RETRY_AFTER_SECONDS,
        )
    calls = pace.calls_per_question()
    each = per_call * calls if per_call is not None else (own or 0.0) / (mine + 1)
    # the questions at the LLM, everyone's, and this worker's yet to reach it
    ahead_q = max(float(mine), at_llm / calls + max(0.0, mine - sent / calls))
    expected = max((ahead_q + 1) * each, own or 0.0)
    if ahead_q < ALWAYS_ADMITTED or expected <= deadline * DEADLINE_SHARE:
        return None
    return Refusal(
        f"the LLM is answering {round(ahead_q)} questions ({mine} of them this worker's), "
        f"about one every {each:.1f}s: a new one would wait about {expected:.0f}s, past the "
        f"{deadline:g}s that request.timeout and llm.timeout.read leave; retry shortly",
        max(1, min(60, math.ceil(each))),
    )

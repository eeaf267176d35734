"""The loop every request goes through: its stages in order, each timed, within the request's
deadline and its LLM call budget.

    >>> pipeline = rag_pipeline(snapshot)        # service.rag.assemble: the stages in force
    >>> reply = await pipeline.run(query)        # everything up to the final LLM request
    >>> answer = await reply.complete()

Errors found by the stages (bad input, nothing found, Solr down) come before any answer is sent.
Each stage is a span of the question's trace when tracing is on (service.tracing): here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from service import tracing
from service.config import Settings
from service.deadline import Deadline
from service.llm import ChatClient
from service.rag.reply import Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.stages import RagState, Stage, SummaryState

Q = TypeVar("Q", RagQuery, SummarizeQuery)
Progress = Callable[[str], None]  # told the name of each stage as it begins
S = TypeVar("S", RagState, SummaryState)


class Pipeline(Generic[Q, S]):
    """`begin` turns the request into its state (or raises: feature off, empty question); then
    each stage the request wants runs, timed under its name, and its typed result is written
    into the state (`State.take`). A stage that calls the LLM is skipped when the request's
    budget has only the calls the stages after it keep left (each stage's `calls_kept`: the
    verification's, the answer's). The stage that makes the Reply (a chain, or a cached
    answer) ends the loop."""

    def __init__(
        self,
        settings: Settings,
        llm: ChatClient,
        begin: Callable[[Q], S],
        stages: Sequence[Stage[S]],
    ) -> None:
        self.settings = settings
        self.stages = tuple(stages)
        self._llm = llm
        self._begin = begin

    @property
    def model(self) -> str:
        """The model the answers come from (the request's, or llm.model)."""
        return self._llm.options.model

    async def run(
        self, query: Q, progress: Progress | None = None, deadline: Deadline | None = None
    ) -> Reply:
        """The request's one way in: everything up to the final LLM request, within the
        request's deadline (a new one, or what is left of the `deadline` of the work this
        request is part of: an agent's), which the returned Reply keeps for that last request.
        `progress` is told each stage's name as it begins (a stream shows the steps)."""
        deadline = deadline or Deadline(self.settings.server.request_timeout)
        state = self._begin(query)
        reply = await deadline.run(self._loop(state, progress))
        reply.deadline = deadline
        return reply

    async def _loop(self, state: S, progress: Progress | None) -> Reply:
        calls = self._llm.calls
        for at, stage in enumerate(self.stages):
            # the calls the stages after this one make (the verification's, the answer's)
            # are kept for them; one is always kept for the answer
            calls.kept = max(1, sum(calls_kept(later, state) for later in self.stages[at + 1 :]))
            if stage.calls_llm and calls.spare <= 0:
                continue
            if not stage.wanted(state):
                continue
            if progress is not None:
                progress(stage.name)
            with tracing.stage(stage.name), state.timings.stage(stage.name):
                result = await stage.run(state)
            if isinstance(result, Reply):
                return result
            state.take(result)
        names = ", ".join(stage.name for stage in self.stages)
        raise RuntimeError(f"no stage made the reply ({names}): the last must be a chain")


def calls_kept(stage: object, state: object) -> int:
    """The LLM calls earlier stages must leave `stage`: its `keeps(state)` when it knows from
    the request whether it will run (Verify: never for a caller's JSON), else its
    `calls_kept`; none when it says nothing."""
    keeps = getattr(stage, "keeps", None)
    kept = keeps(state) if callable(keeps) else getattr(stage, "calls_kept", 0)
    return kept if isinstance(kept, int) else 0

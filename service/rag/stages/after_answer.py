"""AfterAnswer: the answer stages of a question's answer, which the Reply runs once the answer's
text is known, in this order:

    confidence (Doubt) -> echo (RefuseEcho) -> grounding (Ground) -> cache_write (KeepAnswer)

The model's own doubt and the echo check come first, cheap and deterministic, so that grounding
and the answer cache see an abstention, never the answer it replaced. `service.rag.assemble`
builds it once from the settings; Chain asks it for a request's stages."""

from __future__ import annotations

from dataclasses import dataclass

from service.cache import AnswerCache
from service.chains import ChainResult
from service.chains.result import source_texts
from service.grounding import GroundingPolicy
from service.rag.honesty import Honesty
from service.rag.reply import AnswerStage
from service.rag.stages.again import AskAgain
from service.rag.stages.confidence import Doubt
from service.rag.stages.echo import RefuseEcho
from service.rag.stages.ground import Ground, GroundHold
from service.rag.stages.keep_answer import KeepAnswer
from service.rag.stages.state import RagState


@dataclass(frozen=True)
class Judged:
    """What judges one answer as it is written and once it is whole: the model's doubt, the
    echo check (None: grounding.echo off, or no text asked to check), and the grounding
    check's hold (None: grounding.enabled off)."""

    doubt: Doubt
    echo: RefuseEcho | None = None
    grounding: GroundHold | None = None


@dataclass(frozen=True)
class AfterAnswer:
    """The answer stages in force (the module's docstring), built once from the settings."""

    honesty: Honesty
    grounding: GroundingPolicy | None = None  # grounding.enabled
    cache: AnswerCache | None = None  # the answer cache, where a new answer is kept

    def judged(self, state: RagState, result: ChainResult, again: AskAgain | None = None) -> Judged:
        """The doubt of the answer to `state`'s question (the verification's probability of
        yes read from the state), and its echo check unless the answer is not asked for (with
        `again`, an echo's second chance, when grounding.echo.again)."""
        honesty = self.honesty
        not_found = state.question.not_found
        doubt = Doubt(
            not_found,
            honesty.abstain_not_found,
            state.supported,
            honesty.abstain_unsupported,
            state.beside,
        )
        if doubt.unsupported():  # not asked: no text to check
            return Judged(doubt)
        policy = self.grounding
        hold = (
            None if policy is None else GroundHold(source_texts(result.sources), policy.min_overlap)
        )
        if not honesty.echo:
            return Judged(doubt, grounding=hold)
        again = again if honesty.again else None
        echo = RefuseEcho.of(state.query.query, result, not_found, again, honesty.abstain_not_found)
        return Judged(doubt, echo, hold)

    def stages(self, state: RagState, judged: Judged | None) -> tuple[AnswerStage, ...]:
        """The answer stages of one request, in order (`judged`: None for an answer not
        judged, a caller's JSON or one without sources)."""
        stages: list[AnswerStage] = []
        if judged is not None:
            stages.append(judged.doubt)
            if judged.echo is not None:
                stages.append(judged.echo)
        if self.grounding is not None:  # a caller's JSON is checked, never made a refusal
            not_found = state.question.not_found if judged is not None else None
            stages.append(Ground(self.grounding, not_found))
        if self.cache is not None and state.cache_key is not None:
            stages.append(KeepAnswer(self.cache, state.cache_key))  # where it is kept
        return tuple(stages)

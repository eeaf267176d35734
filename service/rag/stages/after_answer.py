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
from service.rag.honesty import Honesty
from service.rag.reply import AnswerStage
from service.rag.stages.again import AskAgain
from service.rag.stages.confidence import Doubt
from service.rag.stages.echo import RefuseEcho
from service.rag.stages.ground import Ground
from service.rag.stages.keep_answer import KeepAnswer
from service.rag.stages.state import RagState


@dataclass(frozen=True)
class Judged:
    """What judges one answer as it is written and once it is whole: the model's doubt, and
    the echo check (None: grounding.echo off, or no text asked to check)."""

    doubt: Doubt
    echo: RefuseEcho | None = None


@dataclass(frozen=True)
class AfterAnswer:
    """The answer stages in force (the module's docstring), built once from the settings."""

    honesty: Honesty
    ground: Ground | None = None  # grounding.enabled
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
        if not honesty.echo or doubt.unsupported():  # not asked: no text to check
            return Judged(doubt)
        again = again if honesty.again else None
        echo = RefuseEcho.of(state.query.query, result, not_found, again, honesty.abstain_not_found)
        return Judged(doubt, echo)

    def stages(self, state: RagState, judged: Judged | None) -> tuple[AnswerStage, ...]:
        """The answer stages of one request, in order (`judged`: None for an answer not
        judged, a caller's JSON or one without sources)."""
        stages: list[AnswerStage] = []
        if judged is not None:
            stages.append(judged.doubt)
            if judged.echo is not None:
                stages.append(judged.echo)
        if self.ground is not None:
            stages.append(self.ground)
        if self.cache is not None and state.cache_key is not None:
            stages.append(KeepAnswer(self.cache, state.cache_key))  # where it is kept
        return tuple(stages)

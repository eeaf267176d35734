"""Honesty: how a question's answer is kept honest, read once from the settings (llm.logprobs,
grounding.verify[.parallel], grounding.abstain.*, grounding.echo[.again], prompt.answer.phrase)
by `service.rag.assemble`."""

from __future__ import annotations

from dataclasses import dataclass

from service.config import Settings
from service.models import packaged


@dataclass(frozen=True)
class Honesty:
    """The honest-answer settings of a request: what is asked of the LLM besides the answer,
    and when the answer becomes the not-found sentence instead."""

    logprobs: bool = False  # llm.logprobs: the answer's token probabilities asked for
    verify: bool = False  # grounding.verify: "does a document say the answer?" asked first
    beside: bool = False  # grounding.verify.parallel: ... or beside the answer (verify_beside)
    abstain_not_found: float | None = None  # grounding.abstain.not.found
    abstain_unsupported: float | None = None  # grounding.abstain.unsupported
    echo: bool = True  # grounding.echo: an answer that only says the question back refused
    again: bool = False  # grounding.echo.again: such an answer asked for once more first
    # prompt.answer.phrase: a short answer to a question a phrase answers cut to that phrase
    phrase: bool = False

    @classmethod
    def of(cls, settings: Settings) -> Honesty:
        grounding = settings.grounding
        return cls(
            logprobs=settings.llm.logprobs,
            verify=grounding.verify,
            beside=verify_beside(settings),
            abstain_not_found=grounding.abstain_not_found,
            abstain_unsupported=grounding.abstain_unsupported,
            echo=grounding.echo,
            again=grounding.echo_again,
            phrase=settings.prompt.answer_phrase,
        )

    @property
    def verifying(self) -> bool:
        """Whether the verification is asked: it is read from token probabilities."""
        return self.verify and self.logprobs


def verify_beside(settings: Settings) -> bool:
    """grounding.verify.parallel: whether the verification is sent beside the answer's request
    (true), before it (false), or, auto, beside unless llm.model is one of the GGUF models
    llama.cpp serves us (whose answer's request reads the verification's from its prompt
    cache, on cores that answer one prompt at a time)."""
    parallel = settings.grounding.verify_parallel
    return parallel == "true" or (parallel == "auto" and not packaged.embedded(settings.llm.model))


def unsupported(supported: float | None, min_supported: float | None) -> bool:
    """Whether the verification's probability of yes is below grounding.abstain.unsupported
    (either unknown: no)."""
    return supported is not None and min_supported is not None and supported < min_supported

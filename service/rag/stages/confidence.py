"""Confidence: the model's own doubt, read from its token probabilities (issue 59, item 1).

The last request asks the LLM for its tokens' log-probabilities and, at each step, its five
likeliest tokens (OpenAI's `logprobs`, which llama.cpp's server reports too). The signals:
- `not_found`: the probability the model gave, at its first step, to the first token of the
  not-found sentence it was told to write when the documents do not say ("I", "Je"): a
  model that hesitates between answering and saying it cannot is told apart at its first
  token, whichever it then wrote;
- `mean_logprob` and `min_logprob` of the answer's tokens;
- `supported` (grounding.verify): before the answer, the LLM is asked on the same prompt
  whether a document above says the answer, one token long; the probability it gives "yes"
  against "no" (the prompt cache makes it a few tokens of work: the answer's request then
  begins with what this one read). With an LLM elsewhere it is asked beside the answer
  instead (grounding.verify.parallel: service.rag.stages.beside), the answer held meanwhile.

With `grounding.abstain.unsupported` set, an answer whose `supported` is below it is not
written at all. With `grounding.abstain.not.found` set, an answer whose first step gave the
not-found sentence at least that probability becomes the not-found sentence (`abstained` says why);
the threshold and its curve on SQuAD and the French FAQ are in bench/RESULTS.md. It is known
at the first token, so a streamed answer is judged before any of it is shown. An LLM that
reports no probabilities is answered as before, and `confidence.signal` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from service.llm import ChatClient, ChatMessage
from service.llm.types import TokenChoice, Usage
from service.rag.honesty import unsupported
from service.rag.reply import Amendment, Finishing
from service.rag.stages.beside import Verifying

NONE_REPORTED = "none: the LLM reported no token probabilities (the echo check alone)"


@dataclass(frozen=True)
class Confidence:
    """What the answer's token probabilities say (the module's docstring)."""

    signal: str  # the signal the abstention is decided on, or why there is none
    not_found: float | None = None
    mean_logprob: float | None = None
    min_logprob: float | None = None
    supported: float | None = None  # grounding.verify's probability of "yes"

    @classmethod
    def of(
        cls,
        tokens: Sequence[TokenChoice],
        not_found_sentence: str,
        supported: float | None = None,
    ) -> Confidence:
        if not tokens:
            signal = SUPPORTED if supported is not None else NONE_REPORTED
            return cls(signal, supported=supported)
        logprobs = [token.logprob for token in tokens]
        return cls(
            "not_found: the probability of the not-found sentence's first token"
            + (f", and {SUPPORTED}" if supported is not None else ""),
            round(not_found_probability(tokens[0], not_found_sentence), 4),
            round(sum(logprobs) / len(logprobs), 4),
            round(min(logprobs), 4),
            supported,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "not_found": self.not_found,
            "mean_logprob": self.mean_logprob,
            "min_logprob": self.min_logprob,
            "supported": self.supported,
        }


SUPPORTED = "supported: the probability of yes, a document says the answer"
_YES = frozenset({"yes", "oui"})
_NO = frozenset({"no", "non"})


async def verified(llm: ChatClient, request: Sequence[ChatMessage]) -> tuple[float | None, Usage]:
    """The LLM's probability of "yes" against "no" at the one step of `request` (the verify
    prompt), and what it cost; None when the LLM reports no probabilities or neither word is
    among its likeliest tokens."""
    completion = await llm.complete(
        request, {"max_tokens": 1, "logprobs": True, "top_logprobs": 10}
    )
    return yes_probability(completion.tokens[:1]), completion.usage


def yes_probability(tokens: Sequence[TokenChoice]) -> float | None:
    """P(yes) / (P(yes) + P(no)) at the first step, any case, English or French."""
    if not tokens:
        return None
    first = tokens[0]
    alternatives = dict(first.top) if first.top else {}
    alternatives.setdefault(first.token, first.logprob)
    yes = no = 0.0
    for token, logprob in alternatives.items():
        word = token.strip().lower()
        if word in _YES:
            yes += math.exp(logprob)
        elif word in _NO:
            no += math.exp(logprob)
    return round(yes / (yes + no), 4) if yes + no > 0 else None


def not_found_probability(first: TokenChoice, not_found_sentence: str) -> float:
    """The probability, at the first step, of the tokens that begin the not-found sentence."""
    sentence = not_found_sentence.strip()
    alternatives = dict(first.top) if first.top else {first.token: first.logprob}
    alternatives.setdefault(first.token, first.logprob)
    return min(
        1.0,
        sum(
            math.exp(logprob)
            for token, logprob in alternatives.items()
            if token.strip() and sentence.startswith(token.strip())
        ),
    )


@dataclass
class Doubt:
    """The answer stage that reports the Confidence and, past `threshold`, abstains."""

    not_found: str  # the not-found sentence, in the question's language
    threshold: float | None  # grounding.abstain.not.found; None: reported only
    supported: float | None = None  # grounding.verify's P(yes), asked before the answer
    min_supported: float | None = None  # grounding.abstain.unsupported; None: reported only
    beside: Verifying | None = None  # ... or asked beside it (grounding.verify.parallel)
    name: ClassVar[str] = "confidence"
    timed: ClassVar[bool] = False

    @property
    def said(self) -> float | None:
        """The verification's P(yes): asked before the answer, or beside it once known."""
        return self.beside.supported if self.beside is not None else self.supported

    def unsupported(self) -> bool:
        """Whether the LLM said no source answers the question (known before the answer, or
        beside it: the answer is held until then)."""
        return unsupported(self.said, self.min_supported)

    def unsure(self, tokens: Sequence[TokenChoice]) -> bool:
        """Whether the first step's doubt is past the threshold (known at the first token)."""
        if self.unsupported():
            return True
        if self.threshold is None or not tokens:
            return False
        return not_found_probability(tokens[0], self.not_found) >= self.threshold

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        """A streamed answer is held while the doubt is past the threshold (service.rag.gate)."""
        return self.unsure(tokens)

    def wanted(self, done: Finishing) -> bool:
        return bool(done.result.sources)

    async def run(self, done: Finishing) -> Amendment | None:
        # an unsupported answer is judged by its verification alone: it was not asked for
        # (Chain), or, asked beside it, abandoned
        tokens = () if self.unsupported() else done.result.tokens
        confidence = Confidence.of(tokens, self.not_found, self.said)
        if self.unsupported():
            why = (
                f"asked whether a document says the answer, the LLM said yes with a "
                f"probability of {self.said:.2f}, below grounding.abstain.unsupported "
                f"({self.min_supported:g})"
            )
        elif done.found_nothing or not self.unsure(done.result.tokens):
            return Amendment(confidence=confidence.to_json())
        else:
            why = (
                f"the LLM's first step gave its not-found sentence a probability of "
                f"{confidence.not_found:.2f}, at or above grounding.abstain.not.found "
                f"({self.threshold:g})"
            )
        return Amendment(message=self.not_found, confidence=confidence.to_json(), abstained=why)

"""Reading the model's doubt from its token probabilities (issue 59, item 1)."""

from __future__ import annotations

import math

from service.config import settings_from_mapping
from service.llm.client import token_choices
from service.llm.types import TokenChoice
from service.models import packaged
from service.rag.honesty import Honesty, verify_beside
from service.rag.stages.confidence import (
    NONE_REPORTED,
    Confidence,
    not_found_probability,
    yes_probability,
)

NOT_FOUND = "I could not find the answer in the documents."


def _token(token: str, p: float, **top: float) -> TokenChoice:
    return TokenChoice(token, math.log(p), tuple((t, math.log(q)) for t, q in top.items()))


def test_the_not_found_sentences_first_token_is_read_among_the_alternatives() -> None:
    first = _token("1", 0.38, **{"1": 0.38, "The": 0.30, "I": 0.25, " I": 0.02, "In": 0.04})
    assert abs(not_found_probability(first, NOT_FOUND) - 0.27) < 1e-9
    assert not_found_probability(_token("Je", 0.6, Je=0.6, Le=0.4), "Je ne peux pas...") == 0.6
    assert not_found_probability(_token("The", 0.9), NOT_FOUND) == 0.0  # no alternatives


def test_confidence_summarises_the_answer_and_says_when_it_has_nothing() -> None:
    tokens = [_token("19", 0.5, **{"19": 0.5, "I": 0.3}), _token("23", 0.9)]
    confidence = Confidence.of(tokens, NOT_FOUND)
    assert confidence.not_found == 0.3
    assert confidence.min_logprob == round(math.log(0.5), 4)
    assert confidence.mean_logprob == round((math.log(0.5) + math.log(0.9)) / 2, 4)
    assert Confidence.of([], NOT_FOUND).signal == NONE_REPORTED


def test_a_servers_probabilities_are_read_leniently() -> None:
    read = token_choices(
        {"content": [
            {"token": "A", "logprob": -0.1, "top_logprobs": [{"token": "A", "logprob": -0.1},
                                                             {"token": "B", "logprob": "x"}]},
            {"token": "B", "logprob": float("nan")},
            "junk",
            {"token": 3, "logprob": -1},
        ]}
    )  # fmt: skip
    assert read == [TokenChoice("A", -0.1, (("A", -0.1),))]
    assert token_choices(None) == [] and token_choices({"content": "x"}) == []


def test_yes_against_no_any_case_english_or_french() -> None:
    assert yes_probability([_token("Yes", 0.6, Yes=0.6, yes=0.2, No=0.1, Maybe=0.1)]) == round(
        0.8 / 0.9, 4
    )
    assert yes_probability([_token("Non", 0.7, Non=0.7, oui=0.3)]) == 0.3
    assert yes_probability([_token(" no", 0.9)]) == 0.0  # no alternatives reported
    assert yes_probability([_token("Maybe", 0.9, Maybe=0.9, Perhaps=0.1)]) is None
    assert yes_probability([]) is None  # an LLM without probabilities
    assert yes_probability([_token("yesterday", 0.9, yesterday=0.9)]) is None  # words, not starts


def test_the_verification_goes_beside_the_answer_unless_the_model_is_ours() -> None:
    """grounding.verify.parallel (issue 70): auto sends the verification beside the answer's
    request for an LLM elsewhere, before it for the GGUF models llama.cpp serves us (the
    prompt cache, two cores); true and false decide whatever the model."""

    def beside(**values: str) -> bool:
        return verify_beside(settings_from_mapping(values, source="test", env={}))

    assert beside() is True  # llm.model's default: Datafari's, an API elsewhere
    for model in packaged.MODELS:
        assert beside(**{"llm.model": model}) is False
        assert beside(**{"llm.model": model, "grounding.verify.parallel": "true"}) is True
    assert beside(**{"llm.model": "gpt-4o"}) is True
    assert beside(**{"llm.model": "gpt-4o", "grounding.verify.parallel": "false"}) is False
    assert Honesty.of(settings_from_mapping({"llm.model": "gpt-4o"}, source="t", env={})).beside

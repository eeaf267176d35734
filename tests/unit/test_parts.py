"""As much evidence as the question needs (issue 59, item 4)."""

from __future__ import annotations

import pytest

from service.rag.stages.rerank import Rerank
from service.text.parts import has_parts


@pytest.mark.parametrize(
    "question",
    [
        "What councils assign tasks to the IPCC? And whose goals often still oppose the IPCC?",
        "Who lit the lamp, and why?",
        "Who wrote the charter and when was it signed?",
        "What is the difference between a list and a tuple?",
        "Compare the 1.5B and the 0.5B models.",
        "Quelle est la différence entre un CDD et un CDI ?",
        "Qui conserve mes données et combien de temps ?",
    ],
)
def test_questions_with_parts(question: str) -> None:
    assert has_parts(question)


@pytest.mark.parametrize(
    "question",
    [
        "When was the lighthouse lamp electrified?",
        "Where does the Middle Rhine flow between Bingen and Bonn?",
        "Rock and roll: who invented it?",
        "In 1990, what did the council decide?",
        "Quel est le délai pour une carte d'identité ?",
        "Comment exercer mon droit d'accès et de rectification ?",
        "?" * 5000,
    ],
)
def test_single_questions(question: str) -> None:
    assert not has_parts(question)


def _rerank(**options: object) -> Rerank:
    return Rerank(client=None, top_n=1, max_chunks=10, **options)  # type: ignore[arg-type]


def test_one_passage_when_the_reranker_is_sure_more_when_it_is_not_or_the_question_has_parts():
    scores = {0: 6.0, 1: 5.6, 2: 2.0, 3: 1.0}
    kept = [0, 1, 2, 3]
    assert _rerank().needed("Who and when?", kept, scores) == 1  # off: top.n always
    shipped = _rerank(top_n_parts=3, close_margin=1.0)
    assert shipped.needed("When was it lit?", kept, scores) == 2  # 5.6 is within 1 of 6
    assert shipped.needed("When was it lit?", kept, {**scores, 1: 4.0}) == 1
    assert shipped.needed("Who lit it and when was it built?", kept, scores) == 3
    assert _rerank(top_n_parts=3).needed("When was it lit?", kept, scores) == 1


def test_the_languages_an_encoder_reads() -> None:
    from service.config import settings_from_mapping

    def reads(**values: str) -> frozenset[str] | None:
        return settings_from_mapping(values, source="test", env={}).embeddings.reads()

    assert reads() == frozenset({"en"})  # all-MiniLM-L6-v2
    assert reads(**{"ai.embeddings.model": "multilingual-e5-small"}) is None
    assert reads(**{"ai.embeddings.model": "bge-m3"}) is None
    assert reads(**{"ai.embeddings.languages": "en, fr"}) == frozenset({"en", "fr"})
    assert reads(**{"ai.embeddings.languages": "*"}) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("grounding.abstain.not.found", "2"),
        ("grounding.abstain.not.found", "0"),
        ("grounding.abstain.not.found", "nan"),
        ("grounding.echo", "maybe"),
        ("grounding.verify", "perhaps"),
        ("grounding.verify.parallel", "sometimes"),
        ("grounding.abstain.unsupported", "1.5"),
        ("grounding.abstain.unsupported", "0"),
        ("grounding.abstain.unsupported", "-inf"),
        ("llm.logprobs", "sometimes"),
        ("rerank.top.n.parts", "0"),
        ("rerank.top.n.parts", "100000"),
        ("rerank.close.margin", "-1"),
        ("rerank.close.margin", "inf"),
        ("hybrid.weight.vector.foreign", "-0.5"),
        ("hybrid.flat.spread", "0"),
        ("hybrid.flat.spread", "3"),
        ("hybrid.flat.spread", "nan"),
        ("hybrid.weight.vector.foreign", "1e9"),
        ("ai.embeddings.languages", "x" * 300),
    ],
)
def test_absurd_values_of_the_new_keys_are_refused_naming_the_key(key: str, value: str) -> None:
    from service.config import settings_from_mapping
    from service.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        settings_from_mapping({key: value}, source="test", env={})
    assert key in str(raised.value)

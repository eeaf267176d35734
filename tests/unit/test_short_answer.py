"""The short answer's form (issue 46, item 3): the grammar names only the sources sent, and a
citation is moved to the source that holds the answer's words. No sockets."""

from __future__ import annotations

import pytest

from service.chains.result import Source
from service.chains.short_answer import NOT_FOUND, grammar, true_citation
from service.retrieval.base import RetrievedDocument


def source(number: int, title: str, text: str) -> Source:
    return Source(number, RetrievedDocument(f"d{number}", title, "", text), (text,))


SOURCES = [
    source(1, "Brannoch lighthouse", "The keeper lit the lamp every evening at dusk."),
    source(2, "Lamp history", "The lamp burned paraffin until 1952, when it was electrified."),
    source(3, "Harbour", "Fishing boats leave at dawn."),
]


def test_the_grammar_cites_only_the_sources_sent() -> None:
    text = grammar([3, 1, 3])
    assert 'number ::= "1" | "3"' in text
    assert f'notfound ::= "{NOT_FOUND}"' in text
    assert '{0,59} (" [" number "]")?' in text  # optional: a model may stop after its answer
    assert text.startswith("root ::= answer | notfound")
    with pytest.raises(ValueError):
        grammar([])


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("in 1952 [2]", "in 1952 [2]"),  # the cited source holds it
        ("in 1952 [1]", "in 1952 [2]"),  # it does not: the one that does is cited
        ("paraffin [3]", "paraffin [2]"),
        ("at dusk [1]", "at dusk [1]"),
        ("the moon [1]", "the moon [1]"),  # no source holds it: left for grounding
        ("It burned paraffin until 1952.", "It burned paraffin until 1952. [2]"),  # cited now
        ("the moon", "the moon"),  # none to cite: grounding judges it
        (NOT_FOUND, NOT_FOUND),
    ],
)
def test_a_citation_points_at_a_source_that_holds_the_answer(written: str, kept: str) -> None:
    assert true_citation(written, SOURCES) == kept

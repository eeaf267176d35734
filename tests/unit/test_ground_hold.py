"""GroundHold under attack: a streamed answer is let go on a sentence only when the grounding
check that follows will find it supported, so an answer that check turns into the not-found
sentence is never shown first."""

from __future__ import annotations

import asyncio

from service.grounding.check import MAX_CLAUSES, GroundingCheck
from service.grounding.policy import GroundingPolicy
from service.rag.gate import Gate
from service.rag.stages.ground import GroundHold

SOURCES = [(1, "The Eiffel tower is 330 metres tall and stands in Paris.")]


def test_a_sentence_past_the_clauses_checked_lets_nothing_go() -> None:
    """The check reads MAX_CLAUSES clauses: a supported sentence after a first one of more
    clauses than that is not vouched for, so it may not let the answer be shown."""
    filler = "; ".join(f"zorb{i} quux{i} flim{i}" for i in range(MAX_CLAUSES + 10))
    answer = f"Alpha beta gamma {filler}. The Eiffel tower is 330 metres tall. " + (
        "Thanks for reading this. " * 60
    )
    gate = Gate(holds=[GroundHold(SOURCES, 0.6)])
    shown = "".join(gate.feed(answer[i : i + 4]) for i in range(0, len(answer), 4))
    grounded = asyncio.run(GroundingPolicy(GroundingCheck(None)).run(answer, SOURCES))
    assert grounded.abstained is not None  # the check vouches for none of it
    assert shown + gate.flush() == ""


def test_a_supported_sentence_within_the_clauses_checked_lets_the_answer_go() -> None:
    answer = "Alpha beta gamma. The Eiffel tower is 330 metres tall. " + "Thanks a lot. " * 20
    gate = Gate(holds=[GroundHold(SOURCES, 0.6)])
    shown = "".join(gate.feed(answer[i : i + 4]) for i in range(0, len(answer), 4))
    assert shown.startswith("Alpha beta gamma. The Eiffel tower is 330 metres tall.")

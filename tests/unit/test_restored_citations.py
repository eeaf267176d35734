"""with_citations_restored under attack: what refine and map-reduce give back of the citations
their last step dropped never lands inside code, never makes another sentence's source the
last sentence's, takes an unknown number for none, and costs what the grounding check reads."""

from __future__ import annotations

import asyncio
import time

from service.chains.result import Source, source_texts, with_citations_restored
from service.grounding.check import GroundingCheck
from service.retrieval import RetrievedDocument

SURVEYS = [f"Survey number {n} of the Vatnaj glacier measured its retreat." for n in range(1, 6)]
CODE = "```python\nif not valid:\n    raise ValueError\n```"


def sources(*texts: str) -> list[Source]:
    return [
        Source(number, RetrievedDocument(str(number), "t", "", text), (text,))
        for number, text in enumerate(texts, start=1)
    ]


def test_no_citation_is_written_inside_a_code_block() -> None:
    given = sources(*SURVEYS, CODE)
    answer = f"Use this:\n{CODE}"
    for shown in (False, True):
        restored = with_citations_restored(answer, given, shown=shown)
        assert restored.startswith(answer), restored  # the code as written
        assert restored == f"{answer}\n[6]"  # after the closing fence, on a line of its own
    unclosed = "Use this:\n```python\nif not valid:\n    raise ValueError"
    assert with_citations_restored(unclosed, given, shown=True) == unclosed


def test_a_streamed_answers_marks_keep_its_last_sentence_supported() -> None:
    """Marks written after a streamed answer are its last sentence's citations: they hold that
    sentence's own source, else they stand on a line of their own."""
    given = sources(*SURVEYS)
    answer = (
        "Survey 2 measured the glacier's retreat [2]. Survey number 1 of the glacier measured "
        "its retreat. Survey 2 measured the glacier's retreat."
    )
    restored = with_citations_restored(answer, given, shown=True)
    report = asyncio.run(GroundingCheck(None).run(restored, source_texts(given)))
    assert all(sentence.supported for sentence in report.sentences), restored
    cheese = "Survey 2 measured its retreat! The moon is made of cheese."
    assert with_citations_restored(cheese, given, shown=True) == f"{cheese}\n[2]"
    refusal = (
        "Survey number 1 of the glacier measured its retreat. The documents say nothing of "
        "the glacier's volume in 1990, nor of the survey teams, nor of the instruments they "
        "carried, nor of the weather on the days they measured it."
    )
    assert with_citations_restored(refusal, given, shown=True) == f"{refusal}\n[1]"


def test_a_citation_of_no_source_given_is_no_citation() -> None:
    given = sources(*SURVEYS)
    answer = "Survey number 4 of the glacier measured its retreat [999]."
    assert with_citations_restored(answer, given, shown=False) == (
        "Survey number 4 of the glacier measured its retreat [999] [4]."
    )


def test_a_long_answer_is_read_as_far_as_the_grounding_check_reads() -> None:
    """A sentence of thousands of supported clauses costs what 300 do (grounding.check's
    MAX_CLAUSES: the rest is not vouched for), not seconds."""
    given = sources(*[" ".join(SURVEYS)] * 40)
    clause = "survey number 3 of the Vatnaj glacier measured its retreat"
    answer = "; ".join([clause] * 3000) + "."
    started = time.process_time()
    assert with_citations_restored(answer, given, shown=False) == answer
    assert time.process_time() - started < 1.0

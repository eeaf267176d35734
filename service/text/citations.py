"""Citations: how an answer names its sources ("[1]", "[2]"), one pattern for everything that
reads them (the Reply, grounding, the evaluation)."""

from __future__ import annotations

import re

CITATION = re.compile(r"\[(\d{1,3})\]")  # a source cited: [1]


def cited_numbers(text: str) -> set[int]:
    """The source numbers a text cites ([1], [2]...)."""
    return {int(number) for number in CITATION.findall(text)}


def without_citations(text: str, between: str = "") -> str:
    """The text with its citations taken out (each replaced by `between`)."""
    return CITATION.sub(between, text)

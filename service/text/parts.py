"""Whether a question has parts: two questions in one, a second clause with its own question
word, or a comparison. Such a question needs more than the one passage the reranker is sure
of (issue 59, item 4: service.rag.stages.rerank), English and French alike.

    >>> has_parts("Who founded the abbey? And when was it burned?")
    True
    >>> has_parts("Who wrote the charter and when was it signed?")
    True
    >>> has_parts("Quelle est la différence entre un CDD et un CDI ?")
    True
    >>> has_parts("When was the lighthouse lamp electrified?")
    False
"""

from __future__ import annotations

import re

_QUESTION_WORDS = (
    r"who|whom|whose|what|when|where|why|how|which|"
    r"qui|que|quoi|quand|où|pourquoi|comment|quel|quelle|quels|quelles|combien"
)
# a second question after the first's question mark, or after "and"/"or" (et/ou)
_TWO_QUESTIONS = re.compile(r"\w[^?]*\?\s*\w[^?]*\?")
_SECOND_CLAUSE = re.compile(
    rf"\b(?:and|or|et|ou|mais|but),?\s+(?:{_QUESTION_WORDS})\b(?!\s*(?:-|est-ce)\b)", re.I
)
_COMPARISON = re.compile(
    r"\b(?:compare[sd]?|comparison|comparing|differences?\s+between|differ|versus|vs\.?|both|"
    r"diff[ée]rences?\s+entre|compar(?:er|aison|ez)|par\s+rapport\s+[àa]|les\s+deux)\b",
    re.I,
)


def has_parts(question: str) -> bool:
    """Whether `question` asks more than one thing (the module's docstring)."""
    text = question.strip()[:2000]
    return bool(
        _TWO_QUESTIONS.search(text) or _SECOND_CLAUSE.search(text) or _COMPARISON.search(text)
    )

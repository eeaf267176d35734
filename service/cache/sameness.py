"""Whether two questions that embed alike ask the same thing, for the answer cache.

Embeddings put opposites close: "cannot"/"can", "higher"/"lower", "before"/"after",
"million"/"billion", "approved"/"rejected" all score above 0.95 with all-MiniLM-L6-v2. So
closeness alone never makes a hit: the two questions must also use the same words, up to
case, punctuation, inflection (city/cities, measured/measure), order, a polite opening
("Can you tell me ...", "Please tell me: ...") and a few words a rephrasing may add or drop
without changing what is asked (articles, "of", the present "do"); state the same numbers;
and negate alike.
Where a question relates two things ("than", "from", "before", "against", ...), the order
must be the same too ("Is Oslo colder than Rome?" is not "Is Rome colder than Oslo?"). No
synonym list: a different word is a different question, so "higher" never stands for "lower"
(and "taller" never for "higher"): precision over reach, as a wrong cached answer is worse than
a miss. `python -m bench.cache_pairs` measures it.
"""

from __future__ import annotations

import re
from collections import Counter

from service.text.claims import negated, numbers, stem, tokens

# what a rephrasing may add or drop without changing what is asked
NEUTRAL = frozenset({"a", "an", "the", "of", "please", "s", "do", "does"})
# a polite opening, dropped before the words are compared
_OPENING = re.compile(
    r"^\s*(?:please\s+)?(?:(?:can|could|would)\s+you\s+(?:please\s+)?tell\s+me|tell\s+me|"
    r"i\s+(?:would\s+like|want)\s+to\s+know)\s*(?:please\s*)?[:,]?\s*",
    re.IGNORECASE,
)
# words that relate two things: with one of them, the order of the words matters
RELATIONAL = frozenset(
    {"than", "from", "to", "before", "after", "against", "versus", "vs", "beat", "defeat",
     "over", "under", "into", "by", "between", "above", "below"}
)  # fmt: skip


def asks_alike(cached: str, asked: str) -> bool:
    """True when two questions differ only in what the module's docstring allows."""
    if numbers(cached) != numbers(asked) or negated(cached) != negated(asked):
        return False
    mine, theirs = _words(cached), _words(asked)
    if Counter(mine) != Counter(theirs):
        return False
    return mine == theirs or not RELATIONAL.intersection(mine)


# agreement, not meaning: "Which city hosts ..." asks what "Which cities host ..." does
_AGREEMENT = {"does": "do", "are": "is", "were": "was", "has": "have"}


def _words(question: str) -> tuple[str, ...]:
    """Its words in order, the opening and neutral words dropped, inflection folded."""
    return tuple(
        _fold(token) for token in tokens(_OPENING.sub("", question)) if token not in NEUTRAL
    )


def _fold(token: str) -> str:
    token = _AGREEMENT.get(token, token)
    if len(token) > 4 and token.endswith("ies"):  # cities -> city
        token = token[:-3] + "y"
    return stem(token)

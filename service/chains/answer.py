"""Reading what the LLM wrote: the final answer, and partial answers that found nothing."""

from __future__ import annotations

import re

from service.errors import NoValidAnswer

# What map requests are told to answer when their documents hold nothing relevant.
NO_ANSWER = "NO_RELEVANT_CONTENT"

# Short answers that say the same in words, as models (and the extractive answerer) often do.
_NOTHING_FOUND = re.compile(
    r"(could not|couldn't|cannot|can't|unable to) find|no relevant|"
    r"(do|does) not (contain|mention|say)|not (mentioned|covered) in the (documents|context)",
    re.I,
)
_SHORT = 200


def clean_answer(text: str) -> str:
    """Datafari's clean-up: literal `\\n` back to newlines, then trimmed. Empty is no answer."""
    answer = text.replace("\\n", "\n").strip()
    if not answer:
        raise NoValidAnswer("the LLM returned an empty answer")
    return answer


def says_nothing_relevant(text: str) -> bool:
    """True for a partial answer that only says its documents did not help."""
    stripped = text.strip()
    if not stripped or NO_ANSWER in stripped.upper().replace(" ", "_"):
        return True
    return len(stripped) <= _SHORT and bool(_NOTHING_FOUND.search(stripped))

"""Turning what the LLM wrote into the answer we return."""

from __future__ import annotations

from service.errors import NoValidAnswer


def clean_answer(text: str) -> str:
    """Datafari's clean-up: literal `\\n` back to newlines, then trimmed. Empty is no answer."""
    answer = text.replace("\\n", "\n").strip()
    if not answer:
        raise NoValidAnswer("the LLM returned an empty answer")
    return answer

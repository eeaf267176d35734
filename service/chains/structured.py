"""Structured LLM answers: the JSON object in an answer, validated against a pydantic model.

Models wrap JSON in code fences or a sentence; the outermost `{...}` is taken. Anything that is
not that object, or does not fit the model, raises ValueError with a one-line reason, so the
caller can fall back (and log why).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_json_answer(answer: str, model: type[M]) -> M:
    found = _JSON_OBJECT.search(answer)
    if not found:
        raise ValueError("no JSON object in the answer")
    try:
        return model.model_validate(json.loads(found.group(0)))
    except (json.JSONDecodeError, ValidationError) as error:
        raise ValueError(str(error).splitlines()[0]) from None


def one_each(labels: Sequence[tuple[int, V]], expected: Sequence[int], what: str) -> dict[int, V]:
    """id -> label of an answer that labels items by id (grades, verdicts); raises ValueError
    unless every expected id is labelled once (`what`: "graded passages")."""
    ids = sorted(number for number, _ in labels)
    if ids != sorted(expected):
        raise ValueError(f"{what} {ids}, expected {sorted(expected)}")
    return dict(labels)

"""What becomes of a request before any stage runs: KAITO's chat rules (a chat request as a
RagQuery with its overrides) and the JSON guard's verdicts."""

from __future__ import annotations

import pytest

from service.api.payload import MAX_DEPTH, json_problem
from service.config import settings_from_mapping
from service.conversation import TOO_LONG, chat_query, needs_relay
from service.errors import ContextLengthExceeded, InvalidChatRequest
from service.pipeline import Overrides
from service.retrieval import Scope

SETTINGS = settings_from_mapping({"llm.context.window": "1000"}, source="test", env={})
USER = {"role": "user", "content": "What is the lamp?"}


def body(**fields: object) -> dict:
    return {"messages": [USER], "index_name": "FileShare", **fields}


@pytest.mark.parametrize(
    ("fields", "relay"),
    [
        ({}, False),
        ({"index_name": None}, True),
        ({"tools": [{"type": "function"}]}, True),
        ({"functions": [{"name": "f"}]}, True),
        ({"messages": [USER, {"role": "tool", "content": "4"}]}, True),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, True),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}, False),
    ],
)
def test_what_is_relayed_to_the_llm_as_it_is(fields: dict, relay: bool) -> None:
    assert needs_relay(body(**fields)) is relay


@pytest.mark.parametrize(
    ("index", "method"),
    [("FileShare", "bm25"), ("VectorMain", "hybrid"), ("vector", "vector"), ("BM25", "bm25")],
)
def test_the_index_names_the_retrieval(index: str, method: str) -> None:
    query = chat_query(body(index_name=index), SETTINGS, Scope())
    assert query.overrides.retrieval_method == method
    assert query.query == "What is the lamp?"
    assert query.always_use_history


def test_max_tokens_is_lowered_to_half_the_window_and_the_budget_follows() -> None:
    overrides = chat_query(body(max_tokens=5000, model="m", temperature=0.5), SETTINGS, Scope())
    assert overrides.overrides == Overrides(
        retrieval_method="bm25", max_request_tokens=500, model="m", max_tokens=500, temperature=0.5
    )


def test_overrides_are_validated_like_the_file() -> None:
    changed = Overrides(retrieval_method="hybrid", max_request_tokens=300).apply(SETTINGS)
    assert (changed.retrieval, changed.max_request_tokens) == ("hybrid", 300)
    with pytest.raises(ValueError):
        Overrides(retrieval_method="telepathy").apply(SETTINGS)


@pytest.mark.parametrize(
    "fields",
    [
        {"index_name": "Nope"},
        {"temperature": 3},
        {"temperature": "hot"},
        {"model": "m" * 300},
        {"messages": [USER, {"role": "assistant", "content": "a"}]},
    ],
)
def test_requests_that_break_the_rules_are_invalid(fields: dict) -> None:
    with pytest.raises(InvalidChatRequest):
        chat_query(body(**fields), SETTINGS, Scope())


def test_a_chat_longer_than_the_window_is_refused_in_kaitos_words() -> None:
    with pytest.raises(ContextLengthExceeded, match=TOO_LONG):
        chat_query(body(messages=[{"role": "user", "content": "x" * 4004}]), SETTINGS, Scope())


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b'{"a": 1}', None),
        (b"not json at all", None),  # the route says so in its own words
        (b"[" * 50_000 + b"]" * 50_000, "nested too deep"),
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested too deep"),
        (b'{"t": NaN}', "NaN"),
        (b'{"t": -Infinity}', "-Infinity"),
        (b'{"t": 1e400}', "too large"),
        (b'{"t": ' + b"9" * 5000 + b"}", "cannot be read"),
        (b'{"q": "a\\ud800b"}', "surrogate"),
        (b'{"\\udfff": 1}', "surrogate"),
        (b'{"q": "\\ud83d\\ude00"}', None),  # a pair is an emoji, not a surrogate
    ],
)
def test_the_json_guard_refuses_what_nothing_downstream_can_carry(
    raw: bytes, problem: str | None
) -> None:
    found = json_problem(raw)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found

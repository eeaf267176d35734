"""What becomes of a request before any stage runs: KAITO's chat rules (a chat request as a
RagQuery with its overrides) and the JSON guard's verdicts."""

from __future__ import annotations

import pytest

from service.api import conversation
from service.api.conversation import TOO_LONG
from service.api.openai_schema import ChatCompletionRequest
from service.api.payload import MAX_DEPTH, json_problem
from service.config import Settings, settings_from_mapping
from service.errors import (
    ContextLengthExceeded,
    InvalidChatRequest,
    RelayDisabled,
    UnsupportedParameter,
)
from service.rag.request import RagQuery
from service.retrieval import Scope
from service.snapshot.options import RequestOptions

SETTINGS = settings_from_mapping({"llm.context.window": "1000"}, source="test", env={})
CHARS = SETTINGS.overridden({"llm.tokenizer": "chars"})
RELAYING = SETTINGS.overridden({"openai.passthrough.enabled": True})
USER = {"role": "user", "content": "What is the lamp?"}


def plan_of(request: dict, settings: Settings, scope: Scope) -> conversation.ChatPlan:
    """The plan of a chat request's body, validated as the route validates it."""
    return conversation.plan_of(ChatCompletionRequest.parse(request), settings, scope)


def retrieval_of(request: dict, settings: Settings) -> str | None:
    return conversation.retrieval_of(ChatCompletionRequest.parse(request), settings)


def body(**fields: object) -> dict:
    return {"messages": [USER], "index_name": "FileShare", **fields}


def query_of(request: dict) -> RagQuery:
    query = plan_of(request, SETTINGS, Scope()).query
    assert query is not None
    return query


@pytest.mark.parametrize(
    ("fields", "relay"),
    [
        ({}, False),
        ({"index_name": None}, False),  # grounded by default: openai.default.index
        ({"index_name": ""}, True),
        ({"tools": [{"type": "function"}]}, True),
        ({"functions": [{"name": "f"}]}, True),
        ({"messages": [USER, {"role": "tool", "content": "4"}]}, True),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, True),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}, False),
    ],
)
def test_what_is_relayed_to_the_llm_as_it_is(fields: dict, relay: bool) -> None:
    assert (retrieval_of(body(**fields), SETTINGS) is None) is relay


def chat(**fields: object) -> dict:
    return {"messages": [USER], **fields}


@pytest.mark.parametrize(
    ("settings", "fields", "method"),
    [
        # no index named: the default index, whatever model the client picked
        (SETTINGS, {"model": "gpt-4o"}, "bm25"),
        (SETTINGS.overridden({"retrieval.method": "hybrid"}), {}, "hybrid"),
        (SETTINGS.overridden({"openai.default.index": "VectorMain"}), {}, "hybrid"),
        # the rag* models name a retrieval; the index_name wins over them
        (SETTINGS, {"model": "rag-vector"}, "vector"),
        (SETTINGS.overridden({"retrieval.method": "vector"}), {"model": "rag"}, "vector"),
        (SETTINGS, {"model": "rag-hybrid", "index_name": "FileShare"}, "bm25"),
        # relaying on: the LLM's own model name opts out, a rag* model does not
        (RELAYING, {"model": "gpt-4o"}, None),
        (RELAYING, {"model": "rag-bm25"}, "bm25"),
        (RELAYING, {}, "bm25"),
        # KAITO's rule, by configuration: no index, no retrieval
        (RELAYING.overridden({"openai.default.index": ""}), {}, None),
    ],
)
def test_which_retrieval_answers_a_chat(settings: Settings, fields: dict, method: str) -> None:
    assert retrieval_of(chat(**fields), settings) == method


def test_the_rag_models_refuse_what_they_cannot_take() -> None:
    tools = chat(model="rag", tools=[{"type": "function"}])
    with pytest.raises(UnsupportedParameter, match=r"^tools"):
        retrieval_of(tools, RELAYING)


def test_a_request_for_the_llm_needs_the_relay() -> None:
    with pytest.raises(RelayDisabled):
        plan_of(chat(index_name=""), SETTINGS, Scope())
    assert plan_of(chat(index_name=""), RELAYING, Scope()).query is None


@pytest.mark.parametrize(
    ("settings", "model", "inline"),
    [
        (SETTINGS, "rag", True),
        (SETTINGS, "gpt-4o", False),
        (SETTINGS.overridden({"openai.sources.inline": "always"}), "gpt-4o", True),
        (SETTINGS.overridden({"openai.sources.inline": "never"}), "rag", False),
    ],
)
def test_sources_go_inside_the_message_for_the_rag_models(
    settings: Settings, model: str, inline: bool
) -> None:
    plan = plan_of(chat(model=model), settings, Scope())
    assert plan.inline_sources is inline
    assert plan.model == (model if model == "rag" else None)


def test_a_json_answer_never_gets_sources_inside_it() -> None:
    plan = plan_of(chat(model="rag", response_format={"type": "json_object"}), SETTINGS, Scope())
    assert plan.inline_sources is False
    assert plan.query is not None and plan.query.options.form.json


@pytest.mark.parametrize(
    ("index", "method"),
    [("FileShare", "bm25"), ("VectorMain", "hybrid"), ("vector", "vector"), ("BM25", "bm25")],
)
def test_the_index_names_the_retrieval(index: str, method: str) -> None:
    query = query_of(body(index_name=index))
    assert query.options.retrieval_method == method
    assert query.query == "What is the lamp?"
    assert query.options.always_use_history


# "What is the lamp?" is 5 tokens in cl100k_base (llm.model gpt-3.5-turbo), 9 with its role:
# of the 1,000-token window, 1000 - 9 - 150 (instructions) = 841 are free
FREE = 841


def test_max_tokens_is_lowered_so_that_the_sources_keep_a_fifth() -> None:
    overrides = query_of(body(max_tokens=5000, model="m", temperature=0.5)).options
    kept = FREE - int(FREE * 0.2)  # 673 for the answer, 168 for the sources
    assert overrides == RequestOptions(
        retrieval_method="bm25",
        max_request_tokens=9 + 150 + (FREE - kept),
        model="m",
        max_tokens=kept,
        temperature=0.5,
        always_use_history=True,
        answer_without_sources=False,  # openai.no.context=refuse (shipped): no LLM without sources
    )


@pytest.mark.parametrize(("ratio", "share"), [(None, 0.5), (0.2, 0.2), (0.8, 0.8)])
def test_the_context_token_ratio_shares_the_window_between_sources_and_answer(
    ratio: float | None, share: float
) -> None:
    fields = {} if ratio is None else {"context_token_ratio": ratio}
    overrides = query_of(body(**fields)).options
    assert overrides.max_request_tokens == 9 + 150 + int(FREE * share)
    assert overrides.max_tokens == FREE - int(FREE * share)  # no max_tokens: what is left


def test_a_small_max_tokens_leaves_the_sources_their_share_only() -> None:
    overrides = query_of(body(max_tokens=50)).options
    assert (overrides.max_tokens, overrides.max_request_tokens) == (50, 9 + 150 + FREE // 2)


def test_the_similarity_threshold_and_the_dynamic_top_k_reach_the_settings() -> None:
    overrides = query_of(body(similarity_threshold=0.85)).options
    assert (overrides.similarity_min, overrides.top_k, overrides.strategy) == (0.85, None, None)
    settings = overrides.apply(SETTINGS)
    assert settings.retrieval.similarity_min == 0.85
    dynamic = SETTINGS.overridden({"openai.dynamic.topk": True, "llm.context.window": 128000})
    plan = plan_of(body(), dynamic, Scope())
    assert plan.query is not None
    # at least 100 passages, one per 500 free tokens when that is more, stuffed in one request
    applied = plan.query.options.apply(dynamic)
    assert (applied.retrieval.top_k, applied.prompt.strategy) == ((128000 - 159) // 500, "stuff")
    small = plan_of(body(), SETTINGS.overridden({"openai.dynamic.topk": True}), Scope()).query
    assert small is not None and small.options.top_k == 100


def test_overrides_are_validated_like_the_file() -> None:
    changed = RequestOptions(retrieval_method="hybrid", max_request_tokens=300).apply(SETTINGS)
    assert (changed.retrieval.in_force, changed.prompt.max_request_tokens) == ("hybrid", 300)
    with pytest.raises(ValueError):
        RequestOptions(retrieval_method="telepathy").apply(SETTINGS)


@pytest.mark.parametrize(
    "fields",
    [
        {"index_name": "Nope!"},  # "Nope" would be a KAITO index's name
        {"index_name": "x" * 65},
        {"temperature": 3},
        {"temperature": "hot"},
        {"similarity_threshold": 1.5},
        {"similarity_threshold": "high"},
        {"similarity_threshold": True},
        {"context_token_ratio": 0.9},
        {"context_token_ratio": 0.1},
        {"context_token_ratio": [0.5]},
        {"model": "m" * 300},
        {"messages": [USER, {"role": "assistant", "content": "a"}]},
    ],
)
def test_requests_that_break_the_rules_are_invalid(fields: dict) -> None:
    with pytest.raises(InvalidChatRequest):
        query_of(body(**fields))


def test_a_chat_longer_than_the_window_is_refused_in_kaitos_words() -> None:
    with pytest.raises(ContextLengthExceeded, match=TOO_LONG):
        query_of(body(messages=[{"role": "user", "content": "lamp " * 1000}]))


def test_the_window_is_counted_in_the_models_tokens_not_in_characters() -> None:
    # 1,100 characters of Hindi: 275 "tokens" at 4 characters a token, which would fit; the
    # model's tokenizer counts several times more, which do not
    hindi = {"role": "user", "content": "हिन्दी भाषा " * 100}
    assert plan_of(body(messages=[hindi]), CHARS, Scope()).query is not None
    with pytest.raises(ContextLengthExceeded, match=TOO_LONG):
        query_of(body(messages=[hindi]))


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

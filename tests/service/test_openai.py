"""The OpenAI-compatible endpoint, driven by the official `openai` package over real HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, ClassVar

import httpx
import pytest
from openai import APIError, BadRequestError, NotFoundError, OpenAI
from pydantic import BaseModel

from service.api.conversation import NO_USER_PROMPT, TOO_LONG, split_conversation
from service.api.openai_schema import ChatMessageIn
from service.api.protocols import driver
from service.chains.prompts import NOT_FOUND_SENTENCES
from service.text import tokens
from service.text.tokens import token_counter
from testing.llm_server import LLMScript, Step, verification
from testing.service import ServiceFactory
from tests.service.test_streaming import SAID

RELAY = {"openai.passthrough.enabled": True}


def client_for(base: str) -> OpenAI:
    return OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def ask(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def test_rag_answer_with_sources(service: ServiceFactory, llm: LLMScript) -> None:
    openai = client_for(service())
    completion = openai.chat.completions.create(
        model="test-model",
        messages=ask("When was the lighthouse lamp electrified?"),
        extra_body={"index_name": "FileShare"},
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content.startswith("Test answer to:")
    sources = completion.model_extra["sources"]
    assert sources[0]["id"] == "lighthouse"
    assert completion.usage.total_tokens == 18
    assert "the lighthouse was electrified" in llm.requests[0].prompt


def test_vector_index_answers_by_meaning(service: ServiceFactory, llm: LLMScript) -> None:
    openai = client_for(service())
    completion = openai.chat.completions.create(
        model="test-model",
        messages=ask("Who switched on the beacon at nightfall?"),
        extra_body={"index_name": "VectorMain"},
    )
    assert completion.model_extra["sources"][0]["id"] == "lighthouse"


def test_no_index_is_a_plain_bypass(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content="Plain LLM answer."))
    openai = client_for(service(RELAY))
    completion = openai.chat.completions.create(model="test-model", messages=ask("Hello"))
    assert completion.choices[0].message.content == "Plain LLM answer."
    assert "sources" not in (completion.model_extra or {})
    assert llm.requests[0].body["messages"] == ask("Hello")


@pytest.mark.parametrize(
    "extra",
    [
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"functions": [{"name": "f", "parameters": {}}]},
    ],
)
def test_tools_bypass_rag(service: ServiceFactory, llm: LLMScript, extra: dict) -> None:
    llm.then(Step(content="tool answer"))
    body = {"model": "m", "messages": ask("lighthouse"), "index_name": "FileShare", **extra}
    response = httpx.post(f"{service(RELAY)}/v1/chat/completions", json=body)
    assert response.json()["choices"][0]["message"]["content"] == "tool answer"
    forwarded = llm.requests[0].body
    assert "index_name" not in forwarded
    assert forwarded["messages"] == ask("lighthouse")  # no sources were added
    assert ("tools" in forwarded) or ("functions" in forwarded)


def test_unsupported_role_bypasses_rag(service: ServiceFactory, llm: LLMScript) -> None:
    messages = [*ask("lighthouse"), {"role": "tool", "content": "42", "tool_call_id": "t"}]
    body = {"model": "m", "messages": messages, "index_name": "FileShare"}
    httpx.post(f"{service(RELAY)}/v1/chat/completions", json=body).raise_for_status()
    assert llm.requests[0].body["messages"] == messages


def test_image_content_bypasses_rag(service: ServiceFactory, llm: LLMScript) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "index_name": "x"}
    httpx.post(f"{service(RELAY)}/v1/chat/completions", json=body).raise_for_status()
    assert llm.requests[0].body["messages"][0]["content"] == content


def test_bypass_returns_upstream_errors_unchanged(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content="rate limited", status=429))
    response = httpx.post(
        f"{service(RELAY)}/v1/chat/completions", json={"model": "m", "messages": ask("hi")}
    )
    assert response.status_code == 429
    assert response.json()["error"]["message"] == "rate limited"


def test_retrieval_query_is_the_user_turn_after_the_last_assistant(
    service: ServiceFactory, llm: LLMScript
) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Tell me about apple orchards."},
        {"role": "assistant", "content": "They are pruned in winter."},
        {"role": "user", "content": "And the zebra herd?"},
        {"role": "user", "content": "Where does it migrate?"},
    ]
    openai = client_for(service())
    completion = openai.chat.completions.create(
        model="test-model", messages=messages, extra_body={"index_name": "FileShare"}
    )
    ids = [source["id"] for source in completion.model_extra["sources"]]
    assert "zebra-only" in ids and "orchard" not in ids
    sent = llm.requests[0]
    assert sent.prompt.rsplit("Question:", 1)[1].split("\n", 1)[0].strip() == (
        "And the zebra herd? Where does it migrate?"
    )
    history = [m["content"] for m in sent.messages[1:-1]]
    assert history == [
        "Be brief.",
        "Tell me about apple orchards.",
        "They are pruned in winter.",
    ]


def test_split_conversation_rules() -> None:
    question, history = split_conversation(
        [
            ChatMessageIn(role="developer", content="d"),
            ChatMessageIn(role="user", content=[{"type": "text", "text": "a"}]),
            ChatMessageIn(role="user", content="b"),
        ]
    )
    assert question == "a\n\nb"
    assert [(m.role, m.content) for m in history] == [("system", "d")]


def test_no_user_turn_after_the_assistant_is_400(service: ServiceFactory) -> None:
    openai = client_for(service())
    with pytest.raises(BadRequestError) as raised:
        openai.chat.completions.create(
            model="m",
            messages=[*ask("hi"), {"role": "assistant", "content": "hello"}],
            extra_body={"index_name": "FileShare"},
        )
    assert raised.value.status_code == 400
    assert raised.value.body["message"] == NO_USER_PROMPT


def test_prompt_longer_than_the_window_is_400(service: ServiceFactory) -> None:
    openai = client_for(service({"llm.context.window": 300}))
    with pytest.raises(BadRequestError) as raised:
        openai.chat.completions.create(
            model="m", messages=ask("lighthouse " * 200), extra_body={"index_name": "FileShare"}
        )
    assert raised.value.body["message"] == TOO_LONG


def test_max_tokens_is_lowered_to_what_the_window_leaves(
    service: ServiceFactory, llm: LLMScript
) -> None:
    openai = client_for(service({"llm.context.window": 2000}))
    question = "lighthouse " * 100
    openai.chat.completions.create(
        model="gpt-4o",
        messages=ask(question),
        max_tokens=5000,
        extra_body={"index_name": "FileShare"},
    )
    gpt4o = token_counter("auto", "gpt-4o")  # o200k_base, as the model counts
    free = 2000 - (gpt4o.count(question) + 4) - 150
    sent = llm.requests[0]
    assert sent.body["max_tokens"] == free - int(free * 0.2)  # the sources keep a fifth
    prompt = sum(gpt4o.count(message["content"]) + 4 for message in sent.body["messages"])
    assert prompt + sent.body["max_tokens"] <= 2000  # prompt and answer fit in the window


def test_an_index_name_that_no_index_has_is_404_and_a_malformed_one_400(
    service: ServiceFactory,
) -> None:
    base = service()
    for name, status in (("Nope", 404), ("no such index!", 400)):
        response = httpx.post(
            f"{base}/v1/chat/completions",
            json={"model": "m", "messages": ask("lighthouse"), "index_name": name},
        )
        assert response.status_code == status, response.text
        assert name in response.json()["error"]["message"]


def test_nothing_found_is_an_openai_error_when_so_configured(service: ServiceFactory) -> None:
    response = httpx.post(
        f"{service({'openai.no.context': 'error'})}/v1/chat/completions",
        json={"model": "m", "messages": ask("xylophonist"), "index_name": "FileShare"},
    )
    assert response.status_code == 428
    assert response.json()["error"]["code"] == "NoFileFound"


def text_and_last(response: Any, stream: bool) -> tuple[str, Any]:
    """A completion's text, and what carries its extensions (the last chunk when streamed)."""
    if not stream:
        return response.choices[0].message.content, response
    chunks = list(response)
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_nothing_found_is_answered_without_sources_as_kaito_does(
    service: ServiceFactory, llm: LLMScript, stream: bool
) -> None:
    llm.then(Step(content="A xylophonist plays the xylophone."))
    messages = [{"role": "system", "content": "Be brief."}, *ask("What is a xylophonist?")]
    response = client_for(service({"openai.no.context": "answer"})).chat.completions.create(
        model="rag", messages=messages, stream=stream
    )
    text, last = text_and_last(response, stream)
    assert text == "A xylophonist plays the xylophone."  # no "Sources:" block
    assert last.model_extra["sources"] == []  # type: ignore[union-attr]
    assert llm.requests[0].body["messages"] == messages  # the conversation as sent


@pytest.mark.parametrize("stream", [False, True])
def test_nothing_found_is_refused_not_answered_from_the_llm_s_memory(
    service: ServiceFactory, llm: LLMScript, stream: bool
) -> None:
    """Issue 83: the `rag` model asked for an answer from the documents; when they hold
    nothing, the answer says so (in the question's language) and why, and the LLM is never
    asked (the shipped openai.no.context=refuse)."""
    openai = client_for(service())
    for question, sentence in (
        ("Who won the xylophonist world cup final in Paris?", "I could not find the answer"),
        ("Qui a gagné la finale de la coupe du monde des xylophonistes ?", "Je n'ai pas trouvé"),
    ):
        response = openai.chat.completions.create(
            model="rag", messages=ask(question), stream=stream
        )
        text, last = text_and_last(response, stream)
        assert text.startswith(sentence), text
        assert last.model_extra["sources"] == []  # type: ignore[union-attr]
        assert "nothing in the documents" in last.model_extra["abstained"]  # type: ignore[union-attr]
    assert llm.requests == []
    if not stream:  # a JSON form has no sentence to say it in: the 428, never plain text
        json_mode = httpx.post(
            f"{openai.base_url}chat/completions",
            json={
                "model": "rag",
                "messages": ask("Who won the xylophonist world cup?"),
                "response_format": {"type": "json_object"},
            },
        )
        assert json_mode.status_code == 428, json_mode.text


WORLD_CUP = "Who won the 1998 football world cup final in Paris?"
FROM_MEMORY = "The 1998 FIFA World Cup final was won by Brazil."  # wrong: France won
# a question sharing a word with a document (BM25 finds it), which does not answer it
NEAR_WORLD_CUP = "Who won the football world cup the year the lighthouse was electrified?"
NEAR_FROM_MEMORY = "West Germany won the 1954 FIFA World Cup final."
# the retrieval a `rag` model answers with, the question and the LLM's memory of it: make
# run's hybrid (kNN finds nothing near the question), and BM25 (a shared word finds a
# passage, which the LLM then answers beside)
SEARCHES = {
    "hybrid": ({"retrieval.method": "hybrid"}, WORLD_CUP, FROM_MEMORY),
    "bm25": ({"retrieval.method": "bm25"}, NEAR_WORLD_CUP, NEAR_FROM_MEMORY),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("search", SEARCHES)
def test_the_rag_model_refuses_what_its_documents_do_not_answer_never_from_memory(
    service: ServiceFactory, llm: LLMScript, stream: bool, search: str
) -> None:
    """Issue 83: POST /v1/chat/completions with the `rag` model and the world cup question
    answered "won by Brazil" (the LLM's memory, wrong) where /ai/rag said 428: whether the
    search finds nothing or a passage beside the question, the documents do not answer it,
    and the completion says so (`abstained`, no sources), whole or streamed, the memory's
    words never sent."""
    settings, question, memory = SEARCHES[search]
    llm.then(Step(content=memory), Step(content=memory))  # asked, and asked again
    response = client_for(service(settings)).chat.completions.create(
        model="rag", messages=ask(question), stream=stream
    )
    text, last = text_and_last(response, stream)
    assert text == NOT_FOUND_SENTENCES["en"]
    assert "Germany" not in text and "Brazil" not in text
    assert last.model_extra["abstained"], last  # type: ignore[index]
    assert last.model_extra["sources"] == last.model_extra["citations"] == []  # type: ignore[index]
    assert (search == "bm25") == bool(llm.requests)  # BM25 found a passage, kNN nothing


# make run's: the LLM asked first whether a document says the answer (its own model's way)
SHIPPED_VERIFICATION = {
    "grounding.verify": True,
    "grounding.abstain.unsupported": 0.55,
    "grounding.verify.parallel": False,
}


@pytest.mark.parametrize("stream", [False, True])
def test_the_rag_model_refuses_when_the_verification_finds_no_document_saying_it(
    service: ServiceFactory, llm: LLMScript, stream: bool
) -> None:
    """Passages found, and the LLM asked whether one says the answer says no: the completion
    is the refusal, the answer never asked for (grounding.verify, as make run ships it)."""
    settings = {"retrieval.method": "bm25", **SHIPPED_VERIFICATION}
    no = Step(content="No", first_top={"No": 0.9, "Yes": 0.1}, takes=verification)
    llm.then(no, Step(content=NEAR_FROM_MEMORY))
    response = client_for(service(settings)).chat.completions.create(
        model="rag", messages=ask(NEAR_WORLD_CUP), stream=stream
    )
    text, last = text_and_last(response, stream)
    assert text == NOT_FOUND_SENTENCES["en"]
    assert "grounding.abstain.unsupported" in last.model_extra["abstained"]  # type: ignore[index]
    assert last.model_extra["sources"] == []  # type: ignore[index]
    assert [request.body["max_tokens"] for request in llm.requests] == [1]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("search", SEARCHES)
def test_the_rag_model_still_answers_what_its_documents_say_with_sources(
    service: ServiceFactory, llm: LLMScript, stream: bool, search: str
) -> None:
    llm.then(Step(content="It was electrified in 1952, when it stopped burning paraffin [1]."))
    response = client_for(service(SEARCHES[search][0])).chat.completions.create(
        model="rag", messages=ask("When was the lighthouse lamp electrified?"), stream=stream
    )
    text, last = text_and_last(response, stream)
    assert text.startswith("It was electrified in 1952, when it stopped burning paraffin [1].")
    assert "\n\nSources:\n[1] [" in text
    assert "abstained" not in last.model_extra  # type: ignore[operator]
    assert last.model_extra["sources"][0]["id"] == "lighthouse"  # type: ignore[index]


def test_no_max_tokens_means_what_the_window_leaves(
    service: ServiceFactory, llm: LLMScript
) -> None:
    openai = client_for(service({"llm.context.window": 2000, "llm.maxTokens": 50}))
    openai.chat.completions.create(model="rag", messages=ask("lighthouse"))
    free = 2000 - (3 + 4) - 150  # "lighthouse": 3 tokens at 4 characters each, 4 for its role
    # what the sources' half of it leaves, not llm.maxTokens
    assert llm.requests[0].body["max_tokens"] == free - free // 2


@pytest.mark.parametrize(("threshold", "found"), [(0.99, False), (0.0, True)])
def test_the_similarity_threshold_of_a_request_is_its_relevance_floor(
    service: ServiceFactory, threshold: float, found: bool
) -> None:
    completion = client_for(service()).chat.completions.create(
        model="test-model",
        messages=ask("Who switched on the beacon at nightfall?"),
        extra_body={"index_name": "VectorMain", "similarity_threshold": threshold},
    )
    assert bool(completion.model_extra["sources"]) is found


def test_the_dynamic_top_k_fills_one_request_with_the_passages_that_fit(
    service: ServiceFactory, llm: LLMScript
) -> None:
    settings = {"solr.topK": 2, "openai.dynamic.topk": True, "llm.context.window": 4000}
    completion = client_for(service(settings)).chat.completions.create(
        model="test-model",
        messages=ask("Who switched on the beacon at nightfall?"),
        extra_body={"index_name": "VectorMain", "similarity_threshold": 0},
    )
    sources = completion.model_extra["sources"]
    assert len(llm.requests) == 1  # one stuff request, whatever the strategy
    assert len({source["id"] for source in sources}) > 2  # more than solr.topK
    assert sources[0]["id"] == "lighthouse"  # in relevance order
    sent = llm.requests[0].body
    # within the sources' share: the window (4,000 tokens at 4 characters) less the answer's
    assert sum(len(m["content"]) for m in sent["messages"]) <= (4000 - sent["max_tokens"]) * 4


LISTED = ["rag", "rag-bm25", "rag-vector", "rag-hybrid", "test-model"]


def test_models_lists_the_rag_models_then_the_configured_one(service: ServiceFactory) -> None:
    models = client_for(service()).models.list()
    assert [model.id for model in models.data] == LISTED


def test_streamed_rag_answer_with_sources_in_the_last_chunk(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="Electrified in 1952 [1]."))
    openai = client_for(service())
    chunks = list(
        openai.chat.completions.create(
            model="test-model",
            messages=ask("When was the lighthouse lamp electrified?"),
            stream=True,
            extra_body={"index_name": "FileShare"},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Electrified in 1952 [1]."
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["sources"][0]["id"] == "lighthouse"


def test_streamed_bypass_passes_through(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content="straight from the model"))
    openai = client_for(service(RELAY))
    stream = openai.chat.completions.create(model="m", messages=ask("hi"), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "straight from the model"


def test_first_streamed_chunk_arrives_before_the_upstream_finishes(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content=SAID + "Slowly written [1].", pause_after_first_chunk=5,
                  pause_after_words=10))  # fmt: skip
    openai = client_for(service())
    stream = openai.chat.completions.create(
        model="m", messages=ask("lighthouse"), stream=True, extra_body={"index_name": "FileShare"}
    )
    first_content_at = None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first_content_at = first_content_at or time.monotonic()
    upstream = llm.requests[-1]  # its clock is this machine's monotonic clock, as ours
    assert upstream.stream_completed and first_content_at is not None
    assert first_content_at < upstream.finished  # read while the LLM was still writing


def test_a_quiet_stream_is_kept_alive_by_comments_sdks_skip(
    service: ServiceFactory, llm: LLMScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a proxy in front (nginx: 60 s) takes a stream that says nothing for a dead one; here the
    # quiet is 3 s of the LLM's and the keep-alive every 0.2 s
    monkeypatch.setattr(driver, "IDLE_SECONDS", 0.2)
    llm.then(Step(content=SAID + "Slowly written [1].", pause_after_first_chunk=3.0,
                  pause_after_words=10))  # fmt: skip
    body = {"model": "m", "messages": ask("lighthouse"), "stream": True, "index_name": "FileShare"}
    with httpx.stream("POST", f"{service()}/v1/chat/completions", json=body, timeout=60) as raw:
        lines = list(raw.iter_lines())
    assert ": keep-alive" in lines
    assert lines[-2:] == ["data: [DONE]", ""]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    assert text == SAID + "Slowly written [1]."
    # the OpenAI SDK reads the same stream as if the comments were not there
    llm.then(Step(content=SAID + "Slowly written [1].", pause_after_first_chunk=1.0,
                  pause_after_words=10))  # fmt: skip
    chunks = client_for(service()).chat.completions.create(
        model="m", messages=ask("lighthouse"), stream=True, extra_body={"index_name": "FileShare"}
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        SAID + "Slowly written [1]."
    )


def test_streamed_upstream_error_is_a_clear_error(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content="model crashed", status=500))
    openai = client_for(service())
    with pytest.raises(APIError, match="500"):
        list(
            openai.chat.completions.create(
                model="m",
                messages=ask("lighthouse"),
                stream=True,
                extra_body={"index_name": "FileShare"},
            )
        )


def test_non_streamed_upstream_error_is_a_clear_error(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="model crashed", status=500))
    with pytest.raises(APIError) as raised:
        client_for(service()).chat.completions.create(
            model="m", messages=ask("lighthouse"), extra_body={"index_name": "FileShare"}
        )
    assert raised.value.status_code == 502  # type: ignore[attr-defined]


def test_a_client_that_leaves_cancels_the_upstream(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content=SAID + "word " * 50, pause_after_first_chunk=5, pause_after_words=7))
    base = service()
    body = {"model": "m", "messages": ask("lighthouse"), "stream": True, "index_name": "FileShare"}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=10) as response:
        for line in response.iter_lines():
            if '"content": "The' in line or '"content":"The' in line:
                break
    assert llm.requests[0].wait_until_abandoned()
    assert not llm.requests[0].stream_completed


# -- OpenAI options: honoured or refused, never silently ignored ------------------------------


def test_a_listed_model_can_be_retrieved_and_another_is_model_not_found(
    service: ServiceFactory,
) -> None:
    openai = client_for(service())
    listed = [model.id for model in openai.models.list()]
    assert listed == LISTED
    assert openai.models.retrieve("test-model").id == "test-model"
    assert openai.models.retrieve("rag-hybrid").owned_by == "solr-rag"
    with pytest.raises(NotFoundError) as raised:
        openai.models.retrieve("gpt-imaginary")
    assert raised.value.body["code"] == "model_not_found"  # type: ignore[index]


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ({"n": 2}, "n"),
        ({"n": True}, "n"),  # true == 1 in Python, not in JSON
        ({"n": 1.5}, "n"),
        ({"logprobs": True}, "logprobs"),
    ],
)
def test_options_rag_cannot_honour_are_refused(
    service: ServiceFactory, llm: LLMScript, option: dict, named: str
) -> None:
    response = httpx.post(
        f"{service()}/v1/chat/completions",
        json={"messages": ask("lighthouse"), "index_name": "FileShare", **option},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unsupported_parameter"
    assert error["message"].startswith(named)
    assert llm.requests == []


def test_include_usage_ends_the_stream_with_a_usage_chunk(service: ServiceFactory) -> None:
    chunks = list(
        client_for(service()).chat.completions.create(
            model="test-model",
            messages=ask("lighthouse"),
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"index_name": "FileShare"},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_stream_is_a_json_boolean(service: ServiceFactory, llm: LLMScript) -> None:
    base = service()
    for stream in ("yes", 1, "true"):
        response = httpx.post(
            f"{base}/v1/chat/completions",
            json={"messages": ask("lighthouse"), "index_name": "FileShare", "stream": stream},
        )
        assert response.status_code == 400, (stream, response.text[:200])
        assert response.json()["error"]["message"].startswith("stream"), response.text
    assert llm.requests == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_other_methods_on_a_post_route_are_405_with_allow(
    service: ServiceFactory, method: str
) -> None:
    response = httpx.request(method, f"{service()}/v1/chat/completions")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_model_the_llm_does_not_serve_is_404_not_a_retried_5xx(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="The model `gpt-imaginary` does not exist", status=404))
    with pytest.raises(NotFoundError) as raised:
        client_for(service()).chat.completions.create(
            model="gpt-imaginary", messages=ask("lighthouse"), extra_body={"index_name": "bm25"}
        )
    assert raised.value.body["code"] == "model_not_found"  # type: ignore[index]
    assert len(llm.requests) == 1  # the SDK did not retry it


# -- grounded by default: plain OpenAI clients get answers from the index ---------------------


class _Encoding:
    """An OpenAI encoding as the tests count its loads: where each ran, never loading one."""

    loads: ClassVar[list[tuple[str, bool]]] = []

    def __init__(self, encoding: str) -> None:
        try:
            asyncio.get_running_loop()
            on_the_loop = True
        except RuntimeError:
            on_the_loop = False
        self.loads.append((encoding, on_the_loop))
        self.name = encoding

    def count(self, text: str) -> int:
        return len(text) // 4 + 1


def test_a_plain_request_is_answered_from_the_index(
    service: ServiceFactory, llm: LLMScript, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 81, finding 7: the first request naming an OpenAI model loaded its encoding (2 s)
    # on the event loop; it is loaded in a worker thread, once
    monkeypatch.setattr(tokens, "OpenAIEncoding", _Encoding)
    monkeypatch.setattr(tokens, "_encodings", {})  # none loaded yet
    monkeypatch.setattr(_Encoding, "loads", [])
    openai = client_for(service())
    completion = openai.chat.completions.create(
        model="gpt-4o-mini", messages=ask("When was the lighthouse lamp electrified?")
    )
    again = openai.chat.completions.create(model="gpt-4o-mini", messages=ask("lighthouse lamp"))
    assert again.choices[0].message.content
    assert _Encoding.loads == [("o200k_base", False)]
    assert completion.model_extra is not None
    assert completion.model_extra["sources"][0]["id"] == "lighthouse"
    assert completion.model_extra["citations"][0] == completion.model_extra["sources"][0]["url"]
    assert "the lighthouse was electrified" in llm.requests[0].prompt
    assert llm.requests[0].body["model"] == "gpt-4o-mini"  # the model it named answers
    assert "Sources:" not in completion.choices[0].message.content  # not a rag* model


def test_a_rag_model_writes_its_sources_into_the_message(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="Electrified in 1952 [1]."))
    completion = client_for(service()).chat.completions.create(
        model="rag", messages=ask("When was the lighthouse lamp electrified?")
    )
    content = completion.choices[0].message.content or ""
    answer, sources = content.split("\n\nSources:\n")
    assert answer == "Electrified in 1952 [1]."
    first = completion.model_extra["sources"][0]  # type: ignore[index]
    assert sources.splitlines()[0] == f"[1] [{first['title']}]({first['url']})"
    assert completion.model == "rag"
    assert llm.requests[0].body["model"] == "test-model"  # the configured LLM answers


def test_a_streamed_rag_model_answer_ends_with_its_sources(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="Electrified in 1952 [1]."))
    chunks = list(
        client_for(service()).chat.completions.create(
            model="rag-bm25", messages=ask("When was the lighthouse lamp electrified?"), stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("Electrified in 1952 [1].\n\nSources:\n[1] [")
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["citations"]  # type: ignore[index]
    assert {c.model for c in chunks} == {"rag-bm25"}


def test_the_llms_own_model_name_relays_when_relaying_is_on(
    service: ServiceFactory, llm: LLMScript
) -> None:
    llm.then(Step(content="Plain LLM answer."))
    openai = client_for(service(RELAY))
    plain = openai.chat.completions.create(model="test-model", messages=ask("lighthouse"))
    assert plain.choices[0].message.content == "Plain LLM answer."
    grounded = openai.chat.completions.create(model="rag", messages=ask("lighthouse"))
    assert grounded.model_extra["sources"]  # type: ignore[index]


# -- OpenAI options: stop, length, response_format, tools ---------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_stop_ends_the_answer_even_when_the_llm_ignores_it(
    service: ServiceFactory, llm: LLMScript, stream: bool
) -> None:
    llm.then(Step(content="The lamp was electrified. END Then it was automated."))
    response = client_for(service()).chat.completions.create(
        model="test-model", messages=ask("lighthouse"), stop=["END"], stream=stream
    )
    if stream:
        chunks = list(response)  # type: ignore[arg-type]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reason = chunks[-1].choices[0].finish_reason
    else:
        text, reason = response.choices[0].message.content, response.choices[0].finish_reason  # type: ignore[union-attr]
    assert text.strip() == "The lamp was electrified."
    assert reason == "stop"
    assert llm.requests[-1].body["stop"] == ["END"]


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_cut_by_max_tokens_finishes_with_length(
    service: ServiceFactory, llm: LLMScript, stream: bool
) -> None:
    llm.then(Step(content="The lamp was", finish_reason="length"))
    response = client_for(service()).chat.completions.create(
        model="test-model", messages=ask("lighthouse"), max_tokens=3, stream=stream
    )
    if stream:
        chunks = [c for c in response if c.choices]  # type: ignore[union-attr]
        assert chunks[-1].choices[0].finish_reason == "length"
    else:
        assert response.choices[0].finish_reason == "length"  # type: ignore[union-attr]
    assert llm.requests[-1].body["max_tokens"] == 3


def test_json_object_is_passed_on_and_the_answer_checked(
    service: ServiceFactory, llm: LLMScript
) -> None:
    openai = client_for(service())
    llm.then(Step(content='{"year": 1952, "source": 1}'))
    completion = openai.chat.completions.create(
        model="rag",
        messages=ask("When was the lighthouse lamp electrified? Answer in JSON."),
        response_format={"type": "json_object"},
    )
    assert json.loads(completion.choices[0].message.content or "") == {"year": 1952, "source": 1}
    assert llm.requests[-1].body["response_format"] == {"type": "json_object"}
    llm.then(Step(content="In 1952 [1]."))  # a model that cannot write JSON
    with pytest.raises(BadRequestError) as raised:
        openai.chat.completions.create(
            model="rag", messages=ask("lighthouse"), response_format={"type": "json_object"}
        )
    assert raised.value.body["code"] == "unsupported_parameter"  # type: ignore[index]


class Electrification(BaseModel):
    year: int
    cited: list[int]


def test_parse_gets_an_answer_that_matches_the_schema(
    service: ServiceFactory, llm: LLMScript
) -> None:
    openai = client_for(service())
    llm.then(Step(content='{"year": 1952, "cited": [1]}'))
    parsed = openai.chat.completions.parse(
        model="rag", messages=ask("lighthouse"), response_format=Electrification
    )
    assert parsed.choices[0].message.parsed == Electrification(year=1952, cited=[1])
    sent = llm.requests[-1].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Electrification"
    llm.then(Step(content='{"year": "nineteen fifty-two"}'))
    with pytest.raises(BadRequestError) as raised:
        openai.chat.completions.parse(
            model="rag", messages=ask("lighthouse"), response_format=Electrification
        )
    assert "does not match the schema" in raised.value.body["message"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"stop": [""]}, "stop"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
            "response_format",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": 5}},
                }
            },
            "response_format",
        ),
        ({"model": "rag", "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ],
)
def test_options_that_cannot_be_honoured_are_400_before_any_llm_call(
    service: ServiceFactory, llm: LLMScript, fields: dict, named: str
) -> None:
    response = httpx.post(
        f"{service(RELAY)}/v1/chat/completions",
        json={"model": "rag", "messages": ask("lighthouse"), **fields},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith(named)
    assert llm.requests == []

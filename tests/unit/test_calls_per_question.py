"""What one question costs the box's models (issue 70): on the shipped rag.properties, every
stage together calls the rerank API and the embeddings API (the encoder) an exact number of
times a question. A stage that starts calling one more time fails here, before a benchmark
finds the box answering half as many questions.

No sockets: the LLM and the embeddings API are testing.llm_server's app, the rerank API
testing.rerank_server's, both reached through httpx's ASGI transport and counting what they
receive; retrieval is a list (Solr is the integration suite's). The LLM is the test server,
as a remote LLM would be (`llm.model=test-model`): the capacity the issue measures is the
box's when the LLM is elsewhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.config import Settings
from service.config.properties import parse_properties
from service.rag.assemble import rag_pipeline
from service.rag.pipeline import Pipeline
from service.rag.request import RagQuery
from service.rag.stages import RagState, Retrieve
from service.retrieval import RetrievedDocument
from service.runtime import Runtime
from service.snapshot import Snapshot
from testing.llm_server import LLMScript, create_llm_app
from testing.rerank_server import RerankScript, create_rerank_app

SHIPPED = Path(__file__).resolve().parents[2] / "rag.properties"
# the upstreams pointed at the test apps; nothing else changed from the shipped file
UPSTREAMS = {
    "solr.startup.check": "false",
    "ai.api.endpoint": "http://llm.test/v1/",
    "llm.model": "test-model",
    "ai.embeddings.endpoint": "http://llm.test/v1/",
    "rerank.endpoint": "http://rerank.test/v1/",
}
PASSAGES = [  # what hybrid retrieval finds: solr.topK passages of a few sentences
    RetrievedDocument(
        id=f"pharos-{i}",
        title=f"Pharos {i}",
        url=f"https://example.org/pharos/{i}",
        content=(
            f"Passage {i}. Sostratus of Cnidus built the lighthouse of Alexandria. "
            "It stood on the island of Pharos. Its fire burned at night and mirrors "
            "reflected the sun by day. Earthquakes damaged it in the fourteenth century."
        ),
        score=1.0 - i / 20,
    )
    for i in range(10)
]
# an answer in other words than its source's: the grounding check asks the encoder (an answer
# quoting its source is supported by its words, and the encoder is not asked)
PARAPHRASE = "A Greek architect from Cnidus designed that famous lighthouse [1]."
QUESTIONS = [
    "Who built the lighthouse of Alexandria?",
    "Where did the lighthouse stand?",
    "What damaged the lighthouse?",
]


@dataclasses.dataclass
class Listed:
    """A retriever that finds the same passages for every question."""

    found: list[RetrievedDocument]

    async def run(self, query: str) -> list[RetrievedDocument]:
        return list(self.found)


def routed(llm: Any, rerank: Any, seen: list[str] | None = None) -> Any:
    """One ASGI app: /rerank to the rerank app, everything else to the LLM's; the path of
    every HTTP request it receives appended to `seen`."""

    async def app(scope: dict, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if seen is not None and scope.get("type") == "http":
            seen.append(path)
        target = rerank if path.endswith("/rerank") else llm
        await target(scope, receive, send)

    return app


SEEN: list[str] = []  # every upstream request of the `shipped` fixture's pipeline, by path


@pytest.fixture
async def shipped(
    tmp_path: Path,
) -> AsyncIterator[tuple[Pipeline[RagQuery, RagState], LLMScript, RerankScript]]:
    """The pipeline rag_pipeline builds from the shipped rag.properties, its upstreams the
    counting test apps, its retrieval the list."""
    script, reranks = LLMScript(), RerankScript()
    script.answer = lambda request: PARAPHRASE
    settings = SHIPPED.read_text(encoding="utf-8") + "".join(
        f"\n{key}={value}" for key, value in UPSTREAMS.items()
    )
    path = tmp_path / "rag.properties"
    path.write_text(settings + "\n", encoding="utf-8")
    SEEN.clear()
    app = routed(create_llm_app(script), create_rerank_app(reranks), SEEN)
    runtime = Runtime(path, transport=httpx.ASGITransport(app=app))
    await runtime.start()
    try:
        pipeline = rag_pipeline(Snapshot(runtime))
        pipeline.stages = [
            dataclasses.replace(stage, retriever=lambda scope: Listed(PASSAGES))
            if isinstance(stage, Retrieve)
            else stage
            for stage in pipeline.stages
        ]
        yield pipeline, script, reranks
    finally:
        await runtime.stop()


async def test_the_shipped_stages_are_the_ones_counted(shipped) -> None:
    """If the shipped stages change, the counts below are to be read again."""
    pipeline, _, _ = shipped
    names = [stage.name for stage in pipeline.stages]
    assert names == ["retrieve", "chunk", "rerank", "verify", "chain"]


async def test_a_question_calls_the_reranker_once_and_the_encoder_once(shipped) -> None:
    """Per question, on shipped settings:

    - the rerank API once: the Rerank stage scores every passage retrieval found in one
      request (rerank.window.sentences would add a second, of sentence windows: off as
      shipped);
    - the embeddings API once: the grounding check (grounding.method=embeddings) embeds the
      answer's sentences its words do not support and their closest source sentences, in one
      request (none when words support every sentence). Hybrid retrieval's embedding of the
      question is one more in the service's own embedding mode (solr.embeddings.mode=solr:
      none), counted by the integration suite, whose retrieval is Solr's; the answer cache is
      off as shipped (on, its lookup would embed the question once more).

    The echo check, the verification and logprobs call the LLM only."""
    pipeline, script, reranks = shipped
    for number, question in enumerate(QUESTIONS, start=1):
        reply = await pipeline.run(RagQuery(question))
        answer = await reply.complete()
        assert answer.documents, answer  # answered from the passages: every stage ran
        assert len(reranks.requests) == number, f"question {number}: {reranks.requests}"
        assert len(script.embedded) == number, f"question {number}: {script.embedded}"
    shipped_settings = Settings.of(parse_properties(SHIPPED.read_text(encoding="utf-8")))
    rerank = shipped_settings.rerank
    for request in reranks.requests:  # at most rerank.max.chunks, each cut to its tokens
        assert len(request["documents"]) == min(len(PASSAGES), rerank.max_chunks)
        assert request.get("max_tokens_per_doc") == rerank.max_tokens
        assert request.get("passage_cut", "end") == rerank.cut


async def test_a_second_rerank_request_is_the_sentence_windows_one(shipped) -> None:
    """The one stage allowed a second rerank request: rerank.window.sentences, when on, cuts
    the chunks kept to their best sentences with one more request, of those sentences."""
    pipeline, script, reranks = shipped
    rerank = next(stage for stage in pipeline.stages if stage.name == "rerank")
    pipeline.stages = [
        dataclasses.replace(stage, window=1) if stage is rerank else stage
        for stage in pipeline.stages
    ]
    reply = await pipeline.run(RagQuery(QUESTIONS[0]))
    await reply.complete()
    assert len(reranks.requests) == 2 and len(script.embedded) == 1
    assert len(reranks.requests[1]["documents"]) < len(reranks.requests[0]["documents"]) * 5


async def test_a_question_sends_four_requests_upstream(shipped) -> None:
    """Every upstream request one question makes on shipped settings, retrieval aside (Solr's
    and the question's embedding: the integration suite's), exactly: the rerank request, the
    verification (one token: does a document say the answer?), the answer, and the grounding
    check's one embeddings request for every sentence it embeds. The service's own CPU a
    question is mostly the HTTP of these (issue 70): a stage that starts sending one more, an
    embeddings request a text or a second verification, fails here."""
    pipeline, script, _ = shipped
    for number, question in enumerate(QUESTIONS, start=1):
        before = len(SEEN)
        reply = await pipeline.run(RagQuery(question))
        answer = await reply.complete()
        assert answer.documents, answer
        asked = SEEN[before:]
        assert sorted(asked) == sorted(
            ["/v1/rerank", "/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings"]
        ), f"question {number}: {asked}"
        assert len(script.requests) == 2 * number  # the verification and the answer
        # sent side by side (grounding.verify.parallel: test-model is not ours): either first
        verification, answering = sorted(
            script.requests[-2:], key=lambda request: request.body.get("max_tokens") != 1
        )
        assert verification.body.get("max_tokens") == 1 and not verification.body.get("stream")
        assert answering.body.get("max_tokens") != 1

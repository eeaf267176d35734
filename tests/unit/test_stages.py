"""Each stage of a request, and the loop over them, without sockets: the LLM and the rerank
API are the test servers' apps reached through httpx's ASGI transport, retrieval a list."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import pytest

from service.chains import Chunk, PromptLibrary, Question, number_chunks
from service.config import Settings
from service.errors import EmptyDocument, NoDocumentFound, UpstreamTimeout
from service.llm import ChatClient, LLMOptions
from service.llm.answer_format import AnswerFormat
from service.llm.budget import CallBudget
from service.llm.rerank import RerankClient
from service.llm.size import RequestSize
from service.rag.assemble import rag_pipeline
from service.rag.honesty import Honesty
from service.rag.pipeline import Pipeline
from service.rag.reply import Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.stages import (
    AfterAnswer,
    Chain,
    ChunkDocuments,
    Expand,
    Grade,
    RagState,
    Rerank,
    Retrieve,
    Rewrite,
    SearchQuery,
    Stage,
    StageResult,
    SummaryState,
)
from service.retrieval import RetrievedDocument
from service.runtime import Runtime
from service.snapshot import Snapshot
from service.snapshot.options import RequestOptions
from testing.llm_server import LLMScript, Step, create_llm_app
from testing.rerank_server import RerankScript, create_rerank_app

PROMPTS = PromptLibrary(Path(__file__).resolve().parents[2] / "prompts")
SIZE = RequestSize(20_000)


@pytest.fixture
def script() -> LLMScript:
    return LLMScript()


def in_process(app: object) -> httpx.AsyncClient:
    """An HTTP client whose requests `app` answers in this process: no socket."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))  # type: ignore[arg-type]


@pytest.fixture
async def http(script: LLMScript) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(create_llm_app(script)) as client:
        yield client


def chat(http: httpx.AsyncClient, calls: int = 16) -> ChatClient:
    return ChatClient(http, LLMOptions(endpoint="http://llm/v1/"), calls=CallBudget(calls))


def document(name: str, content: str) -> RetrievedDocument:
    return RetrievedDocument(
        id=name, title=name.title(), url=f"https://example.org/{name}", content=content
    )


def state(query: str = "Who built the lighthouse?", **changes: object) -> RagState:
    """A request's state; `changes` to the RagQuery or to its RequestOptions."""
    names = {field.name for field in dataclasses.fields(RequestOptions)}
    options = RequestOptions(**{k: changes.pop(k) for k in list(changes) if k in names})
    request = RagQuery(query, options=options, **changes)  # type: ignore[arg-type]
    return RagState(query=request, question=Question(text=query), search_query=query)


async def ran(stage: Stage, state: RagState) -> StageResult:
    """The stage run on `state`, its result written into it as the loop does; the result."""
    result = await stage.run(state)
    if not isinstance(result, Reply):
        state.take(result)
    return result


def chunked(*documents: RetrievedDocument) -> list:
    return number_chunks([Chunk(doc, doc.content) for doc in documents])


# -- the loop --------------------------------------------------------------------------------


@dataclass
class Noted:
    """A stage that notes that it ran; `answers`: it makes the reply."""

    name: str
    log: list[str]
    calls_llm: bool = False
    answers: bool = False
    wants: bool = True
    calls_kept: int = 0
    sleeps: float = 0.0
    seen: list[str] = field(default_factory=list)

    def wanted(self, state: RagState) -> bool:
        return self.wants

    async def run(self, state: RagState) -> StageResult:
        await asyncio.sleep(self.sleeps)
        self.log.append(self.name)
        if self.answers:
            return Reply(None, None, state.timings, state.started, 0.0)  # type: ignore[arg-type]
        return SearchQuery(f"{state.search_query} {self.name}")


def loop(stages: list[Noted], llm: ChatClient, timeout: float = 30) -> Pipeline:
    settings = Settings.of({"request.timeout": timeout})
    return Pipeline(settings, llm, lambda q: state(q.query), stages)


async def test_the_loop_runs_the_wanted_stages_in_order_and_times_each(http) -> None:
    log: list[str] = []
    stages = [
        Noted("first", log),
        Noted("skipped", log, wants=False),
        Noted("second", log),
        Noted("chain", log, answers=True),
        Noted("after", log),
    ]
    reply = await loop(stages, chat(http)).run(RagQuery("q"))
    assert log == ["first", "second", "chain"]
    assert set(reply.timings) == {"first", "second", "chain"}


async def test_the_loop_skips_llm_stages_when_only_the_answers_call_is_left(http) -> None:
    log: list[str] = []
    stages = [Noted("rewrite", log, calls_llm=True), Noted("chain", log, answers=True)]
    await loop(stages, chat(http, calls=1)).run(RagQuery("q"))
    assert log == ["chain"]
    log.clear()
    await loop(stages, chat(http, calls=2)).run(RagQuery("q"))
    assert log == ["rewrite", "chain"]


async def test_the_loop_keeps_the_calls_the_stages_after_it_declare(http) -> None:
    """Issue 67: a stage that declares the calls it keeps (the verification's, the answer's)
    is left them by the stages before it, and runs on them itself."""
    log: list[str] = []
    stages = [
        Noted("grade", log, calls_llm=True),
        Noted("verify", log, calls_llm=True, calls_kept=1),
        Noted("chain", log, answers=True, calls_kept=1),
    ]
    for calls, ran in ((1, ["chain"]), (2, ["verify", "chain"]), (3, ["grade", "verify", "chain"])):
        log.clear()
        await loop(stages, chat(http, calls=calls)).run(RagQuery("q"))
        assert log == ran, calls


async def test_the_loop_writes_each_stages_result_into_the_state(http) -> None:
    """A stage returns what it made; the loop, not the stage, writes it into the state (the
    next stage reads it there)."""
    seen: list[str] = []

    @dataclass
    class Reads(Noted):
        async def run(self, state: RagState) -> StageResult:
            seen.append(state.search_query)
            return await super().run(state)

    stages = [Noted("first", []), Noted("second", []), Reads("chain", [], answers=True)]
    await loop(stages, chat(http)).run(RagQuery("q"))
    assert seen == ["q first second"]


def test_a_state_takes_only_the_results_of_its_own_stages() -> None:
    summary = SummaryState(query=SummarizeQuery(text="Some text."))
    with pytest.raises(TypeError, match="SummaryState takes no SearchQuery"):
        summary.take(SearchQuery("words"))


async def test_the_loop_says_when_no_stage_made_the_reply(http) -> None:
    with pytest.raises(RuntimeError, match="no stage made the reply"):
        await loop([Noted("retrieve", [])], chat(http)).run(RagQuery("q"))


async def test_the_loop_ends_at_the_deadline(http) -> None:
    stages = [Noted("slow", [], sleeps=5), Noted("chain", [], answers=True)]
    with pytest.raises(UpstreamTimeout, match=r"request\.timeout"):
        await loop(stages, chat(http), timeout=0.2).run(RagQuery("q"))


# -- the stages ------------------------------------------------------------------------------


async def test_rewrite_replaces_the_search_query_and_counts_its_call(http, script) -> None:
    script.then(Step(content="lighthouse builder Alexandria"))
    asked = state()
    await ran(Rewrite(chat(http), PROMPTS), asked)
    assert asked.search_query == "lighthouse builder Alexandria"
    assert len(asked.usages) == 1 and len(script.requests) == 1
    assert not Rewrite(chat(http), PROMPTS).wanted(state(document_id="doc-1"))


async def test_expand_writes_the_queries_searched(http, script) -> None:
    script.then(Step(content='{"queries": ["lighthouse Pharos", "Sostratus architect"]}'))
    asked = state()
    await ran(Expand(chat(http), PROMPTS, 3), asked)
    assert "Sostratus architect" in asked.queries and len(asked.queries) >= 2


@dataclass
class Listed:
    """A retriever over a list: what each query finds."""

    found: dict[str, list[RetrievedDocument]]

    async def run(self, query: str) -> list[RetrievedDocument]:
        return self.found.get(query, [])


def retrieve(found: dict[str, list[RetrievedDocument]]) -> Retrieve:
    settings = Settings()
    return Retrieve(settings.retrieval, settings.solr, None, lambda scope: Listed(found))  # type: ignore[arg-type]


async def test_retrieve_fuses_several_queries_and_says_when_nothing_is_found() -> None:
    a, b, c = document("a", "A."), document("b", "B."), document("c", "C.")
    asked = state()
    asked.queries = ("one", "two")
    await ran(retrieve({"one": [a, b], "two": [c, a]}), asked)
    assert asked.documents[0].id == "a" and {d.id for d in asked.documents} == {"a", "b", "c"}
    with pytest.raises(NoDocumentFound, match="found nothing"):
        await retrieve({}).run(state())
    allowed = state(answer_without_sources=True)
    await ran(retrieve({}), allowed)
    assert allowed.documents == []


async def test_chunking_numbers_chunks_by_document_and_refuses_documents_without_text() -> None:
    settings = Settings.of({"chunking.chunk.size": 60})
    asked = state()
    asked.documents = [document("a", "First sentence here. " * 8), document("b", "Other text.")]
    await ran(ChunkDocuments(settings.prompt), asked)
    assert len(asked.chunks) > 2 and {c.number for c in asked.chunks} == {1, 2}
    empty = state()
    empty.documents = [document("a", "   ")]
    with pytest.raises(NoDocumentFound, match="no text"):
        await ran(ChunkDocuments(settings.prompt), empty)
    summary = SummaryState(query=SummarizeQuery(text=" "))
    summary.documents = [document("", " ")]
    with pytest.raises(EmptyDocument):
        await ran(ChunkDocuments(settings.prompt), summary)


@pytest.fixture
def reranks() -> RerankScript:
    return RerankScript()


@pytest.fixture
async def rerank_http(reranks: RerankScript) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(create_rerank_app(reranks)) as client:
        yield client


def reranker(http: httpx.AsyncClient, top_n: int = 2, max_chunks: int = 100) -> Rerank:
    client = RerankClient(http, LLMOptions(endpoint="http://rerank/v1/", model="m"))
    return Rerank(client, top_n, max_chunks)


async def test_rerank_keeps_the_best_chunks_best_first_and_renumbers_them(
    rerank_http, reranks
) -> None:
    asked = state("Who built the lighthouse of Alexandria?")
    asked.chunks = chunked(
        document("tides", "Tides follow the moon."),
        document("pharos", "Sostratus built the lighthouse of Alexandria."),
        document("walls", "The lighthouse walls were white."),
    )
    await ran(reranker(rerank_http), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["pharos", "walls"]
    assert [c.number for c in asked.chunks] == [1, 2]
    sent = reranks.requests[0]
    assert sent["query"] == "Who built the lighthouse of Alexandria?" and sent["model"] == "m"
    assert sent["top_n"] == 3  # every chunk's score: the blend and the minimum need them
    assert sent["documents"][0] == "Tides follow the moon."


async def test_rerank_blend_weighs_retrieval_and_the_reranker_alike(rerank_http) -> None:
    """The reranker prefers `words` (all the query's words) by a little, retrieval preferred
    `first` by far: blended, `first` stays first; by the reranker alone, `words` leads."""
    question = "white lighthouse walls"

    def retrieved() -> list:
        found = [
            ("first", "The lighthouse walls.", 30.0),
            ("words", "White lighthouse walls.", 2.0),
            ("tides", "Tides.", 1.0),
        ]
        return chunked(*(replace(document(i, text), score=score) for i, text, score in found))

    asked = state(question)
    asked.chunks = retrieved()
    await ran(reranker(rerank_http, top_n=3), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["words", "first", "tides"]
    asked.chunks = retrieved()
    await ran(replace(reranker(rerank_http, top_n=3), order="blend"), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["first", "words", "tides"]


async def test_rerank_cuts_each_chunk_kept_to_its_best_window_of_sentences(
    rerank_http, reranks
) -> None:
    asked = state("Who built the white lighthouse?")
    long = (
        "Alexandria had two harbours. Ships came from Rhodes. Sostratus built the white "
        "lighthouse. It stood for centuries."
    )
    asked.chunks = chunked(document("pharos", long), document("short", "A white wall."))
    await ran(replace(reranker(rerank_http, top_n=2), window=2), asked)
    assert [c.chunk.text for c in asked.chunks] == [
        "Ships came from Rhodes. Sostratus built the white lighthouse.",  # first of the best
        "A white wall.",  # no more sentences than a window: whole
    ]
    windows = reranks.requests[-1]["documents"]
    assert len(windows) == 3 + 1 and windows[-1] == "A white wall."  # one request for all
    asked.chunks = chunked(document("pharos", long))
    assert replace(reranker(rerank_http), window=2).wanted(asked)  # one chunk is cut too
    assert not reranker(rerank_http).wanted(asked)
    reranks.status = 503  # the API fails: the chunks stay whole
    await ran(replace(reranker(rerank_http), window=2), asked)
    assert [c.chunk.text for c in asked.chunks] == [long]


async def test_rerank_leaves_out_chunks_below_the_minimum_and_abstains_when_none_is_left(
    rerank_http,
) -> None:
    asked = state("white lighthouse walls")
    found = [("walls", "White lighthouse walls."), ("half", "The lighthouse."), ("no", "Tides.")]
    asked.chunks = chunked(*(document(i, text) for i, text in found))
    await ran(replace(reranker(rerank_http, top_n=3), min_score=0.3), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["walls", "half"]  # 1.0, 0.33; not 0
    asked.chunks = chunked(document("no", "Tides."))  # one chunk: still scored
    with pytest.raises(NoDocumentFound, match=r"scored the best of 1 passages 0.00, below"):
        await ran(replace(reranker(rerank_http), min_score=0.3), asked)


async def test_rerank_reads_teis_answer_and_sends_at_most_max_chunks(rerank_http, reranks) -> None:
    reranks.shape = "tei"
    asked = state("white walls")
    asked.chunks = chunked(
        *(document(f"d{n}", f"text {n}") for n in range(5)), document("w", "white walls")
    )
    await ran(reranker(rerank_http, top_n=3, max_chunks=6), asked)
    assert asked.chunks[0].chunk.document.id == "w" and len(asked.chunks) == 3
    asked.chunks = chunked(
        *(document(f"d{n}", f"text {n}") for n in range(5)), document("w", "white walls")
    )
    await ran(reranker(rerank_http, top_n=3, max_chunks=4), asked)
    assert len(reranks.requests[-1]["documents"]) == 4
    assert "w" not in {c.chunk.document.id for c in asked.chunks}


async def test_a_failing_rerank_api_keeps_the_retrieval_order(rerank_http, reranks, caplog) -> None:
    reranks.status = 503
    asked = state("lighthouse")
    asked.chunks = chunked(document("a", "Tides."), document("b", "The lighthouse."))
    await ran(reranker(rerank_http), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["a", "b"]
    assert "reranking skipped" in caplog.text


@pytest.mark.parametrize(
    "body",
    [
        '{"results": [{"index": 7, "relevance_score": 0.9}]}',  # out of range
        '{"results": [{"index": -1, "relevance_score": 0.9}]}',
        '{"results": [{"index": true, "relevance_score": 0.9}]}',
        '{"results": [{"index": 0, "relevance_score": NaN}]}',
        '{"results": [{"index": 0}]}',
        '{"results": "everything"}',
        '{"results": [7]}',
        "[]]",
    ],
)
async def test_a_rerank_answer_that_makes_no_sense_keeps_the_retrieval_order(
    rerank_http, reranks, caplog, body: str
) -> None:
    reranks.body = body
    asked = state("lighthouse")
    asked.chunks = chunked(document("a", "Tides."), document("b", "The lighthouse."))
    await ran(reranker(rerank_http), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["a", "b"]
    assert "reranking skipped" in caplog.text


async def test_grading_leaves_out_low_chunks_and_refuses_when_none_is_left(http, script) -> None:
    asked = state()
    asked.chunks = chunked(document("a", "Tides."), document("b", "Sostratus built it."))
    grades = '{"grades": [{"id": 1, "relevance": "LOW"}, {"id": 2, "relevance": "HIGH"}]}'
    script.then(Step(content=grades))
    await ran(Grade(chat(http), PROMPTS, SIZE, "HIGH", 2), asked)
    assert [c.chunk.document.id for c in asked.chunks] == ["b"] and asked.chunks[0].number == 1
    script.then(Step(content='{"grades": [{"id": 1, "relevance": "LOW"}]}'))
    with pytest.raises(NoDocumentFound, match="grading found no chunk"):
        await ran(Grade(chat(http), PROMPTS, SIZE, "HIGH", 2), asked)
    assert len(script.requests) == 2  # the refused grading's call was made (its request ends)
    assert len(asked.usages) == 1
    allowed = state(answer_without_sources=True)  # nothing kept, the request goes on:
    allowed.chunks = chunked(document("a", "Tides."))  # the grading's cost is counted
    script.then(Step(content='{"grades": [{"id": 1, "relevance": "LOW"}]}'))
    await ran(Grade(chat(http), PROMPTS, SIZE, "HIGH", 2), allowed)
    assert allowed.chunks == [] and len(allowed.usages) == 1


def chain(llm: ChatClient) -> Chain:
    return Chain(llm, PROMPTS, SIZE, "stuff", 2, 200, AfterAnswer(Honesty()))


async def test_the_chain_makes_a_reply_whose_answer_cites_its_sources(http, script) -> None:
    asked = state()
    asked.chunks = chunked(document("pharos", "Sostratus built the lighthouse."))
    reply = await chain(chat(http)).run(asked)
    assert isinstance(reply, Reply) and script.requests == []  # the answer's call is still to go
    answer = await reply.complete()
    assert answer.message.endswith("[1]") and answer.documents[0].cited
    assert answer.llm_calls == 1 and "Sostratus" in script.requests[0].prompt


async def test_a_replys_answer_reads_its_text_first(http, script) -> None:
    """The trap: answer() before the text was read once returned an empty message."""
    asked = state()
    asked.chunks = chunked(document("pharos", "Sostratus built the lighthouse."))
    reply = await chain(chat(http)).run(asked)
    answer = await reply.answer()
    assert answer.message.startswith("Test answer to:") and answer.documents
    with pytest.raises(RuntimeError, match="read once"):
        await reply.complete()


@pytest.mark.parametrize(
    ("short", "strategy", "asked", "grammar"),
    [
        (True, "stuff", {}, True),
        (False, "stuff", {}, False),  # prompt.answer.form=sentence
        (True, "refine", {}, False),  # the last request is not the one with the sources
        (True, "stuff", {"format": "bullets"}, False),  # the caller asked a form
        (True, "stuff", {"form": AnswerFormat(stop=("END",))}, False),
    ],
)
async def test_the_short_answer_holds_the_last_request_to_its_grammar(
    http, script, short: bool, strategy: str, asked: dict, grammar: bool
) -> None:
    """Issue 46, item 3: the short form's grammar names the sources sent, and goes only with
    a stuff request the caller asked no form of; the citation is then checked."""
    query = state(**asked)
    query.chunks = chunked(
        document("pharos", "Sostratus built the lighthouse."),
        document("lamp", "The lamp burned paraffin until 1952."),
    )
    stage = Chain(chat(http), PROMPTS, SIZE, strategy, 2, 200, AfterAnswer(Honesty()),
                  short=short)  # fmt: skip
    script.then(Step(content="until 1952 [1]"))
    reply = await stage.run(query)
    answer = await reply.complete()
    sent = script.requests[-1].body.get("grammar")
    assert (sent is not None) == grammar
    if grammar:
        assert 'number ::= "1" | "2"' in sent
        assert answer.message == "until 1952 [2]"  # moved to the source that says it


async def test_without_chunks_the_chain_answers_the_conversation(http, script) -> None:
    asked = state("Hello there", answer_without_sources=True)
    reply = await chain(chat(http)).run(asked)
    answer = await reply.complete()
    assert answer.documents == [] and script.requests[0].prompt == "Hello there"


@pytest.mark.parametrize(
    ("key", "value"),
    [("rerank.top.n", 0), ("rerank.max.chunks", 5000), ("rerank.endpoint", "ftp://x"),
     ("rerank.timeout", -1)],
)  # fmt: skip
def test_rerank_settings_are_validated(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(key)):
        Settings.of({key: value})


async def assembled(tmp_path: Path, script: LLMScript, **values: object) -> list[str]:
    """The stage names rag_pipeline builds on these settings (a Runtime whose upstreams are
    the LLM test app in the process: nothing is called while assembling)."""
    path = tmp_path / "rag.properties"
    lines = ["solr.startup.check=false", *(f"{key}={value}" for key, value in values.items())]
    path.write_text("\n".join(lines) + "\n")
    runtime = Runtime(path, transport=httpx.ASGITransport(app=create_llm_app(script)))
    await runtime.start()
    try:
        pipeline = rag_pipeline(Snapshot(runtime))
        return [stage.name for stage in pipeline.stages]
    finally:
        await runtime.stop()


async def test_the_assembler_builds_the_stages_the_settings_turn_on(tmp_path, script) -> None:
    assert await assembled(tmp_path, script) == ["retrieve", "chunk", "chain"]
    everything = await assembled(
        tmp_path,
        script,
        **{
            "cache.enabled": "true",
            "chat.query.rewriting.enabled": "true",
            "rag.queries.count": 3,
            "rerank.enabled": "true",
            "rag.grading.enabled": "true",
        },
    )
    assert everything == [
        "cache", "rewrite", "expand", "retrieve", "chunk", "rerank", "grade", "chain"
    ]  # fmt: skip


async def test_a_runtime_with_a_transport_reaches_its_upstreams_without_sockets(
    tmp_path, script
) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("solr.startup.check=false\nai.api.endpoint=http://llm.invalid/v1/\n")
    runtime = Runtime(path, transport=httpx.ASGITransport(app=create_llm_app(script)))
    await runtime.start()
    try:
        assert await Snapshot(runtime).llm.list_models() == ["test-model"]
    finally:
        await runtime.stop()


async def test_a_request_s_options_share_its_call_budget(tmp_path, script) -> None:
    """One request, one llm.max.calls.per.request: the snapshot a request's options make (an
    agent's answer with the conversation's history) spent a whole budget of its own."""
    path = tmp_path / "rag.properties"
    path.write_text("solr.startup.check=false\nllm.max.calls.per.request=3\n")
    runtime = Runtime(path, transport=httpx.ASGITransport(app=create_llm_app(script)))
    await runtime.start()
    try:
        snapshot = Snapshot(runtime)
        snapshot.llm.calls.spend()
        answering = snapshot.overridden(RequestOptions(always_use_history=True))
        assert answering is not snapshot and answering.llm is not snapshot.llm
        assert answering.llm.calls.left == 2
        answering.llm.calls.spend()
        assert snapshot.llm.calls.left == 1
    finally:
        await runtime.stop()

"""The stages of a request, chosen and built from one settings snapshot: the one place that
knows which stage a setting turns on.

    >>> reply = await ask(snapshot, RagQuery("Who discovered penicillin?"))
    >>> reply = await summarize(snapshot, SummarizeQuery(document_id="doc-1"))

`ask` is every route's way in: the request's own options (RagQuery.options) are applied here,
once, so no route can forget one.

A new stage is one class (`service.rag.stages`), one settings part and one line here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from service.chains import Question
from service.chains.prompts import FORMAT_INSTRUCTIONS, language_name, not_found_sentence
from service.config import Settings
from service.deadline import Deadline
from service.errors import BadRequest, FeatureDisabled
from service.grounding import GroundingCheck, GroundingPolicy, LlmGroundingCheck
from service.llm import ChatMessage
from service.llm.size import request_size
from service.models import packaged
from service.rag.honesty import Honesty
from service.rag.pipeline import Pipeline, Progress
from service.rag.reply import Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.stages import (
    AfterAnswer,
    CacheLookup,
    Chain,
    ChunkDocuments,
    Expand,
    Fetch,
    Given,
    Grade,
    RagState,
    Rerank,
    Retrieve,
    Rewrite,
    Stage,
    Summarize,
    SummaryState,
    Verify,
)
from service.retrieval import RetrievedDocument
from service.snapshot import Snapshot
from service.text import normalize_question, sanitize_query
from service.text.language import answer_language

RagPipeline = Pipeline[RagQuery, RagState]
SummarizePipeline = Pipeline[SummarizeQuery, SummaryState]


async def ask(
    snapshot: Snapshot,
    query: RagQuery,
    progress: Progress | None = None,
    deadline: Deadline | None = None,
) -> Reply:
    """The answer to `query`, up to its last LLM request: its options applied to the
    snapshot, the stages they turn on built and run (each named to `progress` as it
    begins), within `deadline` when it is part of a longer work (an agent's)."""
    return await rag_pipeline(snapshot.overridden(query.options)).run(query, progress, deadline)


async def answer_from(
    snapshot: Snapshot,
    query: RagQuery,
    documents: Sequence[RetrievedDocument],
    progress: Progress | None = None,
    deadline: Deadline | None = None,
) -> Reply:
    """The answer to `query` from `documents` an earlier step found (an agent's tools): rag's
    stages from the chunking on (rerank, grading, verification, the chain and its answer
    stages), so that answer is cut, cited, checked and refused as /ai/rag's is."""
    pipeline = rag_pipeline(snapshot.overridden(query.options), given=tuple(documents))
    return await pipeline.run(query, progress, deadline)


async def summarize(
    snapshot: Snapshot, query: SummarizeQuery, progress: Progress | None = None
) -> Reply:
    """The summary of one document, up to its last LLM request."""
    return await summarize_pipeline(snapshot).run(query, progress)


def rag_pipeline(
    snapshot: Snapshot, given: tuple[RetrievedDocument, ...] | None = None
) -> RagPipeline:
    """/ai/rag and /v1/chat/completions: [cache] [rewrite] [expand] retrieve chunk [rerank]
    [grade] [verify] chain, then, once the answer is written, its answer stages (AfterAnswer:
    confidence, [echo], [grounding], [cache_write]). With `given` documents (an agent's), they
    stand for retrieve, and nothing before it runs (no search, no cached answer)."""
    settings = snapshot.settings
    llm, prompts = snapshot.llm, snapshot.prompts
    size = request_size(settings, llm.options.model)  # counted once: it may load a tokenizer
    reserve = size.of_answer(settings.llm.max_tokens)
    stages: list[Stage[RagState]] = [Given(given)] if given is not None else []
    if given is None:
        if snapshot.answer_cache is not None:
            stages.append(CacheLookup(snapshot.answer_cache, lambda q: variant(snapshot, q), llm))
        if settings.chat.rewriting_enabled:
            stages.append(Rewrite(llm, prompts))
        if settings.retrieval.queries_count > 1:
            stages.append(Expand(llm, prompts, settings.retrieval.queries_count))
        retrieve = Retrieve(settings.retrieval, settings.solr, snapshot.solr, snapshot.retriever)
        stages.append(retrieve)
    stages.append(ChunkDocuments(settings.prompt))
    if snapshot.rerank is not None:
        rerank = settings.rerank
        stages.append(
            Rerank(
                snapshot.rerank,
                rerank.top_n,
                rerank.max_chunks,
                rerank.min_score,
                rerank.order,
                rerank.window_sentences,
                rerank.top_n_parts,
                rerank.close_margin,
            )
        )
    if settings.retrieval.grading_enabled:
        concurrency = settings.prompt.map_concurrency
        stages.append(Grade(llm, prompts, size, settings.retrieval.grading_min, concurrency))
    honesty = Honesty.of(settings)
    strategy = settings.prompt.strategy
    if honesty.verifying:
        beside, least = honesty.beside, honesty.abstain_unsupported
        stages.append(Verify(llm, prompts, size, strategy, beside, least))
    after = AfterAnswer(honesty, grounding_policy(snapshot), snapshot.answer_cache)
    concurrency = settings.prompt.map_concurrency
    short = short_answers(settings)
    stages.append(Chain(llm, prompts, size, strategy, concurrency, reserve, after, short))
    return Pipeline(settings, llm, lambda query: _rag_state(snapshot, query), stages)


def answer_calls(settings: Settings) -> int:
    """The LLM calls rag's answer makes once it has its documents (the stages rag_pipeline
    adds after them that call the LLM: Verify's when verifying, Chain's): what the agent's
    steps leave it."""
    verify = Verify.calls_kept if Honesty.of(settings).verifying else 0
    return verify + Chain.calls_kept


def short_answers(settings: Settings) -> bool:
    """prompt.answer.form: short, or auto with one of the GGUF models llama.cpp serves us (the
    only LLMs known to take a grammar)."""
    form = settings.prompt.answer_form
    return form == "short" or (form == "auto" and packaged.embedded(settings.llm.model))


def summarize_pipeline(snapshot: Snapshot) -> SummarizePipeline:
    """/ai/summarize: one document (by id, or posted text) -> chunk -> summarize."""
    settings = snapshot.settings
    llm = snapshot.llm
    size = request_size(settings, llm.options.model)
    stages: list[Stage[SummaryState]] = [
        Fetch(snapshot.solr, settings.solr),
        ChunkDocuments(settings.prompt),
        Summarize(
            llm,
            snapshot.prompts,
            size,
            settings.prompt.map_concurrency,
            size.of_answer(settings.llm.max_tokens),
        ),
    ]
    return Pipeline(settings, llm, lambda query: _summary_state(snapshot, query), stages)


def grounding_policy(snapshot: Snapshot) -> GroundingPolicy | None:
    """How the answer is checked against its sources, or None (grounding.enabled off)."""
    settings = snapshot.settings
    grounding = settings.grounding
    if not grounding.enabled:
        return None
    check = GroundingCheck(
        None if grounding.method == "words" else snapshot.embeddings,
        min_overlap=grounding.min_overlap,
        min_similarity=grounding.min_similarity,
    )
    if grounding.method != "llm":
        return GroundingPolicy(check, grounding.action, grounding.min_ratio, grounding.min_overlap)
    llm = snapshot.llm
    judge = LlmGroundingCheck(
        llm,
        snapshot.prompts,
        request_size(settings, llm.options.model),
        check,
        concurrency=settings.prompt.map_concurrency,
    )
    return GroundingPolicy(judge, grounding.action, grounding.min_ratio, grounding.min_overlap)


def variant(snapshot: Snapshot, request: RagQuery) -> str:
    """Everything but the question that shapes an answer, hashed: the settings in force, the
    prompts, the model, the caller's groups, id, lang (or the question's language), format and
    the request's options and answer form. Two requests share cached answers only when it is
    equal."""
    scope = request.scope
    if scope.groups is not None:
        scope = replace(scope, groups=tuple(sorted(scope.groups)))
    asked = replace(request, query="", history=(), scope=scope)
    model = snapshot.llm.options.model
    # the answer's language too: a French question meaning an English one is not its answer
    language = answer_language(request.lang, request.query)
    parts = (snapshot.settings.version(), snapshot.prompts.fingerprint, model, repr(asked),
             language)  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def searched(question: str) -> str:
    """The question as Solr is asked it (sanitized); BadRequest when nothing is left of it."""
    search_query = sanitize_query(question)
    if not search_query:
        raise BadRequest("the query is empty once sanitized")
    return search_query


def _rag_state(snapshot: Snapshot, request: RagQuery) -> RagState:
    settings = snapshot.settings
    if not settings.server.enable_rag:
        raise FeatureDisabled("ai.enable.rag is false in rag.properties")
    search_query = searched(request.query)
    # the answer's language: the caller's, else the question's, named in the prompt unless it
    # is English (the prompts' default, "the language of the question", is what a small
    # model drifts from in another language)
    language = answer_language(request.lang, request.query)
    named = language if request.lang or language != "en" else ""
    question = Question(
        text=normalize_question(request.query),
        history=_history(snapshot, request),
        language=language_name(named),
        format_instruction=FORMAT_INSTRUCTIONS[request.format],
        not_found=not_found_sentence(language),
    )
    return RagState(query=request, question=question, search_query=search_query)


def _summary_state(snapshot: Snapshot, request: SummarizeQuery) -> SummaryState:
    if not snapshot.settings.server.enable_summarization:
        raise FeatureDisabled("ai.enable.summarization is false in rag.properties")
    return SummaryState(query=request)


def _history(snapshot: Snapshot, request: RagQuery) -> tuple[ChatMessage, ...]:
    chat = snapshot.settings.chat
    if request.options.always_use_history:
        return request.history
    if not chat.memory_enabled or chat.history_size == 0:
        return ()
    return request.history[-chat.history_size :]

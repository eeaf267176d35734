"""Datafari 7's synthesis (`action: synthesize`): each of the filters' documents summarized
(the first SYNTHESIS_MAX_FILES that can be read, among the first MAX_TRIED ids), then one
answer written from the summaries, citing them (`prompts/synthesis.j2`).

The whole synthesis is one request: one deadline (`request.timeout`) bounds every summary and
the final call together, one call budget (`llm.max.calls.per.request`) pays for them all, and
the answer reports every LLM call it made.

    >>> answer = await synthesize(snapshot, SynthesisQuery(ids, question, lang, scope))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from service.chains.prompts import language_name
from service.deadline import Deadline
from service.errors import (
    DocumentNotFound,
    EmptyDocument,
    NoFileContent,
    SummarySourceNotFound,
    TooManyCalls,
)
from service.llm import ChatMessage
from service.rag import assemble
from service.rag.reply import Answer, AnswerDocument
from service.rag.request import SummarizeQuery
from service.retrieval import Scope
from service.snapshot import Snapshot
from service.text.citations import cited_numbers

log = logging.getLogger(__name__)

SYNTHESIS_MAX_FILES = 5  # Datafari's synthesis.maxFiles: the documents a synthesis reads
MAX_TRIED = 4 * SYNTHESIS_MAX_FILES  # ids tried to find them (one not there is passed over)
ASKED = "Write a synthesis of these documents"  # Datafari's words, when nothing is asked


@dataclass(frozen=True)
class SynthesisQuery:
    """The documents to synthesize (by id, in order), what is asked of them, in which language,
    within which scope."""

    ids: tuple[str, ...]
    question: str = ""
    lang: str | None = None
    scope: Scope | None = None


async def synthesize(
    snapshot: Snapshot, query: SynthesisQuery, progress: Callable[[str], None] | None = None
) -> Answer:
    """The synthesis of the query's documents (NoFileContent when none could be read)."""
    deadline = Deadline(snapshot.settings.server.request_timeout)
    return await deadline.run(_synthesize(snapshot, query, progress or (lambda _: None)))


async def _synthesize(
    snapshot: Snapshot, query: SynthesisQuery, tell: Callable[[str], None]
) -> Answer:
    ids = list(dict.fromkeys(query.ids))[:MAX_TRIED]
    started = time.perf_counter()
    tell("synthesis:start")
    summaries: list[AnswerDocument] = []
    answer = Answer(message="", documents=[])
    calls = snapshot.llm.calls
    with calls.reserving(1):  # the final request's call: the summaries never spend it
        for document_id in ids:
            if len(summaries) == SYNTHESIS_MAX_FILES:
                break
            if calls.left <= 0:  # the documents past the budget are left out
                if summaries:
                    break
                raise TooManyCalls(
                    "a synthesis needs at least 2 LLM calls (a summary, then the synthesis): "
                    f"raise llm.max.calls.per.request (now {calls.limit + 1})"
                )
            wanted = min(SYNTHESIS_MAX_FILES, len(ids))
            tell(f"synthesis:summary generation ({len(summaries) + 1}/{wanted})")
            asked = SummarizeQuery(document_id=document_id, lang=query.lang, scope=query.scope)
            try:
                summary = await (await assemble.summarize(snapshot, asked)).complete()
            except (DocumentNotFound, SummarySourceNotFound, EmptyDocument) as skipped:
                log.info("synthesis: %s left out (%s)", document_id[:64], skipped.reason)
                continue
            except TooManyCalls:
                if not summaries:
                    raise
                log.info("synthesis: %s left out (llm.max.calls.per.request)", document_id[:64])
                break
            answer.llm_calls += summary.llm_calls
            answer.usage += summary.usage
            source = summary.documents[0] if summary.documents else None
            title, url = (source.title, source.url) if source else (document_id, "")
            summaries.append(AnswerDocument(document_id, title, url, summary.message,
                                            len(summaries) + 1, cited=False))  # fmt: skip
    if not summaries:
        raise NoFileContent(f"none of the {len(ids)} document(s) could be read")
    tell("synthesis:generation")
    completion = await snapshot.llm.complete(synthesis_messages(snapshot, summaries, query))
    answer.add_usage(completion.usage)
    text = completion.text.strip()
    cited = cited_numbers(text)
    answer.message = text
    answer.documents = [replace(d, cited=d.number in cited) for d in summaries]
    answer.timings = {"synthesis": round((time.perf_counter() - started) * 1000, 1)}
    return answer


def synthesis_messages(
    snapshot: Snapshot, summaries: list[AnswerDocument], query: SynthesisQuery
) -> list[ChatMessage]:
    """The one request of a synthesis: the summarizer's instructions (in the query's
    language), then the numbered summaries and what to write."""
    prompts = snapshot.prompts
    language = language_name(query.lang)
    common = {"language": language, "history": [], "format_instruction": "", "not_found": ""}
    numbered = "\n\n".join(f"[{d.number}] {d.title}\n{d.content}" for d in summaries)
    question = query.question.strip() or ASKED + "."
    return [
        ChatMessage("system", prompts.render("summarize_system", **common)),
        ChatMessage(
            "user", prompts.render("synthesis", summaries=numbered, question=question, **common)
        ),
    ]

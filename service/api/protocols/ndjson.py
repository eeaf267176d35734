"""Datafari 7's stream events, as its ChatStream names them and NdjsonChatStream writes them:
one JSON object a line, `{"type": T, "data": {...}, "ts": <epoch milliseconds>}`.

    event              data                                   when
    stream.started     {}                                     first, always
    memory             {memoryId}                             the turn's memory
    phase              {name}                                 service.started, Rag:retrieving
                                                              chat history, Rag:query
                                                              rewriting, Rag:retrieval,
                                                              Rag:response generation,
                                                              summarize:..., search:start,
                                                              service:done
    message.delta      {text}                                 the answer as the LLM writes it
    tool.call          {id, toolName, label, icon?, i18nKey?}  an agent's tool starts
    tool.result        {id, durationMs}                       ... and ends
    tool.error         {id, durationMs, error}                ... or fails (the agent goes on)
    sources.add        {source: {id, title, url, content}}    one a source (one a document)
    search.results     {docs: [{docId, title, url, content}]} action search: what it found
    sources.final      {items: [...]}                         every source
    message.final      {text}                                 the answer kept (replaces deltas)
    conversation       {conversationId, title}                the conversation it was kept in
    error              {code, label, message, reason}         a failure
    stream.completed   {status: OK | ERROR}                   last, always

Ours beside theirs, in extra fields a Datafari client ignores: `step` (our stage's name) on a
phase, `cited` on a source, `timings`, `usage`, `abstained` on message.final.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence

from service.agents.tools import TOOLS, AgentEvent, AnswerText, ToolEvent
from service.api.messages import user_message
from service.api.protocols.envelopes import datafari_code
from service.errors import ServiceError

NDJSON_TYPE = "application/x-ndjson; charset=utf-8"
NDJSON_HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}

# our stages' names as Datafari's phases (a stage not named here shows no phase of its own)
PHASES: dict[str, str] = {
    "rewrite": "Rag:query rewriting",
    "cache": "Rag:retrieval",
    "expand": "Rag:retrieval",
    "retrieve": "Rag:retrieval",
    "rerank": "Rag:retrieval",
    "grade": "Rag:retrieval",
    "verify": "Rag:response generation",
    "chain": "Rag:response generation",
    "fetch": "summarize:document retrieval",
    "summarize": "summarize:generation",
    "agent": "agentic:reasoning",
    "answer": "agentic:answer",
    "search": "search:start",
}
SUMMARY_PHASES = {"chunk": "summarize:chunking"}
SUMMARY_START = "summarize:start"


class EventStream:
    """One stream's lines, in Datafari 7's shape; remembers the last phase so that stages of
    one phase show it once."""

    def __init__(self) -> None:
        self._phase = ""

    @staticmethod
    def event(kind: str, **data: object) -> str:
        line = {"type": kind, "data": data, "ts": int(time.time() * 1000)}
        return json.dumps(line, ensure_ascii=False) + "\n"

    def started(self) -> str:
        return self.event("stream.started")

    def memory(self, memory_id: str, not_kept: str | None = None) -> str:
        if not_kept:
            return self.event("memory", memoryId=memory_id, notKept=not_kept)
        return self.event("memory", memoryId=memory_id)

    def phase(self, name: str, step: str | None = None) -> str:
        self._phase = name
        return self.event("phase", name=name, **({"step": step} if step else {}))

    def progress(self, step: str | AgentEvent, action: str) -> Iterator[str]:
        """A stage that began (its phase, once a phase), an agent's tool, or a part of its
        answer."""
        if isinstance(step, ToolEvent):
            yield self.tool(step)
            return
        if isinstance(step, AnswerText):
            yield self.delta(step.text)
            return
        names = {**PHASES, **SUMMARY_PHASES} if action == "summarize" else PHASES
        name = step if step.startswith("synthesis:") else names.get(step)  # Datafari's own
        if action == "summarize" and step == "fetch" and self._phase != SUMMARY_START:
            yield self.phase(SUMMARY_START)  # Datafari's summary begins with it
        if name is not None and name != self._phase:
            yield self.phase(name, step)

    def tool(self, step: ToolEvent) -> str:
        if step.what == "call":
            # what the tool is, for a person watching it work (the registry's label); Datafari's
            # generic tools with the icon and i18n key its UI knows them by
            known = TOOLS.get(step.tool)
            if known is not None and known.icon:
                return self.event("tool.call", id=step.id, toolName=step.tool,
                                  label=known.label, icon=known.icon,
                                  i18nKey=known.i18n_key)  # fmt: skip
            label = known.label if known is not None and known.label else step.tool
            return self.event("tool.call", id=step.id, toolName=step.tool, label=label)
        if step.what == "result":
            return self.event("tool.result", id=step.id, durationMs=step.duration_ms)
        return self.event("tool.error", id=step.id, durationMs=step.duration_ms, error=step.error)

    def delta(self, text: str) -> str:
        return self.event("message.delta", text=text)

    def sources(
        self, items: Sequence[dict[str, object]], found: Sequence[dict[str, str]] | None = None
    ) -> Iterator[str]:
        """Each source, then (a search's) what it found, then every source."""
        for item in items:
            yield self.event("sources.add", source=item)
        if found is not None:
            yield self.event("search.results", docs=list(found))
        yield self.event("sources.final", items=list(items))

    def final(self, text: str, **ours: object) -> str:
        return self.event("message.final", text=text, **{k: v for k, v in ours.items() if v})

    def conversation(self, conversation_id: str, title: str) -> str:
        return self.event("conversation", conversationId=conversation_id, title=title)

    def completed(self, status: str) -> str:
        return self.event("stream.completed", status=status)

    def failed(self, error: ServiceError, feature: str, language: str | None) -> Iterator[str]:
        """A failure as Datafari ends a stream with one: the error, no sources, done."""
        yield self.error(error, feature, language)
        yield self.event("sources.final", items=[])
        yield self.phase("service:done")
        yield self.completed("ERROR")

    def error(self, error: ServiceError, feature: str, language: str | None) -> str:
        code, label = datafari_code(feature, error)
        # ours beside Datafari's: when to ask again (a caller over its cap, the LLM full)
        later = {} if error.retry_after is None else {"retryAfter": error.retry_after}
        return self.event(
            "error",
            code=code,
            label=label,
            message=user_message(error, language),
            reason=error.reason,
            **later,
        )

    def refused(self, error: ServiceError, language: str | None) -> Iterator[str]:
        """A body that fails validation: a stream of its own, as Datafari answers it."""
        yield self.started()
        yield self.error(error, "ai", language)
        yield self.completed("ERROR")

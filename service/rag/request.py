"""What a request asks: the question (or the document to summarize), with the options it
sets for itself (service.snapshot.options)."""

from __future__ import annotations

from dataclasses import dataclass

from service.llm import ChatMessage
from service.retrieval.scope import EVERYTHING, Scope
from service.snapshot.options import DEFAULTS, RequestOptions


@dataclass(frozen=True)
class RagQuery:
    """A validated RAG request, from /ai/rag or /v1/chat/completions."""

    query: str
    document_id: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] = ()
    format: str = "default"
    # what the caller may see (security on); the default searches everything
    scope: Scope = EVERYTHING
    # what the request changes for itself (the OpenAI endpoint's model, retrieval, form...)
    options: RequestOptions = DEFAULTS


@dataclass(frozen=True)
class SummarizeQuery:
    """A validated /ai/summarize request: a FileShare id, or the text itself."""

    document_id: str | None = None
    text: str | None = None
    lang: str | None = None
    scope: Scope = EVERYTHING

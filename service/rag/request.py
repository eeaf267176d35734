"""What a request asks: the question (or the document to summarize) and what it may change of
the settings for itself."""

from __future__ import annotations

from dataclasses import dataclass

from service.config import Settings
from service.llm import ChatMessage
from service.llm.answer_format import PLAIN, AnswerFormat
from service.retrieval.scope import EVERYTHING, Scope


@dataclass(frozen=True)
class Overrides:
    """What one request may change of the settings for itself (the OpenAI endpoint: the
    retrieval its index names, KAITO's similarity threshold and dynamic top-k, its model,
    temperature, max_tokens and token budget): typed per-call options, as httpx's are."""

    retrieval_method: str | None = None
    max_request_tokens: int | None = None
    similarity_min: float | None = None
    top_k: int | None = None
    strategy: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None

    def apply(self, settings: Settings) -> Settings:
        """`settings` with these changes, each validated by its part as a rag.properties value
        is (a ValueError names the field); the other parts are shared, not validated again."""
        parts = {
            "retrieval": {
                "method": self.retrieval_method,
                "similarity_min": self.similarity_min,
                "top_k": self.top_k,
            },
            "prompt": {"max_request_tokens": self.max_request_tokens, "strategy": self.strategy},
        }
        update = {}
        for name, fields in parts.items():
            changes = {field: value for field, value in fields.items() if value is not None}
            if changes:
                part = getattr(settings, name)
                update[name] = type(part).model_validate({**part.model_dump(), **changes})
        return settings.model_copy(update=update) if update else settings


NO_OVERRIDES = Overrides()


@dataclass(frozen=True)
class RagQuery:
    """A validated RAG request, from /ai/rag or /v1/chat/completions."""

    query: str
    document_id: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] = ()
    format: str = "default"
    # the OpenAI-compatible endpoint's messages are the conversation itself: always used
    always_use_history: bool = False
    # what the caller may see (security on); the default searches everything
    scope: Scope = EVERYTHING
    overrides: Overrides = NO_OVERRIDES
    # the answer's stop sequences and response format (the OpenAI endpoint's)
    form: AnswerFormat = PLAIN
    # nothing relevant found: an error (Datafari's 428), or the LLM answers the conversation
    # without sources (KAITO's rule, openai.no.context=answer)
    answer_without_sources: bool = False


@dataclass(frozen=True)
class SummarizeQuery:
    """A validated /ai/summarize request: a FileShare id, or the text itself."""

    document_id: str | None = None
    text: str | None = None
    lang: str | None = None
    scope: Scope = EVERYTHING

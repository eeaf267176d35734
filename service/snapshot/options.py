"""What one request may change for itself: one typed value, validated when it is made and
applied to the settings in one place (`apply`, called by `Snapshot.overridden`), as httpx's
per-call options are.

    >>> options = RequestOptions(retrieval_method="bm25", temperature=0.2)
    >>> options.apply(settings).retrieval.in_force
    'bm25'

The OpenAI endpoint fills it from a chat request (`service.api.conversation`); /ai/rag and MCP send
the defaults. Nothing a router does afterwards can forget a field: the pipeline's snapshot is
`snapshot.overridden(query.options)`, made by `service.rag.assemble.ask`. It lives with the
snapshot that applies it (it needs only the settings and the answer's form), so the snapshot
imports nothing above it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from service.config import Settings
from service.config.settings import Retrieval
from service.llm.answer_format import PLAIN, AnswerFormat

Strategy = Literal["stuff", "mapreduce", "refine"]


@dataclass(frozen=True, config=ConfigDict(arbitrary_types_allowed=True))
class RequestOptions:
    """A request's own options: its retrieval, chain and LLM settings (each None: the
    configured one), the answer's form (stop sequences, response format, sampling), and how
    the conversation and an empty search are treated."""

    retrieval_method: Retrieval | None = None
    top_k: int | None = Field(None, ge=1)
    similarity_min: float | None = Field(None, ge=0, le=1)
    strategy: Strategy | None = None
    max_request_tokens: int | None = Field(None, ge=1)
    model: str | None = None
    max_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    form: AnswerFormat = PLAIN
    # the OpenAI endpoint's messages are the conversation itself: always used
    always_use_history: bool = False
    # nothing relevant found: an error (Datafari's 428), or the LLM answers the conversation
    # without sources (KAITO's rule, openai.no.context=answer)
    answer_without_sources: bool = False

    def apply(self, settings: Settings) -> Settings:
        """`settings` with these changes, each validated by its part as a rag.properties value
        is (a ValueError names the field); the other parts are shared, not validated again."""
        parts: dict[str, dict[str, Any]] = {
            "retrieval": {
                "method": self.retrieval_method,
                "similarity_min": self.similarity_min,
                "top_k": self.top_k,
            },
            "prompt": {"max_request_tokens": self.max_request_tokens, "strategy": self.strategy},
            "llm": {
                "model": self.model,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
            },
        }
        update = {}
        for name, fields in parts.items():
            changes = {field: value for field, value in fields.items() if value is not None}
            if changes:
                part = getattr(settings, name)
                update[name] = type(part).model_validate({**part.model_dump(), **changes})
        return settings.model_copy(update=update) if update else settings

    @property
    def names_model(self) -> bool:
        """Whether the caller named the LLM model (then a 404 from the LLM is theirs)."""
        return self.model is not None


DEFAULTS = RequestOptions()

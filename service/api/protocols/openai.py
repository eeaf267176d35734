"""OpenAI's chat completion: the answer whole (`chat.completion`), or its chunks as
Server-Sent Events (the role, the text as it comes, then the inline sources, the end with the
sources and the usage; `data: [DONE]` last, after an error chunk too). Ours in extra fields:
`sources` (whole), `citations` (their URLs in citation order, as search-augmented APIs give
them), and, when they have a value, `grounding`, `cached` with `cache_age`, `abstained`,
`confidence`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from service.api.protocols.answer import AnswerFields
from service.api.protocols.driver import Step
from service.api.protocols.envelopes import openai_body_of
from service.api.sse import sse_event
from service.errors import ServiceError
from service.rag.reply import Answer


@dataclass(frozen=True)
class Completion:
    """An Answer as OpenAI's chat.completion, or as its chunks (a renderer of the driver)."""

    completion_id: str
    model: str
    inline_sources: bool  # the rag* models: a Sources list inside the message
    include_usage: bool = False  # stream_options.include_usage: the usage in a last chunk

    def whole(self, answer: Answer) -> dict[str, Any]:
        message = answer.message
        if self.inline_sources and answer.documents:
            message += sources_block(answer)
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": message},
                    "finish_reason": answer.finish_reason,
                }
            ],
            **self.extensions(answer),
        }

    def extensions(self, answer: Answer) -> dict[str, Any]:
        fields = AnswerFields.of(answer)
        return {
            "usage": usage_of(answer),
            "sources": [source.model_dump() for source in fields.sources],
            "citations": [d.url or d.id for d in answer.documents],
            **fields.honesty(),
        }

    def started(self) -> Iterator[str]:
        yield self.choice({"role": "assistant", "content": ""})

    def progress(self, step: Step) -> Iterator[str]:
        return iter(())

    def delta(self, text: str) -> Iterator[str]:
        yield self.choice({"content": text})

    def final(self, answer: Answer) -> Iterator[str]:
        if self.inline_sources and answer.documents:
            yield self.choice({"content": sources_block(answer)})
        extensions = self.extensions(answer)
        if self.include_usage:  # OpenAI sends it once, in the last chunk: clients add them up
            del extensions["usage"]
        yield self.choice({}, answer.finish_reason, **extensions)
        if self.include_usage:
            yield self.chunk([], usage=usage_of(answer))

    def ended(self) -> Iterator[str]:
        yield "data: [DONE]\n\n"

    def failed(self, error: ServiceError) -> Iterator[str]:
        yield sse_event(openai_body_of(error))
        yield from self.ended()

    def idle(self) -> Iterator[str]:
        yield ": keep-alive\n\n"  # an SSE comment: OpenAI's SDKs and every SSE reader skip it

    def choice(self, delta: dict[str, str], finish: str | None = None, **extra: object) -> str:
        return self.chunk([{"index": 0, "delta": delta, "finish_reason": finish}], **extra)

    def chunk(self, choices: list[dict[str, Any]], **extra: object) -> str:
        return sse_event(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": self.model,
                "choices": choices,
                **extra,
            }
        )


def sources_block(answer: Answer) -> str:
    """The sources written after the answer, as Markdown: `[n] [title](url)`; nothing for an
    answer without sources."""
    if not answer.documents:
        return ""
    lines = []
    for document in answer.documents:
        title = _one_line(document.title or document.id)
        lines.append(
            f"[{document.number}] [{title}]({document.url})"
            if document.url
            else f"[{document.number}] {title}"
        )
    return "\n\nSources:\n" + "\n".join(lines)


def _one_line(text: str) -> str:
    """A title fit for a Markdown link: one line, no brackets that would end the link."""
    return " ".join(text.replace("[", "(").replace("]", ")").split())[:200]


def usage_of(answer: Answer) -> dict[str, int]:
    usage = answer.usage
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }

"""The spans of the calls to OpenAI-compatible APIs (chat, embeddings, rerank), named and
described as OpenTelemetry's GenAI semantic conventions say: `chat test-model`, with
gen_ai.operation.name, gen_ai.request.model, gen_ai.usage.input_tokens / output_tokens,
gen_ai.response.finish_reasons...

What was said (the messages, the answer) is put in a span only when an operator asked for it
(observability.tracing.capture.content, or the conventions' own
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from service.tracing import _state
from service.tracing._spans import (
    CLIENT,
    KIND,
    NOTHING,
    Span,
    _Nothing,
    attach,
    child_tracer,
    detach,
)

if TYPE_CHECKING:
    from opentelemetry import trace

# the API's path -> the conventions' operation name (rerank has none of its own there)
OPERATIONS = {"chat/completions": "chat", "embeddings": "embeddings", "rerank": "rerank"}
_INFERENCE_KINDS = {"chat": "LLM", "embeddings": "EMBEDDING", "rerank": "RERANKER"}
# the API these clients speak: what gen_ai.provider.name (and the older gen_ai.system) say
PROVIDER = "openai"
MAX_CAPTURED_CHARS = 32_000  # of one attribute, when content is captured
# what an API's answer may put in a span (a third party's, maybe hostile): a model's name, a
# finish reason, how many reasons
MAX_NAME_CHARS, MAX_REASON_CHARS, MAX_REASONS = 256, 64, 16


class LlmCall:
    """One call's span: `with call:` around a whole call (current inside, ended on leaving);
    for a streamed answer, `with call.recording():` around the whole stream and `with
    call.sending():` around its request. `answered(body)` / `streamed(...)` add what the API
    said of it. NO_CALL, tracing off, does nothing and hands back shared no-op objects."""

    __slots__ = ("_operation", "_otel", "_token")

    def __init__(self, otel: trace.Span | None, operation: str = "") -> None:
        self._otel = otel
        self._operation = operation
        self._token: Any = None

    def __enter__(self) -> LlmCall:
        if self._otel is not None:
            self._token = attach(self._otel)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._otel is None:
            return
        detach(self._token)
        self.end(error)

    def sending(self) -> _Sending | _Nothing:
        """Current while its request is sent (its traceparent is this span's), not ended."""
        return _Sending(self._otel) if self._otel is not None else NOTHING

    def recording(self) -> _Recording | _Nothing:
        """Ended on leaving (a failure marked), never made current: a streamed answer's span,
        which lasts across the stream's pieces (an async generator's: no context may be
        attached across its yields)."""
        return _Recording(self) if self._otel is not None else NOTHING

    def end(self, error: BaseException | None = None) -> None:
        if self._otel is None:
            return
        if error is not None:
            Span(self._otel).failed(error)
        self._otel.end()

    def answered(self, body: object) -> None:
        """What the API's answer says of the call: the model, the tokens, why it stopped."""
        if self._otel is None or not isinstance(body, dict):
            return
        span = self._otel
        if isinstance(body.get("model"), str) and body["model"]:
            span.set_attribute("gen_ai.response.model", body["model"][:MAX_NAME_CHARS])
        usage = body.get("usage")
        if isinstance(usage, dict):
            _tokens(span, usage.get("prompt_tokens"), usage.get("completion_tokens"))
        choices = body.get("choices")
        if self._operation != "chat" or not isinstance(choices, list):
            return
        choices = [choice for choice in choices[:MAX_REASONS] if isinstance(choice, dict)]
        reasons = [str(c["finish_reason"])[:MAX_REASON_CHARS] for c in choices
                   if c.get("finish_reason")]  # fmt: skip
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)
        if _state.capture_content():
            said = [(c.get("message") or {}).get("content") for c in choices]
            _output(span, [text for text in said if isinstance(text, str)], reasons)

    def streamed(self, text: str, usage: object, reason: str) -> None:
        """What a streamed answer came to, once read (`usage`: its prompt_tokens and
        completion_tokens, as the API reported them)."""
        if self._otel is None:
            return
        _tokens(self._otel, getattr(usage, "prompt_tokens", None),
                getattr(usage, "completion_tokens", None))  # fmt: skip
        self._otel.set_attribute("gen_ai.response.finish_reasons", [reason[:MAX_REASON_CHARS]])
        if _state.capture_content():
            _output(self._otel, [text], [reason])


class _Sending:
    """A call's span current for the time of its request (LlmCall.sending)."""

    __slots__ = ("_otel", "_token")

    def __init__(self, otel: trace.Span) -> None:
        self._otel = otel
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = attach(self._otel)

    def __exit__(self, *exception: object) -> None:
        detach(self._token)


class _Recording:
    """A call's span ended on leaving, a failure marked (LlmCall.recording)."""

    __slots__ = ("_call",)

    def __init__(self, call: LlmCall) -> None:
        self._call = call

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._call.end(error)


NO_CALL = LlmCall(None)


def llm_call(path: str, payload: Mapping[str, Any], endpoint: str) -> LlmCall:
    """The span of one POST `path` to the OpenAI-compatible API at `endpoint`, started (not
    yet current); NO_CALL when tracing is off."""
    tracer = child_tracer()
    if tracer is None:
        return NO_CALL
    operation = OPERATIONS.get(path, path)
    model = payload.get("model")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.system": PROVIDER,
        KIND: _INFERENCE_KINDS.get(operation, "UNKNOWN"),
        **_server(endpoint),
    }
    if isinstance(model, str) and model:
        attributes["gen_ai.request.model"] = model
    for key, name in (("temperature", "temperature"), ("max_tokens", "max_tokens")):
        if isinstance(payload.get(key), int | float) and not isinstance(payload[key], bool):
            attributes[f"gen_ai.request.{name}"] = payload[key]
    if operation == "chat" and payload.get("stream"):
        attributes["gen_ai.request.stream"] = True
    if operation == "embeddings" and isinstance(payload.get("input"), list):
        attributes["solr_rag.embeddings.inputs"] = len(payload["input"])
    if operation == "rerank" and isinstance(payload.get("documents"), list):
        attributes["solr_rag.rerank.documents"] = len(payload["documents"])
    if operation == "chat" and _state.capture_content():
        attributes["gen_ai.input.messages"] = _captured(_messages(payload.get("messages")))
    name = f"{operation} {model}" if isinstance(model, str) and model else operation
    return LlmCall(tracer.start_span(name, kind=CLIENT, attributes=attributes), operation)


def _server(endpoint: str) -> dict[str, Any]:
    """server.address and server.port of an endpoint (never its login or path's query)."""
    try:
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname or "", "server.port": port}


def _tokens(span: trace.Span, prompt: object, completion: object) -> None:
    if isinstance(prompt, int) and not isinstance(prompt, bool):
        span.set_attribute("gen_ai.usage.input_tokens", prompt)
    if isinstance(completion, int) and not isinstance(completion, bool):
        span.set_attribute("gen_ai.usage.output_tokens", completion)


def _messages(messages: object) -> list[dict[str, Any]]:
    """OpenAI's messages in the conventions' shape: role, and the text as a part."""
    shaped = []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            content = message.get("content")
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            shaped.append(
                {"role": str(message.get("role", "")), "parts": [{"type": "text", "content": text}]}
            )
    return shaped


def _output(span: trace.Span, texts: list[str], reasons: list[str]) -> None:
    said = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": text}],
            "finish_reason": reasons[at] if at < len(reasons) else "stop",
        }
        for at, text in enumerate(texts)
    ]
    span.set_attribute("gen_ai.output.messages", _captured(said))


def _captured(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)[:MAX_CAPTURED_CHARS]


__all__ = ["NO_CALL", "LlmCall", "llm_call"]

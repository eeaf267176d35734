"""A client for any OpenAI-compatible `/chat/completions` API (OpenAI, vLLM, Ollama, llama.cpp).

Pooled (one shared httpx client), with connect/read timeouts and bounded retries with
exponential backoff and jitter on what is worth retrying: connection failures, 429 and
502/503/504 (honouring `Retry-After`). The API token never appears in an error or a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from service import tracing
from service.errors import (
    ModelNotServed,
    TechnicalError,
    ToolsUnsupported,
    UpstreamBadResponse,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from service.llm.breaker import CircuitBreaker
from service.llm.budget import CallBudget
from service.llm.queue import BusyClock, LlmLoad
from service.llm.types import ChatMessage, Completion, TokenChoice, ToolCall, ToolTurn, Usage
from service.metrics import upstream_error
from service.observability import count_llm_call, request_headers
from service.upstream import POOL_WAIT_SECONDS, upstream_call

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
# what says the upstream itself is unavailable (and so counts for its circuit breaker): a 500
# or a 4xx answers one request, which a client may provoke at will, and says nothing of the rest
UNAVAILABLE_STATUSES = RETRYABLE_STATUSES
MAX_RETRY_AFTER_SECONDS = 10.0
MAX_TOOL_CALLS = 8  # tool calls read of one model turn
MAX_ARGUMENT_CHARS = 4_000  # of one tool call's arguments
_MAX_TOKENS = 4_096  # token probabilities kept of one answer
_MAX_TOP = 10  # alternatives kept of one token


@dataclass(frozen=True)
class LLMOptions:
    """Where an OpenAI-compatible API is and how to call it."""

    endpoint: str
    model: str = ""
    token: str = ""
    temperature: float = 0.0
    max_tokens: int = 200
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    retries: int = 2
    backoff_seconds: float = 0.5
    # the request named the model: a 404 from the API is then the caller's error, not ours
    model_chosen_by_caller: bool = False


class OpenAICompatibleClient:
    """HTTP plumbing shared by the chat and embeddings clients: URLs, auth, retries, errors."""

    what = "the LLM"
    upstream = "llm"  # the label of its errors in solr_rag_upstream_errors

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: LLMOptions,
        breaker: CircuitBreaker | None = None,
        load: LlmLoad | None = None,  # the endpoint's calls and queue (service.llm.queue)
    ) -> None:
        self._http = http
        self.options = options
        self.breaker = breaker or CircuitBreaker.off()
        self.busy = BusyClock(self.upstream, load)
        self._timeout = httpx.Timeout(
            options.read_timeout, connect=options.connect_timeout, pool=POOL_WAIT_SECONDS
        )

    async def list_models(self) -> list[str]:
        """The model ids the server offers (GET /models): a cheap reachability check."""
        with upstream_call(
            self._where, timed_out="did not list its models in time", unreachable="is unreachable"
        ):
            response = await self._http.get(
                self._url("models"), headers=self._headers(), timeout=self._timeout
            )
        if response.status_code >= 400:
            raise UpstreamBadResponse(
                f"{self._where} answered HTTP {response.status_code} to GET /models"
            )
        try:
            return [str(model["id"]) for model in response.json().get("data", [])]
        except (ValueError, AttributeError, KeyError, TypeError):
            raise UpstreamBadResponse(f"{self._where} listed its models unreadably") from None

    @property
    def _where(self) -> str:
        """How errors name the upstream: by role, never by address (reasons reach anonymous
        callers); the address goes to the log (`_log_failure`)."""
        return self.what

    def _log_failure(self, error: TechnicalError) -> None:
        log.warning("%s (%s at %s)", error.reason, self.what, self.options.endpoint)

    def _url(self, path: str) -> str:
        return self.options.endpoint.rstrip("/") + "/" + path

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **request_headers()}
        if self.options.token:
            headers["Authorization"] = f"Bearer {self.options.token}"
        return headers

    async def _post(self, path: str, payload: dict[str, Any]) -> Any:
        with tracing.llm_call(path, payload, self.options.endpoint) as call:
            with self.busy.track():
                response = await self._send(path, payload, stream=False)
            try:
                body = parsed(response.content)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise UpstreamBadResponse(f"{self._where} answered with invalid JSON") from None
            call.answered(body)  # its span: the model, the tokens, why it stopped
        return body

    async def _send(
        self, path: str, payload: dict[str, Any], *, stream: bool, errors: bool = True
    ) -> httpx.Response:
        """POST with retries on what is worth retrying, behind the circuit breaker; a streamed
        response is returned open (the caller closes it). An error status raises, unless
        `errors` is False (the response is then returned as it is, read, for a caller that
        relays it)."""
        if path == "chat/completions":
            count_llm_call()
        try:
            self.breaker.before_call(self._where)
        except UpstreamUnavailable:
            upstream_error(self.upstream, "circuit_open")
            raise
        try:
            response = await self._attempts(path, payload, stream=stream)
        except (UpstreamUnavailable, UpstreamTimeout) as error:
            # a timeout while the LLM had a queue says it is busy, not broken
            if isinstance(error, UpstreamUnavailable) or not self.busy.queued():
                self.breaker.record_failure()
            upstream_error(self.upstream, error.metric)
            self._log_failure(error)
            raise
        if response.status_code in UNAVAILABLE_STATUSES:
            self.breaker.record_failure()
        else:
            self.breaker.record_success()
        if response.status_code < 400 or not errors:
            return response
        upstream_error(self.upstream, UpstreamBadResponse.metric)
        message = self._scrub(_error_message(response))
        hint = ""
        if response.status_code == 400 and "context" in message.lower():
            hint = (
                "; the prompt is too long for the model: lower prompt.max.request.size "
                "(or prompt.max.request.tokens) below the model's context size"
            )
        if self.options.model_chosen_by_caller and response.status_code == 404:
            raise ModelNotServed(
                f"{self._where} does not serve the model {self.options.model!r}: {message}"
            )
        failure = UpstreamBadResponse(
            f"{self._where} answered HTTP {response.status_code}: {message}{hint}",
            upstream_status=response.status_code,
        )
        self._log_failure(failure)
        raise failure

    async def _attempts(
        self, path: str, payload: dict[str, Any], *, stream: bool
    ) -> httpx.Response:
        """The response of the last attempt; an error response comes back read and closed."""
        attempt = 0
        while True:
            request = self._http.build_request(
                "POST",
                self._url(path),
                json=payload,
                headers=self._headers(),
                timeout=self._timeout,
            )
            # A timeout is not retried: the model may still be working, and a second wait of
            # the same length would double the user's.
            try:
                with upstream_call(
                    self._where,
                    timed_out=f"did not answer within {self.options.read_timeout:g}s; raise its "
                    "read timeout or use a faster model (llm.timeout.read for the LLM)",
                    unreachable="is unreachable; check its endpoint in rag.properties and that "
                    "the server runs",
                ):
                    response = await self._http.send(request, stream=stream)
            except UpstreamUnavailable:
                if attempt < self.options.retries:
                    attempt += 1
                    await self._sleep(attempt, None)
                    continue
                raise
            if response.status_code < 400:
                return response
            await response.aread()
            await response.aclose()
            if response.status_code in RETRYABLE_STATUSES and attempt < self.options.retries:
                attempt += 1
                await self._sleep(attempt, response.headers.get("Retry-After"))
                continue
            return response

    async def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = self.options.backoff_seconds * 2 ** (attempt - 1)
        delay += random.uniform(0, delay / 2)
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), MAX_RETRY_AFTER_SECONDS))
        log.warning("%s call failed, retry %d in %.2fs", self.what, attempt, delay)
        await asyncio.sleep(delay)

    def _scrub(self, text: str) -> str:
        token = self.options.token
        return text.replace(token, "***") if token else text


class ChatClient(OpenAICompatibleClient):
    """Sends chat prompts to `/chat/completions`.

    `complete` returns the whole answer; `stream` returns a CompletionStream to iterate for
    the text as the model writes it. Each spends one call of `calls`, the request's budget.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: LLMOptions,
        breaker: CircuitBreaker | None = None,
        calls: CallBudget | None = None,
        load: LlmLoad | None = None,
    ) -> None:
        super().__init__(http, options, breaker, load)
        self.calls = calls or CallBudget.unlimited()

    async def complete(
        self, messages: Sequence[ChatMessage], extra: Mapping[str, Any] | None = None
    ) -> Completion:
        """The whole answer; `extra` adds fields to the payload (stop, response_format)."""
        self.calls.spend()
        body = await self._post("chat/completions", self._payload(messages, False, extra))
        return _completion_from(body, self._where)

    def stream(
        self, messages: Sequence[ChatMessage], extra: Mapping[str, Any] | None = None
    ) -> CompletionStream:
        self.calls.spend()
        return CompletionStream(self, self._payload(messages, True, extra))

    async def with_tools(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> ToolTurn:
        """One turn of a tool loop (OpenAI's tools API): `messages` as the API takes them
        (tool calls and results included). ToolsUnsupported when the LLM refuses tools."""
        self.calls.spend()
        payload: dict[str, Any] = {
            "messages": list(messages),
            "tools": list(tools),
            "tool_choice": "auto",
            "temperature": self.options.temperature,
            "max_tokens": self.options.max_tokens,
            "stream": False,
        }
        if self.options.model:
            payload["model"] = self.options.model
        try:
            body = await self._post("chat/completions", payload)
        except UpstreamBadResponse as error:
            if " 400" in error.reason or " 422" in error.reason or " 501" in error.reason:
                raise ToolsUnsupported(
                    f"{self._where} refused a request with tools ({error.reason[:300]}): the "
                    "configured LLM cannot call tools (llama.cpp's server needs --jinja); use "
                    "action=rag, or an LLM that supports the OpenAI tools API"
                ) from None
            raise
        return _tool_turn_from(body, self._where)

    async def relay(self, payload: dict[str, Any]) -> httpx.Response:
        """Sends an OpenAI request body as it is (the bypass of the OpenAI-compatible endpoint)
        and returns the upstream's response, errors included; streamed when the body asks."""
        return await self._send(
            "chat/completions", payload, stream=bool(payload.get("stream")), errors=False
        )

    def _payload(
        self, messages: Sequence[ChatMessage], stream: bool, extra: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messages": [message.as_dict() for message in messages],
            "temperature": self.options.temperature,
            "max_tokens": self.options.max_tokens,
            "stream": stream,
            **(extra or {}),
        }
        if stream:
            payload["stream_options"] = {"include_usage": True}
        if self.options.model:
            payload["model"] = self.options.model
        return payload


class CompletionStream:
    """An answer as the model writes it: `async for delta in stream` yields text pieces the
    moment they arrive; afterwards `text` holds the whole answer and `usage` its usage (when
    the server reports it). Leaving the loop early closes the upstream request."""

    def __init__(self, client: ChatClient, payload: dict[str, Any]) -> None:
        self._client = client
        self._payload = payload
        self.text = ""
        self.usage = Usage()
        self.finish_reason = "stop"
        self.tokens: list[TokenChoice] = []  # as they come, when logprobs were asked for

    async def __aiter__(self) -> AsyncIterator[str]:
        client = self._client
        call = tracing.llm_call("chat/completions", self._payload, client.options.endpoint)
        with client.busy.track(), call.recording():  # its span: current only while it is sent
            with call.sending():
                response = await client._send("chat/completions", self._payload, stream=True)
            try:
                async for delta in self._deltas(response):
                    yield delta
            except TechnicalError as error:
                upstream_error(client.upstream, error.metric)
                raise
            finally:
                await response.aclose()
            call.streamed(self.text, self.usage, self.finish_reason)

    async def _deltas(self, response: httpx.Response) -> AsyncIterator[str]:
        client = self._client
        with upstream_call(
            client._where,
            timed_out=f"stopped sending for {client.options.read_timeout:g}s",
            unreachable="broke off the stream",
        ):
            async for line in response.aiter_lines():
                data = line[5:].strip() if line.startswith("data:") else ""
                if not data:
                    continue
                if data == "[DONE]":
                    break
                for delta in self._read(data):
                    self.text += delta
                    yield delta

    def _read(self, data: str) -> list[str]:
        where = self._client._where
        try:
            chunk = parsed(data)
        except json.JSONDecodeError:
            raise UpstreamBadResponse(f"{where} streamed a chunk that is not JSON") from None
        if not isinstance(chunk, dict):
            raise UpstreamBadResponse(f"{where} streamed a chunk that is not an object")
        if "error" in chunk:
            message = chunk["error"].get("message", "") if isinstance(chunk["error"], dict) else ""
            raise UpstreamBadResponse(f"{where} streamed an error: {self._client._scrub(message)}")
        if chunk.get("usage"):
            self.usage = _usage_from(chunk["usage"])
        deltas = []
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            if isinstance(choice.get("finish_reason"), str):
                self.finish_reason = choice["finish_reason"]
            if len(self.tokens) < _MAX_TOKENS:
                self.tokens.extend(token_choices(choice.get("logprobs")))
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str) and content:
                deltas.append(content)
        return deltas


def parsed(body: bytes | str) -> Any:
    """An upstream's JSON, by orjson: several times faster than json on what these APIs send
    (an embeddings response is thousands of floats; every streamed token is a chunk), the
    same values; json reads what orjson refuses (NaN, another encoding than UTF-8). What
    neither reads (nested too deep, a number too long, bytes that are no text) is a
    json.JSONDecodeError, as invalid JSON is: the upstream's fault, never a 500."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise json.JSONDecodeError(f"unreadable: {type(error).__name__}", "", 0) from None


def _error_message(response: httpx.Response) -> str:
    try:
        body = parsed(response.content)
    except json.JSONDecodeError:
        return response.reason_phrase or "no details"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", ""))[:300]
    if isinstance(error, str):
        return error[:300]
    return response.reason_phrase or "no details"


def _completion_from(body: Any, where: str) -> Completion:
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise UpstreamBadResponse(f"{where} answered without choices[0].message.content") from None
    reason = choice.get("finish_reason")
    return Completion(
        text=text if isinstance(text, str) else "",
        usage=_usage_from(body.get("usage") or {}),
        model=str(body.get("model", "")),
        finish_reason=reason if isinstance(reason, str) and reason else "stop",
        tokens=tuple(token_choices(choice.get("logprobs"))),
    )


def token_choices(logprobs: Any) -> list[TokenChoice]:
    """OpenAI's `choices[].logprobs.content` read leniently: what is malformed is left out
    (a server's probabilities are a signal, never a reason to fail the answer)."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return []
    read = []
    for item in content[:_MAX_TOKENS]:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            continue
        logprob = item.get("logprob")
        if not isinstance(logprob, int | float) or not math.isfinite(logprob):
            continue
        top = tuple(
            (alternative["token"], float(alternative["logprob"]))
            for alternative in (item.get("top_logprobs") or [])[:_MAX_TOP]
            if isinstance(alternative, dict)
            and isinstance(alternative.get("token"), str)
            and isinstance(alternative.get("logprob"), int | float)
            and math.isfinite(alternative["logprob"])
        )
        read.append(TokenChoice(item["token"][:64], float(logprob), top))
    return read


def _tool_turn_from(body: Any, where: str) -> ToolTurn:
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise UpstreamBadResponse(f"{where} answered without choices[0].message") from None
    calls = []
    for raw in (message.get("tool_calls") or [])[:MAX_TOOL_CALLS]:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        call_id = str(raw.get("id") or f"call_{len(calls)}")[:64]
        calls.append(ToolCall(call_id, function["name"][:64], arguments[:MAX_ARGUMENT_CHARS]))
    text = message.get("content")
    return ToolTurn(
        text=text if isinstance(text, str) else "",
        calls=tuple(calls),
        usage=_usage_from(body.get("usage") or {}),
    )


def _usage_from(usage: dict[str, Any]) -> Usage:
    try:
        return Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
    except (TypeError, ValueError, AttributeError):
        return Usage()

"""A controllable OpenAI-compatible LLM for tests: real HTTP, deterministic, recording.

Tests tell it how to behave (`script`) and read what it received (`requests`). It never
guesses: by default it answers with a fixed sentence that names the question, repeats the
first words of document [1] and cites it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse


@dataclass
class RecordedRequest:
    """A chat completion request as the server saw it."""

    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    first_chunk_sent: float = 0.0
    stream_completed: bool = False
    stream_abandoned: bool = False
    left_while_waiting: bool = False  # the client hung up during the step's delay

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def prompt(self) -> str:
        """The last user message: where our chains put the sources and the question."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        last = users[-1] if users else ""
        if isinstance(last, list):  # content parts
            return "\n".join(part.get("text", "") for part in last if isinstance(part, dict))
        return last

    def wait_until_abandoned(self, seconds: float = 4) -> bool:
        """Whether the client (the service) left this stream before its end, within `seconds`."""
        deadline = time.monotonic() + seconds
        while not self.stream_abandoned and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.stream_abandoned

    @property
    def size(self) -> int:
        return sum(len(m["content"]) for m in self.messages if isinstance(m["content"], str))


@dataclass
class Step:
    """What to do for one request: wait, then answer `status` with `content` (or raw `body`)."""

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    pause_after_first_chunk: float = 0.0  # streaming: a slow model after its first word
    pause_after_words: int = 1  # ... or after this many words
    finish_reason: str = "stop"  # "length": as if max_tokens cut the answer
    # the first step's likeliest tokens (token -> probability), reported when the request
    # asks for logprobs; None: the server reports no probabilities, as some do
    first_top: dict[str, float] | None = None
    # the requests this step is for: the first one it accepts takes it, whatever came before
    # (two requests sent at once arrive in either order); None: the next request
    takes: Callable[[RecordedRequest], bool] | None = None


def verification(request: RecordedRequest) -> bool:
    """Whether a request is grounding.verify's (one token: does a document say the answer?),
    for `Step(takes=verification)`: sent beside the answer's, it may arrive after it."""
    return request.body.get("max_tokens") == 1


def _logprobs(step: Step, word: str, first: bool) -> dict[str, Any] | None:
    """OpenAI's `logprobs` of one streamed word (one token here): its own probability, and
    at the first step the scripted alternatives."""
    if step.first_top is None:
        return None
    top = step.first_top if first else {word: 0.9}
    chosen = math.log(top.get(word, 0.5))
    alternatives = [{"token": t, "logprob": math.log(p)} for t, p in top.items()]
    return {"content": [{"token": word, "logprob": chosen, "top_logprobs": alternatives}]}


def default_answer(request: RecordedRequest) -> str:
    """ "Test answer to: <the question> [1]", saying a few words of document [1] when the
    prompt holds one (an answer that only said the question back would be an echo, which
    the service refuses)."""
    question = request.prompt.rsplit("Question:", 1)[-1].strip().split("\n", 1)[0]
    source = re.search(r"^\[1\][^\n]*\n([^\n]+)", request.prompt, re.M)
    if source is None:  # a reduce or refine request: the words an earlier answer quoted
        source = re.search(r"It says: ([^\[\n]+)", request.prompt)
    if source is None:
        return f"Test answer to: {question} [1]"
    asked = {word.strip(".,;:?!").lower() for word in question.split()}
    words = [w for w in source.group(1).split() if w.strip(".,;:?!").lower() not in asked]
    said = " ".join(words[:8])  # words of the document the question did not say
    return f"Test answer to: {question} It says: {said} [1]"


class LLMScript:
    """The queue of behaviours; when it is empty, every request gets `default`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self.answer: Callable[[RecordedRequest], str] = default_answer
        self.delay = 0.0
        self.requests: list[RecordedRequest] = []
        # /v1/embeddings: vectors of this size (another model than the real one's 384)
        self.embedding_dimension = 1536
        self.embedded: list[list[str]] = []  # the texts of each /v1/embeddings request
        # questions holding slow_word are answered slowly: a streamed one slow_delay after its
        # first word, a whole one slow_delay before it
        self.slow_word = ""
        self.slow_delay = 0.0
        # one request at a time, each taking `delay` (a local model on a few cores: what it
        # cannot answer yet waits its turn); else requests are answered side by side
        self.one_at_a_time = False
        # the queue it reports as llama.cpp does (GET /metrics, /slots): the requests being
        # answered and those waiting their turn, whoever sent them; and how often it was asked
        self.processing = 0
        self.waiting = 0
        self.queue_reads = 0

    def reset(self) -> None:
        with self._lock:
            self._steps.clear()
            self.requests.clear()
            self.answer = default_answer
            self.delay = 0.0
            self.slow_word, self.slow_delay = "", 0.0  # a slow model is one test's only
            self.one_at_a_time = False
            self.queue_reads = 0
            self.embedding_dimension = 1536
            self.embedded.clear()

    def then(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            for at, step in enumerate(self._steps):
                if step.takes is None or step.takes(request):
                    return self._steps.pop(at)
        if self.slow_word and self.slow_word in request.prompt:  # a slow model for these
            if request.body.get("stream"):
                return Step(content=self.answer(request), pause_after_first_chunk=self.slow_delay)
            return Step(content=self.answer(request), delay=self.slow_delay)
        return Step(content=self.answer(request), delay=self.delay)


async def _stream(recorded: RecordedRequest, step: Step) -> AsyncIterator[str]:
    """OpenAI chunks, a word at a time; notes whether the client stayed to the end."""

    def chunk(**fields: Any) -> str:
        return "data: " + json.dumps({"object": "chat.completion.chunk", **fields}) + "\n\n"

    words = re.findall(r"\S+\s*", step.content or "")
    try:
        yield chunk(choices=[{"index": 0, "delta": {"role": "assistant"}}])
        for number, word in enumerate(words):
            if number == 0:  # noted before it leaves: the client may read it at once
                recorded.first_chunk_sent = time.monotonic()
            choice: dict[str, Any] = {"index": 0, "delta": {"content": word}}
            if recorded.body.get("logprobs"):
                choice["logprobs"] = _logprobs(step, word, number == 0)
            yield chunk(choices=[choice])
            await asyncio.sleep(0)  # lets a disconnect be noticed, as a real server does
            if number == step.pause_after_words - 1 and step.pause_after_first_chunk:
                await asyncio.sleep(step.pause_after_first_chunk)
        yield chunk(choices=[{"index": 0, "delta": {}, "finish_reason": step.finish_reason}])
        usage = {"prompt_tokens": 11, "completion_tokens": len(words), "total_tokens": 11}
        yield chunk(choices=[], usage=usage)
        yield "data: [DONE]\n\n"
        recorded.stream_completed = True
    finally:
        recorded.finished = time.monotonic()
        recorded.stream_abandoned = not recorded.stream_completed


def create_llm_app(script: LLMScript) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "up"}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        """llama.cpp's gauges of its queue (its server started with --metrics)."""
        script.queue_reads += 1
        lines = []
        for name, value in (("processing", script.processing), ("deferred", script.waiting)):
            lines += [f"# TYPE llamacpp:requests_{name} gauge", f"llamacpp:requests_{name} {value}"]
        return PlainTextResponse("\n".join(lines) + "\n")

    @app.get("/slots")
    async def slots() -> list[dict[str, Any]]:
        """llama.cpp's slots: one, answering or idle."""
        script.queue_reads += 1
        return [{"id": 0, "is_processing": script.processing > 0}]

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "test-model", "object": "model"}]}

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        """Deterministic unit vectors, one per input: the shape of an embeddings API, no
        meaning (the real model is the project's model server's)."""
        texts = (await request.json())["input"]
        script.embedded.append([texts] if isinstance(texts, str) else list(texts))
        size = script.embedding_dimension
        data = []
        for index, text in enumerate([texts] if isinstance(texts, str) else texts):
            seed = int(hashlib.sha256(str(text).encode()).hexdigest()[:8], 16)
            vector = [((seed >> (i % 24)) & 0xFF) / 255 + 0.001 for i in range(size)]
            norm = math.sqrt(sum(value * value for value in vector))
            data.append({"object": "embedding", "index": index,
                         "embedding": [value / norm for value in vector]})  # fmt: skip
        return {"object": "list", "data": data, "model": "test-embeddings"}

    turn = asyncio.Lock()  # script.one_at_a_time: whose turn it is

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        recorded = RecordedRequest(
            await request.json(), dict(request.headers), started=time.monotonic()
        )
        script.requests.append(recorded)
        step = script.next_step(recorded)
        script.waiting += 1
        try:
            async with turn if script.one_at_a_time else contextlib.nullcontext():
                script.waiting, script.processing = script.waiting - 1, script.processing + 1
                try:
                    waited_until = time.monotonic() + step.delay
                    while time.monotonic() < waited_until:  # a real model notices who left
                        if await request.is_disconnected():
                            recorded.left_while_waiting = True
                            break
                        await asyncio.sleep(min(0.05, max(0.0, waited_until - time.monotonic())))
                finally:
                    script.waiting, script.processing = script.waiting + 1, script.processing - 1
        finally:
            script.waiting -= 1
        recorded.finished = time.monotonic()
        if step.body is not None:
            return PlainTextResponse(step.body, status_code=step.status, headers=step.headers)
        if step.status == 200 and recorded.body.get("stream"):
            return StreamingResponse(_stream(recorded, step), media_type="text/event-stream")
        if step.status != 200:
            return JSONResponse(
                {"error": {"message": step.content or "failure", "type": "test", "code": None}},
                status_code=step.status,
                headers=step.headers,
            )
        return JSONResponse(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": recorded.body.get("model", "test-model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": step.content},
                        "finish_reason": step.finish_reason,
                        "logprobs": _logprobs(step, ((step.content or "").split() or [""])[0], True)
                        if recorded.body.get("logprobs")
                        else None,
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        )

    return app


def main(argv: list[str] | None = None) -> None:
    """Serve the default behaviour on a port, with a fixed latency (for benchmarks)."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--slow-word", default="", help="questions holding it are slow")
    parser.add_argument("--slow-delay", type=float, default=5.0, help="their pause (seconds)")
    args = parser.parse_args(argv)
    script = LLMScript()
    script.delay = args.delay
    script.slow_word, script.slow_delay = args.slow_word, args.slow_delay
    uvicorn.run(
        create_llm_app(script), host="127.0.0.1", port=args.port, log_level="warning",
        access_log=False,
    )  # fmt: skip


if __name__ == "__main__":
    main()

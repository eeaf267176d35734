"""A controllable OpenAI-compatible LLM for tests: real HTTP, deterministic, recording.

Tests tell it how to behave (`script`) and read what it received (`requests`). It never
guesses: by default it answers with a fixed sentence that names the question and cites [1].
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response


@dataclass
class RecordedRequest:
    """A chat completion request as the server saw it."""

    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float = 0.0

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def prompt(self) -> str:
        """The last user message: where our chains put the sources and the question."""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def size(self) -> int:
        return sum(len(m["content"]) for m in self.messages)


@dataclass
class Step:
    """What to do for one request: wait, then answer `status` with `content` (or raw `body`)."""

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def default_answer(request: RecordedRequest) -> str:
    question = request.prompt.rsplit("Question:", 1)[-1].strip().split("\n", 1)[0]
    return f"Test answer to: {question} [1]"


class LLMScript:
    """The queue of behaviours; when it is empty, every request gets `default`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self.answer: Callable[[RecordedRequest], str] = default_answer
        self.delay = 0.0
        self.requests: list[RecordedRequest] = []

    def reset(self) -> None:
        with self._lock:
            self._steps.clear()
            self.requests.clear()
            self.answer = default_answer
            self.delay = 0.0

    def then(self, *steps: Step) -> None:
        with self._lock:
            self._steps.extend(steps)

    def next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            if self._steps:
                return self._steps.pop(0)
        return Step(content=self.answer(request), delay=self.delay)


def create_llm_app(script: LLMScript) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "up"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "test-model", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        recorded = RecordedRequest(
            await request.json(), dict(request.headers), started=time.monotonic()
        )
        script.requests.append(recorded)
        step = script.next_step(recorded)
        if step.delay:
            await asyncio.sleep(step.delay)
        recorded.finished = time.monotonic()
        if step.body is not None:
            return PlainTextResponse(step.body, status_code=step.status, headers=step.headers)
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
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        )

    return app

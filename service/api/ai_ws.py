"""Datafari 7's AI API over a WebSocket, `/ai/ws` (its `/rest/v2.0/ai/ws`, AiWebSocketHandler):
the client sends `{"type": "ai.request", "data": <the body of POST /ai>}`, and receives the
events of /ai/stream, one a text message (service.api.ai_events); `human.input.response` is
answered that no question is waiting (our agents never ask one).

The same rules as the stream: the API key at the handshake (refused: closed, 1008), the
caller's groups from its headers, the per-caller cap on questions in progress (shared with the
HTTP endpoints), and a turn cancelled when its client leaves. What a hostile or absurd client
can cost is bounded: one turn at a time per connection, READ_AHEAD messages waiting behind it
(more: closed, 1008), MAX_MESSAGES_PER_MINUTE requests a minute, a message of at most
MAX_MESSAGE_BYTES (larger: closed, 1009), MAX_REFUSED garbage messages (then closed, 1003), and
a client that stops reading is closed after SEND_SECONDS (its turn cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass

from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from service.api.ai import AiRequest, Turn, turn_events
from service.api.ai_events import EventStream
from service.api.auth import api_keys, matching_api_key
from service.api.dependencies import request_snapshot
from service.api.errors import describe_validation_errors
from service.api.llm_work import Callers, caller_of
from service.api.payload import NOT_JSON, QUESTION_BYTES, read_json
from service.errors import BadRequest, ServiceError
from service.text.language import answer_language

log = logging.getLogger(__name__)
router = APIRouter(tags=["ai"])

MAX_MESSAGE_BYTES = QUESTION_BYTES
MAX_MESSAGES_PER_MINUTE = 30
READ_AHEAD = 4
MAX_REFUSED = 5
SEND_SECONDS = 30.0


@dataclass
class Refusals:
    """Messages of one connection refused for not being requests."""

    count: int = 0


class Closing(Exception):
    """The connection is to be closed with this code and reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@router.websocket("/ai/ws")
async def ai_ws(websocket: WebSocket) -> None:
    """Datafari 7's AI API over a WebSocket (the module's docstring)."""
    security = websocket.app.state.runtime.settings().security
    if api_keys(security) and matching_api_key(websocket, security) is None:
        await websocket.close(code=1008, reason="missing or wrong API key")
        return
    await websocket.accept()
    websocket.state.request_id = uuid.uuid4().hex[:16]
    waiting: asyncio.Queue[str] = asyncio.Queue(maxsize=READ_AHEAD)
    refused = Refusals()
    reader = asyncio.create_task(_read(websocket, waiting))
    try:
        while True:
            getting = asyncio.ensure_future(waiting.get())
            await asyncio.wait({getting, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():  # the reader ended: the client left, or must go
                getting.cancel()
                break
            text = getting.result()
            turn = asyncio.create_task(_answer(websocket, text, refused))
            await asyncio.wait({turn, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not turn.done():  # the client left mid-turn: its work is cancelled
                turn.cancel()
                break
            turn.result()
    except Closing as closing:
        await _close(websocket, closing)
    except (WebSocketDisconnect, RuntimeError):
        pass  # gone meanwhile
    finally:
        reader.cancel()
    if reader.done() and not reader.cancelled() and isinstance(reader.exception(), Closing):
        await _close(websocket, reader.exception())  # type: ignore[arg-type]


async def _read(websocket: WebSocket, waiting: asyncio.Queue[str]) -> None:
    """The client's messages into `waiting`, within the module's bounds; returns when the
    client leaves, raises Closing when it must go."""
    recent: deque[float] = deque()
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None and message.get("bytes") is not None:
            text = message["bytes"].decode("utf-8", errors="replace")
        if text is None:
            continue
        if len(text.encode("utf-8", errors="replace")) > MAX_MESSAGE_BYTES:
            raise Closing(1009, f"a message is at most {MAX_MESSAGE_BYTES} bytes")
        now = time.monotonic()
        recent.append(now)
        while recent and now - recent[0] > 60:
            recent.popleft()
        if len(recent) > MAX_MESSAGES_PER_MINUTE:
            raise Closing(1008, f"at most {MAX_MESSAGES_PER_MINUTE} messages a minute")
        if waiting.full():
            raise Closing(1008, f"at most {READ_AHEAD} messages may wait for an answer")
        waiting.put_nowait(text)


async def _answer(websocket: WebSocket, text: str, refused: Refusals) -> None:
    """One message: a question answered with the stream's events, or why it is refused."""
    stream = EventStream()
    message, problem = read_json(text.encode("utf-8", errors="replace"))
    kind = message.get("type") if isinstance(message, dict) else None
    if kind == "human.input.response":
        await _send(websocket, stream.event("error", code="404", label="humanInputNotFound",
                    message="No question of ours is waiting for an answer.",
                    reason="this service's agents never ask one"))  # fmt: skip
        return
    if kind != "ai.request" or not isinstance(message.get("data"), dict):  # type: ignore[union-attr]
        refused.count += 1
        if refused.count > MAX_REFUSED:
            raise Closing(1003, "too many messages that are not ai.request")
        if problem is not None:
            reason = problem
        elif message is NOT_JSON:
            reason = "not JSON"
        else:
            reason = f"type {str(kind)[:64]!r}, or no data"
        for line in stream.refused(BadRequest(f"Unsupported WebSocket message: {reason}"), None):
            await _send(websocket, line)
        return
    try:
        body = AiRequest.model_validate(message["data"])  # type: ignore[index]
    except ValidationError as error:
        problems = describe_validation_errors(error)
        for line in stream.refused(BadRequest(problems[:2000]), None):
            await _send(websocket, line)
        return
    websocket.state.language = answer_language(body.lang, body.query)
    settings = websocket.app.state.runtime.settings()
    callers: Callers = websocket.app.state.callers
    try:
        with callers.asking(caller_of(websocket, settings), settings.llm.max_concurrent_per_caller):
            turn = Turn(body, websocket, request_snapshot(websocket))  # type: ignore[arg-type]
            async for line in turn_events(turn):
                await _send(websocket, line)
    except ServiceError as error:  # over the caller's cap
        for line in stream.refused(error, websocket.state.language):
            await _send(websocket, line)


async def _send(websocket: WebSocket, line: str) -> None:
    try:
        await asyncio.wait_for(websocket.send_text(line.rstrip("\n")), SEND_SECONDS)
    except TimeoutError:
        raise Closing(1008, f"the client read nothing for {SEND_SECONDS:g} s") from None


async def _close(websocket: WebSocket, closing: Closing) -> None:
    log.info("closing a WebSocket of /ai/ws: %s", closing.reason)
    with contextlib.suppress(RuntimeError):  # already closed
        await websocket.close(code=closing.code, reason=closing.reason)

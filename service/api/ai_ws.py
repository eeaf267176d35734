"""Datafari 7's AI API over a WebSocket, `/ai/ws` (its `/rest/v2.0/ai/ws`, AiWebSocketHandler):
the client sends `{"type": "ai.request", "data": <the body of POST /ai>}`, and receives the
events of /ai/stream, one a text message (service.api.protocols.ndjson); `human.input.response` is
answered that no question is waiting (our agents never ask one).

Every rule of HTTP holds, decided by the same door (service.api.door): at the handshake the
page's Origin and the caller (refused: closed, 1008, with the reason); at every message the
caller again, with the configuration of that moment (a key removed or a token expired since:
closed, 1008, whatever the message); at every turn the per-caller cap and the LLM's admission
(refused: the turn's error events, the socket kept), an access log line and the request
metrics. A caller's identity token ends the socket when it expires, even between turns.

What a hostile or absurd client can cost is bounded: one turn at a time per connection,
READ_AHEAD messages waiting behind it (more: closed, 1008), MAX_MESSAGES_PER_MINUTE requests a
minute, a message of at most MAX_MESSAGE_BYTES, refused by the protocol before it is read
whole (1009; no compression is offered, so nothing inflates), MAX_REFUSED messages that ask
nothing (garbage, other types, `human.input.response`: then closed, 1003), a client that
stops reading is closed after SEND_SECONDS (its turn cancelled), and one that says nothing for
IDLE_SECONDS between turns is closed (1001); a caller holds at most ws.max.per.caller sockets
and the worker ws.max.total (more: closed at once, 1013; service.api.sockets). The server
pings every PING_SECONDS (service.api.connections): a peer that does not answer is gone.
A turn itself may take as long as its answer does (request.timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from service import tracing
from service.api.ai import AiRequest, turn_of
from service.api.dependencies import counting_snapshot
from service.api.door import POLICY_VIOLATION, Door, caller_of
from service.api.errors import describe_validation_errors
from service.api.payload import NOT_JSON, QUESTION_BYTES, read_json
from service.api.protocols.datafari7 import AiEvents
from service.api.protocols.driver import drive
from service.api.protocols.ndjson import EventStream
from service.api.request_context import CLIENT_LEFT, record_access
from service.api.sockets import OpenSockets, SocketsFull
from service.errors import BadRequest, ServiceError
from service.observability import request_id_var
from service.text.language import answer_language

log = logging.getLogger(__name__)
router = APIRouter(tags=["ai"])

MAX_MESSAGE_BYTES = QUESTION_BYTES
MAX_MESSAGES_PER_MINUTE = 30
READ_AHEAD = 4
MAX_REFUSED = 5
SEND_SECONDS = 30.0
IDLE_SECONDS = 300.0
GOING_AWAY = 1001


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
    """Datafari 7's AI API over a WebSocket (the module's docstring); the door
    (service.api.door) has checked its Origin and its caller. A socket over its caller's
    share, or the worker's, is closed at once (1013: service.api.sockets)."""
    door: Door = websocket.app.state.door
    try:
        release = _open_sockets(websocket).take(caller_of(websocket), door.settings())
    except SocketsFull as full:
        log.info("WebSocket %s refused: %s", websocket.url.path, full.reason)
        await websocket.accept()
        await websocket.close(code=full.close_code, reason=full.reason)
        return
    try:
        await _serve(websocket)
    finally:
        release()


def _open_sockets(websocket: WebSocket) -> OpenSockets:
    """The app's count of open sockets (made with its first socket)."""
    state = websocket.app.state
    sockets = getattr(state, "open_sockets", None)
    if sockets is None:
        sockets = state.open_sockets = OpenSockets()
    return sockets


async def _serve(websocket: WebSocket) -> None:
    await websocket.accept()
    connection = uuid.uuid4().hex[:12]
    websocket.state.request_id = connection
    waiting: asyncio.Queue[str] = asyncio.Queue(maxsize=READ_AHEAD)
    refused = Refusals()
    reader = asyncio.create_task(_read(websocket, waiting))
    try:
        for number in itertools.count(1):
            getting = asyncio.ensure_future(waiting.get())
            await asyncio.wait({getting, reader}, timeout=_idle_seconds(websocket),
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if not getting.done():
                getting.cancel()
                if reader.done():  # the client left, or must go
                    break
                raise _idle(websocket)
            request_id = f"{connection}-{number}"
            turn = asyncio.create_task(_turn(websocket, getting.result(), refused, request_id))
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


def _idle_seconds(websocket: WebSocket) -> float:
    """How long the socket may wait for its next message: IDLE_SECONDS, or until its
    caller's identity token expires."""
    expires = caller_of(websocket).expires
    if expires is None:
        return IDLE_SECONDS
    return max(0.0, min(IDLE_SECONDS, expires - time.time()))


def _idle(websocket: WebSocket) -> Closing:
    expires = caller_of(websocket).expires
    if expires is not None and expires <= time.time() + 0.5:
        return Closing(POLICY_VIOLATION, "the identity token expired")
    return Closing(GOING_AWAY, f"nothing was asked for {IDLE_SECONDS:g} s")


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


async def _answer(websocket: WebSocket, text: str, refused: Refusals) -> int:
    """One message: a question answered with the stream's events, or why it is refused; the
    HTTP status its answer would have had."""
    stream = EventStream()
    door: Door = websocket.app.state.door
    try:  # at every message, whatever it is: a key removed, a token expired since?
        caller = door.identify(websocket)
    except ServiceError as error:
        raise Closing(POLICY_VIOLATION, error.reason[:120]) from None
    message, problem = read_json(text.encode("utf-8", errors="replace"))
    kind = message.get("type") if isinstance(message, dict) else None
    if kind != "ai.request" or not isinstance(message.get("data"), dict):  # type: ignore[union-attr]
        refused.count += 1
        if refused.count > MAX_REFUSED:
            raise Closing(1003, "too many messages that are not ai.request")
        if kind == "human.input.response":
            await _send(websocket, stream.event("error", code="404", label="humanInputNotFound",
                        message="No question of ours is waiting for an answer.",
                        reason="this service's agents never ask one"))  # fmt: skip
            return 404
        for line in _refusal(stream, message, problem):
            await _send(websocket, line)
        return 400
    try:
        body = AiRequest.model_validate(message["data"])  # type: ignore[index]
    except ValidationError as error:
        problems = describe_validation_errors(error)
        for line in stream.refused(BadRequest(problems[:2000]), None):
            await _send(websocket, line)
        return 400
    websocket.state.language = answer_language(body.lang, body.query)
    settings = door.settings()
    await door.observe(settings)  # the LLM's queue, as an HTTP question's admission reads it
    try:
        with door.question(caller, settings):
            snapshot = await counting_snapshot(websocket)  # type: ignore[arg-type]
            turn = turn_of(body, websocket, snapshot, caller)
            events = AiEvents(body.action, websocket.state.language)
            # the driver writes an event's lines (the answer's end's) as one piece: a
            # WebSocket message is one event
            async for lines in drive(turn, events, websocket.state.request_id):
                for line in lines.split("\n"):
                    if line:
                        await _send(websocket, line)
    except ServiceError as error:  # over the caller's cap, or the LLM full
        for line in stream.refused(error, websocket.state.language):
            await _send(websocket, line)
        return error.status
    return events.status


def _refusal(stream: EventStream, message: object, problem: str | None) -> Iterator[str]:
    """Why a message is not a request. A JSON object of another `type`, or an ai.request
    without data, is answered as Datafari's AiWebSocketHandler answers it: the error alone
    (label "Bad request"), then the end of the stream; what is not a JSON object, or an
    ai.request whose data is not one, is refused as an invalid body is (with its reason)."""
    if isinstance(message, dict) and problem is None:
        kind = message.get("type")
        why: tuple[str, str] | None
        if kind != "ai.request":
            why = "Unsupported WebSocket message type", "" if kind is None else str(kind)[:64]
        elif message.get("data") is None:
            why = "Missing AiRequest data", "data is required"
        else:
            why = None
        if why is not None:
            yield stream.event("error", code="400", label="Bad request", message=why[0],
                               reason=why[1])  # fmt: skip
            yield stream.completed("ERROR")
            return
    if problem is None and message is NOT_JSON:
        problem = "not JSON"
    reason = problem or ("data is not an object" if isinstance(message, dict) else "not an object")
    yield from stream.refused(BadRequest(f"Unsupported WebSocket message: {reason}"), None)


async def _turn(websocket: WebSocket, text: str, refused: Refusals, request_id: str) -> None:
    """One message answered, with its request id, access log line and metrics; traced, its
    own trace (a question), whose id is then the turn's request id."""
    attributes = {"http.route": "/ai/ws", "solr_rag.transport": "websocket"}
    with tracing.server("WS /ai/ws", None, attributes) as span:
        await _answered(websocket, text, refused, span.trace_id or request_id)


async def _answered(websocket: WebSocket, text: str, refused: Refusals, request_id: str) -> None:
    """One message answered under `request_id`, its access log line written."""
    websocket.state.request_id = request_id
    bound = request_id_var.set(request_id)
    started = time.perf_counter()
    status = CLIENT_LEFT
    try:
        status = await _answer(websocket, text, refused)
    except Closing as closing:
        status = 400 if closing.code in (1003, 1009) else 403
        raise
    finally:
        request_id_var.reset(bound)
        seconds = time.perf_counter() - started
        record_access("/ai/ws", "WS", websocket.url.path, status, seconds, request_id)
        tracing.current().set("http.response.status_code", status)  # the turn's span


async def _send(websocket: WebSocket, line: str) -> None:
    try:
        async with asyncio.timeout(SEND_SECONDS):
            await websocket.send_text(line.rstrip("\n"))
    except TimeoutError:
        raise Closing(1008, f"the client read nothing for {SEND_SECONDS:g} s") from None


async def _close(websocket: WebSocket, closing: Closing) -> None:
    log.info("closing a WebSocket of /ai/ws: %s", closing.reason)
    with contextlib.suppress(RuntimeError):  # already closed
        await websocket.close(code=closing.code, reason=closing.reason)

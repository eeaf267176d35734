"""Datafari 7's AI API over a WebSocket (/ai/ws, its /rest/v2.0/ai/ws): `ai.request` answered
with the stream's events, checked against Datafari's catalogue; garbage, floods, huge messages
and callers without the key closed with a reason."""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack

import pytest
import websockets.sync.client as ws_client
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from service.api.ai_ws import MAX_MESSAGE_BYTES, MAX_REFUSED, READ_AHEAD
from service.api.connections import AcceptErrors
from testing.llm_server import LLMScript, Step
from testing.service import ClientFactory, ServiceFactory
from tests.service.test_datafari7_conformance import ANSWERED, FAILED, RAG, conforming, shape


def turn(websocket: object) -> list[dict]:
    """The events of one answer, up to stream.completed, checked against the catalogue (a
    test client's socket, or a real one's)."""
    lines = []
    while True:
        receive = getattr(websocket, "receive_text", None)
        line = receive() if receive else websocket.recv(timeout=120)  # type: ignore[attr-defined]
        lines.append(line)
        if json.loads(line)["type"] == "stream.completed":
            return conforming("\n".join(lines))


@pytest.mark.parametrize("path", ["/ai/ws", "/Datafari/rest/v2.0/ai/ws"])
def test_an_ai_request_is_answered_with_the_stream_s_events(
    client: TestClient, llm: LLMScript, path: str
) -> None:
    with client.websocket_connect(path) as websocket:
        websocket.send_text(json.dumps({"type": "ai.request", "data": RAG}))
        first = turn(websocket)
        assert ANSWERED.match(shape(first)), shape(first)
        final = next(e["data"] for e in first if e["type"] == "message.final")
        assert final["text"].startswith("Test answer to:")
        # the same connection takes the next question
        websocket.send_text(json.dumps({"type": "ai.request", "data": {**RAG, "id": "nope"}}))
        second = turn(websocket)
        assert FAILED.match(shape(second)), shape(second)
    assert len(llm.requests) == 1


def test_what_is_not_a_request_is_said_so_and_a_connection_of_garbage_is_closed(
    client: TestClient, llm: LLMScript
) -> None:
    with client.websocket_connect("/ai/ws") as websocket:
        websocket.send_text(json.dumps({"type": "human.input.response", "interactionId": "x"}))
        (answer,) = [json.loads(websocket.receive_text())]
        assert (answer["type"], answer["data"]["label"]) == ("error", "humanInputNotFound")
        websocket.send_text(json.dumps({"type": "ai.request", "data": {"action": "rag"}}))
        refused = turn(websocket)
        assert shape(refused) == "stream.started error stream.completed:ERROR "
        assert refused[1]["data"]["label"] == "aiBadRequest"
        for garbage in ["not json", "[1, 2]", "{" * 100_000]:
            websocket.send_text(garbage)
            assert shape(turn(websocket)) == "stream.started error stream.completed:ERROR "
        # what the HTTP body's JSON guard refuses, refused here with its reason
        websocket.send_text('{"type": "ai.request", "data": {"query": NaN}}')
        nan = turn(websocket)
        assert "NaN is not a JSON number" in nan[1]["data"]["reason"]
        for _ in range(MAX_REFUSED - 5):  # human.input.response, 3 garbage, NaN: 5 refused
            websocket.send_text("still not json")
            turn(websocket)
        websocket.send_text("one too many")
        with pytest.raises(WebSocketDisconnect) as closed:
            websocket.receive_text()
        assert closed.value.code == 1003
    assert llm.requests == []


def test_a_message_of_another_type_gets_datafari_s_bad_request_alone(
    service: ServiceFactory, llm: LLMScript
) -> None:
    """Issue 68: Datafari's AiWebSocketHandler answers a message that is not an ai.request
    (or one without data) with its error, label "Bad request", then stream.completed; no
    stream.started before it, and the connection kept for the next question. On a real
    socket, frame by frame."""
    url = service().replace("http://", "ws://", 1) + "/Datafari/rest/v2.0/ai/ws"
    with ws_client.connect(url, open_timeout=30) as websocket:
        websocket.send(json.dumps({"type": "chat.message", "data": RAG}))
        other = turn(websocket)
        assert shape(other) == "error stream.completed:ERROR "
        assert other[0]["data"] == {"code": "400", "label": "Bad request",
                                    "message": "Unsupported WebSocket message type",
                                    "reason": "chat.message"}  # fmt: skip
        websocket.send(json.dumps({"data": RAG}))  # no type at all
        untyped = turn(websocket)
        assert shape(untyped) == "error stream.completed:ERROR "
        assert (untyped[0]["data"]["label"], untyped[0]["data"]["reason"]) == ("Bad request", "")
        websocket.send(json.dumps({"type": "ai.request", "data": None}))
        empty = turn(websocket)
        assert shape(empty) == "error stream.completed:ERROR "
        assert (empty[0]["data"]["message"], empty[0]["data"]["reason"]) == (
            "Missing AiRequest data", "data is required")  # fmt: skip
        websocket.send(json.dumps({"type": "ai.request", "data": RAG}))
        assert ANSWERED.match(shape(turn(websocket)))
    assert len(llm.requests) == 1


def test_a_huge_message_or_a_flood_closes_the_connection(
    client: TestClient, llm: LLMScript
) -> None:
    with client.websocket_connect("/ai/ws") as websocket:
        websocket.send_text("x" * (MAX_MESSAGE_BYTES + 1))
        with pytest.raises(WebSocketDisconnect) as closed:
            websocket.receive_text()
        assert closed.value.code == 1009
    llm.then(Step(content="Slow [1].", delay=3))
    with client.websocket_connect("/ai/ws") as websocket:
        request = json.dumps({"type": "ai.request", "data": RAG})
        for _ in range(READ_AHEAD + 2):  # one answered, READ_AHEAD waiting, one too many
            websocket.send_text(request)
        with pytest.raises(WebSocketDisconnect) as closed:
            while True:
                websocket.receive_text()
        assert closed.value.code == 1008
    assert len(llm.requests) <= 1


def test_a_caller_without_the_key_is_refused_at_the_handshake(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"api.keys": "the-key"})
    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/ai/ws") as ws:
        ws.receive_text()
    assert closed.value.code == 1008
    with client.websocket_connect("/ai/ws", headers={"X-API-Key": "the-key"}) as websocket:
        websocket.send_text(json.dumps({"type": "ai.request", "data": RAG}))
        assert ANSWERED.match(shape(turn(websocket)))


def test_one_caller_s_sockets_are_capped_and_cost_other_callers_nothing(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 81, finding 3: one caller held 2,000 idle sockets (each allowed IDLE_SECONDS),
    until the process ran out of file descriptors and answered no one. A caller has at most
    ws.max.per.caller open, the worker ws.max.total; more are closed with 1013 (try again
    later) and the reason, and a socket closed gives its place back."""
    client = make_client({"api.keys": "key-a,key-b", "ws.max.per.caller": 3,
                          "ws.max.total": 5})  # fmt: skip
    a, b = {"X-API-Key": "key-a"}, {"X-API-Key": "key-b"}
    with ExitStack() as held:
        for _ in range(3):
            held.enter_context(client.websocket_connect("/ai/ws", headers=a))
        with (
            pytest.raises(WebSocketDisconnect) as closed,
            client.websocket_connect("/ai/ws", headers=a) as refused,
        ):
            refused.receive_text()
        assert closed.value.code == 1013 and "ws.max.per.caller" in closed.value.reason
        # another caller still connects, and asks; the service still answers everyone
        other = held.enter_context(client.websocket_connect("/ai/ws", headers=b))
        other.send_text(json.dumps({"type": "ai.request", "data": RAG}))
        assert ANSWERED.match(shape(turn(other)))
        assert client.get("/health/live").status_code == 200
        held.enter_context(client.websocket_connect("/ai/ws", headers=b))  # the fifth
        with (
            pytest.raises(WebSocketDisconnect) as closed,
            client.websocket_connect("/ai/ws", headers=b) as refused,
        ):
            refused.receive_text()
        assert closed.value.code == 1013 and "ws.max.total" in closed.value.reason
    # out of descriptors all the same (other files), a failed accept is said once a burst
    assert isinstance(client.portal.call(_exception_handler), AcceptErrors)  # type: ignore[union-attr]
    # all closed: their places given back
    with client.websocket_connect("/ai/ws", headers=a) as again:
        again.send_text(json.dumps({"type": "ai.request", "data": RAG}))
        assert ANSWERED.match(shape(turn(again)))


async def _exception_handler() -> object:
    """The exception handler of the loop the service runs on."""
    return asyncio.get_running_loop().get_exception_handler()

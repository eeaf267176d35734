"""Every way in passes one door (service.api.door): issue 66's findings, each as it was found.

Two people behind one API key (user A and user B, group staff) and a third in another group
(user C, group hr), with `security.identity=jwt`: nothing of one is read, listed, renamed,
deleted, continued or appended by another, over HTTP and over Datafari 7's WebSocket. The
socket holds a whole slow answer, checks the page's Origin, is bounded before it inflates or
reads a huge message, passes the LLM's admission and the per-caller cap, loses its rights when
its key is removed or its token expires, and writes its access log line and metrics."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import jwt
import pytest
import websockets.sync.client as ws_client
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import ConnectionClosed

from service.api.llm_work import LlmPace
from service.api.payload import QUESTION_BYTES
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory

SECRET = "every-door-" + "s" * 40  # HS256 key of the tests' identity tokens
KEY = f"door-{uuid.uuid4().hex}"  # one key, shared by A and B (and C)
OTHER_KEY = f"door-other-{uuid.uuid4().hex}"
QUESTION = "When was the lighthouse lamp electrified?"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def token(subject: str, groups: list[str], seconds: float = 600) -> str:
    claims = {"sub": subject, "groups": groups, "exp": int(time.time() + seconds)}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def person(subject: str, groups: list[str], key: str = KEY, seconds: float = 600) -> dict:
    """The headers of one person behind `key`: the key in X-API-Key, the JWT in Authorization."""
    return {"X-API-Key": key, "Authorization": f"Bearer {token(subject, groups, seconds)}"}


JWT_CONFIG = {
    "conversations.enabled": True,
    "api.keys": f"{KEY},{OTHER_KEY}",
    "security.enabled": True,
    "security.identity": "jwt",
    "security.jwt.key": SECRET,
    "security.jwt.algorithms": "HS256",
}


@pytest.fixture
def people(make_client: ClientFactory) -> Iterator[tuple[TestClient, dict, dict, dict]]:
    """The service, and three people: A and B (staff) behind one key, C (hr)."""
    run = uuid.uuid4().hex[:8]  # people of their own: the suite's Solr keeps conversations
    client = make_client(JWT_CONFIG)
    yield (client, person(f"user-a-{run}", ["staff"]), person(f"user-b-{run}", ["staff"]),
           person(f"user-c-{run}", ["hr"]))  # fmt: skip


def content(response: object) -> dict:
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["status"] == "OK", body
    return body["content"]


def prompts(llm: LLMScript) -> str:
    return "\n".join(json.dumps(request.messages) for request in llm.requests)


# -- 1. a person owns their conversations -------------------------------------------------------


def test_two_people_behind_one_key_never_touch_each_other_s_conversations(
    people: tuple[TestClient, dict, dict, dict], llm: LLMScript
) -> None:
    client, a, b, c = people
    secret = f"A-PRIVATE {uuid.uuid4().hex}"
    written = client.post("/users/messages", headers=a, json={"role": "user", "content": secret})
    mine = content(written)["conversationId"]
    assert content(client.get("/users/conversations", headers=a))["conversationId"] == mine
    for other in (b, c):
        panel = content(client.get("/users/conversations", headers=other,
                                   params={"conversationId": mine}))  # fmt: skip
        assert panel["conversations"] == [] and panel["conversationId"] is None
        assert secret not in json.dumps(panel)
        assert client.get(f"/ai/conversations/{mine}", headers=other).status_code == 404
        renamed = client.put("/users/conversations", headers=other,
                             json={"conversationId": mine, "title": "stolen"})  # fmt: skip
        assert renamed.status_code == 404
        intruding = {"role": "user", "content": "B-WROTE", "conversationId": mine}
        appended = client.post("/users/messages", headers=other, json=intruding)
        assert appended.status_code == 404
        deleted = client.delete("/users/conversations", headers=other,
                                params={"conversationId": mine})  # fmt: skip
        assert deleted.status_code == 404
        assert client.delete(f"/ai/conversations/{mine}", headers=other).status_code == 404
        # continuing A's conversation by its id answers in a new one, without A's words
        llm.reset()
        asked = content(client.post("/ai", headers=other,
                                    json={"query": QUESTION, "conversationId": mine}))  # fmt: skip
        assert asked["conversationId"] != mine
        assert secret not in prompts(llm)
    still = content(client.get("/users/conversations", headers=a))
    assert still["conversationId"] == mine and still["title"] != "stolen"
    assert [m["content"] for m in still["messages"]] == [secret]
    assert "B-WROTE" not in json.dumps(still)


def test_a_memory_is_its_person_s(
    people: tuple[TestClient, dict, dict, dict], llm: LLMScript
) -> None:
    client, a, b, _ = people
    secret = f"A-MEMORY {uuid.uuid4().hex}"
    first = content(client.post("/ai", headers=a, json={"query": f"{QUESTION} {secret}"}))
    memory = first["memoryId"]
    llm.reset()
    theirs = content(client.post("/ai", headers=b, json={"query": QUESTION, "memoryId": memory}))
    assert secret not in prompts(llm)
    assert theirs.get("conversationId") != first.get("conversationId")
    llm.reset()
    again = {"query": QUESTION, "memoryId": memory, "conversationId": first["conversationId"]}
    content(client.post("/ai", headers=a, json=again))
    assert secret in prompts(llm)  # A's own history is A's


def test_a_key_alone_names_the_key_and_an_address_owns_nothing(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    keyed = make_client({"conversations.enabled": True, "api.keys": f"{KEY},{OTHER_KEY}"})
    # (chat.memory.enabled: a posted history is read, as on /ai/rag)
    mine = content(keyed.post("/ai", headers={"X-API-Key": KEY}, json={"query": QUESTION}))
    assert mine["conversationId"] and mine["memoryId"] and "notKept" not in mine
    other = {"X-API-Key": OTHER_KEY}
    assert (
        keyed.get(f"/ai/conversations/{mine['conversationId']}", headers=other).status_code == 404
    )

    anonymous = make_client({"conversations.enabled": True, "chat.memory.enabled": True})
    answered = content(anonymous.post("/ai", json={"query": QUESTION}))
    assert "conversationId" not in answered and "memoryId" not in answered
    assert "anonymous" in answered["notKept"]
    assert anonymous.get("/users/conversations").status_code == 401
    # the history a widget sends is read
    llm.reset()
    history = [{"role": "user", "content": "EARLIER-TURN"}, {"role": "assistant", "content": "ok"}]
    content(anonymous.post("/ai", json={"query": QUESTION, "history": history}))
    assert "EARLIER-TURN" in prompts(llm)
    streamed = anonymous.post("/ai/stream", json={"query": QUESTION}).text.splitlines()
    memory = next(json.loads(line)["data"] for line in streamed if '"memory"' in line)
    assert memory["memoryId"] == "" and "anonymous" in memory["notKept"]
    assert not any(json.loads(line)["type"] == "conversation" for line in streamed)


def test_the_per_caller_cap_is_each_person_s(service: ServiceFactory, llm: LLMScript) -> None:
    base = service({**JWT_CONFIG, "llm.max.concurrent.per.caller": 1})
    llm.slow_word, llm.slow_delay = "lighthouse", 4.0
    a, b = person("cap-a", ["staff"]), person("cap-b", ["staff"])
    body = {"query": QUESTION}
    done: list[int] = []
    slow = threading.Thread(
        target=lambda: done.append(
            httpx.post(f"{base}/ai", headers=a, json=body, timeout=60).status_code
        )
    )
    slow.start()
    try:
        deadline = time.monotonic() + 30
        while not llm.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        again = httpx.post(f"{base}/ai/rag", headers=a, json=body, timeout=60)
        assert again.status_code == 429, again.text  # A's one question is in progress
        other = httpx.post(f"{base}/ai/rag", headers=b, json={"query": "What is BM25?"}, timeout=60)
        assert other.status_code != 429, other.text  # B is another person
    finally:
        slow.join(60)
    assert done == [200]


# -- 2, 5. a WebSocket that holds a whole answer, bounded before it reads -----------------------


def _ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ai/ws"


def _turn(socket: ws_client.ClientConnection, body: dict, timeout: float = 120) -> list[dict]:
    socket.send(json.dumps({"type": "ai.request", "data": body}))
    events = []
    while True:
        event = json.loads(socket.recv(timeout=timeout))
        events.append(event)
        if event["type"] == "stream.completed":
            return events


def test_a_socket_held_a_minute_carries_a_slow_answer_whole(
    service: ServiceFactory, llm: LLMScript
) -> None:
    base = service({"llm.timeout.read": 120})
    llm.slow_word, llm.slow_delay = "lighthouse", 61.0  # a minute after its first word
    with ws_client.connect(_ws_url(base), open_timeout=30) as socket:
        time.sleep(11)  # longer than the headers' 10 s
        events = _turn(socket, {"query": QUESTION}, timeout=180)
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "stream.completed" and events[-1]["data"]["status"] == "OK", kinds
    final = next(e["data"]["text"] for e in events if e["type"] == "message.final")
    streamed = "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")
    assert final.startswith("Test answer to:") and streamed == final
    assert llm.requests[-1].stream_completed


def test_no_compression_is_offered_and_a_huge_message_is_refused_unread(
    service: ServiceFactory,
) -> None:
    base = service()
    with ws_client.connect(_ws_url(base), compression="deflate", open_timeout=30) as socket:
        offered = socket.response.headers.get("Sec-WebSocket-Extensions")  # type: ignore[union-attr]
        assert offered is None  # permessage-deflate refused: nothing inflates
        socket.send("x" * (QUESTION_BYTES + 1))
        with pytest.raises(ConnectionClosed) as closed:
            socket.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


# -- 4. the page's Origin ----------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://testserver.evil"])
def test_a_socket_from_another_origin_is_refused(make_client: ClientFactory, origin: str) -> None:
    client = make_client({"cors.allowed.origins": "https://search.example.org"})
    opening = client.websocket_connect("/ai/ws", headers={"origin": origin})
    with pytest.raises(WebSocketDisconnect) as closed, opening as socket:
        socket.receive_text()
    assert closed.value.code == 1008 and "origin" in closed.value.reason


@pytest.mark.parametrize("origin", [None, "http://testserver", "https://search.example.org"])
def test_a_socket_from_the_service_s_page_or_an_allowed_origin_is_answered(
    make_client: ClientFactory, llm: LLMScript, origin: str | None
) -> None:
    client = make_client({"cors.allowed.origins": "https://search.example.org"})
    headers = {"origin": origin} if origin else {}
    with client.websocket_connect("/ai/ws", headers=headers) as socket:
        socket.send_text(json.dumps({"type": "ai.request", "data": {"query": QUESTION}}))
        lines = []
        while not lines or json.loads(lines[-1])["type"] != "stream.completed":
            lines.append(socket.receive_text())
    assert json.loads(lines[-1])["data"]["status"] == "OK"


# -- 6. admission and the cap on the socket --------------------------------------------------


def _full(client: TestClient) -> None:
    """The LLM's pace as when it answers one question a minute and is busy with two."""
    client.app.state.door.pace = LlmPace(in_progress=2, completed=5, answered=1.0, busy=60.0)  # type: ignore[attr-defined]


def _socket_turn(socket: object, body: dict) -> list[dict]:
    socket.send_text(json.dumps({"type": "ai.request", "data": body}))  # type: ignore[attr-defined]
    events = []
    while not events or events[-1]["type"] != "stream.completed":
        events.append(json.loads(socket.receive_text()))  # type: ignore[attr-defined]
    return events


def test_a_full_llm_refuses_the_socket_s_question_as_it_refuses_http(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"llm.admission": "on", "request.timeout": 30, "llm.timeout.read": 30})
    _full(client)
    refused = client.post("/ai/rag", json={"query": QUESTION})
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
    with client.websocket_connect("/ai/ws") as socket:
        events = _socket_turn(socket, {"query": QUESTION})
    error = next(e["data"] for e in events if e["type"] == "error")
    assert error["retryAfter"] >= 1 and "the LLM is answering" in error["reason"], error
    assert events[-1]["data"]["status"] == "ERROR"
    assert not llm.requests


def test_a_search_is_no_answer_in_the_llm_s_pace(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client()
    pace = client.app.state.door.pace  # type: ignore[attr-defined]
    content(client.post("/ai", json={"query": QUESTION, "action": "search"}))
    assert pace.completed == 0 and not llm.requests
    content(client.post("/ai", json={"query": QUESTION}))
    assert pace.completed == 1


def test_the_socket_s_turns_share_the_caller_s_cap(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"llm.max.concurrent.per.caller": 1, "api.keys": KEY})
    door = client.app.state.door  # type: ignore[attr-defined]
    door.callers["key:" + hashlib.sha256(KEY.encode()).hexdigest()[:16]] = 1  # one in progress
    with client.websocket_connect("/ai/ws", headers={"X-API-Key": KEY}) as socket:
        events = _socket_turn(socket, {"query": QUESTION})
    error = next(e["data"] for e in events if e["type"] == "error")
    assert error["retryAfter"] >= 1 and "llm.max.concurrent.per.caller" in error["reason"]
    assert not llm.requests


# -- 7. rights re-checked at every turn --------------------------------------------------------


def test_a_removed_key_ends_its_open_socket(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"api.keys": f"{KEY},{OTHER_KEY}"})
    with client.websocket_connect("/ai/ws", headers={"X-API-Key": OTHER_KEY}) as socket:
        assert _socket_turn(socket, {"query": QUESTION})[-1]["data"]["status"] == "OK"
        patched = client.patch("/admin/config", headers=ADMIN, json={"api.keys": KEY})
        assert patched.status_code == 200, patched.text
        assert client.post("/ai/rag", headers={"X-API-Key": OTHER_KEY},
                           json={"query": QUESTION}).status_code == 401  # fmt: skip
        socket.send_text(json.dumps({"type": "ai.request", "data": {"query": QUESTION}}))
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_text()
    assert closed.value.code == 1008 and "API key" in closed.value.reason
    assert len(llm.requests) == 1


@pytest.mark.parametrize(
    "message",
    [{"type": "human.input.response", "data": {}}, {"type": "ping"}, "garbage"],
)
def test_a_removed_key_ends_its_socket_whatever_it_sends(
    make_client: ClientFactory, message: object
) -> None:
    """Not only a question: any message of a removed key's socket closes it (a revoked
    client kept its socket open answering human.input.response)."""
    client = make_client({"api.keys": f"{KEY},{OTHER_KEY}"})
    with client.websocket_connect("/ai/ws", headers={"X-API-Key": OTHER_KEY}) as socket:
        patched = client.patch("/admin/config", headers=ADMIN, json={"api.keys": KEY})
        assert patched.status_code == 200, patched.text
        socket.send_text(message if isinstance(message, str) else json.dumps(message))
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_text()
    assert closed.value.code == 1008 and "API key" in closed.value.reason


def test_an_expired_token_ends_the_socket_even_between_turns(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(JWT_CONFIG)
    short = person("short-lived", ["hr"], seconds=4)
    with client.websocket_connect("/ai/ws", headers=short) as socket:
        assert _socket_turn(socket, {"query": QUESTION})[-1]["data"]["status"] == "OK"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_text()  # nothing asked: the socket ends when the token does
    assert closed.value.code == 1008 and "expired" in closed.value.reason
    expired = person("short-lived", ["hr"], seconds=-5)
    opening = client.websocket_connect("/ai/ws", headers=expired)
    with pytest.raises(WebSocketDisconnect) as refused, opening as socket:
        socket.receive_text()
    assert refused.value.code == 1008 and "token" in refused.value.reason


# -- 10. the socket's turns are logged and counted ----------------------------------------------


def test_a_socket_turn_writes_an_access_line_and_metrics(
    make_client: ClientFactory, llm: LLMScript, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    caplog.set_level("INFO", logger="service.access")
    with client.websocket_connect("/ai/ws") as socket:
        _socket_turn(socket, {"query": QUESTION})
        _socket_turn(socket, {"query": QUESTION, "id": "no-such-document"})
    lines = [r.getMessage() for r in caplog.records if r.name == "service.access"]
    turns = [line for line in lines if line.startswith("WS /ai/ws")]
    assert len(turns) == 2, lines
    assert turns[0].startswith("WS /ai/ws 200") and not turns[1].startswith("WS /ai/ws 200")
    metrics = client.get("/metrics").text
    assert 'endpoint="/ai/ws",method="WS",status="200"' in metrics


def test_a_form_another_site_posts_changes_nothing(make_client: ClientFactory) -> None:
    """Review finding: with the person from a proxy's header (a session cookie the browser
    sends to any site's form), POST /users/conversations from another site's page made empty
    conversations until the person's real one was pushed out."""
    client = make_client({"conversations.enabled": True, "security.enabled": True,
                          "security.user.header": "X-User",
                          "conversations.max.per.caller": 3})  # fmt: skip
    victim = {"X-User": f"victim-{uuid.uuid4().hex[:8]}"}
    written = client.post(
        "/users/messages", headers=victim, json={"role": "user", "content": "mine"}
    )
    kept = content(written)["conversationId"]
    form = {**victim, "Origin": "https://evil.example",
            "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip
    for _ in range(3):
        refused = client.post("/users/conversations", headers=form, content="a=b")
        assert refused.status_code == 403 and "origin" in refused.text, refused.text
        assert client.delete("/users/conversations", headers=form,
                             params={"conversationId": kept}).status_code == 403  # fmt: skip
    panel = content(client.get("/users/conversations", headers=victim))
    assert [c["id"] for c in panel["conversations"]] == [kept]
    own = {**victim, "Origin": "http://testserver"}
    assert content(client.post("/users/conversations", headers=own))["conversationId"] != kept


def test_a_page_behind_a_proxy_that_rewrites_host_still_asks(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Review finding: nginx's default proxy_pass rewrites Host, and a site's own cookies
    (analytics, a load balancer's) ride along: the chat widget's question from
    https://search.example.org must still be answered. Only where the service's rights come
    from what the browser sends by itself (security.user.header: a proxy's person) is a
    request held to its page's Origin."""
    proxied = {"Origin": "https://search.example.org", "Host": "127.0.0.1:8000",
               "Cookie": "_ga=GA1.1.1"}  # fmt: skip
    client = make_client()
    answered = client.post("/ai/rag", headers=proxied, json={"query": QUESTION})
    assert answered.status_code == 200, answered.text
    people = make_client({"security.enabled": True, "security.user.header": "X-User"})
    person = {**proxied, "X-User": "someone"}
    refused = people.post("/ai/rag", headers=person, json={"query": QUESTION})
    assert refused.status_code == 403 and "origin" in refused.text
    forwarded = {**person, "X-Forwarded-Host": "search.example.org"}  # nginx's $host: no port
    assert people.post("/ai/rag", headers=forwarded, json={"query": QUESTION}).status_code == 200


def test_two_people_behind_one_key_never_continue_each_other_s_turns_over_a_socket(
    people: tuple[TestClient, dict, dict, dict], llm: LLMScript
) -> None:
    """What the HTTP test above asks, over /ai/ws: A's conversation and memory, named in B's
    and C's turns on sockets of their own, are neither read nor continued; A's own socket,
    its next turn, reads them."""
    client, a, b, c = people
    secret = f"A-SOCKET {uuid.uuid4().hex}"

    def ended(events: list[dict]) -> dict:
        assert events[-1]["data"] == {"status": "OK"}, events
        return {e["type"]: e["data"] for e in events}

    with client.websocket_connect("/ai/ws", headers=a) as socket:
        first = ended(_socket_turn(socket, {"query": f"{QUESTION} {secret}"}))
    mine = first["conversation"]["conversationId"]
    memory = first["memory"]["memoryId"]
    for other in (b, c):
        with client.websocket_connect("/ai/ws", headers=other) as socket:
            llm.reset()
            asked = {"query": QUESTION, "conversationId": mine, "memoryId": memory}
            theirs = ended(_socket_turn(socket, asked))
        assert secret not in prompts(llm)
        assert theirs["conversation"]["conversationId"] != mine
        assert theirs["memory"]["memoryId"] != memory
    with client.websocket_connect("/ai/ws", headers=a) as socket:
        llm.reset()
        again = ended(_socket_turn(socket, {"query": QUESTION, "conversationId": mine}))
    assert secret in prompts(llm) and again["conversation"]["conversationId"] == mine


def test_a_subject_spelling_a_long_subject_s_hash_reads_none_of_its_conversations(
    people: tuple[TestClient, dict, dict, dict],
) -> None:
    """Issue 81, finding 5: a sub over 200 characters was kept as "#" + its sha256; a token
    whose sub was that text listed and read the long subject's conversations."""
    client = people[0]
    long = f"https://idp.example/{uuid.uuid4().hex}/" + "x" * 300
    real = person(long, ["staff"])
    forged = person("#" + hashlib.sha256(long.encode()).hexdigest(), ["staff"])
    secret = f"LONG-SUBJECT {uuid.uuid4().hex}"
    written = client.post("/users/messages", headers=real, json={"role": "user", "content": secret})
    mine = content(written)["conversationId"]
    assert content(client.get("/users/conversations", headers=real))["conversationId"] == mine
    listed = content(client.get("/users/conversations", headers=forged))
    assert listed["conversations"] == [] and secret not in json.dumps(listed)
    assert client.get(f"/ai/conversations/{mine}", headers=forged).status_code == 404

"""Document-level security: a user of group A never gets group B's text, on any path."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from testing.corpus import remove_documents
from testing.llm_server import LLMScript, Step
from testing.service import ADMIN_TOKEN, ClientFactory

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET_B = "bergamot-xq marmalade"  # only group B may read this
DOCUMENTS = [
    {
        "id": "acl-a",
        "title": "Quince marmalade (group A)",
        "content": "The quince marmalade recipe of team A boils the fruit for forty minutes.",
        "allowed_groups": ["team-a"],
    },
    {
        "id": "acl-b",
        "title": "Bergamot marmalade (group B)",
        "content": f"The {SECRET_B} recipe of team B needs a whole night of soaking.",
        "allowed_groups": ["team-b"],
    },
    {
        "id": "acl-ab-denied",
        "title": "Marmalade notes (not for A)",
        "content": "Marmalade notes shared with everyone except team A: add the peel late.",
        "denied_groups": ["team-a"],
    },
]
A = {"X-User-Groups": "team-a"}


@pytest.fixture
def secure(make_client: ClientFactory) -> TestClient:
    admin = make_client()
    admin.post("/documents", json={"documents": DOCUMENTS}, headers=AUTH).raise_for_status()
    return make_client({"security.enabled": True, "retrieval.method": "bm25"})


SECRETS = ("bergamot-xq", "night of soaking", "peel late")  # B's text, and the denied doc's


def assert_no_secret(response: httpx.Response, llm: LLMScript) -> None:
    """Not in the answer, not in the sources, not in any prompt sent to the LLM."""
    for secret in SECRETS:
        assert secret not in response.text
        for request in llm.requests:
            assert secret not in str(request.body)


@pytest.mark.parametrize("method", ["bm25", "vector", "hybrid"])
def test_rag_sees_only_what_the_group_may(
    make_client: ClientFactory, secure: TestClient, llm: LLMScript, method: str
) -> None:
    client = make_client({"security.enabled": True, "retrieval.method": method})
    response = client.post("/ai/rag", json={"query": "marmalade recipe bergamot"}, headers=A)
    assert response.status_code == 200, response.text
    ids = {d["id"] for d in response.json()["content"]["documents"]}
    assert "acl-a" in ids and not ids & {"acl-b", "acl-ab-denied"}
    assert_no_secret(response, llm)


def test_group_b_does_see_its_document(secure: TestClient, llm: LLMScript) -> None:
    response = secure.post(
        "/ai/rag", json={"query": "bergamot marmalade"}, headers={"X-User-Groups": "team-b"}
    )
    assert response.json()["content"]["documents"][0]["id"] == "acl-b"


def test_no_identity_sees_public_documents_only(secure: TestClient, llm: LLMScript) -> None:
    response = secure.post("/ai/rag", json={"query": "marmalade lighthouse"})
    ids = {d["id"] for d in response.json()["content"]["documents"]}
    assert "lighthouse" in ids and not ids & {"acl-a", "acl-b"}


def test_id_of_a_forbidden_document_is_not_found(secure: TestClient, llm: LLMScript) -> None:
    response = secure.post("/ai/rag", json={"query": "recipe", "id": "acl-b"}, headers=A)
    assert response.status_code == 404
    assert response.json()["content"]["label"] == "ragFileNotFound"
    assert_no_secret(response, llm)


def test_summarize_respects_the_groups(make_client: ClientFactory, secure, llm) -> None:
    client = make_client({"security.enabled": True, "ai.enable.summarization": True})
    response = client.post("/ai/summarize", json={"id": "acl-b"}, headers=A)
    assert response.status_code == 404
    assert_no_secret(response, llm)


def test_vector_search_api_respects_the_groups(secure: TestClient) -> None:
    response = secure.get("/search/vector", params={"q": SECRET_B, "topK": 50}, headers=A)
    parents = {p["parent_id"] for p in response.json()["content"]["documents"]}
    assert "acl-a" in parents and not parents & {"acl-b", "acl-ab-denied"}


def test_openai_endpoint_respects_the_groups(secure: TestClient, llm: LLMScript) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "marmalade recipe bergamot"}],
        "index_name": "hybrid",
    }
    response = secure.post("/v1/chat/completions", json=body, headers=A)
    assert response.status_code == 200, response.text
    assert {s["id"] for s in response.json()["sources"]} & {"acl-b", "acl-ab-denied"} == set()
    assert_no_secret(response, llm)


def test_a_malformed_groups_header_is_a_bad_request(secure: TestClient) -> None:
    response = secure.post(
        "/ai/rag", json={"query": "marmalade"}, headers={"X-User-Groups": 'a") OR *:* ("'}
    )
    assert response.status_code == 400
    assert response.json()["content"]["label"] == "ragBadRequest"


def test_security_off_searches_everything(client: TestClient, secure: TestClient) -> None:
    response = client.post("/ai/rag", json={"query": "bergamot marmalade"})
    ids = {d["id"] for d in response.json()["content"]["documents"]}
    assert {"acl-b", "acl-ab-denied"} <= ids


# -- identity from a verified JWT --------------------------------------------------------------

PRIVATE_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PUBLIC_PEM = (
    PRIVATE_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


def token(groups: object, *, expires_in: int = 300, key: object = PRIVATE_KEY, **claims) -> str:
    body = {"sub": "user-1", "groups": groups, "exp": int(time.time()) + expires_in, **claims}
    algorithm = "HS256" if isinstance(key, str) else "RS256"
    return jwt.encode(body, key, algorithm=algorithm)


@pytest.fixture
def jwt_secure(make_client: ClientFactory, secure: TestClient, monkeypatch) -> TestClient:
    monkeypatch.setenv("SOLR_RAG_SECURITY_JWT_KEY", PUBLIC_PEM)  # a PEM spans lines
    return make_client(
        {
            "security.enabled": True,
            "security.identity": "jwt",
            "security.jwt.audience": "solr-rag",
            "retrieval.method": "bm25",
        }
    )


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def test_a_verified_token_gives_its_groups(jwt_secure: TestClient, llm: LLMScript) -> None:
    response = jwt_secure.post(
        "/ai/rag",
        json={"query": "marmalade recipe bergamot"},
        headers=bearer(token(["team-a"], aud="solr-rag")),
    )
    assert response.status_code == 200, response.text
    assert [d["id"] for d in response.json()["content"]["documents"]] == ["acl-a"]
    assert_no_secret(response, llm)
    as_b = jwt_secure.post(
        "/ai/rag",
        json={"query": "bergamot"},
        headers=bearer(token(["team-b"], aud="solr-rag")),
    )
    assert "acl-b" in [d["id"] for d in as_b.json()["content"]["documents"]]


def test_the_groups_header_means_nothing_when_identity_is_jwt(
    jwt_secure: TestClient, llm: LLMScript
) -> None:
    response = jwt_secure.post(
        "/ai/rag", json={"query": "bergamot"}, headers={"X-User-Groups": "team-b"}
    )
    assert response.status_code == 401  # no token: an identity is required (issue 81)
    assert_no_secret(response, llm)
    assert llm.requests == []


@pytest.mark.parametrize(
    "bad",
    [
        token(["team-b"], expires_in=-10, aud="solr-rag"),  # expired
        token(["team-b"], aud="another-service"),  # not for us
        token(["team-b"], key="a-shared-secret-of-32-bytes-or-more!", aud="solr-rag"),  # HS256
        token(["team-b"], aud="solr-rag")[:-4] + "AAAA",  # signature tampered with
        "not-a-jwt",
    ],
    ids=["expired", "wrong-audience", "wrong-algorithm", "tampered", "garbage"],
)
def test_an_invalid_token_is_401_never_a_wider_scope(
    jwt_secure: TestClient, llm: LLMScript, bad: str
) -> None:
    response = jwt_secure.post("/ai/rag", json={"query": "bergamot"}, headers=bearer(bad))
    assert response.status_code == 401
    assert response.json()["content"]["label"] == "ragUnauthorized"
    assert_no_secret(response, llm)
    assert llm.requests == []


def test_jwt_identity_and_api_keys_work_together(
    make_client: ClientFactory, secure: TestClient, monkeypatch, llm: LLMScript
) -> None:
    monkeypatch.setenv("SOLR_RAG_SECURITY_JWT_KEY", PUBLIC_PEM)
    client = make_client(
        {
            "security.enabled": True,
            "security.identity": "jwt",
            "retrieval.method": "bm25",
            "api.keys": "widget-key",
        }
    )
    identity = bearer(token(["team-a"]))
    without_key = client.post("/ai/rag", json={"query": "marmalade"}, headers=identity)
    assert without_key.status_code == 401
    response = client.post(
        "/ai/rag",
        json={"query": "marmalade recipe bergamot"},
        headers={**identity, "X-API-Key": "widget-key"},
    )
    assert response.status_code == 200, response.text
    assert [d["id"] for d in response.json()["content"]["documents"]] == ["acl-a"]
    assert_no_secret(response, llm)


# -- issue 81: leaving out one's identity never widens what one sees ---------------------------

MARKER = "DENYMARK-5521"
DENIED_ENG = {
    "id": "denied-eng",
    "title": "Renovation memo",
    "content": f"The renovation memo of the fourth floor, for all but eng. Marker {MARKER}.",
    "denied_groups": ["eng"],
}
WIDGET_KEY = "widget-key"
KEY_ONLY = {"X-API-Key": WIDGET_KEY}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def as_person(groups: list[str], subject: str) -> dict[str, str]:
    """A person behind the shared widget key: the key, and their own identity token."""
    return {"X-API-Key": WIDGET_KEY, **bearer(token(groups, sub=subject, aud="solr-rag"))}


def _tool_call(name: str, **arguments: object) -> Step:
    call = {"id": f"call-{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    return Step(body=json.dumps(body))


def _agent(client: TestClient, headers: dict[str, str], llm: LLMScript) -> tuple[int, str]:
    llm.then(_tool_call("get_document", document="denied-eng"),
             _tool_call("search", query="renovation memo"))  # fmt: skip
    llm.answer = lambda request: "I could not find it in the documents."
    body = {"action": "agentic", "agent": "generic", "query": "What does the renovation memo say?"}
    response = client.post("/ai", json=body, headers=headers)
    return response.status_code, response.text


def _socket(client: TestClient, headers: dict[str, str], llm: LLMScript) -> tuple[int, str]:
    """Datafari 7's WebSocket: a summary asked in one turn (a refused handshake: 401)."""
    turn = {"type": "ai.request", "data": {"action": "summarize", "id": "denied-eng"}}
    try:
        with client.websocket_connect("/ai/ws", headers=headers) as socket:
            socket.send_text(json.dumps(turn))
            lines = [socket.receive_text()]
            while json.loads(lines[-1])["type"] != "stream.completed":
                lines.append(socket.receive_text())
    except WebSocketDisconnect as closed:
        assert closed.code == 1008, closed
        return 401, closed.reason
    return 200, "\n".join(lines)


def _http(method: str, path: str, **request: object) -> Reader:
    def read(client: TestClient, headers: dict[str, str], llm: LLMScript) -> tuple[int, str]:
        extra = MCP_ACCEPT if path == "/mcp" else {}
        response = client.request(method, path, headers={**headers, **extra}, **request)  # type: ignore[arg-type]
        return response.status_code, response.text

    return read


Reader = Callable[[TestClient, dict[str, str], LLMScript], tuple[int, str]]
RENOVATION = "renovation memo"
READS: dict[str, Reader] = {
    "search": _http("GET", "/search/select", params={"q": RENOVATION, "fl": "id,preview_content"}),
    "rag": _http("POST", "/ai/rag", json={"query": RENOVATION}),
    "summarize": _http("POST", "/ai", json={"action": "summarize", "id": "denied-eng"}),
    "mcp": _http("POST", "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                       "params": {"name": "search",
                                                  "arguments": {"query": RENOVATION}}}),
    "v1": _http("POST", "/v1/chat/completions",
                json={"model": "rag", "messages": [{"role": "user", "content": RENOVATION}]}),
    "agent": _agent,
    "ws": _socket,
}  # fmt: skip


@pytest.fixture
def renovation(
    make_client: ClientFactory, solr_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ClientFactory]:
    """The memo denied to eng in the index; the service with JWT identity behind one key."""
    admin = make_client()
    admin.post("/documents", json={"documents": [DENIED_ENG]}, headers=AUTH).raise_for_status()
    monkeypatch.setenv("SOLR_RAG_SECURITY_JWT_KEY", PUBLIC_PEM)
    config = {"security.enabled": True, "security.identity": "jwt", "api.keys": WIDGET_KEY,
              "security.jwt.audience": "solr-rag", "retrieval.method": "bm25",
              "ai.enable.summarization": True, "agentic.enabled": True,
              "agentic.max.steps": 3}  # fmt: skip
    yield lambda overrides=None: make_client({**config, **(overrides or {})})
    remove_documents(solr_url, [DENIED_ENG["id"]])


@pytest.mark.parametrize("path", list(READS))
def test_leaving_out_the_token_never_reads_what_one_s_group_is_denied(
    renovation: ClientFactory, llm: LLMScript, path: str
) -> None:
    """Issue 81, finding 1: with the key alone, bob (eng) read the memo denied to eng. Now the
    key alone is a 401 (security.identity.required, on by default with an identity source),
    and where it is allowed, a caller of unknown groups sees no document that denies any."""
    read = READS[path]

    def seen(client: TestClient, headers: dict[str, str]) -> tuple[int, bool]:
        llm.reset()
        status, text = read(client, headers, llm)
        assert status < 500 and "Traceback" not in text, text
        return status, MARKER in text or any(MARKER in str(r.body) for r in llm.requests)

    required, open_to_all = renovation(), renovation({"security.identity.required": False})
    bob, carol = as_person(["eng"], "bob"), as_person(["hr"], "carol")
    assert seen(open_to_all, carol) == (200, True)  # it is there, on this path
    assert seen(required, carol) == (200, True)
    assert seen(required, bob)[1] is False
    assert seen(open_to_all, bob)[1] is False
    assert seen(open_to_all, KEY_ONLY)[1] is False  # unknown groups: no document denying any
    # a token without its groups claim (Azure AD's overage) says nothing of the groups either
    claimless = jwt.encode(
        {"sub": "bob", "aud": "solr-rag", "exp": int(time.time()) + 300}, PRIVATE_KEY, "RS256"
    )
    assert seen(required, {"X-API-Key": WIDGET_KEY, **bearer(claimless)})[1] is False
    llm.reset()
    status, text = read(required, KEY_ONLY, llm)
    assert status == 401 and MARKER not in text and not llm.requests, text
    if path != "ws":  # the documented shape: OpenAI's under /v1, else Datafari's envelope
        body = json.loads(text)
        assert body.get("error") or body["content"]["label"].endswith("Unauthorized"), body


# -- issue 81: scores say nothing of what the caller cannot see --------------------------------

CANTEEN = [
    {
        "id": "score-canteen",
        "title": "Canteen menu",
        "content": "The canteen menu: gazpachoq at noon, and the payrollq office is upstairs.",
    },
    {
        "id": "score-hr",
        "title": "HR only",
        "content": "The payrollq run closes on the twentieth.",
        "allowed_groups": ["hr"],
    },
]


def _scores(client: TestClient, word: str, headers: dict[str, str]) -> tuple[float, float]:
    """The canteen menu's score for `word` on /search/select and on MCP's search."""
    found = client.get("/search/select", params={"q": word, "fl": "id,score"}, headers=headers)
    docs = found.json()["response"]["docs"]
    assert [d["id"] for d in docs] == ["score-canteen"], docs
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": word}}}  # fmt: skip
    answered = client.post("/mcp", json=call, headers={**headers, **MCP_ACCEPT})
    sources = answered.json()["result"]["structuredContent"]["sources"]
    assert [s["id"] for s in sources] == ["score-canteen"], sources
    return docs[0]["score"], sources[0]["score"]


def test_scores_tell_nothing_of_hidden_documents(make_client: ClientFactory, solr_url: str) -> None:
    """Issue 81, finding 6: BM25 counts the whole collection, so the public menu scored lower
    for a word a hidden document holds too. With security on, a caller is shown a score of
    the rank alone, unless security.scores.exposed says the risk is taken."""
    admin = make_client()
    admin.post("/documents", json={"documents": CANTEEN}, headers=AUTH).raise_for_status()
    try:
        eng = {"X-User-Groups": "eng"}
        config = {"security.enabled": True, "retrieval.method": "bm25"}
        shown = make_client(config)
        assert _scores(shown, "payrollq", eng) == _scores(shown, "gazpachoq", eng)
        raw = make_client({**config, "security.scores.exposed": True})
        assert _scores(raw, "payrollq", eng) != _scores(raw, "gazpachoq", eng)
    finally:
        remove_documents(solr_url, [d["id"] for d in CANTEEN])

"""Document-level security: a user of group A never gets group B's text, on any path."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript
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
    assert response.status_code == 428  # no token: public documents only, and none matches
    assert_no_secret(response, llm)


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

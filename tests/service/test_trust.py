"""What a hostile caller, crawler or share gets (issue 45), over HTTP against the real Solr:
no caller value is ever a Solr template, and the surfaces an attacker tried answer as the
documented API says."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MACRO_IDS = ("macro/${HOME}.txt", "macro/${q}.txt", "${rag.id}", "macro/${a:${b}}.txt")


@pytest.fixture
def admin(make_client: ClientFactory, solr_url: str) -> Iterator[TestClient]:
    yield make_client()
    remove_documents(solr_url, MACRO_IDS)


def held(solr_url: str, document_id: str) -> int:
    found = httpx.post(
        f"{solr_url}/FileShare/select",
        data={"q": "{!term f=id v=$ident}", "ident": document_id, "defType": "lucene",
              "rows": 0, "wt": "json", "expandMacros": "false"},
    ).json()  # fmt: skip
    return int(found["response"]["numFound"])


def test_a_value_holding_solr_macros_is_never_expanded(admin: TestClient, solr_url: str) -> None:
    """Ids holding ${...} are indexed in one batch, found unchanged the second time (not
    embedded again), and deleted by their id, each exactly."""
    documents = [
        {"id": i, "content": f"Kiln log {n}: fired at dawn."} for n, i in enumerate(MACRO_IDS)
    ]
    first = admin.post("/documents", json={"documents": documents}, headers=ADMIN)
    assert first.status_code == 200, first.text
    assert first.json()["content"]["documents"] == len(MACRO_IDS)
    again = admin.post("/documents", json={"documents": documents}, headers=ADMIN)
    assert again.status_code == 200, again.text
    assert again.json()["content"]["unchanged"] == len(MACRO_IDS)
    assert again.json()["content"]["embedded"] == 0
    listed = admin.get("/documents", params={"id_prefix": "macro/${"}, headers=ADMIN).json()
    assert {d["id"] for d in listed["content"]["documents"]} == set(MACRO_IDS[:2] + MACRO_IDS[3:])
    for document_id in MACRO_IDS:
        assert held(solr_url, document_id) == 1
        deleted = admin.delete(f"/documents/{document_id}", headers=ADMIN)
        assert deleted.status_code == 200, (document_id, deleted.text)
        assert held(solr_url, document_id) == 0
    asked = admin.post("/ai/rag", json={"query": "${rag.id} ${q} kiln"})
    assert asked.status_code < 500, asked.text


@pytest.mark.parametrize("local", ["extractive", "qwen2.5-coder-1.5b-instruct"])
def test_a_model_the_local_llm_does_not_serve_is_a_404_not_an_answer(
    make_client: ClientFactory, llm: LLMScript, local: str
) -> None:
    """The service's own models answer to any name: a request naming another model is
    refused (it was answered by the local model under the name it asked for)."""
    client = make_client({"llm.model": local})
    ask = [{"role": "user", "content": "When was the lighthouse lamp electrified?"}]
    refused = client.post(
        "/v1/chat/completions", json={"model": "no-such-model-xyz", "messages": ask}
    )
    assert refused.status_code == 404, refused.text
    assert refused.json()["error"]["code"] == "model_not_found"
    assert local in refused.json()["error"]["message"] and not llm.requests
    for model in (local, "rag", ""):
        answered = client.post("/v1/chat/completions", json={"model": model, "messages": ask})
        assert answered.status_code == 200, (model, answered.text)

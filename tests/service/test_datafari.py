"""A Datafari front-end, unchanged (issue 17): its paths under /Datafari/rest/v2.0, the
deprecated RAG through the search API, and the inputs Datafari accepts."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.errors import SolrLayoutError
from testing.llm_server import LLMScript
from testing.service import ClientFactory
from tests.service.test_rag_errors import error_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PREFIX = "/Datafari/rest/v2.0"
QUESTION = "When was the lighthouse lamp electrified?"


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "OK"
    return body


def test_the_datafari_paths_are_our_routes(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"ai.enable.summarization": True})
    answer = ok(client.post(f"{PREFIX}/ai/rag", json={"query": QUESTION}))
    assert answer["content"]["documents"][0]["id"] == "lighthouse"
    summary = ok(client.post(f"{PREFIX}/ai/summarize", json={"id": "lighthouse"}))
    assert summary["content"]["message"]
    passages = ok(client.get(f"{PREFIX}/search/vector", params={"queryrag": QUESTION}))
    assert passages["content"]["documents"]
    assert len(llm.requests) == 2


def test_errors_on_the_datafari_paths_keep_the_envelope(client: TestClient) -> None:
    error_of(client.post(f"{PREFIX}/ai/rag", json={"query": ""}), 400, "ragBadRequest")
    error_of(client.post(f"{PREFIX}/ai/summarize", json={}), 400, "summarizationBadRequest")
    assert client.get(f"{PREFIX}/admin/config").status_code == 404  # only the RagAPI's routes
    assert client.post(f"{PREFIX}x/ai/rag", json={"query": QUESTION}).status_code == 404


def test_the_deprecated_search_select_answers_in_the_rag_envelope(
    client: TestClient, llm: LLMScript
) -> None:
    for path in ("/search/select", f"{PREFIX}/search/select"):
        params = {"q": QUESTION, "action": "rag", "format": "bulletpoint", "lang": "fr"}
        answer = ok(client.get(path, params=params))
        assert answer["content"]["documents"][0]["id"] == "lighthouse"
        assert answer["content"]["message"].startswith("Test answer to:")
    system = llm.requests[-1].messages[0]
    assert "Answer in French." in system["content"] and "bullet" in system["content"].lower()
    content = error_of(client.get("/search/select", params={"q": "x", "action": "facets"}), 400,
                       "ragBadRequest")  # fmt: skip
    assert "action=rag" in content["reason"]
    error_of(client.get("/search/select", params={"action": "rag"}), 400, "ragBadRequest")
    # a URL keeps within the HTTP server's limit (longer questions: POST /ai/rag)
    too_long = {"q": "\U000c9214" * 1001, "action": "rag"}
    error_of(client.get("/search/select", params=too_long), 400, "ragBadRequest")
    error_of(client.get("/search/select", params={"q": "x", "action": "rag", "lang": "??"}), 400,
             "ragBadRequest")  # fmt: skip


@pytest.mark.parametrize(
    "lenient",
    [{"lang": ""}, {"format": "poem"}, {"format": ""}, {"lang": "", "format": "haiku"}],
)
def test_what_datafari_accepts_is_answered(
    client: TestClient, llm: LLMScript, lenient: dict
) -> None:
    answer = ok(client.post("/ai/rag", json={"query": QUESTION, **lenient}))
    assert answer["content"]["documents"][0]["id"] == "lighthouse"


def test_a_system_message_in_the_history_is_kept(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"chat.memory.enabled": True})
    history = [
        {"role": "system", "content": "Answer like a lighthouse keeper."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Ahoy."},
    ]
    ok(client.post("/ai/rag", json={"query": QUESTION, "history": history}))
    sent = llm.requests[0].messages
    assert {"role": "system", "content": "Answer like a lighthouse keeper."} in sent
    assert {"role": "assistant", "content": "Ahoy."} in sent


# -- their rag.properties, as it is -----------------------------------------------------------


def datafari_file(tmp_path: Path, llm_base_url: str, **changes: str) -> Path:
    text = (FIXTURES / "datafari-rag.properties").read_text()
    text = text.replace("{llm_endpoint}", f"{llm_base_url}/v1/")
    for key, value in changes.items():
        text = re.sub(rf"(?m)^{re.escape(key)}=.*$", f"{key}={value}", text)
    path = tmp_path / "rag.properties"
    path.write_text(text)
    return path


@pytest.fixture
def datafari_env(monkeypatch: pytest.MonkeyPatch, solr_url: str, llm_base_url: str) -> None:
    """Where Datafari's file cannot say: our Solr and the embeddings API (1,536 dimensions,
    like the OpenAI model vector_1536 is made for), as a deployment sets them."""
    for name in [name for name in os.environ if name.startswith("SOLR_RAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SOLR_RAG_SOLR_URL", solr_url)
    monkeypatch.setenv("SOLR_RAG_AI_EMBEDDINGS_ENDPOINT", f"{llm_base_url}/v1/")


@pytest.mark.usefixtures("corpus", "datafari_env")
def test_a_datafari_rag_properties_starts_the_service_and_answers(
    tmp_path: Path, llm: LLMScript, llm_base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = datafari_file(tmp_path, llm_base_url)
    with TestClient(create_app(path)) as client:
        answer = ok(client.post(f"{PREFIX}/ai/rag", json={"query": QUESTION}))
        settings = client.app.state.runtime.settings()  # type: ignore[attr-defined]
    assert answer["content"]["documents"][0]["id"] == "lighthouse"
    assert llm.requests[0].body["model"] == "gpt-3.5-turbo"  # rag.model
    assert llm.requests[0].headers["authorization"] == "Bearer X"  # rag.api.token
    assert settings.prompt.max_request_size == 40000  # llm.max.request.size
    assert settings.retrieval.top_k == 10  # solr.topK
    assert (settings.retrieval.in_memory, settings.retrieval.in_memory_chunks) == (False, 5)
    assert settings.retrieval.in_force == "bm25"  # solr.enable.vector.search=false honoured
    assert settings.solr.vector_field == "vector_1536"
    warned = [r.getMessage() for r in caplog.records if "former name" in r.getMessage()]
    assert len(warned) == 4 and any(
        "rag.model is the former name of llm.model" in w for w in warned
    )


@pytest.mark.usefixtures("corpus", "datafari_env")
def test_datafari_vector_search_switch_runs_vector_search(
    tmp_path: Path, llm: LLMScript, llm_base_url: str, solr_url: str
) -> None:
    path = datafari_file(tmp_path, llm_base_url, **{"solr.enable.vector.search": "true"})
    with TestClient(create_app(path)) as client:
        assert client.app.state.runtime.settings().retrieval.in_force == "vector"  # type: ignore[attr-defined]


@pytest.mark.usefixtures("corpus", "datafari_env")
def test_a_vector_field_of_another_dimension_stops_the_start_naming_the_fix(
    tmp_path: Path, llm: LLMScript, llm_base_url: str
) -> None:
    llm.embedding_dimension = 768
    path = datafari_file(tmp_path, llm_base_url)
    with pytest.raises(SolrLayoutError) as raised, TestClient(create_app(path)):
        pass
    message = str(raised.value)
    assert "1536-dimension" in message and "gives 768" in message and "vector_768" in message


@pytest.mark.usefixtures("corpus", "datafari_env")
def test_a_vector_field_that_is_not_a_vector_stops_the_start(
    tmp_path: Path, llm_base_url: str
) -> None:
    path = datafari_file(tmp_path, llm_base_url, **{"solr.vector.field": "title"})
    with (
        pytest.raises(SolrLayoutError, match="not a DenseVectorField"),
        TestClient(create_app(path)),
    ):
        pass


# Datafari 7's MCP server's datafari_search tool, byte for byte (../shared/datafari7-clients.md)
MCP_SEARCH = (
    "/Datafari/rest/v2.0/search/select?q=lighthouse%20keeper&fl=title,url,id,docId,extension,"
    "preview_content&sort=score%20desc&q.op=AND&rows=10&start=0&aggregator=&wt=json"
)


def test_datafari_s_search_api_answers_its_mcp_server_in_solr_s_shape(client: TestClient) -> None:
    """Issue 68: the MCP server's search got a 400 for every query (its tool said `null`)."""
    response = client.get(MCP_SEARCH)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["responseHeader"]["status"] == 0
    found = body["response"]
    assert found["start"] == 0 and found["numFound"] >= 1
    first = found["docs"][0]
    # what the MCP server reads: docId, title[0], preview_content[0], url
    assert first["docId"] == first["id"] == "lighthouse"
    assert first["title"] == ["The lighthouse keeper"]
    assert first["preview_content"][0].startswith("The keeper of the Brannoch lighthouse")
    assert set(first) == {"title", "url", "id", "docId", "extension", "preview_content"}
    # q.op=AND: every word must match; OR finds more
    both = client.get("/search/select", params={"q": "lighthouse orchard", "q.op": "AND"})
    either = client.get("/search/select", params={"q": "lighthouse orchard", "q.op": "OR"})
    assert both.json()["response"]["numFound"] < either.json()["response"]["numFound"]
    paged = client.get("/search/select", params={"q": "lighthouse orchard", "rows": 1, "start": 1})
    assert [d["id"] for d in paged.json()["response"]["docs"]] == [
        d["id"] for d in either.json()["response"]["docs"][1:2]]  # fmt: skip


@pytest.mark.parametrize(
    "hostile",
    [
        {"q": "{!lucene}*:*"},
        {"q": "lighthouse", "defType": "lucene", "qt": "/update", "shards": "http://evil/solr"},
        {"q": "lighthouse", "stream.body": "<delete><query>*:*</query></delete>"},
        {"q": "lighthouse", "rq": "{!rerank reRankQuery=$x}", "fl": "*,[child],content"},
        {"q": "${secret}", "fq": "id:*"},
    ],
)
def test_the_search_api_reads_words_and_facets_never_solr_syntax(
    client: TestClient, hostile: dict
) -> None:
    response = client.get("/search/select", params=hostile)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 200:
        docs = response.json()["response"]["docs"]
        assert all(set(doc) <= {"id", "docId", "title", "url", "preview_content", "extension",
                                "score"} for doc in docs)  # fmt: skip
        assert len(docs) <= 10
    assert client.get("/search/select", params={"q": "lighthouse"}).json()["response"]["docs"]


def test_the_search_api_is_bounded_and_says_what_it_refuses(client: TestClient) -> None:
    for refused in ({"q": "x", "rows": 10**7}, {"q": "x", "start": 10**6, "rows": 20},
                    {"q": "x", "wt": "xml"}, {"q": "x", "sort": "title asc"},
                    {"q": "x", "q.op": "NEAR"}, {"q": "x", "action": "facets"},
                    {"q": "x", "fq": ["title:a"] * 11}):  # fmt: skip
        response = client.get("/search/select", params=refused)
        assert response.status_code == 400, (refused, response.text)
    # more rows than a page holds, or past the depth searched: cut, as an MCP host asks any
    for asked, start, given in ((500, 0, "100"), (20, 95, "5"), (51, 0, "51")):
        response = client.get("/search/select", params={"q": "x", "rows": asked, "start": start})
        assert response.status_code == 200, response.text
        assert response.json()["responseHeader"]["params"]["rows"] == given


def test_the_search_api_keeps_within_the_caller_s_groups(make_client: ClientFactory) -> None:
    from tests.service.test_security import AUTH, DOCUMENTS, SECRETS

    make_client().post("/documents", json={"documents": DOCUMENTS}, headers=AUTH).raise_for_status()
    secure = make_client({"security.enabled": True})
    words = {"q": "marmalade soaking peel quince", "rows": 10}
    team_a = secure.get("/search/select", headers={"X-User-Groups": "team-a"}, params=words)
    assert team_a.status_code == 200, team_a.text
    assert "acl-a" in team_a.text and not any(secret in team_a.text for secret in SECRETS)
    nobody = secure.get("/search/select", params=words)  # no groups: public documents only
    assert nobody.status_code == 200 and "acl-ab-denied" in nobody.text
    assert "acl-a" not in nobody.text.replace("acl-ab", "") and "bergamot-xq" not in nobody.text


def test_the_search_api_counts_every_match_and_refuses_a_value_its_field_cannot_hold(
    client: TestClient,
) -> None:
    """Review findings: numFound counted the documents read, not those matched; a filter
    value that does not suit its field's type (a date) was Solr's 400 reported as a 502."""
    counts = {
        rows: client.get("/search/select", params={"q": "lighthouse orchard", "rows": rows}).json()[
            "response"
        ]["numFound"]
        for rows in (0, 1, 10)
    }
    assert counts[0] == counts[1] == counts[10] >= 2, counts
    for value in ("last_modified:x", "last_modified:[NOW/FOO TO *]"):
        refused = client.get("/search/select", params={"q": "lighthouse", "fq": value})
        assert refused.status_code == 400, refused.text
        assert "does not suit its field" in refused.json()["content"]["reason"]

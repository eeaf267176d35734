"""RAG over a Solr the service did not build (issue 32): collections made from other schemas
(Solr's _default field names; Datafari's FileShare and VectorMain as ManifoldCF fills them),
filled the way a crawler fills them (plain Solr updates, never our ingestion)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.errors import SolrLayoutError
from testing.llm_server import LLMScript
from testing.solr import create_collection, delete_collection, upload_configset
from tests.conftest import ADMIN_TOKEN, ClientFactory, write_properties

CONFIGSETS = Path(__file__).parents[1] / "fixtures" / "configsets"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PRODUCTS, DOCS, PASSAGES = "Products", "DfFileShare", "DfVectorMain"

PRODUCT_DOCS = [
    {
        "id": "p-trail",
        "name_s": "Trail running shoe",
        "body_txt": ["The trail running shoe has a rock plate.", "Its heel drop is 6 mm."],
        "link_s": "https://shop.example/p-trail",
    },
    {
        "id": "p-kettle",
        "name_s": "Camping kettle",
        "body_txt": ["A titanium camping kettle that boils a litre in four minutes."],
        "link_s": "https://shop.example/p-kettle",
    },
]
# Datafari's FileShare as ManifoldCF writes it: every document mentions the handbook
SALES_SECRET = "quokka bonus formula"
STAFF_SECRET = "canteen wasabi menu"
DATAFARI_DOCS = [
    {
        "id": "file://share/public/tides.txt",
        "title": ["Harbour tide tables"],
        "title_en": "Harbour tide tables",
        "content": ["The handbook lists the harbour tide tables: high water at 06:12."],
        "content_en": "The handbook lists the harbour tide tables: high water at 06:12.",
        "url": "file://share/public/tides.txt",
        "language": "en",
    },
    {
        "id": "file://share/sales/bonus.txt",
        "title": ["Sales bonus"],
        "content": [f"The handbook explains the {SALES_SECRET} for the sales team."],
        "content_en": f"The handbook explains the {SALES_SECRET} for the sales team.",
        "url": "file://share/sales/bonus.txt",
        "language": "en",
        "allow_token_document": ["AD:sales"],
    },
    {
        "id": "file://share/staff/canteen.txt",
        "title": ["Canteen"],
        "content": [f"The handbook gives the {STAFF_SECRET} of the staff canteen."],
        "content_en": f"The handbook gives the {STAFF_SECRET} of the staff canteen.",
        "url": "file://share/staff/canteen.txt",
        "language": "en",
        "allow_token_share": ["AD:staff"],
        "deny_token_document": ["AD:interns"],
    },
    {
        "id": "file://share/public/marees.txt",
        "title": ["Horaires des marées"],
        "title_fr": "Horaires des marées du port",
        "content": ["Le handbook du port donne les horaires des marées: pleine mer à 6h12."],
        "content_fr": "Le handbook du port donne les horaires des marées: pleine mer à 6h12.",
        "url": "file://share/public/marees.txt",
        "language": "fr",
    },
]
PUBLIC = {"file://share/public/tides.txt", "file://share/public/marees.txt"}
SALES, STAFF = "file://share/sales/bonus.txt", "file://share/staff/canteen.txt"

DATAFARI_DOCUMENT_FIELDS = "title=title_{lang}|title,content=content_{lang}|content"
DATAFARI_PASSAGE_FIELDS = "text=embedded_content,parent=parent_doc"


def post(solr_url: str, collection: str, documents: list[dict]) -> None:
    httpx.post(
        f"{solr_url}/{collection}/update", params={"commit": "true"}, json=documents, timeout=60
    ).raise_for_status()


@pytest.fixture(scope="module")
def foreign(solr_url: str) -> Iterator[str]:
    """The three foreign collections, filled by plain Solr updates."""
    for name in ("plain", "DatafariFileShare", "DatafariVectorMain"):
        upload_configset(solr_url, name, CONFIGSETS / name)
    create_collection(solr_url, PRODUCTS, "plain")
    create_collection(solr_url, DOCS, "DatafariFileShare")
    create_collection(solr_url, PASSAGES, "DatafariVectorMain")
    post(solr_url, PRODUCTS, PRODUCT_DOCS)
    post(solr_url, DOCS, DATAFARI_DOCS)
    yield solr_url
    for name in (PRODUCTS, DOCS, PASSAGES):
        delete_collection(solr_url, name)


def products(**overrides: object) -> dict[str, object]:
    return {
        "solr.collection.documents": PRODUCTS,
        "solr.documents.fields": "title=name_s,content=body_txt,url=link_s",
        "retrieval.method": "bm25",
        **overrides,
    }


def datafari(**overrides: object) -> dict[str, object]:
    return {
        "solr.collection.documents": DOCS,
        "solr.collection.passages": PASSAGES,
        "solr.documents.fields": DATAFARI_DOCUMENT_FIELDS,
        "solr.passages.fields": DATAFARI_PASSAGE_FIELDS,
        "retrieval.method": "bm25",
        "chunking.maxFiles": 10,
        **overrides,
    }


def rag(client: TestClient, query: str, **extra: object) -> dict:
    headers = extra.pop("headers", {})
    response = client.post("/ai/rag", json={"query": query, **extra}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["content"]


def sources(content: dict) -> set[str]:
    return {document["id"] for document in content["documents"]}


# -- 1: field mapping ----------------------------------------------------------------------------


@pytest.mark.usefixtures("foreign")
@pytest.mark.parametrize("qf", ["name_s body_txt", "title content"])
def test_bm25_answers_from_a_collection_with_its_own_field_names(
    make_client: ClientFactory, llm: LLMScript, qf: str
) -> None:
    """The issue's case: it answered 428 "the retrieved documents hold no text"; `title
    content`, the default qf, is read as the mapped fields."""
    client = make_client(products(**{"solr.bm25.qf": qf}))
    content = rag(client, "How much heel drop has the trail running shoe?")
    first = content["documents"][0]
    assert first["id"] == "p-trail"
    assert first["title"] == "Trail running shoe"
    assert first["url"] == "https://shop.example/p-trail"
    # multi-valued: the values joined, both sent to the LLM
    assert "rock plate" in first["content"] and "6 mm" in first["content"]
    assert "Its heel drop is 6 mm." in llm.requests[-1].prompt


@pytest.mark.usefixtures("foreign")
def test_an_id_request_and_a_summary_read_the_mapped_fields(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(products(**{"ai.enable.summarization": True}))
    content = rag(client, "what does it boil?", id="p-kettle")
    assert [d["id"] for d in content["documents"]] == ["p-kettle"]
    assert content["documents"][0]["title"] == "Camping kettle"
    summary = client.post("/ai/summarize", json={"id": "p-kettle"})
    assert summary.status_code == 200, summary.text
    assert "titanium camping kettle" in llm.requests[-1].prompt


def test_the_startup_check_names_a_missing_mapped_field(
    foreign: str, tmp_path: Path, base_properties: dict[str, object]
) -> None:
    properties = {**base_properties, **products(**{"solr.documents.fields": "content=body_x"})}
    path = write_properties(tmp_path / "mapped.properties", properties)
    with pytest.raises(SolrLayoutError) as refused, TestClient(create_app(path)):
        pass
    reason = str(refused.value)
    assert f"'{PRODUCTS}' (solr.collection.documents) lacks the field(s) body_x" in reason
    assert "solr.documents.fields" in reason


@pytest.mark.usefixtures("foreign")
def test_a_bad_mapping_is_refused_with_the_roles(
    make_client: ClientFactory, tmp_path: Path, base_properties: dict[str, object]
) -> None:
    admin = make_client()
    for value, says in [
        ("heading=name_s", "roles: id, title, content"),
        ("id=a|b", "takes one field"),
        ("title=name s", "not a Solr field name"),
        ("title=a,title=b", "mapped twice"),
    ]:
        response = admin.put("/admin/config", json={"solr.documents.fields": value}, headers=AUTH)
        assert response.status_code == 422, response.text
        assert says in response.text


@pytest.mark.usefixtures("foreign")
@pytest.mark.parametrize("check", [True, False])
def test_a_collection_without_kaito_partitions_is_searched(
    make_client: ClientFactory, llm: LLMScript, check: bool
) -> None:
    """DfFileShare has no index_s: with the startup check off it was a 502 on every question
    (`undefined field: "index_s"`)."""
    client = make_client(datafari(**{"solr.startup.check": check}))
    assert sources(rag(client, "handbook harbour tide marées")) >= PUBLIC


@pytest.mark.usefixtures("foreign")
def test_a_language_suffixed_field_is_read_and_searched_in_the_request_language(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(datafari())
    french = rag(client, "horaires des marées du port", lang="fr")
    first = french["documents"][0]
    assert first["id"] == "file://share/public/marees.txt"
    assert first["title"] == "Horaires des marées du port"  # title_fr, not title
    # content_fr is indexed, not stored: read from content
    assert "pleine mer à 6h12" in first["content"]
    english = rag(client, "harbour tide tables")
    assert english["documents"][0]["id"] == "file://share/public/tides.txt"
    assert english["documents"][0]["title"] == "Harbour tide tables"


# -- 2: ManifoldCF's security model --------------------------------------------------------------

CALLERS = {
    "": PUBLIC,
    "AD:sales": PUBLIC | {SALES},
    "AD:staff": PUBLIC | {STAFF},
    "AD:staff,AD:interns": PUBLIC,
    "AD:sales,AD:staff": PUBLIC | {SALES, STAFF},
}


def secure(make_client: ClientFactory, **overrides: object) -> TestClient:
    return make_client(
        datafari(**{"security.enabled": True, "security.model": "manifoldcf", **overrides})
    )


def assert_no_leak(text: str, llm: LLMScript, visible: set[str]) -> None:
    secrets = {SALES: SALES_SECRET, STAFF: STAFF_SECRET}
    for document, secret in secrets.items():
        if document not in visible:
            assert secret not in text
            assert all(secret not in str(request.body) for request in llm.requests)


@pytest.mark.usefixtures("foreign")
@pytest.mark.parametrize("tokens", list(CALLERS))
def test_manifoldcf_tokens_decide_what_a_caller_sees(
    make_client: ClientFactory, llm: LLMScript, tokens: str
) -> None:
    client = secure(make_client)
    headers = {"X-User-Groups": tokens} if tokens else {}
    response = client.post("/ai/rag", json={"query": "handbook"}, headers=headers)
    assert response.status_code == 200, response.text
    assert sources(response.json()["content"]) == CALLERS[tokens]
    assert_no_leak(response.text, llm, CALLERS[tokens])


@pytest.mark.usefixtures("foreign")
def test_manifoldcf_security_holds_for_ids_summaries_and_the_openai_endpoint(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = secure(make_client, **{"ai.enable.summarization": True})
    sales = {"X-User-Groups": "AD:sales"}
    for document in (STAFF,):
        by_id = client.post("/ai/rag", json={"query": "menu", "id": document}, headers=sales)
        assert by_id.status_code == 404
        summary = client.post("/ai/summarize", json={"id": document}, headers=sales)
        assert summary.status_code == 404
    body = {"model": "m", "messages": [{"role": "user", "content": "handbook canteen menu"}]}
    response = client.post("/v1/chat/completions", json=body, headers=sales)
    assert response.status_code == 200, response.text
    assert STAFF not in {s["id"] for s in response.json()["sources"]}
    assert_no_leak(response.text, llm, PUBLIC | {SALES})
    listed = client.get("/documents", params={"group": "AD:sales", "limit": 100}, headers=AUTH)
    assert {d["id"] for d in listed.json()["content"]["documents"]} == PUBLIC | {SALES}


def test_manifoldcf_security_needs_the_token_fields(
    foreign: str, tmp_path: Path, base_properties: dict[str, object]
) -> None:
    properties = {
        **base_properties,
        **products(**{"security.enabled": True, "security.model": "manifoldcf"}),
    }
    path = write_properties(tmp_path / "tokens.properties", properties)
    with pytest.raises(SolrLayoutError, match="allow_token_share"), TestClient(create_app(path)):
        pass

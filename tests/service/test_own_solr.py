"""RAG over a Solr the service did not build (issue 32): collections made from other schemas
(Solr's _default field names; Datafari's FileShare and VectorMain as ManifoldCF fills them),
filled the way a crawler fills them (plain Solr updates, never our ingestion)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from fastapi.testclient import TestClient

import testing
from service import cli
from service.api.app import create_app
from service.errors import SolrLayoutError
from service.ingest.indexer import IngestProgress
from service.ingest.sync import PAGE, PassageSync, SyncSummary
from service.ingest.sync_state import SETTLE_SECONDS
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.llm_server import LLMScript, Step
from testing.service import ADMIN_TOKEN, ClientFactory, test_settings, write_properties
from testing.solr import create_collection, delete_collection, upload_configset
from testing.solr_reads import SolrReads

CONFIGSETS = Path(testing.__file__).parent / "configsets"
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


@pytest.mark.usefixtures("foreign")
def test_manifoldcf_security_holds_for_datafari_7s_filters(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 47: filters (ids, or a facet's fq) narrow what a caller sees, never widen it."""
    client = secure(make_client)
    sales = {"X-User-Groups": "AD:sales"}
    both = f'id:("{STAFF}" OR "{SALES}")'
    for filters in ({"id": [STAFF]}, {"fq": [f'id:"{STAFF}"']}, {"fq": [both], "id": [STAFF]}):
        body = {"query": "handbook canteen menu", "filters": filters}
        response = client.post("/ai", json=body, headers=sales)
        assert response.status_code in (200, 428), response.text
        assert STAFF not in sources(response.json()["content"])
        assert_no_leak(response.text, llm, PUBLIC | {SALES})
    narrowed = client.post(
        "/ai", json={"query": "handbook", "filters": {"fq": [both]}}, headers=sales
    )
    assert sources(narrowed.json()["content"]) == {SALES}
    refused = client.post(
        "/ai", json={"query": "handbook", "filters": {"fq": ["allow_token_document:*"]}}
    )
    assert refused.status_code == 400 and "security field" in refused.text


@pytest.mark.usefixtures("foreign")
def test_manifoldcf_security_holds_for_every_query_of_multi_query_retrieval(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """The LLM writes more queries, one aimed at the hidden document: each one is searched
    within the caller's tokens."""
    client = secure(make_client, **{"rag.queries.count": 3})
    llm.then(Step(content=json.dumps({"queries": ["canteen wasabi menu", "quokka bonus"]})))
    response = client.post("/ai/rag", json={"query": "handbook"}, headers={"X-User-Groups": ""})
    assert response.status_code == 200, response.text
    assert sources(response.json()["content"]) == PUBLIC
    assert_no_leak(response.text, llm, PUBLIC)
    assert len(llm.requests) == 2  # the queries, then the answer


MEMO = "file://share/public/renovation.txt"
MEMO_DOC = {
    "id": MEMO,
    "title": ["Renovation"],
    "content": ["The renovationq memo, for everyone but the interns."],
    "content_en": "The renovationq memo, for everyone but the interns.",
    "url": MEMO,
    "language": "en",
    "deny_token_document": ["AD:interns"],  # allowed to all (__nosecurity__) but interns
}
JWT_SECRET = "own-solr-" + "j" * 40


def test_manifoldcf_deny_tokens_hide_a_document_from_a_caller_of_unknown_tokens(
    foreign: str, make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 81, finding 1, ManifoldCF's model: the key alone (no identity token) read what
    the interns are denied; now it is a 401, or (security.identity.required=false) a caller
    whose tokens are unknown sees no document that denies any token."""
    post(foreign, DOCS, [MEMO_DOC])
    try:
        config = {"security.identity": "jwt", "security.jwt.key": JWT_SECRET,
                  "security.jwt.algorithms": "HS256", "api.keys": "own-key"}  # fmt: skip
        required = secure(make_client, **config)
        allowed = secure(make_client, **config, **{"security.identity.required": False})
        key = {"X-API-Key": "own-key"}

        def holder(tokens: list[str]) -> dict[str, str]:
            claims = {"sub": "x", "groups": tokens, "exp": int(time.time()) + 600}
            return {**key, "Authorization": "Bearer " + jwt.encode(claims, JWT_SECRET, "HS256")}

        def found(client: TestClient, headers: dict[str, str]) -> bool:
            response = client.post("/ai/rag", json={"query": "renovationq"}, headers=headers)
            assert response.status_code in (200, 428), response.text
            return MEMO in response.text

        assert found(required, holder(["AD:sales"])) and found(allowed, holder([]))
        assert not found(required, holder(["AD:sales", "AD:interns"]))
        assert not found(allowed, key)
        refused = required.post("/ai/rag", json={"query": "renovationq"}, headers=key)
        assert refused.status_code == 401 and MEMO not in refused.text
    finally:
        httpx.post(f"{foreign}/{DOCS}/update", params={"commit": "true"},
                   json={"delete": {"id": MEMO}}, timeout=60).raise_for_status()  # fmt: skip


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


# -- 3: InMemory vector search --------------------------------------------------------------------


def in_memory(**overrides: object) -> dict[str, object]:
    return products(
        **{
            "rag.enable.vector.search": True,
            "inMemory.maxChunks": 1,
            "vector.chunk.size": 60,
            "vector.chunk.overlap": 0,
            "chunking.maxFiles": 5,
            **overrides,
        }
    )


@pytest.mark.usefixtures("foreign")
def test_in_memory_vector_search_keeps_the_passages_nearest_the_question(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """BM25 finds both products (OR); their passages are ranked by meaning, and only the
    nearest one reaches the LLM, under its document's id, title and URL."""
    client = make_client(in_memory())
    content = rag(client, "What is the heel drop of the trail running shoe, camping kettle?")
    [source] = content["documents"]
    assert (source["id"], source["title"]) == ("p-trail", "Trail running shoe")
    assert source["content"] == "Its heel drop is 6 mm."
    prompt = llm.requests[-1].prompt
    assert "Its heel drop is 6 mm." in prompt
    assert "rock plate" not in prompt and "titanium" not in prompt
    kettle = rag(client, "How fast does the kettle boil a litre of water, shoe?")
    assert [d["id"] for d in kettle["documents"]] == ["p-kettle"]


@pytest.mark.usefixtures("foreign")
def test_in_memory_vectors_are_kept_so_a_document_is_embedded_once(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(in_memory())
    vectors = client.app.state.runtime.passage_vectors  # type: ignore[attr-defined]
    rag(client, "heel drop of the trail running shoe")
    first = vectors.embedded
    assert first >= 2  # the shoe's two passages at least
    rag(client, "rock plate of the trail running shoe")
    assert vectors.embedded == first


@pytest.mark.usefixtures("foreign")
def test_in_memory_vector_search_needs_bm25_retrieval(make_client: ClientFactory) -> None:
    admin = make_client(products())
    response = admin.put(
        "/admin/config",
        json={"rag.enable.vector.search": True, "retrieval.method": "hybrid"},
        headers=AUTH,
    )
    assert response.status_code == 422, response.text
    assert "retrieval.method=bm25" in response.text


@pytest.mark.usefixtures("foreign")
def test_in_memory_vector_search_keeps_manifoldcf_security(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = secure(
        make_client,
        **{"rag.enable.vector.search": True, "inMemory.maxChunks": 50, "vector.chunk.size": 80},
    )
    headers = {"X-User-Groups": "AD:sales"}
    response = client.post("/ai/rag", json={"query": "handbook"}, headers=headers)
    assert response.status_code == 200, response.text
    assert sources(response.json()["content"]) == PUBLIC | {SALES}
    assert_no_leak(response.text, llm, PUBLIC | {SALES})


# -- 4b: solr-rag sync ----------------------------------------------------------------------------


def synced_settings(solr_url: str, model_server_url: str, documents: str, passages: str):
    return test_settings(
        solr_url,
        model_server_url,
        **{
            "solr.collection.documents": documents,
            "solr.collection.passages": passages,
            "solr.documents.fields": DATAFARI_DOCUMENT_FIELDS,
            "solr.passages.fields": DATAFARI_PASSAGE_FIELDS,
            "vector.chunk.size": 200,
            "vector.chunk.overlap": 0,
        },
    )


async def sync_run(
    settings,
    checkpoint: Path,
    progress=None,
    page: int = PAGE,
    settle: float = SETTLE_SECONDS,
    reads: SolrReads | None = None,
) -> SyncSummary:
    """One sync (`reads`: what Solr answers it, counted)."""
    hooks = reads.hooks if reads else {}
    async with httpx.AsyncClient() as http, httpx.AsyncClient(event_hooks=hooks) as to_solr:
        solr = SolrClient(to_solr, settings.solr.url)
        sync = PassageSync(solr, settings, embeddings_client(http, settings),
                           checkpoint=checkpoint, page=page, settle=settle)  # fmt: skip
        return await sync.run(progress)


def running(checkpoint: Path) -> bool:
    """Whether the checkpoint says a run is under way (its place), not only where it ended."""
    return bool(json.loads(checkpoint.read_text())["cursor"])


def passages_of(solr_url: str, collection: str) -> dict[str, list[dict]]:
    found = httpx.get(
        f"{solr_url}/{collection}/select",
        params={"q": "*:*", "rows": 10_000, "fl": "*", "sort": "id asc"},
    ).json()["response"]["docs"]
    by_parent: dict[str, list[dict]] = {}
    for doc in found:
        by_parent.setdefault(doc["parent_doc"], []).append(doc)
    return by_parent


def datafari_collections(solr_url: str, documents: str, passages: str) -> None:
    """A FileShare and a VectorMain of Datafari's schemas (testing/configsets), for a sync."""
    upload_configset(solr_url, "DatafariFileShare", CONFIGSETS / "DatafariFileShare")
    upload_configset(solr_url, "DatafariVectorMain", CONFIGSETS / "DatafariVectorMain")
    create_collection(solr_url, documents, "DatafariFileShare")
    create_collection(solr_url, passages, "DatafariVectorMain")


def wiki(i: int) -> dict:
    """A crawled page: three paragraphs, so several passages."""
    text = "\n\n".join(
        f"Page {i}, part {part}: the glacier number {i} moved {i * part} metres in spring."
        + " It is measured by the survey team every week." * 3
        for part in (1, 2, 3)
    )
    return {"id": f"wiki-{i:02d}", "title": [f"Glacier {i}"], "content": [text],
            "content_en": text, "url": f"https://wiki.example/{i}", "language": "en"}  # fmt: skip


async def test_sync_writes_new_and_changed_documents_resumes_and_removes_the_gone(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    documents, passages = "SyncDocs", "SyncPassages"
    datafari_collections(solr_url, documents, passages)
    try:
        post(solr_url, documents, [wiki(i) for i in range(12)])
        settings = synced_settings(solr_url, model_server_url, documents, passages)
        checkpoint = tmp_path / "sync.json"

        # a first run stops after its first page (a crash); the next resumes after it
        def crash(state: IngestProgress) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            await sync_run(settings, checkpoint, crash, page=5)
        assert checkpoint.exists()
        assert len(passages_of(solr_url, passages)) == 5  # the first page's, committed
        seen: list[IngestProgress] = []
        first = await sync_run(settings, checkpoint, seen.append, page=5)
        assert first.resumed and [s.documents for s in seen] == [10, 12]
        assert not running(checkpoint)
        held = passages_of(solr_url, passages)
        assert sorted(held) == [f"wiki-{i:02d}" for i in range(12)]
        one = held["wiki-03"]
        assert len(one) >= 3 and {p["chunk_index"] for p in one} == set(range(len(one)))
        assert one[0]["title"] == ["Glacier 3"] and one[0]["url"] == "https://wiki.example/3"
        assert "glacier number 3" in one[0]["embedded_content"]
        assert len(one[0]["vector_384"]) == 384

        # nothing changed: nothing embedded, nothing written (the documents written in the
        # last SETTLE_SECONDS are read again: one may have become visible late)
        again = await sync_run(settings, checkpoint)
        assert (again.changed, again.passages, again.embedded, again.removed) == (0, 0, 0, 0)
        assert again.documents == 12 and not again.resumed

        # one paragraph of one document changed: only its passage is embedded again
        changed = wiki(3)
        text = changed["content"][0].replace("moved 6 metres", "moved 60 metres")
        changed.update(content=[text], content_en=text)
        post(solr_url, documents, [changed])
        after = await sync_run(settings, checkpoint)
        assert (after.changed, after.embedded) == (1, 1)
        assert after.passages == len(one)
        new = passages_of(solr_url, passages)["wiki-03"]
        assert sum("moved 60 metres" in p["embedded_content"] for p in new) == 1
        assert new[0]["vector_384"] == pytest.approx(one[0]["vector_384"])

        # a document deleted from FileShare: its passages go at the next sync
        httpx.post(
            f"{solr_url}/{documents}/update",
            params={"commit": "true"},
            json={"delete": {"id": "wiki-07"}},
        ).raise_for_status()
        gone = await sync_run(settings, checkpoint)
        assert gone.removed == 1 and gone.embedded == 0
        assert "wiki-07" not in passages_of(solr_url, passages)
        assert len(passages_of(solr_url, passages)) == 11
    finally:
        delete_collection(solr_url, documents)
        delete_collection(solr_url, passages)


async def test_a_large_documents_passages_show_progress_and_resume_midway(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """Issue 45, item 2: a document of 300 passages is written a slice at a time, each slice
    committed and its progress said (nothing was said, nor kept, until its end); a run that
    stops after the first slice leaves the document incomplete, and the next run makes it
    whole, embedding only what the first had not."""
    from service.ingest.sync import SLICE

    documents, passages = "BigSyncDocs", "BigSyncPassages"
    datafari_collections(solr_url, documents, passages)
    paragraphs = [
        f"Paragraph {n} of the long survey: cairn {n} stands {n} metres high." for n in range(300)
    ]
    text = "\n\n".join(f"{p} {p}" for p in paragraphs)  # about 150 characters each
    try:
        post(solr_url, documents, [{"id": "survey", "title": ["Survey"], "content": [text],
                                    "language": "en"}])  # fmt: skip
        settings = synced_settings(solr_url, model_server_url, documents, passages)
        checkpoint = tmp_path / "sync.json"

        def stop_after_a_slice(state: IngestProgress) -> None:
            if state.documents == 0 and state.passages > 0:  # within the first page
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            await sync_run(settings, checkpoint, stop_after_a_slice)
        kept = passages_of(solr_url, passages)["survey"]
        assert len(kept) == SLICE and "survey_0" not in {p["id"] for p in kept}
        seen: list[IngestProgress] = []
        resumed = await sync_run(settings, checkpoint, seen.append)
        whole = passages_of(solr_url, passages)["survey"]
        assert len(whole) == resumed.passages > SLICE and "survey_0" in {p["id"] for p in whole}
        assert resumed.embedded == len(whole) - SLICE  # the first slice's vectors reused
        again = await sync_run(settings, checkpoint)
        assert (again.changed, again.embedded) == (0, 0)  # whole now: unchanged
    finally:
        delete_collection(solr_url, documents)
        delete_collection(solr_url, passages)


def page_of(i: int, revision: str = "") -> dict:
    """A crawled page of one passage."""
    text = f"Note {i}: cairn {i} stands {i % 97} metres above the pass.{revision}"
    return {"id": f"note-{i:03d}", "title": [f"Cairn {i}"], "content": [text], "content_en": text,
            "url": f"https://notes.example/{i}", "language": "en"}  # fmt: skip


async def test_a_sync_reads_only_what_changed_since_the_last(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """Issue 82, item 3: a sync costs what changed, not what FileShare holds. After a first
    run, one with nothing changed reads no document (not even an id) and no passage; after 3
    of 500 documents changed it reads and embeds those 3, and the vectors of their passages
    alone; a crawler that writes 5 documents again unchanged costs their text and their
    passages' hashes, no vector; a deleted document is found by counting, and the ids are
    compared only then (counted by what Solr returned to the sync's own client)."""
    documents, passages = "ReadDocs", "ReadPassages"
    datafari_collections(solr_url, documents, passages)
    try:
        post(solr_url, documents, [page_of(i) for i in range(500)])
        scan = {"id": "scan-001", "title": ["A scanned page"], "language": "en"}  # no text
        post(solr_url, documents, [scan])
        settings = synced_settings(solr_url, model_server_url, documents, passages)
        checkpoint, reads = tmp_path / "sync.json", SolrReads()

        async def synced() -> SyncSummary:
            reads.clear()
            return await sync_run(settings, checkpoint, settle=0, reads=reads)

        first = await synced()
        assert (first.documents, first.changed, first.embedded) == (501, 500, 500)
        assert reads.carrying(documents, "content") == 500  # the scanned page has none

        nothing = await synced()
        assert (nothing.documents, nothing.changed, nothing.removed, nothing.compared) == (
            0, 0, 0, 0)  # fmt: skip
        assert reads.documents[documents] == 0 and reads.documents[passages] == 0
        assert reads.searches[documents] + reads.searches[passages] <= 8  # whatever N is

        post(solr_url, documents, [page_of(i, " Rebuilt in 2024.") for i in (7, 250, 499)])
        three = await synced()
        assert (three.documents, three.changed, three.passages, three.embedded) == (3, 3, 3, 3)
        assert reads.carrying(documents, "content") == reads.documents[documents] == 3
        assert reads.carrying(passages, "vector_384") <= 3  # the changed ones' own
        assert three.compared == 0 and three.removed == 0

        post(solr_url, documents, [page_of(i) for i in range(100, 105)])  # written again as is
        again = await synced()
        assert (again.documents, again.changed, again.embedded) == (5, 0, 0)
        assert reads.carrying(passages, "vector_384") == 0

        httpx.post(f"{solr_url}/{documents}/update", params={"commit": "true"},
                   json={"delete": {"id": "note-042"}}).raise_for_status()  # fmt: skip
        gone = await synced()
        assert (gone.documents, gone.removed) == (0, 1) and gone.compared > 500
        assert "note-042" not in passages_of(solr_url, passages)
        assert "scan-001" not in passages_of(solr_url, passages)  # no text: no passage

        quiet = await synced()  # the ids are compared when a document may be gone, only
        assert (quiet.documents, quiet.removed, quiet.compared) == (0, 0, 0)
        assert reads.documents[documents] + reads.documents[passages] == 0

        post(solr_url, documents, [{**scan, "content": ["Its text, read at last."]}])
        text = await synced()  # a document without passages that gains some: counted still
        assert (text.documents, text.changed, text.embedded, text.compared) == (1, 1, 1, 0)
        assert (await synced()).compared == 0
    finally:
        delete_collection(solr_url, documents)
        delete_collection(solr_url, passages)


@pytest.fixture(scope="module")
def synced(foreign: str, model_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """DfVectorMain made from DfFileShare by sync: the passages a crawler's documents get."""
    settings = synced_settings(foreign, model_server_url, DOCS, PASSAGES)
    checkpoint = tmp_path_factory.mktemp("sync") / "sync.json"
    summary = asyncio.run(sync_run(settings, checkpoint))
    assert summary.changed == len(DATAFARI_DOCS)
    return foreign


@pytest.mark.usefixtures("synced")
@pytest.mark.parametrize("method", ["vector", "hybrid"])
@pytest.mark.parametrize("tokens", list(CALLERS))
def test_synced_passages_answer_by_knn_and_hybrid_within_manifoldcf_security(
    make_client: ClientFactory, llm: LLMScript, method: str, tokens: str
) -> None:
    client = secure(
        make_client,
        **{"retrieval.method": method, "retrieval.similarity.min": 0, "solr.topK": 20},
    )
    headers = {"X-User-Groups": tokens} if tokens else {}
    response = client.post("/ai/rag", json={"query": "handbook"}, headers=headers)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert sources(content) == CALLERS[tokens]
    titles = {d["id"]: d["title"] for d in content["documents"]}
    assert titles["file://share/public/tides.txt"] == "Harbour tide tables"
    assert_no_leak(response.text, llm, CALLERS[tokens])
    vector = client.get(
        "/search/vector", params={"q": "handbook canteen bonus", "topK": 50}, headers=headers
    )
    assert vector.status_code == 200, vector.text
    assert {p["parent_id"] for p in vector.json()["content"]["documents"]} == CALLERS[tokens]


@pytest.mark.usefixtures("synced")
def test_the_cli_syncs_with_progress(
    tmp_path: Path, base_properties: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = {"vector.chunk.size": 200, "vector.chunk.overlap": 0}  # as the fixture's sync
    path = write_properties(tmp_path / "sync.properties", {**base_properties, **datafari(**chunks)})
    checkpoint = tmp_path / "cli-sync.json"
    assert cli.main(["sync", "--config", str(path), "--checkpoint", str(checkpoint)]) == 0
    out, err = capsys.readouterr()
    assert "4/4 documents" in err and "documents/s" in err
    assert "synced: 4 documents read, 0 new or changed" in out
    with pytest.raises(SystemExit) as bad:
        cli.main(["sync", "--config", str(path), "--every", "soon"])
    assert bad.value.code == 2
    assert "'soon' is not an interval (30s, 5m, 1h)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as late:
        cli.main(["sync", "--config", str(path), "--settle", "2d"])
    assert late.value.code == 2 and "is not an interval" in capsys.readouterr().err
    with pytest.raises(SystemExit) as late:
        cli.main(["sync", "--config", str(path), "--settle", "25h"])
    assert late.value.code == 2 and "--settle is 0s to 1 day" in capsys.readouterr().err


async def test_a_huge_document_is_read_only_as_far_as_a_question_needs(foreign: str) -> None:
    """Issue 45, item 2: a crawler's document of megabytes (our schema, and Datafari's
    multi-valued stored-only content) is read up to MAX_READ_CHARS: Solr sends no more, and
    every value of a multi-valued field comes in its order, as stored."""
    from service.config.field_map import parse_fields
    from service.retrieval import DocumentById
    from service.retrieval.reading import MAX_READ_CHARS

    words = "The tide log of the harbour notes each high water. " * 40_000  # 2 MB
    small = [
        "First value.\n\n  Indented second paragraph.",
        'Second value, with <b>tags</b> & "quotes".',
    ]
    post(
        foreign,
        DOCS,
        [{"id": "huge-df", "content": [words, words]}, {"id": "small-df", "content": small}],
    )
    post(foreign, "FileShare", [{"id": "huge-ours", "title": "Tide log", "content": words}])
    datafari_map = parse_fields("title=title,content=content_{lang}|content", "documents")
    try:
        async with httpx.AsyncClient(timeout=60) as http:
            solr = SolrClient(http, foreign)
            for collection, field_map, document_id in (
                (DOCS, datafari_map, "huge-df"),
                ("FileShare", parse_fields("", "documents"), "huge-ours"),
            ):
                read = await DocumentById(solr, collection, field_map).run(document_id)
                assert read is not None
                assert MAX_READ_CHARS - 100 <= len(read.content) <= MAX_READ_CHARS
                assert words.startswith(read.content), document_id
            exact = await DocumentById(solr, DOCS, datafari_map).run("small-df")
            assert exact is not None and exact.content == "\n".join(small)
    finally:
        httpx.post(f"{foreign}/FileShare/update", params={"commit": "true"},
                   json={"delete": {"id": "huge-ours"}}).raise_for_status()  # fmt: skip

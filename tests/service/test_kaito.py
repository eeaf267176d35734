"""KAITO RAGEngine's index API, driven by its own client package (kaito-rag-engine-client)
against the real Solr (issue 17): create, list, page, update, delete, retrieve, persist/load,
drop; then /v1/chat/completions answers from that index, and nothing else sees it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from kaito_rag_engine_client import AuthenticatedClient, Client
from kaito_rag_engine_client.api.index import (
    create_index,
    delete_documents_in_index,
    delete_index,
    list_documents_in_index,
    list_indexes,
    load_index,
    persist_index,
    retrieve_index,
    update_documents_in_index,
)
from kaito_rag_engine_client.models import (
    DeleteDocumentRequest,
    Document,
    DocumentMetadataType0,
    IndexRequest,
    RetrieveRequest,
    RetrieveRequestMetadataFilterType0,
    UpdateDocumentRequest,
)
from openai import OpenAI

from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ServiceFactory

INDEX = "harbours"
DOCUMENTS = {
    "tides": ("The harbour of Brannoch floods twice a day when the spring tides come in.",
              {"author": "Kim", "title": "Tides"}),
    "cranes": ("Four cranes unload the ferries at the harbour's north quay.",
               {"author": "Lou", "title": "Cranes"}),
}  # fmt: skip


def metadata(values: dict[str, str]) -> DocumentMetadataType0:
    return DocumentMetadataType0.from_dict(values)


@pytest.fixture
def base(service: ServiceFactory) -> Iterator[str]:
    url = service({"retrieval.method": "hybrid", "solr.topK": 5})
    yield url
    httpx.delete(f"{url}/indexes/{INDEX}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})


@pytest.fixture
def kaito(base: str) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=base, token=ADMIN_TOKEN, raise_on_unexpected_status=True)


def create(kaito: AuthenticatedClient) -> list[Document]:
    documents = [
        Document(text=text, doc_id=doc_id, metadata=metadata(meta))
        for doc_id, (text, meta) in DOCUMENTS.items()
    ]
    created = create_index.sync(
        client=kaito, body=IndexRequest(index_name=INDEX, documents=documents)
    )
    assert isinstance(created, list)
    return created


def test_create_list_page_update_delete(kaito: AuthenticatedClient) -> None:
    created = create(kaito)
    assert [document.doc_id for document in created] == ["tides", "cranes"]
    assert INDEX in (list_indexes.sync(client=kaito) or [])

    page = list_documents_in_index.sync(INDEX, client=kaito, limit=1, max_text_length=10)
    assert page is not None and (page.count, page.total_items) == (1, 2)
    assert page.documents[0].doc_id == "cranes" and page.documents[0].is_truncated
    assert len(page.documents[0].text) == 10
    by_kim = list_documents_in_index.sync(INDEX, client=kaito, metadata_filter='{"author": "Kim"}')
    assert by_kim is not None and [d.doc_id for d in by_kim.documents] == ["tides"]

    changed = Document(
        text="The harbour silted up in 1890.", doc_id="tides", metadata=metadata({"author": "Kim"})
    )
    same_text, same_meta = DOCUMENTS["cranes"]
    same = Document(text=same_text, doc_id="cranes", metadata=metadata(same_meta))
    stranger = Document(text="Unknown.", doc_id="nowhere")
    updated = update_documents_in_index.sync(
        INDEX, client=kaito, body=UpdateDocumentRequest(documents=[changed, same, stranger])
    )
    assert updated is not None
    assert [d.doc_id for d in updated.updated_documents] == ["tides"]
    assert [d.doc_id for d in updated.unchanged_documents] == ["cranes"]
    assert [d.doc_id for d in updated.not_found_documents] == ["nowhere"]

    deleted = delete_documents_in_index.sync(
        INDEX, client=kaito, body=DeleteDocumentRequest(doc_ids=["cranes", "nowhere"])
    )
    assert deleted is not None
    assert (deleted.deleted_doc_ids, deleted.not_found_doc_ids) == (["cranes"], ["nowhere"])
    rest = list_documents_in_index.sync(INDEX, client=kaito)
    assert rest is not None and [d.text for d in rest.documents] == [
        "The harbour silted up in 1890."
    ]


def test_retrieve_persist_load_and_drop(kaito: AuthenticatedClient, base: str) -> None:
    create(kaito)
    found = retrieve_index.sync(
        client=kaito,
        body=RetrieveRequest(
            index_name=INDEX, query="Which cranes unload ferries?", max_node_count=2
        ),
    )
    assert found is not None and found.results[0].doc_id == "cranes"
    assert found.count == len(found.results) <= 2
    only_kim = retrieve_index.sync(
        client=kaito,
        body=RetrieveRequest(
            index_name=INDEX,
            query="harbour cranes tides",
            metadata_filter=RetrieveRequestMetadataFilterType0.from_dict({"author": "Kim"}),
        ),
    )
    assert only_kim is not None and {node.doc_id for node in only_kim.results} == {"tides"}
    # each node carries its document's metadata (it was null: issue 36, item 11)
    assert only_kim.results[0].metadata is not None
    assert only_kim.results[0].metadata.to_dict()["author"] == "Kim"
    persist_index.sync(INDEX, client=kaito)  # raises on an unexpected status
    load_index.sync(INDEX, client=kaito, overwrite=True)
    delete_index.sync(INDEX, client=kaito)
    assert INDEX not in (list_indexes.sync(client=kaito) or [])
    missing = httpx.post(
        f"{base}/persist/{INDEX}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert missing.status_code == 404 and missing.json()["content"]["label"] == "indexIndexNotFound"


def test_chat_answers_from_the_index_and_nothing_else_sees_it(
    kaito: AuthenticatedClient, base: str, llm: LLMScript
) -> None:
    create(kaito)
    openai = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    question = [{"role": "user", "content": "How often does the harbour flood?"}]
    reply = openai.chat.completions.create(model="test-model", messages=question,
                                           extra_body={"index_name": INDEX})  # fmt: skip
    assert reply.model_extra is not None
    ids = [source["id"] for source in reply.model_extra["sources"]]
    assert f"kaito/{INDEX}/tides" in ids and all(i.startswith(f"kaito/{INDEX}/") for i in ids)
    assert "floods twice a day" in llm.requests[0].prompt
    # the main corpus does not hold the index's documents
    main = httpx.post(f"{base}/ai/rag", json={"query": "harbour flood spring tides cranes ferries"})
    assert all(
        not d["id"].startswith("kaito/") for d in main.json()["content"].get("documents", [])
    )
    body = {"model": "m", "messages": question, "index_name": "nosuchindex"}
    unknown = httpx.post(f"{base}/v1/chat/completions", json=body)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "index_not_found"


def test_the_index_api_needs_the_admin_token(base: str) -> None:
    anonymous = Client(base_url=base)
    response = list_indexes.sync_detailed(client=anonymous)
    assert response.status_code == 401
    assert httpx.post(f"{base}/index", json={"index_name": "x", "documents": []}).status_code == 401


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/index", {"index_name": "no spaces!", "documents": [{"text": "x"}]}),
        ("POST", "/index", {"index_name": "-dash-first", "documents": [{"text": "x"}]}),
        ("POST", "/index", {"index_name": "x" * 65, "documents": [{"text": "x"}]}),
        ("POST", "/index", {"index_name": INDEX, "documents": []}),
        ("POST", "/index", {"index_name": INDEX, "documents": [{"text": "x"}] * 1001}),
        ("POST", "/index", {"index_name": INDEX, "documents": [{"text": ""}]}),
        ("POST", "/index", {"index_name": INDEX, "documents": [{"text": "x", "doc_id": "a/b"}]}),
        ("POST", "/index", {"index_name": INDEX, "documents": [{"text": "x", "doc_id": "a\nb"}]}),
        ("POST", "/index", {"index_name": INDEX,
                            "documents": [{"text": "x", "metadata": {"big": "m" * 9000}}]}),
        ("POST", "/retrieve", {"index_name": INDEX, "query": "x", "max_node_count": 301}),
        ("POST", "/retrieve", {"index_name": INDEX, "query": "{}[]^~*"}),
        ("POST", "/retrieve", {"index_name": INDEX, "query": "x",
                               "metadata_filter": {"a": {"nested": 1}}}),
        ("POST", "/retrieve", {"index_name": INDEX, "query": "x", "metadata_filter": {"a b": 1}}),
        ("GET", f"/indexes/{INDEX}/documents?limit=101", None),
        ("GET", f"/indexes/{INDEX}/documents?metadata_filter=not-json", None),
        ("GET", f"/indexes/{INDEX}/documents?metadata_filter=[1]", None),
        ("GET", f"/indexes/{INDEX}/documents?metadata_filter=" + "x" * 1001, None),
        ("POST", f"/indexes/{INDEX}/documents/delete", {"doc_ids": []}),
        ("POST", f"/indexes/{'x' * 65}/documents/delete", {"doc_ids": ["a"]}),
        ("DELETE", "/indexes/bad%20name", None),
    ],
)  # fmt: skip
def test_hostile_index_requests_are_400_and_change_nothing(
    kaito: AuthenticatedClient, base: str, solr_url: str, method: str, path: str, body: object
) -> None:
    create(kaito)
    before = httpx.get(
        f"{solr_url}/FileShare/select",
        params={"q": "index_s:[* TO *]", "defType": "lucene", "rows": 0},
    )
    response = httpx.request(
        method, f"{base}{path}", json=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["status"] == "ERROR"
    after = httpx.get(
        f"{solr_url}/FileShare/select",
        params={"q": "index_s:[* TO *]", "defType": "lucene", "rows": 0},
    )
    assert after.json()["response"]["numFound"] == before.json()["response"]["numFound"] == 2

"""Ingestion never leaves stale or lost data, and a hostile file cannot stall the service
(issue 14, items 3 and 8-10): last version wins, ids come from relative paths, ids with `/`
delete, missing ids are reported, and extraction runs in a bounded worker process."""

from __future__ import annotations

import asyncio
import io
import time
import zipfile
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from service.errors import PayloadTooLarge, TechnicalError
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.ingest.sandbox import Extractor
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import SolrClient
from testing import extraction_jobs
from testing.corpus import remove_documents
from testing.service import ADMIN_TOKEN, ClientFactory, test_settings

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
IDS = ("twice", "teamA/report.txt", "teamB/report.txt", "folder/deep/x.txt", "bomb.docx")


@pytest.fixture
def admin(make_client: ClientFactory, solr_url: str) -> Iterator[TestClient]:
    yield make_client()
    remove_documents(solr_url, IDS)


def solr_docs(solr_url: str, collection: str, query: str) -> list[dict]:
    response = httpx.get(
        f"{solr_url}/{collection}/select",
        params={"q": query, "defType": "lucene", "rows": 1000, "wt": "json", "fl": "id,content"},
        timeout=30,
    )
    return response.json()["response"]["docs"]


def test_the_same_id_twice_in_one_request_keeps_the_last_version_everywhere(
    admin: TestClient, solr_url: str
) -> None:
    long_first = {"id": "twice", "title": "Old", "content": "Obsolete paragraph. " * 300}
    short_last = {"id": "twice", "title": "New", "content": "The current osmium text."}
    response = admin.post("/documents", json={"documents": [long_first, short_last]}, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"] == 1
    [stored] = solr_docs(solr_url, "FileShare", "{!term f=id}twice")
    assert stored["content"] == "The current osmium text."
    passages = solr_docs(solr_url, "VectorMain", "{!term f=parent_id}twice")
    assert [p["content"] for p in passages] == ["The current osmium text."]
    answer = admin.post("/ai/rag", json={"query": "osmium", "id": "twice"})
    assert "Obsolete" not in answer.text


def test_uploaded_files_are_named_by_their_relative_path(admin: TestClient, solr_url: str) -> None:
    files = [
        ("files", ("teamA/report.txt", b"Team A reports on basalt.", "text/plain")),
        ("files", ("teamB/report.txt", b"Team B reports on granite.", "text/plain")),
        ("files", ("teamB/report.txt", b"A second file with the same path.", "text/plain")),
    ]
    response = admin.post("/documents/files", files=files, headers=ADMIN)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert content["documents"] == 2
    assert content["skipped"] == [
        {"file": "teamB/report.txt", "reason": "another file of this upload has this id"}
    ]
    stored = {d["id"]: d["content"] for d in solr_docs(solr_url, "FileShare", "{!prefix f=id}team")}
    assert stored == {
        "teamA/report.txt": "Team A reports on basalt.",
        "teamB/report.txt": "Team B reports on granite.",
    }


@pytest.mark.parametrize(
    "path", ["/documents/folder/deep/x.txt", "/documents/folder%2Fdeep%2Fx.txt"]
)
def test_an_id_with_slashes_can_be_deleted(admin: TestClient, solr_url: str, path: str) -> None:
    document = {"id": "folder/deep/x.txt", "content": "Nested text about feldspar."}
    admin.post("/documents", json={"documents": [document]}, headers=ADMIN).raise_for_status()
    response = admin.delete(path, headers=ADMIN)
    assert response.status_code == 200, response.text
    assert solr_docs(solr_url, "FileShare", "{!term f=id}folder/deep/x.txt") == []
    assert solr_docs(solr_url, "VectorMain", "{!term f=parent_id}folder/deep/x.txt") == []


def test_deleting_a_missing_id_says_it_is_missing(admin: TestClient) -> None:
    response = admin.delete("/documents/no/such/document", headers=ADMIN)
    assert response.status_code == 404
    assert response.json()["content"]["label"] == "ingestionFileNotFound"


def zip_bomb(inflated: int) -> bytes:
    """A DOCX-looking zip whose one part inflates to `inflated` bytes of zeros."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            block = b"\0" * (1 << 20)
            for _ in range(inflated >> 20):
                part.write(block)
    return out.getvalue()


def test_a_zip_bomb_is_refused_with_a_413_naming_the_file(admin: TestClient, solr_url: str) -> None:
    bomb = zip_bomb(300 << 20)
    assert len(bomb) < 2 << 20
    files = [("files", ("bomb.docx", bomb, "application/octet-stream"))]
    response = admin.post("/documents/files", files=files, headers=ADMIN)
    assert response.status_code == 413, response.text
    assert "bomb.docx" in response.json()["content"]["reason"]
    assert solr_docs(solr_url, "FileShare", "{!term f=id}bomb.docx") == []


# -- the extraction worker ---------------------------------------------------------------------


@pytest.fixture
def extractor() -> Iterator[Extractor]:
    worker = Extractor(memory_limit=512 << 20, timeout=3)
    yield worker
    worker.close()


async def test_extraction_runs_off_the_event_loop(extractor: Extractor) -> None:
    finished: list[str] = []

    async def slow() -> None:
        await extractor.run(extraction_jobs.busy, "slow.pdf", 1.0)
        finished.append("extraction")

    async def other_request() -> None:
        await asyncio.sleep(0.05)
        finished.append("other request")

    await extractor.run(extraction_jobs.echo, "warm-up", "x")  # the worker is up
    await asyncio.gather(slow(), other_request())
    assert finished == ["other request", "extraction"]


async def test_a_file_needing_too_much_memory_is_too_large_and_the_service_unharmed(
    extractor: Extractor,
) -> None:
    with pytest.raises(PayloadTooLarge, match=r"huge\.pdf"):
        await extractor.run(extraction_jobs.hog, "huge.pdf", 2 << 30)
    assert await extractor.run(extraction_jobs.echo, "next.txt", "fine") == "fine"


async def test_a_file_that_takes_too_long_is_stopped_and_the_worker_replaced(
    extractor: Extractor,
) -> None:
    started = time.monotonic()
    with pytest.raises(TechnicalError, match="longer than 3s"):
        await extractor.run(extraction_jobs.busy, "endless.pdf", 60)
    assert time.monotonic() - started < 40  # its 3 s limit, not the job's 60
    assert await extractor.run(extraction_jobs.echo, "next.txt", "fine") == "fine"


def test_what_is_indexed_can_be_listed_a_page_at_a_time(admin: TestClient, solr_url: str) -> None:
    def listed(**params: object) -> dict:
        response = admin.get("/documents", params=params, headers=ADMIN)
        assert response.status_code == 200, response.text
        return response.json()["content"]

    glaciers = listed(id_prefix="glacier-", limit=2, offset=1)
    assert [d["id"] for d in glaciers["documents"]] == ["glacier-2", "glacier-3"]
    assert (glaciers["total"], glaciers["limit"], glaciers["offset"]) == (5, 2, 1)
    assert glaciers["documents"][0]["title"] and "content" not in glaciers["documents"][0]
    assert [d["id"] for d in listed(language="fr")["documents"]] == ["marseille"]
    secret = {"id": "teamA/report.txt", "content": "Quarterly numbers.", "allowed_groups": ["a"]}
    assert admin.post("/documents", json={"documents": [secret]}, headers=ADMIN).status_code == 200
    assert [d["id"] for d in listed(id_prefix="teamA/", group="a")["documents"]] == [secret["id"]]
    assert listed(id_prefix="teamA/", group="b")["documents"] == []
    assert admin.get("/documents").status_code == 401
    assert admin.get("/documents", params={"limit": 1000}, headers=ADMIN).status_code == 400


def test_a_run_failing_before_the_passages_are_written_leaves_nothing_marked_done(
    solr_url: str, model_server_url: str
) -> None:
    """The FileShare document (with the hash that makes the next run skip it) is written after
    its passages: when they cannot be written, the next run indexes it whole."""
    document = SourceDocument(
        id="halfway", title="Halfway", url="", content="Tungsten melts at a high temperature."
    )

    async def ingest(passages_collection: str, *, force: bool = False) -> None:
        settings = test_settings(
            solr_url, model_server_url, **{"solr.collection.passages": passages_collection}
        )
        async with httpx.AsyncClient() as http:
            embeddings = EmbeddingsClient(
                http, LLMOptions(endpoint=settings.embeddings.endpoint, model="all-MiniLM-L6-v2")
            )
            solr = SolrClient(http, solr_url)
            await indexer_for(settings, solr, embeddings, force=force).run([document])

    try:
        with pytest.raises(TechnicalError):
            # forced: no read of the passages first, so what fails is their write
            asyncio.run(ingest("NoSuchPassages", force=True))
        # what the failed run wrote becomes visible at any later commit (anyone's)
        httpx.post(f"{solr_url}/FileShare/update", params={"commit": "true"}, json={}, timeout=30)
        assert solr_docs(solr_url, "FileShare", "{!term f=id}halfway") == []
        asyncio.run(ingest("VectorMain"))
        assert len(solr_docs(solr_url, "FileShare", "{!term f=id}halfway")) == 1
        assert len(solr_docs(solr_url, "VectorMain", "{!term f=parent_id}halfway")) == 1
    finally:
        remove_documents(solr_url, ["halfway"])

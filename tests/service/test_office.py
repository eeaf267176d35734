"""PDF and DOCX knowledge bases: files the tests build themselves, extracted with pages and
sections kept as passage boundaries, ingested (CLI and upload) and answered end to end; a
corrupt or encrypted file is reported and skipped while the rest goes on."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import docx
import httpx
import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from service.errors import ExtractionFailed
from service.ingest import PassageSplitter, extract_bytes
from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ROOT, ClientFactory, write_properties

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PAGE_ONE = "The zeppelin hangar at Friedrichshafen was built in 1909 for airship assembly."
PAGE_TWO = "Hangar doors open on rails; a crew of twelve pushes each door in calm weather."


def make_pdf(*pages: str, title: str = "Zeppelin hangar handbook", password: str = "") -> bytes:
    out = io.BytesIO()
    pdf = canvas.Canvas(out, pagesize=A4, encrypt=password or None)
    pdf.setTitle(title)
    for text in pages:
        pdf.drawString(72, 760, text)
        pdf.showPage()
    pdf.save()
    return out.getvalue()


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Apiary in winter", level=1)
    document.add_paragraph("In winter the apiary hives are wrapped against the frost.")
    document.add_heading("Apiary in spring", level=1)
    document.add_paragraph("The first spring inspection of the apiary checks the queen.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# -- extraction ---------------------------------------------------------------------------------


def test_a_pdf_keeps_its_pages_and_its_title() -> None:
    document = extract_bytes("hangar.pdf", make_pdf(PAGE_ONE, PAGE_TWO), document_id="hangar.pdf")
    assert document.title == "Zeppelin hangar handbook"
    assert document.sections == (PAGE_ONE, PAGE_TWO)
    assert document.content == f"{PAGE_ONE}\n\n{PAGE_TWO}"


def test_passages_never_cross_a_page() -> None:
    document = extract_bytes("hangar.pdf", make_pdf(PAGE_ONE, PAGE_TWO), document_id="hangar.pdf")
    passages = PassageSplitter(1000, 100).run(document)
    assert [p.text for p in passages] == [PAGE_ONE, PAGE_TWO]  # would fit together, yet apart


def test_a_docx_is_cut_at_its_headings_and_titled_by_the_first() -> None:
    document = extract_bytes("apiary.docx", make_docx(), document_id="apiary.docx")
    assert document.title == "Apiary in winter"
    assert len(document.sections) == 2
    assert document.sections[1].startswith("Apiary in spring\n\nThe first spring inspection")


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("locked.pdf", make_pdf(PAGE_ONE, password="secret"), "encrypted"),
        ("broken.pdf", b"%PDF-1.4\n this is not really a pdf", "not a readable PDF"),
        ("broken.docx", make_docx()[:300], "not a readable DOCX"),
        ("empty.pdf", make_pdf(""), "no text"),
    ],
)
def test_unreadable_files_fail_with_a_reason(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionFailed, match=reason):
        extract_bytes(name, data, document_id=name)


# -- end to end ----------------------------------------------------------------------------------


@pytest.fixture
def cleanup(solr_url: str) -> object:
    yield
    remove_documents(solr_url, ["hangar.pdf", "apiary.docx", "locked.pdf", "broken.docx"])


@pytest.mark.usefixtures("cleanup")
def test_uploaded_pdf_and_docx_are_answered_and_bad_files_skipped(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "hybrid"})
    files = [
        ("files", ("hangar.pdf", make_pdf(PAGE_ONE, PAGE_TWO), "application/pdf")),
        ("files", ("apiary.docx", make_docx(), "application/octet-stream")),
        ("files", ("locked.pdf", make_pdf(PAGE_ONE, password="pw"), "application/pdf")),
        ("files", ("broken.docx", b"PK\x03\x04 not a zip", "application/octet-stream")),
    ]
    response = client.post("/documents/files", files=files, headers=ADMIN)
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    assert (content["documents"], content["passages"]) == (2, 4)
    assert {s["file"]: s["reason"] for s in content["skipped"]} == {
        "locked.pdf": "the PDF is encrypted",
        "broken.docx": "not a readable DOCX (BadZipFile)",
    }

    answer = client.post("/ai/rag", json={"query": "How many people push a hangar door?"})
    assert answer.status_code == 200, answer.text
    documents = answer.json()["content"]["documents"]
    assert documents[0]["id"] == "hangar.pdf"
    assert documents[0]["title"] == "Zeppelin hangar handbook"
    assert "crew of twelve" in llm.requests[-1].prompt

    answer = client.post("/ai/rag", json={"query": "apiary spring inspection queen"})
    assert answer.json()["content"]["documents"][0]["id"] == "apiary.docx"


def test_uploads_need_the_admin_token(make_client: ClientFactory) -> None:
    files = [("files", ("hangar.pdf", make_pdf(PAGE_ONE), "application/pdf"))]
    assert make_client().post("/documents/files", files=files).status_code == 401


@pytest.mark.usefixtures("cleanup")
def test_the_cli_ingests_a_folder_and_reports_what_it_skips(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str
) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "hangar.pdf").write_bytes(make_pdf(PAGE_ONE, PAGE_TWO))
    (folder / "apiary.docx").write_bytes(make_docx())
    (folder / "broken.docx").write_bytes(b"garbage")
    config = write_properties(tmp_path / "cli.properties", base_properties)
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "ingest", str(folder), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stderr and "broken.docx" in done.stderr
    assert "2 documents and 4 passages" in done.stdout
    assert "1 file(s) skipped" in done.stdout
    found = httpx.get(
        f"{solr_url}/FileShare/select",
        params={
            "q": 'id:("kb/hangar.pdf" OR "kb/apiary.docx")',
            "defType": "lucene",
            "fl": "id,title",
        },
    ).json()["response"]["docs"]
    assert sorted(d["title"] for d in found) == ["Apiary in winter", "Zeppelin hangar handbook"]

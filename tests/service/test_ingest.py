"""Ingestion: text, Markdown and HTML files into FileShare, through the CLI, into the real Solr."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from service.cli import main as cli
from service.ingest import extract, source_files
from service.ingest.folder import document_of
from service.ingest.samples import export_samples


def test_text_title_is_the_first_line(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("\n\nHarbour notes\nThe tide turns at noon.\n")
    document = extract(file, tmp_path, source="")
    assert (document.id, document.title) == ("notes.txt", "Harbour notes")
    assert document.content.startswith("Harbour notes")


def test_markdown_title_is_the_first_heading(tmp_path: Path) -> None:
    file = tmp_path / "guide.md"
    file.write_text("Intro line\n\n## Setting up the loom ##\n\nThread the warp first.\n")
    assert extract(file, tmp_path).title == "Setting up the loom"


def test_html_text_and_title(tmp_path: Path) -> None:
    file = tmp_path / "page.html"
    file.write_text(
        "<html><head><title>Tide tables</title><style>p{color:red}</style></head>"
        "<body><h1>Ignored heading</h1><p>High tide &amp; low tide.</p>"
        "<script>alert(1)</script><p>Second paragraph.</p></body></html>"
    )
    document = extract(file, tmp_path)
    assert document.title == "Tide tables"
    assert "High tide & low tide." in document.content
    assert "alert" not in document.content and "color" not in document.content
    assert "\n\nSecond paragraph." in document.content


def test_ids_are_the_folder_name_and_the_path_below_it(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.md").write_text("# C\n")
    (tmp_path / "a" / "skip.bin").write_bytes(b"\x00")
    found = [document_of(file, root).id for root, file in source_files([tmp_path / "a"])]
    assert found == ["a/b/c.md"]
    named = [document_of(f, root, source="kb").id for root, f in source_files([tmp_path / "a"])]
    assert named == ["kb/b/c.md"]


def test_missing_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        list(source_files([tmp_path / "nowhere"]))


def test_sample_corpus_comes_from_the_standard_library(tmp_path: Path) -> None:
    count = export_samples(tmp_path)
    assert count > 50
    assert (tmp_path / "assert.txt").read_text().startswith('The "assert" statement\n')


def test_cli_ingests_files_that_the_service_then_finds(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str, make_client
) -> None:
    from testing.service import write_properties

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "kiln.md").write_text(
        "# Kiln firing\n\nStoneware is fired to cone ten in the kiln.\n"
    )
    config = write_properties(tmp_path / "ingest.properties", base_properties)
    assert cli(["ingest", str(folder), "--config", str(config)]) == 0

    found = httpx.get(
        f"{solr_url}/FileShare/select", params={"q": 'id:"kb/kiln.md"', "defType": "lucene"}
    ).json()
    assert (
        found["response"]["docs"][0]["title"] == ["Kiln firing"]
        or found["response"]["docs"][0]["title"] == "Kiln firing"
    )

    client = make_client()
    response = client.post("/ai/rag", json={"query": "stoneware cone"})
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "kb/kiln.md"


def test_two_folders_with_the_same_file_names_do_not_replace_each_other(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str, make_client, capsys
) -> None:
    """Issue 36, item 2: a second folder's pass.txt replaced the sample corpus's, and the
    summary said nothing."""
    from testing.service import ADMIN_TOKEN, write_properties

    config = write_properties(tmp_path / "ingest.properties", base_properties)
    ids = {"handbook/pass.txt": "Tide tables", "notes/pass.txt": "Kiln notes"}
    for document_id, text in ids.items():
        folder = tmp_path / document_id.split("/")[0]
        folder.mkdir()
        (folder / "pass.txt").write_text(f"{text} of the harbour.")
        assert cli(["ingest", str(folder), "--config", str(config)]) == 0
    client = make_client()
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        for document_id, text in ids.items():
            found = httpx.get(
                f"{solr_url}/FileShare/select",
                params={"q": f'id:"{document_id}"', "defType": "lucene"},
            ).json()["response"]["docs"]
            assert len(found) == 1 and text in str(found[0]["content"])
        # an upload of the same id replaces it: said so, with where the old one came from
        uploaded = client.post(
            "/documents/files",
            files=[("files", ("handbook/pass.txt", b"Tide tables, uploaded.", "text/plain"))],
            headers=admin,
        )
        assert uploaded.status_code == 200, uploaded.text
        replaced = uploaded.json()["content"]["replaced"]
        assert replaced == [{"id": "handbook/pass.txt", "source": "handbook"}]
        # and the folder ingested again takes it back, saying so
        capsys.readouterr()
        assert cli(["ingest", str(tmp_path / "handbook"), "--config", str(config)]) == 0
        assert "handbook/pass.txt (was from upload)" in capsys.readouterr().err
        # --source: one name for another folder, whose files then update that source's
        (tmp_path / "more").mkdir()
        (tmp_path / "more" / "pass.txt").write_text("Kiln notes, revised.")
        assert cli(["ingest", str(tmp_path / "more"), "--source", "notes",
                    "--config", str(config)]) == 0  # fmt: skip
        assert "replaced" not in capsys.readouterr().err
        found = httpx.get(
            f"{solr_url}/FileShare/select", params={"q": 'id:"notes/pass.txt"', "defType": "lucene"}
        ).json()["response"]["docs"]
        assert "revised" in str(found[0]["content"])
    finally:  # documents and passages
        for document_id in ids:
            client.delete(f"/documents/{document_id}", headers=admin)


def test_ingest_sync_adds_changes_and_deletes_what_left_the_folder(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str, capsys
) -> None:
    """`solr-rag ingest --sync FOLDER`, as a cron job runs it: the second run indexes the new
    and changed files only, and deletes the document (and passages) of the file removed."""
    from testing.corpus import remove_documents
    from testing.service import write_properties

    folder = tmp_path / "share"
    folder.mkdir()
    for name, text in {
        "a": "Alder wood burns hot.",
        "b": "Birch bark peels.",
        "c": "Cedar smells.",
    }.items():
        (folder / f"{name}.txt").write_text(text)
    config = write_properties(tmp_path / "sync.properties", base_properties)
    ids = [f"share/{name}.txt" for name in "abcd"]

    def held() -> dict[str, str]:
        found = httpx.get(
            f"{solr_url}/FileShare/select",
            params={"q": "{!prefix f=id}share/", "defType": "lucene", "fl": "id,content"},
        ).json()["response"]["docs"]
        return {doc["id"]: str(doc["content"]) for doc in found}

    def passages(document_id: str) -> int:
        found = httpx.get(
            f"{solr_url}/VectorMain/select",
            params={"q": "{!term f=parent_id}" + document_id, "defType": "lucene", "rows": 0},
        ).json()
        return int(found["response"]["numFound"])

    try:
        assert cli(["ingest", str(folder), "--sync", "--config", str(config)]) == 0
        assert set(held()) == {"share/a.txt", "share/b.txt", "share/c.txt"}
        capsys.readouterr()
        (folder / "c.txt").unlink()
        (folder / "b.txt").write_text("Birch bark peels in strips.")
        (folder / "d.txt").write_text("Dogwood flowers in spring.")
        assert cli(["ingest", str(folder), "--sync", "--config", str(config)]) == 0
        out = capsys.readouterr().out
        now = held()
        assert set(now) == {"share/a.txt", "share/b.txt", "share/d.txt"}
        assert "in strips" in now["share/b.txt"] and passages("share/c.txt") == 0
        assert "(1 unchanged" in out or "1 unchanged" in out, out
        assert "Deleted 1 document(s) whose file is gone" in out
    finally:
        remove_documents(solr_url, ids)


def test_ingest_never_follows_a_link_out_of_the_folder(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str, capsys
) -> None:
    """`solr-rag ingest --sync` over a share holding links to /etc/passwd and the process
    environment: they are skipped with the reason, never indexed, and do not stop the
    deletion of a document whose file left the share."""
    from testing.corpus import hostile_share, ids_under, remove_documents
    from testing.service import write_properties

    texts = {"a.txt": "Alder wood burns hot.", "b.txt": "Birch bark peels."}
    folder = hostile_share(tmp_path / "linked", texts)
    config = write_properties(tmp_path / "links.properties", base_properties)

    held = lambda: ids_under(solr_url, "linked/")  # noqa: E731
    try:
        assert cli(["ingest", str(folder), "--sync", "--config", str(config)]) == 0
        err = capsys.readouterr().err
        assert held() == {"linked/a.txt", "linked/b.txt"}
        assert "passwd.txt: a link" in err and "env.txt: a link" in err
        (folder / "b.txt").unlink()
        assert cli(["ingest", str(folder), "--sync", "--config", str(config)]) == 0
        assert "Deleted 1 document(s) whose file is gone" in capsys.readouterr().out
        assert held() == {"linked/a.txt"}
    finally:
        remove_documents(solr_url, ["linked/a.txt", "linked/b.txt"])

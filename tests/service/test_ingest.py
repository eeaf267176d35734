"""Ingestion: text, Markdown and HTML files into FileShare, through the CLI, into the real Solr."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from service.cli import main as cli
from service.ingest import extract, find_files
from service.ingest.samples import export_samples


def test_text_title_is_the_first_line(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("\n\nHarbour notes\nThe tide turns at noon.\n")
    document = extract(file, tmp_path)
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


def test_ids_are_paths_below_the_ingested_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.md").write_text("# C\n")
    (tmp_path / "a" / "skip.bin").write_bytes(b"\x00")
    found = [extract(file, root).id for file, root in find_files([tmp_path / "a"])]
    assert found == ["b/c.md"]


def test_missing_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        list(find_files([tmp_path / "nowhere"]))


def test_sample_corpus_comes_from_the_standard_library(tmp_path: Path) -> None:
    count = export_samples(tmp_path)
    assert count > 50
    assert (tmp_path / "assert.txt").read_text().startswith('The "assert" statement\n')


def test_cli_ingests_files_that_the_service_then_finds(
    tmp_path: Path, base_properties: dict[str, object], solr_url: str, make_client
) -> None:
    from tests.conftest import write_properties

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "kiln.md").write_text(
        "# Kiln firing\n\nStoneware is fired to cone ten in the kiln.\n"
    )
    config = write_properties(tmp_path / "ingest.properties", base_properties)
    assert cli(["ingest", str(folder), "--config", str(config)]) == 0

    found = httpx.get(
        f"{solr_url}/FileShare/select", params={"q": "id:kiln.md", "defType": "lucene"}
    ).json()
    assert (
        found["response"]["docs"][0]["title"] == ["Kiln firing"]
        or found["response"]["docs"][0]["title"] == "Kiln firing"
    )

    client = make_client()
    response = client.post("/ai/rag", json={"query": "stoneware cone"})
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "kiln.md"

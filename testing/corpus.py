"""The test corpus (tests/fixtures/corpus.json) as SourceDocuments: the tests' documents, and
the load benchmark's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import httpx

from service.ingest import SourceDocument

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def load_corpus() -> list[SourceDocument]:
    records = json.loads((FIXTURES / "corpus.json").read_text(encoding="utf-8"))
    return [
        SourceDocument(
            id=r["id"],
            title=r["title"],
            url=r.get("url", f"https://example.org/{r['id']}"),
            content=r["content"],
            language=r.get("language", "en"),
        )
        for r in records
    ]


def remove_documents(solr_url: str, ids: Iterable[str]) -> None:
    """Documents a test added, gone from FileShare, and their passages from VectorMain."""
    quoted = " OR ".join(json.dumps(document_id) for document_id in ids)
    for collection, field in (("FileShare", "id"), ("VectorMain", "parent_id")):
        httpx.post(
            f"{solr_url}/{collection}/update",
            params={"commit": "true"},
            json={"delete": {"query": f"{field}:({quoted})"}},
            timeout=30,
        ).raise_for_status()


def ids_under(solr_url: str, prefix: str, collection: str = "FileShare") -> set[str]:
    """The ids starting with `prefix` that `collection` holds (committed)."""
    found = httpx.get(
        f"{solr_url}/{collection}/select",
        params={"q": f"{{!prefix f=id}}{prefix}", "defType": "lucene", "fl": "id", "rows": 10_000},
        timeout=30,
    ).json()["response"]["docs"]
    return {doc["id"] for doc in found}


def hostile_share(folder: Path, files: dict[str, str]) -> Path:
    """`folder` made a share an attacker wrote into: `files` (name: text), links to
    /etc/passwd (passwd.txt), the process environment (env.txt) and the service's
    rag.properties (props.md), and a FIFO (fifo.txt) that blocks whoever opens it."""
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (folder / "env.txt").symlink_to("/proc/self/environ")
    (folder / "props.md").symlink_to(ROOT / "rag.properties")
    os.mkfifo(folder / "fifo.txt")
    return folder

"""Every snippet of the README and of docs/ that calls the API runs, as written, against the
service on the shipped rag.properties (issue 36, item 5: a snippet's model name was a 404
there).

Only the addresses change: the snippets' http://127.0.0.1:8000 becomes the test service's, and
the shipped file's Solr and model server are the suite's (environment overrides, as an
operator would set them), its LLM the extractive answerer, its collections two fresh ones
holding part of the sample corpus `make run` indexes (the topics the snippets ask about, and a
few others)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.api.app import create_app
from service.config.store import env_name
from service.ingest import extract
from service.ingest.indexer import indexer_for
from service.ingest.samples import export_samples
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.servers import serve_in_thread
from testing.service import ROOT, test_settings
from testing.solr import create_collection, delete_collection

README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
SHIPPED = "http://127.0.0.1:8000"
BLOCK = re.compile(r"^```(python|bash)\n(.*?)^```", re.S | re.M)
INLINE_CURL = re.compile(r"\*\*curl\*\*: `(curl [^`]*)`", re.S)


def snippets() -> list[tuple[str, str, str]]:
    """(language, code, where) of each snippet of the README and docs/ that calls the running
    service."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix().replace("/", "-")
        for match in BLOCK.finditer(text):
            language, code = match.group(1), match.group(2)
            calls = SHIPPED in code and not (language == "bash" and "make run" in code)
            if calls:
                found.append(
                    (language, code, f"{name}-line-{text.count(chr(10), 0, match.start()) + 1}")
                )
        for match in INLINE_CURL.finditer(text):
            code = " ".join(match.group(1).split())
            found.append(("bash", code, f"{name}-line-{text.count(chr(10), 0, match.start()) + 1}"))
    return found


SNIPPETS = snippets()


def test_the_readme_has_the_snippets_it_promises() -> None:
    languages = [language for language, _, _ in SNIPPETS]
    assert languages.count("python") >= 5 and languages.count("bash") >= 2


SAMPLES = ("assert", "pass", "if", "for", "while", "import")  # sample topics indexed
DOCUMENTS, PASSAGES = "ReadmeFileShare", "ReadmeVectorMain"


def index_samples(folder: Path, solr_url: str, model_server_url: str) -> None:
    export_samples(folder)
    documents = [extract(folder / f"{name}.txt", folder) for name in SAMPLES]
    collections = {"solr.collection.documents": DOCUMENTS, "solr.collection.passages": PASSAGES}
    settings = test_settings(solr_url, model_server_url, **collections)

    async def index() -> None:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            await indexer_for(settings, solr, embeddings_client(http, settings)).run(documents)

    asyncio.run(index())


@pytest.fixture(scope="module")
def shipped(
    tmp_path_factory: pytest.TempPathFactory, solr_url: str, model_server_url: str
) -> Iterator[str]:
    """The service on a copy of the shipped rag.properties, the suite's Solr and model server
    named by environment variables, its collections holding sample topics."""
    folder = tmp_path_factory.mktemp("shipped")
    create_collection(solr_url, DOCUMENTS, "FileShare")
    create_collection(solr_url, PASSAGES, "VectorMain")
    index_samples(folder / "samples", solr_url, model_server_url)
    path = Path(shutil.copy(ROOT / "rag.properties", folder / "rag.properties"))
    overrides = {
        env_name("solr.url"): solr_url,
        # the snippets' calls, not the embedded model's answers (tests/service/test_answerer.py
        # and test_first_minutes.py): the extractive answerer, in a tenth of a second
        env_name("ai.api.endpoint"): f"{model_server_url}/v1/",
        env_name("llm.model"): "extractive",
        env_name("ai.embeddings.endpoint"): f"{model_server_url}/v1/",
        env_name("solr.collection.documents"): DOCUMENTS,
        env_name("solr.collection.passages"): PASSAGES,
    }
    saved = {name: os.environ.get(name) for name in overrides}
    os.environ.update(overrides)
    try:
        with serve_in_thread(create_app(path), health_path="/health/live") as base:
            yield base
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        delete_collection(solr_url, DOCUMENTS)
        delete_collection(solr_url, PASSAGES)


@pytest.mark.parametrize(
    ("language", "code"),
    [(language, code) for language, code, _ in SNIPPETS],
    ids=[f"{where}-{language}" for language, _, where in SNIPPETS],
)
def test_a_readme_snippet_runs_against_the_shipped_configuration(
    shipped: str, language: str, code: str
) -> None:
    code = code.replace(SHIPPED, shipped)
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-c", code]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip(), done.stderr[-3000:]
    if language == "bash":  # curl prints the service's answer: not an error envelope
        assert '"ERROR"' not in done.stdout and '"error"' not in done.stdout, done.stdout[:2000]

"""Fixtures: a real Solr (once per run: 9.8.1, or SOLR_VERSION's), a recording LLM server, and the
service on both.

Set SOLR_RAG_TEST_SOLR_URL to run against a Solr you started yourself (with this project's
configsets) instead of starting one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.llm import EmbeddingsClient, LLMOptions
from service.models.server import create_model_app
from service.observability import StderrHandler
from service.retrieval import SolrClient
from testing.corpus import load_corpus
from testing.llm_server import LLMScript, create_llm_app
from testing.servers import serve_in_thread
from testing.service import (
    ClientFactory,
    ServiceFactory,
    service_properties,
    test_settings,
    write_properties,
)
from testing.solr import SCRIPT as SOLR_SCRIPT
from testing.solr import SolrStartError, local_solr, solr_version
from testing.suite import EXISTING_SOLR_ENV
from tests.solr_versions import in_subset


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI timeout, `kill`) ends the run like Ctrl-C: fixtures are torn down, so
    the servers they started stop too. Once: a second SIGTERM (a timeout signals the whole
    process group, and testing.suite passes it on too) would interrupt the teardown itself."""

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


# The files whose tests take longest (`--durations`), started first when the suite runs on
# several workers (`make test`: pytest-xdist, a file at a time), so that no worker is left
# with a long file at the end while the others idle. The rest keep their order.
SLOW_FIRST = (
    "tests/service/test_compose_stack.py",
    "tests/cluster/",
    "tests/service/test_answerer.py",
    "tests/service/test_every_door.py",
    "tests/service/test_fuzz_openapi.py",
    "tests/service/test_config_safety.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The `solr` marker means it: every test that needs the real Solr (through the solr_url
    fixture, directly or not) carries it, so `-m "not solr"` runs what needs none. The tests
    tests/solr_versions.py lists carry `solr_versions` (CI runs them on Solr 9.10.1 too).

    On several workers (`-n 2 --dist loadgroup`), a file's tests stay on one worker (its
    module fixtures start once), and tests/cluster/'s share the worker that starts their
    three-node cluster; the slowest files go first."""
    for item in items:
        if {"solr_url", "solr_jars"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.solr)
        if in_subset(item.nodeid):
            item.add_marker(pytest.mark.solr_versions)
        item.add_marker(pytest.mark.xdist_group(_worker_group(item.nodeid)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one process: the order as written
        items.sort(key=_start_rank)


def _worker_group(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return "tests/cluster/" if path.startswith("tests/cluster/") else path


def _start_rank(item: pytest.Item) -> int:
    group = _worker_group(item.nodeid)
    return next(
        (rank for rank, slow in enumerate(SLOW_FIRST) if group.startswith(slow)), len(SLOW_FIRST)
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The handler a CLI run in the test set up goes when the test's call ends: a server the
    test still runs in a thread (its access line, its shutdown in a fixture's teardown) then
    logs to pytest's capture only, never onto the terminal between two phases."""
    before = logging.getLogger().handlers[:]
    try:
        return (yield)
    finally:
        root = logging.getLogger()
        for handler in root.handlers[:]:
            if isinstance(handler, StderrHandler) and handler not in before:
                root.removeHandler(handler)


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """A test that runs the CLI (which sets up logging for its process) leaves the root logger
    as it found it (its handler writes to whatever stderr is when a record comes, so a record
    logged in a later fixture's teardown never meets the test's captured stream, closed)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def solr_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get(EXISTING_SOLR_ENV)
    if existing:
        yield existing.rstrip("/")
        return
    try:
        with local_solr(tmp_path_factory.mktemp("solr")) as solr:
            yield solr.url
    except SolrStartError as error:
        pytest.fail(f"the local Solr did not start: {error}")


@pytest.fixture(scope="session")
def solr_jars() -> None:
    """The jars of the run's Solr version fetched (and our plugins built) before a test that
    starts Solrs of its own without the run's shared one (testing.suite runs such tests apart):
    its start is then only a start. Once a version, and quick when they are there."""
    fetched = subprocess.run(
        ["bash", str(SOLR_SCRIPT), "fetch", "--version", solr_version()],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    if fetched.returncode != 0:
        pytest.fail(f"solr.sh fetch failed:\n{fetched.stdout[-2000:]}\n{fetched.stderr[-2000:]}")


@pytest.fixture(scope="session")
def model_server_url() -> Iterator[str]:
    """The project's own local model server (extractive chat + all-MiniLM-L6-v2 embeddings)."""
    with serve_in_thread(create_model_app()) as base:
        yield base


@pytest.fixture(scope="session")
def corpus(solr_url: str, model_server_url: str) -> list[SourceDocument]:
    """The test documents in FileShare, and their embedded passages in VectorMain, through the
    real ingestion path."""
    documents = load_corpus()
    settings = test_settings(solr_url, model_server_url)

    async def index() -> None:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            for collection in ("FileShare", "VectorMain"):
                await solr.delete_by_query(collection, "*:*")
            embeddings = EmbeddingsClient(
                http, LLMOptions(endpoint=settings.embeddings.endpoint, model="all-MiniLM-L6-v2")
            )
            await indexer_for(settings, solr, embeddings).run(documents)

    asyncio.run(index())
    return documents


@pytest.fixture(scope="session")
def llm_script() -> LLMScript:
    return LLMScript()


@pytest.fixture(scope="session")
def llm_base_url(llm_script: LLMScript) -> Iterator[str]:
    with serve_in_thread(create_llm_app(llm_script)) as base:
        yield base


@pytest.fixture
def llm(llm_script: LLMScript, llm_base_url: str) -> Iterator[LLMScript]:
    """The recording LLM, emptied before each test."""
    llm_script.reset()
    yield llm_script
    llm_script.reset()


@pytest.fixture
def base_properties(solr_url: str, llm_base_url: str, model_server_url: str) -> dict[str, object]:
    return service_properties(solr_url, llm_base_url, model_server_url)


@pytest.fixture
def make_client(
    tmp_path: Path, base_properties: dict[str, object], corpus: list[SourceDocument], llm: LLMScript
) -> Iterator[ClientFactory]:
    """make_client({"rag.operator": "AND"}) -> the service on that configuration."""
    clients: list[TestClient] = []

    def make(overrides: Mapping[str, object] | None = None) -> TestClient:
        # one file per client: a client reloads its own file when it changes
        values = {**base_properties, **(overrides or {})}
        path = write_properties(tmp_path / f"rag-{len(clients)}.properties", values)
        client = TestClient(create_app(path), raise_server_exceptions=False)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: ClientFactory) -> TestClient:
    return make_client()


@pytest.fixture
def service(
    tmp_path: Path, base_properties: dict[str, object], corpus: object, llm: LLMScript
) -> Iterator[ServiceFactory]:
    """service({"key": value}) -> the base URL of the service on that configuration, on a
    real socket (for clients that need a URL: the OpenAI SDK, LangChain, litellm)."""
    servers = []

    def start(overrides: Mapping[str, object] | None = None) -> str:
        path = write_properties(
            tmp_path / f"rag{len(servers)}.properties", {**base_properties, **(overrides or {})}
        )
        server = serve_in_thread(create_app(path))
        servers.append(server)
        return server.__enter__()

    yield start
    for server in servers:
        server.__exit__(None, None, None)

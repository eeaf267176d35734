"""The Solr organisations run is secured: the service against real Solr nodes with Solr's own
security.json (BasicAuth, rule-based authorization: a reader and a writer), ZooKeeper's data
under digest ACLs, and, separately, Solr over TLS with a CA the test makes and client
certificates required. Answers, ingestion and sync work with the right credentials; wrong or
missing ones give one clear error naming the key, never a traceback, never the password."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.cli import main as cli
from service.config import settings_from_mapping
from service.retrieval import SolrClient
from service.retrieval.access import SolrPools
from service.retrieval.zookeeper import ZooKeeperUnavailable, live_nodes
from testing.llm_server import LLMScript
from testing.secured_solr import (
    Certificates,
    make_certificates,
    security_json,
    zookeeper_acl_options,
)
from testing.servers import free_port
from testing.service import ADMIN_TOKEN, ROOT, write_properties
from testing.solr import LocalSolr, SolrStartError, local_solr

WRITER_PASSWORD = "writer-Pa55-4e1f"
READER_PASSWORD = "reader-Pa55-77c2"
ZK_READER_PASSWORD = "zk-reader-Pa55-0b9d"
SECRETS = (WRITER_PASSWORD, READER_PASSWORD, ZK_READER_PASSWORD, "wrong-Pa55-9a9a")
QUESTION = "When does the lighthouse keeper sound the fog horn?"


@pytest.fixture(scope="module")
def basic_solr(tmp_path_factory: pytest.TempPathFactory, solr_url: str) -> Iterator[LocalSolr]:
    """A SolrCloud of two nodes: BasicAuth (anonymous refused), a `reader` that may read and
    a `writer` that may also update, ZooKeeper's data under digest ACLs. (solr_url: the jars
    are fetched by then.)"""
    folder = tmp_path_factory.mktemp("secured")
    users = {"writer": (WRITER_PASSWORD, ["writer"]), "reader": (READER_PASSWORD, ["reader"])}
    security = security_json(folder, users, writers=["writer"])
    options = zookeeper_acl_options("zk-admin-Pa55", "zk-reader", ZK_READER_PASSWORD)
    try:
        with local_solr(folder / "solr", nodes=2, security=security, java_opts=options) as solr:
            yield solr
    except SolrStartError as error:
        pytest.fail(f"the secured Solr did not start: {error}")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("ca"), client_auth=True)


@pytest.fixture(scope="module")
def tls_solr(
    tmp_path_factory: pytest.TempPathFactory, solr_url: str, certificates: Certificates
) -> Iterator[LocalSolr]:
    """One Solr node over https, its certificate signed by the test's CA, every client asked
    for a certificate that CA signed."""
    try:
        with local_solr(tmp_path_factory.mktemp("tls"), tls=certificates.jetty) as solr:
            yield solr
    except SolrStartError as error:
        pytest.fail(f"the TLS Solr did not start: {error}")


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    folder = tmp_path / "harbour"
    folder.mkdir()
    (folder / "lighthouse.txt").write_text(
        "Lighthouse keeping\nIn fog the keeper sounds the fog horn every thirty seconds, "
        "from dusk until the fog lifts.\n"
    )
    (folder / "ferry.txt").write_text(
        "Ferry timetable\nThe first ferry leaves the harbour at seven in the morning.\n"
    )
    return folder


def properties(
    folder: Path, name: str, solr: LocalSolr, model_server_url: str, **keys: object
) -> Path:
    values = {
        "solr.url": solr.url,
        "ai.embeddings.endpoint": f"{model_server_url}/v1/",
        "solr.timeout.read": 20,
        **{key.replace("__", "."): value for key, value in keys.items()},
    }
    return write_properties(folder / f"{name}.properties", values)


def service_properties(
    folder: Path, name: str, solr: LocalSolr, model_server_url: str, llm: str, **keys: object
) -> Path:
    return properties(
        folder,
        name,
        solr,
        model_server_url,
        **{
            "ai.enable.rag": True,
            "ai.api.endpoint": f"{llm}/v1/",
            "llm.model": "test-model",
            "llm.retries": 0,
            "admin.token": ADMIN_TOKEN,
            "prompt.templates.dir": ROOT / "prompts",
            "prompt.chunking.strategy": "stuff",
            "grounding.enabled": False,
            **keys,
        },
    )


def login(user: str, password: str) -> dict[str, str]:
    return {"solr.auth.user": user, "solr.auth.password": password}


def ask(path: Path) -> httpx.Response:
    with TestClient(create_app(path), raise_server_exceptions=False) as client:
        return client.post("/ai/rag", json={"query": QUESTION})


def count(solr: LocalSolr, auth: tuple[str, str] | None, **tls: object) -> int:
    """FileShare's documents of the test's folder, once what was written is visible."""
    commit = httpx.get(
        f"{solr.url}/FileShare/update",
        params={"commit": "true"},
        auth=("writer", WRITER_PASSWORD),
        timeout=60,
    )
    commit.raise_for_status()
    response = httpx.get(
        f"{solr.url}/FileShare/select",
        params={"q": "*:*", "defType": "lucene", "rows": 0, "wt": "json"},
        auth=auth,
        timeout=30,
        **tls,  # type: ignore[arg-type]
    )
    response.raise_for_status()
    return int(response.json()["response"]["numFound"])


def no_secret_in(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text
        assert "Traceback" not in text


def test_an_anonymous_request_is_refused_by_the_secured_solr(basic_solr: LocalSolr) -> None:
    response = httpx.get(f"{basic_solr.url}/FileShare/select", params={"q": "*:*"}, timeout=30)
    assert response.status_code == 401


def test_a_writer_ingests_and_syncs_and_a_reader_answers(
    basic_solr: LocalSolr,
    documents: Path,
    tmp_path: Path,
    model_server_url: str,
    llm_base_url: str,
    llm: LLMScript,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer = properties(
        tmp_path, "writer", basic_solr, model_server_url, **login("writer", WRITER_PASSWORD)
    )
    assert cli(["ingest", str(documents), "--config", str(writer)]) == 0
    assert count(basic_solr, ("reader", READER_PASSWORD)) == 2
    assert cli(["sync", "--config", str(writer), "--checkpoint", str(tmp_path / "cp")]) == 0

    reader = service_properties(
        tmp_path,
        "reader",
        basic_solr,
        model_server_url,
        llm_base_url,
        **login("reader", READER_PASSWORD),
    )
    response = ask(reader)
    assert response.status_code == 200, response.text
    sources = [document["id"] for document in response.json()["content"]["documents"]]
    assert "harbour/lighthouse.txt" in sources
    assert "fog horn" in llm.requests[-1].prompt  # the LLM read what the reader found

    with TestClient(create_app(reader)) as client:
        admin = client.get("/admin/config", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        shown = {item["key"]: item["value"] for item in admin.json()["settings"]}
        assert shown["solr.auth.password"] == "***"
        health = client.get("/health")
        assert health.status_code == 200
        metrics = client.get("/metrics")
        moved = client.patch(
            "/admin/config",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            json={"solr.url": f"http://127.0.0.1:{free_port()}/solr"},
        )
        assert moved.status_code == 422  # the stored password never follows a new address
        assert "solr.auth.password" in moved.text
        no_secret_in(admin.text, health.text, moved.text, metrics.text)
    captured = capsys.readouterr()
    no_secret_in(captured.out, captured.err, caplog.text)


def test_a_reader_may_answer_but_ingestion_says_it_may_not_write(
    basic_solr: LocalSolr,
    documents: Path,
    tmp_path: Path,
    model_server_url: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    (documents / "new.txt").write_text("Tide notes\nHigh tide at noon.\n")
    reader = properties(
        tmp_path, "reader", basic_solr, model_server_url, **login("reader", READER_PASSWORD)
    )
    with caplog.at_level(logging.WARNING):
        assert cli(["ingest", str(documents), "--config", str(reader)]) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "may read but not write" in last and "update permission" in last
    no_secret_in(err, caplog.text)


def test_missing_or_wrong_credentials_name_the_key_never_the_password(
    basic_solr: LocalSolr,
    documents: Path,
    tmp_path: Path,
    model_server_url: str,
    llm_base_url: str,
    llm: LLMScript,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    anonymous = service_properties(
        tmp_path, "anonymous", basic_solr, model_server_url, llm_base_url
    )
    wrong = service_properties(
        tmp_path,
        "wrong",
        basic_solr,
        model_server_url,
        llm_base_url,
        **login("reader", "wrong-Pa55-9a9a"),
    )
    for path, says in ((anonymous, "solr.auth.user"), (wrong, "refused the credentials")):
        # a command: one line naming the key
        assert cli(["ingest", str(documents), "--config", str(path)]) == 1
        assert says in capsys.readouterr().err.strip().splitlines()[-1]
        # mid-request (the start's check off): a 502 in the documented shape
        unchecked = write_properties(
            tmp_path / f"{path.stem}-unchecked.properties",
            {
                **dict(line.split("=", 1) for line in path.read_text().splitlines()[1:]),
                "solr.startup.check": "false",
            },
        )
        response = ask(unchecked)
        assert response.status_code == 502
        body = response.json()
        assert body["status"] == "ERROR"
        assert says in body["content"]["reason"]
        no_secret_in(response.text)
    assert not llm.requests  # nothing was asked of the LLM without documents
    with pytest.raises(Exception, match=r"solr\.auth\.user"), TestClient(create_app(anonymous)):
        pass  # the server refuses to start
    captured = capsys.readouterr()
    no_secret_in(captured.out, captured.err, caplog.text)


def test_zookeeper_under_acls_shows_the_live_nodes_only_with_the_digest(
    basic_solr: LocalSolr,
) -> None:
    with pytest.raises(ZooKeeperUnavailable, match=r"solr\.zk\.digest\.user"):
        live_nodes(basic_solr.zk_host, 10)
    with pytest.raises(ZooKeeperUnavailable, match=r"check solr\.zk\.digest\.user"):
        live_nodes(basic_solr.zk_host, 10, "zk-reader:wrong-Pa55-9a9a")
    names, scheme = live_nodes(basic_solr.zk_host, 10, f"zk-reader:{ZK_READER_PASSWORD}")
    assert sorted(f"{scheme}://{name.replace('_', '/')}" for name in names) == sorted(
        basic_solr.urls
    )

    gone = f"http://127.0.0.1:{free_port()}/solr"  # no Solr there: ZooKeeper finds the nodes
    layout = settings_from_mapping(
        {
            "solr.url": gone,
            "solr.zk.hosts": basic_solr.zk_host,
            "solr.zk.digest.user": "zk-reader",
            "solr.zk.digest.password": ZK_READER_PASSWORD,
            **login("reader", READER_PASSWORD),
        },
        source="tests",
        env={},
    ).solr

    async def search() -> tuple[int, list[dict[str, object]]]:
        async with SolrPools() as pools:
            solr = SolrClient.of(layout, pools)
            found = await solr.select("FileShare", {"q": "*:*", "defType": "lucene", "rows": 0})
            return found["response"]["numFound"], solr.nodes.report()

    _, nodes = asyncio.run(search())
    known = {node["at"]: node for node in nodes}
    assert set(known) == {gone, *basic_solr.urls}
    assert all(known[url]["status"] == "up" for url in basic_solr.urls)


def test_over_tls_with_the_ca_and_a_client_certificate_the_service_ingests_and_answers(
    tls_solr: LocalSolr,
    certificates: Certificates,
    documents: Path,
    tmp_path: Path,
    model_server_url: str,
    llm_base_url: str,
    llm: LLMScript,
) -> None:
    assert tls_solr.url.startswith("https://")
    tls = {
        "solr.tls.ca": certificates.ca,
        "solr.tls.cert": certificates.client_cert,
        "solr.tls.key": certificates.client_key,
    }
    config = service_properties(
        tmp_path,
        "tls",
        tls_solr,
        model_server_url,
        llm_base_url,
        **{key.replace(".", "__"): value for key, value in tls.items()},
    )
    assert cli(["ingest", str(documents), "--config", str(config)]) == 0
    response = ask(config)
    assert response.status_code == 200, response.text
    sources = [document["id"] for document in response.json()["content"]["documents"]]
    assert "harbour/lighthouse.txt" in sources


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ({}, "solr.tls.ca"),  # the system's CAs do not know the test's CA
        ({"solr.tls.ca": "stranger"}, "solr.tls.ca"),  # another CA
        ({"solr.tls.ca": "ca"}, "solr.tls.cert"),  # Solr asks for a client certificate
    ],
)
def test_over_tls_a_missing_ca_or_certificate_is_one_line_naming_the_key(
    tls_solr: LocalSolr,
    certificates: Certificates,
    documents: Path,
    tmp_path: Path,
    model_server_url: str,
    keys: dict[str, str],
    says: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = {"ca": certificates.ca, "stranger": certificates.stranger_ca}
    config = properties(
        tmp_path,
        "tls",
        tls_solr,
        model_server_url,
        **{key.replace(".", "__"): files[value] for key, value in keys.items()},
    )
    assert cli(["ingest", str(documents), "--config", str(config)]) == 1
    err = capsys.readouterr().err
    assert says in err.strip().splitlines()[-1]
    assert "Traceback" not in err

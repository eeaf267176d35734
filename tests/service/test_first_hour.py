"""What a new user trips on in the first hour (issue 36): the items fixed so far, each with
a test that failed before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from openai import OpenAI

from service.api.app import create_app
from service.errors import SolrLayoutError
from service.processes import start_group, stop_group
from testing.llm_server import LLMScript
from testing.servers import free_port
from testing.service import ADMIN_TOKEN, ClientFactory, ServiceFactory, write_properties

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
QUESTION = [{"role": "user", "content": "Who lit the lighthouse lamp?"}]


# -- 3: usage is counted once in a stream ------------------------------------------------------


def test_a_streamed_answer_reports_its_usage_once(service: ServiceFactory) -> None:
    openai = OpenAI(base_url=f"{service()}/v1", api_key="unused")
    chunks = list(
        openai.chat.completions.create(
            model="rag", messages=QUESTION, stream=True, stream_options={"include_usage": True}
        )
    )
    with_usage = [chunk for chunk in chunks if chunk.usage is not None]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1]


# -- 4: an answer cut by max_tokens says length ------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_local_model_server_says_length_when_max_tokens_cut_the_answer(
    model_server_url: str, stream: bool
) -> None:
    prompt = (
        "######\n[1] Lighthouse\nThe keeper lit the lamp every evening at dusk, and he trimmed "
        "its wick at dawn.\n######\nQuestion: Who lit the lamp?"
    )
    openai = OpenAI(base_url=f"{model_server_url}/v1", api_key="unused")
    asked = {"model": "extractive", "messages": [{"role": "user", "content": prompt}]}
    if stream:
        chunks = list(openai.chat.completions.create(**asked, max_tokens=5, stream=True))
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert finishes[-1] == "length"
        whole = list(openai.chat.completions.create(**asked, max_tokens=500, stream=True))
        assert [c.choices[0].finish_reason for c in whole if c.choices][-1] == "stop"
    else:
        cut = openai.chat.completions.create(**asked, max_tokens=5)
        assert cut.choices[0].finish_reason == "length"
        assert len((cut.choices[0].message.content or "").split()) == 5
        whole = openai.chat.completions.create(**asked, max_tokens=500)
        assert whole.choices[0].finish_reason == "stop"


# -- 6: the CLI --------------------------------------------------------------------------------


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *arguments],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_cli_says_its_version_and_what_ingest_reads() -> None:
    version = _cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("solr-rag ")
    ingest = _cli("ingest", "--help").stdout
    assert "PDF" in ingest and "DOCX" in ingest
    assert "rag.properties" in ingest  # --config says what it is and its default


def test_ingesting_a_folder_that_does_not_exist_is_one_line_not_a_traceback(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    config = write_properties(tmp_path / "rag.properties", base_properties)
    result = _cli("ingest", "--config", str(config), "/no/such/dir")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no such file or folder: /no/such/dir" in result.stderr


# -- 7: a startup error names the missing field and the key that maps it -----------------------


def test_a_collection_without_our_fields_is_named_with_its_key_and_configset(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    path = write_properties(
        tmp_path / "startup.properties", {**base_properties, "solr.vector.field": "vector_999"}
    )
    with pytest.raises(SolrLayoutError) as refused, TestClient(create_app(path)):
        pass
    reason = str(refused.value)
    assert "'VectorMain' (solr.collection.passages) lacks the field(s) vector_999" in reason
    assert "solr/configsets/VectorMain" in reason and "solr.vector.field" in reason
    nowhere = write_properties(
        tmp_path / "nowhere.properties", {**base_properties, "solr.collection.documents": "Docs"}
    )
    with pytest.raises(SolrLayoutError) as missing, TestClient(create_app(nowhere)):
        pass
    assert "solr/configsets/FileShare" in str(missing.value)  # not solr/configsets/Docs
    assert "solr.collection.documents" in str(missing.value)


# -- 11: smaller ones --------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "status", "code"), [("GET", 405, "method_not_allowed")])
def test_v1_routing_errors_carry_openai_codes(
    make_client: ClientFactory, method: str, status: int, code: str
) -> None:
    response = make_client().request(method, "/v1/chat/completions")
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    missing = make_client().get("/v1/no/such/route")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_the_favicon_is_no_404(make_client: ClientFactory) -> None:
    assert make_client().get("/favicon.ico").status_code == 204


def test_deleting_a_document_says_how_many_passages_went_with_it(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client()
    document = {"id": "first-hour/doc", "title": "Lamps", "content": "The lamp. " * 400}
    added = client.post("/documents", json={"documents": [document]}, headers=ADMIN)
    assert added.status_code == 200, added.text
    written = added.json()["content"]["passages"]
    assert written > 1
    deleted = client.delete("/documents/first-hour/doc", headers=ADMIN)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["content"]["passages"] == written


# -- 10: startup says where the chat and admin pages are, and how to turn the admin on --------


@pytest.mark.usefixtures("corpus")
def test_startup_prints_the_pages_and_how_to_set_the_admin_token(
    tmp_path: Path, base_properties: dict[str, object]
) -> None:
    values = {key: value for key, value in base_properties.items() if key != "admin.token"}
    config = write_properties(tmp_path / "rag.properties", values)
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "serve", "--config", str(config)]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ADMIN_TOKEN")}
    server = start_group(
        [*command, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=environment,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        printed = ""
        while "Application startup complete" not in printed:
            line = server.stdout.readline().decode()
            assert line, printed  # it ended before printing
            printed += line
        assert f"chat: http://127.0.0.1:{port}/ui" in printed
        assert f"admin: http://127.0.0.1:{port}/admin (off until" in printed
        assert "ADMIN_TOKEN=" in printed
        # what the start found, said once (it was said again by the check before it)
        assert printed.count("Solr layout checked") == 1, printed
        assert printed.count("solr.embeddings.mode auto") == 1, printed
    finally:
        stop_group(server, timeout=30)

"""The admin API: rag.properties read (tokens masked) and changed (validated, atomic, comments
kept, concurrent edits all applied, hot), and the optional API keys of public endpoints."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from service.config.properties import parse_properties
from service.text import tokens
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SECRET = "sk-live-secret-0123456789"
COMMENTED = """# Our RAG settings: keep this comment
ai.enable.rag=true
# the model (this comment too)
llm.model=test-model
custom.unknown.key=kept as it is
"""


@pytest.fixture
def admin(make_client: ClientFactory) -> tuple[TestClient, Path]:
    """A service whose rag.properties holds comments, an unknown key and an API token."""
    client = make_client({"ai.api.token": SECRET})
    path = client.app.state.runtime.config.path
    path.write_text(COMMENTED + path.read_text(encoding="utf-8").split("\n", 1)[1])
    return client, path


def values(client: TestClient) -> dict[str, object]:
    body = client.get("/admin/config", headers=ADMIN).json()
    return {item["key"]: item["value"] for item in body["settings"]}


def test_config_lists_every_key_with_type_default_and_help(admin) -> None:
    client, _ = admin
    response = client.get("/admin/config", headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    assert response.headers["etag"] == f'"{body["version"]}"'
    keys = {item["key"]: item for item in body["settings"]}
    temperature = keys["llm.temperature"]
    assert temperature["type"] == "number"
    assert (temperature["minimum"], temperature["maximum"], temperature["default"]) == (0, 2, 0)
    assert keys["prompt.chunking.strategy"]["choices"] == ["stuff", "mapreduce", "refine"]
    assert keys["solr.vector.field"]["read_only"] is True
    assert all(item["description"] for item in body["settings"])


def test_tokens_are_masked(admin) -> None:
    client, _ = admin
    response = client.get("/admin/config", headers=ADMIN)
    assert SECRET not in response.text
    assert ADMIN_TOKEN not in response.text
    assert values(client)["ai.api.token"] == "***"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"X-Other": "1"}])
def test_admin_endpoints_need_the_admin_token(admin, headers: dict[str, str]) -> None:
    client, path = admin
    before = path.read_bytes()
    for method, url in [
        ("GET", "/admin/config"),
        ("PATCH", "/admin/config"),
        ("POST", "/admin/test-connection"),
    ]:
        response = client.request(method, url, headers=headers, json={"llm.model": "x"})
        assert response.status_code == 401, (method, url)
        assert response.json()["content"]["label"] == "adminUnauthorized"
    assert path.read_bytes() == before


def test_a_change_is_written_keeping_comments_order_and_unknown_keys(admin, llm: LLMScript) -> None:
    client, path = admin
    response = client.patch(
        "/admin/config", headers=ADMIN, json={"llm.model": "model-b", "chunking.maxFiles": 2}
    )
    assert response.status_code == 200, response.text
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Our RAG settings: keep this comment\nai.enable.rag=true\n")
    assert "# the model (this comment too)\nllm.model=model-b\n" in text
    assert "custom.unknown.key=kept as it is" in text
    assert parse_properties(text)["chunking.maxFiles"] == "2"
    assert response.headers["etag"] == f'"{response.json()["version"]}"'
    # the next request uses it, without a restart
    assert client.post("/ai/rag", json={"query": "lighthouse"}).status_code == 200
    assert llm.requests[-1].body["model"] == "model-b"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"llm.temperature": 5}, "llm.temperature"),
        ({"chunking.maxFiles": "many"}, "chunking.maxFiles"),
        ({"prompt.chunking.strategy": "summarize-all"}, "prompt.chunking.strategy"),
        ({"ai.enable.rag": "yes please"}, "ai.enable.rag"),
        ({"no.such.key": 1}, "no.such.key"),
        ({"solr.vector.field": "vector_1536"}, "solr.vector.field"),
        ({"ai.embeddings.model": "bge-small-en-v1.5"}, "ai.embeddings.model"),  # other vectors
        ({"hybrid.fusion": "magic"}, "hybrid.fusion"),
        ({"solr.embeddings.mode": "solr"}, "solr.embeddings.mode"),  # VectorMain: no plugin
        ({"solr.embeddings.mode": "gpu"}, "solr.embeddings.mode"),
        ({"hybrid.candidates": 100_000}, "hybrid.candidates"),  # bounded work per question
        ({"llm.model": "ok", "llm.maxTokens": -1}, "llm.maxTokens"),
    ],
)
def test_an_invalid_change_is_422_naming_the_key_and_the_file_is_untouched(
    admin, change: dict[str, object], named: str
) -> None:
    client, path = admin
    before = path.read_bytes()
    response = client.patch("/admin/config", headers=ADMIN, json=change)
    assert response.status_code == 422, response.text
    content = response.json()["content"]
    assert content["label"] == "adminInvalidConfig"
    assert named in content["reason"]
    assert path.read_bytes() == before
    assert values(client)["llm.model"] == "test-model"


def test_put_changes_like_patch(admin) -> None:
    client, path = admin
    response = client.put("/admin/config", headers=ADMIN, json={"llm.model": "put-model"})
    assert response.status_code == 200
    assert parse_properties(path.read_text(encoding="utf-8"))["llm.model"] == "put-model"


def test_a_change_based_on_an_old_version_is_refused(admin) -> None:
    client, path = admin
    version = client.get("/admin/config", headers=ADMIN).json()["version"]
    first = client.patch(
        "/admin/config", headers={**ADMIN, "If-Match": version}, json={"llm.model": "first"}
    )
    assert first.status_code == 200
    before = path.read_bytes()
    stale = client.patch(
        "/admin/config", headers={**ADMIN, "If-Match": version}, json={"llm.model": "second"}
    )
    assert stale.status_code == 409
    assert stale.json()["content"]["label"] == "adminConflict"
    assert path.read_bytes() == before


TWENTY_CHANGES = {
    "llm.model": "m20",
    "llm.temperature": 0.5,
    "llm.maxTokens": 321,
    "llm.retries": 3,
    "llm.timeout.connect": 4,
    "llm.timeout.read": 60,
    "chunking.chunk.size": 2500,
    "chunking.maxFiles": 4,
    "rag.operator": "AND",
    "prompt.max.request.size": 30000,
    "prompt.map.concurrency": 3,
    "chat.memory.enabled": True,
    "chat.memory.history.size": 8,
    "chat.query.rewriting.enabled": True,
    "solr.topK": 7,
    "hybrid.rrf.k": 50,
    "hybrid.weight.bm25": 0.8,
    "vector.chunk.size": 900,
    "solr.timeout.read": 20,
    "request.timeout": 200,
}


def test_twenty_concurrent_changes_are_all_applied(admin) -> None:
    client, path = admin
    statuses: list[int] = []
    start = threading.Barrier(len(TWENTY_CHANGES))

    def change(key: str, value: object) -> None:
        start.wait()
        statuses.append(client.patch("/admin/config", headers=ADMIN, json={key: value}).status_code)

    threads = [threading.Thread(target=change, args=item) for item in TWENTY_CHANGES.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert statuses == [200] * 20
    shown = values(client)
    written = parse_properties(path.read_text(encoding="utf-8"))
    for key, value in TWENTY_CHANGES.items():
        assert shown[key] == value, key
        assert key in written, key
    assert "# Our RAG settings: keep this comment" in path.read_text(encoding="utf-8")


def test_a_token_can_be_set_but_never_read_and_is_masked_in_the_log(
    admin, llm: LLMScript, caplog: pytest.LogCaptureFixture
) -> None:
    client, _ = admin
    with caplog.at_level(logging.INFO):
        response = client.patch("/admin/config", headers=ADMIN, json={"ai.api.token": "sk-new-1"})
        kept = client.patch("/admin/config", headers=ADMIN, json={"ai.api.token": "***"})
    assert response.status_code == kept.status_code == 200
    assert "sk-new-1" not in response.text
    assert "sk-new-1" not in caplog.text and SECRET not in caplog.text
    assert "configuration changed: ai.api.token" in caplog.text
    client.post("/ai/rag", json={"query": "lighthouse"})
    assert llm.requests[-1].headers["authorization"] == "Bearer sk-new-1"


@pytest.mark.parametrize(
    ("key", "value"),
    [("ai.api.token", "sk-X\r\nX-Injected: 1"), ("rerank.token", "sk-\u0007bell"),
     ("ai.embeddings.token", "sk-\nline")],
)  # fmt: skip
def test_a_secret_no_client_could_send_is_refused_without_being_shown(
    admin, key: str, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A token with a line break was written, then every question failed naming the LLM's
    endpoint; now it is a 422 naming the key, and the value is in no answer or log line."""
    client, path = admin
    before = path.read_bytes()
    with caplog.at_level(logging.INFO):
        response = client.patch("/admin/config", headers=ADMIN, json={key: value})
    assert response.status_code == 422, response.text
    reason = response.json()["content"]["reason"]
    assert key in reason and "control character" in reason, reason
    assert reason.startswith(f"{path.name}: invalid value(s)"), reason  # was "None: ..."
    secret = value.split("-")[-1][:4] if "-" in value else value
    assert secret not in response.text and secret not in caplog.text
    assert path.read_bytes() == before


def test_every_change_is_logged_old_to_new(admin, caplog: pytest.LogCaptureFixture) -> None:
    client, _ = admin
    with caplog.at_level(logging.INFO):
        client.patch("/admin/config", headers=ADMIN, json={"llm.model": "logged-model"})
    assert "llm.model: 'test-model' -> 'logged-model'" in caplog.text


def test_a_key_set_by_the_environment_is_refused(
    make_client: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLR_RAG_LLM_MODEL", "from-env")
    client = make_client()
    item = next(
        i
        for i in client.get("/admin/config", headers=ADMIN).json()["settings"]
        if i["key"] == "llm.model"
    )
    assert item["environment"] == "SOLR_RAG_LLM_MODEL"
    response = client.patch("/admin/config", headers=ADMIN, json={"llm.model": "x"})
    assert response.status_code == 422
    assert "SOLR_RAG_LLM_MODEL" in response.json()["content"]["reason"]


def test_an_admin_session_cannot_open_the_server_s_folders_to_sync(admin) -> None:
    """Issue 81, finding 7: jobs.sync.folders through the admin API made any file of the host
    indexable as a public document; like the TLS files' paths, it is read-only there, and
    the refusal says where it is set."""
    client, path = admin
    before = path.read_bytes()
    response = client.patch("/admin/config", headers=ADMIN, json={"jobs.sync.folders": "/etc"})
    assert response.status_code == 422, response.text
    content = response.json()["content"]
    assert content["label"] == "adminInvalidConfig"
    assert "jobs.sync.folders" in content["reason"] and "read-only" in content["reason"]
    assert "SOLR_RAG_JOBS_SYNC_FOLDERS" in content["reason"]  # the fix, named
    assert path.read_bytes() == before
    keys = {i["key"]: i for i in client.get("/admin/config", headers=ADMIN).json()["settings"]}
    assert keys["jobs.sync.folders"]["read_only"] is True


def test_a_tokenizer_file_is_loaded_once_off_the_event_loop_whatever_its_name(
    admin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 81, finding 7: a tokenizer.json named in an edit was loaded on the event loop
    (a 65 MB one held /health/live for 8 s), and again under another name of the same file
    (./), never let go. It is loaded in a worker thread, once per file (its device, inode,
    size and time), and one no longer named is let go."""
    loads: list[tuple[str, bool]] = []

    class Counted(tokens.TokenizerFile):
        def __init__(self, path: Path, text: str) -> None:
            try:
                asyncio.get_running_loop()
                on_the_loop = True
            except RuntimeError:
                on_the_loop = False
            loads.append((path.name, on_the_loop))
            super().__init__(path, text)

    monkeypatch.setattr(tokens, "TokenizerFile", Counted)
    client, _ = admin
    for name in ("first", "second", "third"):
        tokenizer = Tokenizer(WordLevel({"[UNK]": 0, name: 1}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = Whitespace()
        tokenizer.save(str(tmp_path / f"{name}.json"))
    for named in ["first.json", "./first.json", "sub/../first.json", "second.json",
                  "third.json", "first.json"]:  # fmt: skip
        (tmp_path / "sub").mkdir(exist_ok=True)
        change = {"llm.tokenizer": f"{tmp_path}/{named}"}
        response = client.patch("/admin/config", headers=ADMIN, json=change)
        assert response.status_code == 200, response.text
    # the same file under three names: read once; first.json let go once two others came
    assert loads == [("first.json", False), ("second.json", False), ("third.json", False),
                     ("first.json", False)]  # fmt: skip
    health = client.get("/health", headers=ADMIN).json()
    assert health["checks"]["llm"]["tokenizer"].endswith("first.json")


def test_test_connection_reports_each_service(admin) -> None:
    client, _ = admin
    report = client.post("/admin/test-connection", headers=ADMIN).json()
    assert report["llm"]["status"] == "up"
    assert report["llm"]["model"] == "test-model is served"
    assert report["embeddings"]["status"] == "up"
    assert report["solr:FileShare"]["status"] == "up"
    assert report["solr:VectorMain"]["status"] == "up"


# -- API keys on the public endpoints ---------------------------------------------------------


def test_public_endpoints_can_require_an_api_key(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"api.keys": "key-one, key-two"})
    body = {"query": "lighthouse"}
    missing = client.post("/ai/rag", json=body)
    assert missing.status_code == 401
    assert missing.json()["content"]["label"] == "ragUnauthorized"
    assert "key-one" not in missing.text
    assert client.post("/ai/rag", json=body, headers={"X-API-Key": "wrong"}).status_code == 401
    ok = client.post("/ai/rag", json=body, headers={"Authorization": "Bearer key-two"})
    assert ok.status_code == 200
    assert client.post("/ai/rag", json=body, headers={"X-API-Key": "key-one"}).status_code == 200
    chat = client.post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert chat.status_code == 401
    assert chat.json()["error"]["code"] == "Unauthorized"
    assert client.get("/health/live").status_code == 200  # operations stay open

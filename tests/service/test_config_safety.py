"""Configuration edits cannot be smuggled or break the service (issue 14, items 5-7): every
value round-trips to itself and adds no key, null means the default, every number is bounded,
a value that would stop the next start is refused, and a token stays with its endpoint."""

from __future__ import annotations

import os
import threading
from functools import partial
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from service.api.admin import _keep_tokens_with_their_endpoints
from service.config import ConfigStore
from service.config.catalog import catalog
from service.config.custom_tools import FILE_NAME as CUSTOM_TOOLS
from service.config.properties import parse_properties, with_values
from service.config.settings import secret_destinations
from service.errors import InvalidConfigChange
from testing.llm_server import LLMScript
from testing.servers import dead_address
from testing.service import ADMIN_TOKEN, ClientFactory

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FILE = "# comment\nai.enable.rag=true\ncors.allowed.origins=\nllm.model=m\n"
ANY_CHARACTER = st.characters(codec=None, categories=None)  # surrogates and controls included


@settings(max_examples=500, deadline=None)
@given(value=st.text(alphabet=ANY_CHARACTER, max_size=60))
def test_any_value_written_reads_back_as_itself_and_adds_no_key(value: str) -> None:
    written = with_values(FILE, {"cors.allowed.origins": value})
    read = parse_properties(written)
    assert read["cors.allowed.origins"] == value
    assert set(read) == {"ai.enable.rag", "cors.allowed.origins", "llm.model"}
    assert read["llm.model"] == "m"
    for separator in ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"):
        assert separator not in written  # no reader splits this file where we did not


@settings(max_examples=200, deadline=None)
@given(value=st.text(alphabet=ANY_CHARACTER, max_size=40))
def test_a_value_appended_as_a_new_key_round_trips_too(value: str) -> None:
    read = parse_properties(with_values(FILE, {"api.keys": value}))
    assert read["api.keys"] == value
    assert len(read) == 4


def values(client: TestClient) -> dict[str, object]:
    body = client.get("/admin/config", headers=ADMIN).json()
    return {item["key"]: item["value"] for item in body["settings"]}


def test_a_line_separator_cannot_smuggle_a_key(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"security.enabled": True})
    smuggled = "https://a.example\u2028security.enabled=false\u0085chat.memory.enabled=true"
    response = client.patch("/admin/config", json={"cors.allowed.origins": smuggled}, headers=ADMIN)
    assert response.status_code == 200, response.text
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    reread = parse_properties(runtime.config.path.read_text(encoding="utf-8"))
    assert reread["cors.allowed.origins"] == smuggled
    assert reread["security.enabled"] == "true"
    assert "chat.memory.enabled" not in reread
    assert values(client)["security.enabled"] is True


EDITABLE = [
    info
    for info in catalog()
    if not info.read_only and info.key not in ("security.enabled", "ai.enable.rag")
]


# solr.url's default (http://127.0.0.1:8983/solr) names an address this test does not own: a
# Solr may answer there (`make run` beside the suite) or not. It is put back last, and either
# outcome is checked for what it must be: the default accepted and shown, or refused naming it.
ADDRESS_OUTSIDE_THE_TEST = "solr.url"


def test_null_puts_every_key_back_to_its_default(make_client: ClientFactory) -> None:
    client = make_client()
    for info in EDITABLE:
        if info.key == ADDRESS_OUTSIDE_THE_TEST:
            continue
        response = client.patch("/admin/config", json={info.key: None}, headers=ADMIN)
        assert response.status_code == 200, (info.key, response.text)
        shown = {item["key"]: item for item in response.json()["settings"]}[info.key]
        assert shown["value"] == info.default, info.key
    # the defaults point the LLM at api.openai.com, unreachable here: a clear 503, no crash
    assert client.post("/ai/rag", json={"query": "lighthouse"}).status_code == 503

    default = next(info.default for info in EDITABLE if info.key == ADDRESS_OUTSIDE_THE_TEST)
    response = client.patch("/admin/config", json={ADDRESS_OUTSIDE_THE_TEST: None}, headers=ADMIN)
    if response.status_code == 200:  # a Solr with our collections answers at the default
        shown = {item["key"]: item["value"] for item in response.json()["settings"]}
        assert shown[ADDRESS_OUTSIDE_THE_TEST] == default
    else:
        assert response.status_code == 422, response.text
        reason = response.json()["content"]["reason"]
        assert ADDRESS_OUTSIDE_THE_TEST in reason and default in reason, reason


def test_a_solr_url_where_no_solr_answers_is_refused(make_client: ClientFactory) -> None:
    client = make_client()
    path = client.app.state.runtime.config.path  # type: ignore[attr-defined]
    before = path.read_bytes()
    with dead_address() as address:  # a port this test holds, on which nothing listens
        dead = f"http://{address}/solr"
        response = client.patch("/admin/config", json={"solr.url": dead}, headers=ADMIN)
    assert response.status_code == 422, response.text
    reason = response.json()["content"]["reason"]
    assert "solr.url" in reason and dead in reason, reason
    assert path.read_bytes() == before


NUMERIC = [info for info in catalog() if info.kind in ("integer", "number")]


def test_every_numeric_key_has_an_upper_bound() -> None:
    assert [info.key for info in NUMERIC if info.maximum is None] == []


@pytest.mark.parametrize("info", NUMERIC, ids=[info.key for info in NUMERIC])
def test_absurd_numbers_are_refused_and_nothing_is_written(
    make_client: ClientFactory, info
) -> None:
    client = make_client()
    path = client.app.state.runtime.config.path  # type: ignore[attr-defined]
    before = path.read_bytes()
    for absurd in ("1e400", "inf", "nan", "-1e400", str(10**30)):
        response = client.patch("/admin/config", json={info.key: absurd}, headers=ADMIN)
        assert response.status_code == 422, (info.key, absurd, response.text)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"prompt.templates.dir": ""}, "prompt.templates.dir"),
        ({"prompt.templates.dir": "/nonexistent/prompts"}, "prompt.templates.dir"),
        ({"solr.collection.documents": "NoSuchCollection"}, "NoSuchCollection"),
        ({"security.enabled": True, "security.identity": "jwt"}, "security.jwt.key"),
    ],
)
def test_a_value_that_would_stop_the_next_start_is_refused(
    make_client: ClientFactory, change: dict, named: str
) -> None:
    client = make_client()
    path = client.app.state.runtime.config.path  # type: ignore[attr-defined]
    before = path.read_bytes()
    response = client.patch("/admin/config", json=change, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert named in response.json()["content"]["reason"]
    assert path.read_bytes() == before


# every secret sent somewhere, read from the settings themselves: a new one cannot be forgotten
# (each key deciding where a secret goes: Solr's login has three, issue 66)
SENT_SECRETS = [
    (endpoint, token)
    for token, endpoints in secret_destinations().items()
    for endpoint in endpoints
]


def test_every_secret_says_where_it_is_sent() -> None:
    secrets = {info.key for info in catalog() if info.kind == "secret"}
    assert secrets == set(secret_destinations())
    assert {token for _, token in SENT_SECRETS} >= {"ai.api.token", "rerank.token"}
    assert {endpoint for endpoint, token in SENT_SECRETS if token == "solr.auth.password"} == {
        "solr.url",
        "solr.zk.hosts",
        "solr.nodes.discover",
    }
    known = {info.key for info in catalog()}
    assert all(endpoint in known for endpoint, _ in SENT_SECRETS)


# what a secret needs beside it to be valid (a Solr login: its user; ZooKeeper's: its hosts),
# and an address of its endpoint's kind; Solr's layout is not checked at the attacker's address
COMPANIONS: dict[str, dict[str, object]] = {
    "solr.auth.password": {"solr.auth.user": "rag", "solr.startup.check": False},
    "solr.auth.token": {"solr.startup.check": False},
    "solr.zk.digest.password": {
        "solr.zk.digest.user": "reader",
        "solr.zk.hosts": "127.0.0.1:2181",
        "solr.startup.check": False,
    },
}
ADDRESSES = {
    "solr.zk.hosts": ("attacker.example:2181", "other.example:2181"),
    "solr.nodes.discover": (True, False),  # on: the nodes the cluster names are called too
}
STARTS = {"solr.nodes.discover": {"solr.nodes.discover": False}}  # off, so that on is new
USERS = {"solr.auth.password": "solr.auth.user", "solr.zk.digest.password": "solr.zk.digest.user"}


@pytest.mark.parametrize(("endpoint", "token"), SENT_SECRETS)
def test_a_stored_token_never_follows_a_changed_endpoint(
    make_client: ClientFactory, endpoint: str, token: str
) -> None:
    starts = {token: "sk-stored-secret", **COMPANIONS.get(token, {}), **STARTS.get(endpoint, {})}
    client = make_client(starts)
    attacker, other = ADDRESSES.get(endpoint, ("https://attacker.example/v1/",
                                               "https://other.example/v1/"))  # fmt: skip
    moved = {endpoint: attacker}
    refused = client.patch("/admin/config", json={**moved, token: "***"}, headers=ADMIN)
    assert refused.status_code == 422, refused.text
    assert token in refused.json()["content"]["reason"]
    assert client.patch("/admin/config", json=moved, headers=ADMIN).status_code == 422
    assert values(client)[token] == "***"
    user = {USERS[token]: None} if token in USERS else {}  # a login's user goes with it
    cleared = client.patch("/admin/config", json={**moved, token: None, **user}, headers=ADMIN)
    assert cleared.status_code == 200, cleared.text
    assert values(client)[token] == ""
    user = {USERS[token]: "rag"} if token in USERS else {}
    given = client.patch(
        "/admin/config", json={endpoint: other, token: "sk-new", **user}, headers=ADMIN
    )
    assert given.status_code == 200, given.text
    assert values(client)[token] == "***"


def test_a_token_the_environment_gives_never_follows_an_admin_edit(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ai.api.token read from SOLR_RAG_AI_API_TOKEN_FILE: the admin API names that variable
    as the key's source and refuses to write the key (the secret would land in rag.properties
    in clear, and not be used); moving the endpoint is refused too, the token rotated in its
    file meanwhile or not: only a change that names the token gives it."""
    secret = tmp_path / "llm.token"
    secret.write_text("sk-from-a-file")
    monkeypatch.setenv("SOLR_RAG_AI_API_TOKEN_FILE", str(secret))
    client = make_client()
    shown = client.get("/admin/config", headers=ADMIN).json()["settings"]
    (key,) = [key for key in shown if key["key"] == "ai.api.token"]
    assert key["environment"] == "SOLR_RAG_AI_API_TOKEN_FILE" and key["value"] == "***"
    written = client.patch("/admin/config", json={"ai.api.token": "sk-typed"}, headers=ADMIN)
    assert written.status_code == 422, written.text
    assert "SOLR_RAG_AI_API_TOKEN_FILE" in written.json()["content"]["reason"]
    path = client.get("/admin/config", headers=ADMIN).json()["path"]
    assert "sk-typed" not in Path(path).read_text()
    moved = {"ai.api.endpoint": "https://attacker.example/v1/"}
    for rotated in ("sk-from-a-file", "sk-rotated", "sk-rotated-while-stale"):
        if rotated.endswith("stale"):  # a reload that fails: the settings in force stay old
            (Path(path).parent / CUSTOM_TOOLS).write_text("{not json")
        secret.write_text(rotated)
        refused = client.patch("/admin/config", json=moved, headers=ADMIN)
        assert refused.status_code == 422, refused.text
        assert "SOLR_RAG_AI_API_TOKEN_FILE" in refused.json()["content"]["reason"]
    (Path(path).parent / CUSTOM_TOOLS).unlink()
    left = client.patch("/admin/config", json={"llm.model": "other-model"}, headers=ADMIN)
    assert left.status_code == 200, left.text  # other keys are edited as ever


def test_fewer_addresses_need_no_token_again(make_client: ClientFactory, solr_url: str) -> None:
    """A node left out of solr.url, or discovery turned off, sends Solr's login to fewer of
    the places it already goes: no token again; a node added does need it."""
    login = {"solr.auth.password": "sk-stored-secret", **COMPANIONS["solr.auth.password"]}
    both = f"{solr_url},http://127.0.0.1:9/solr"
    client = make_client({**login, "solr.url": both})
    for fewer in ({"solr.url": solr_url}, {"solr.nodes.discover": False}):
        changed = client.patch("/admin/config", json=fewer, headers=ADMIN)
        assert changed.status_code == 200, changed.text
    for more in ({"solr.url": both}, {"solr.nodes.discover": True}):
        refused = client.patch("/admin/config", json=more, headers=ADMIN)
        assert refused.status_code == 422, refused.text
        assert "solr.auth.password" in refused.json()["content"]["reason"]


def test_an_address_is_new_to_the_file_as_it_is_not_only_to_the_settings_in_force(
    make_client: ClientFactory, tmp_path: Path
) -> None:
    """An operator moved the endpoint and rotated its token in rag.properties, and the reload
    failed (a broken tools file beside it): the settings in force still name the old
    endpoint. Setting the old endpoint back would send the new token there: refused."""
    client = make_client({"ai.api.token": "sk-first", "ai.api.endpoint": "https://old.example/v1/"})
    path = Path(client.get("/admin/config", headers=ADMIN).json()["path"])
    (path.parent / CUSTOM_TOOLS).write_text("{not json")
    text = path.read_text().replace("https://old.example/v1/", "https://new.example/v1/")
    path.write_text(text.replace("sk-first", "sk-rotated"))
    assert values(client)["ai.api.endpoint"] == "https://old.example/v1/"  # still in force
    back = client.patch(
        "/admin/config", json={"ai.api.endpoint": "https://old.example/v1/"}, headers=ADMIN
    )
    assert back.status_code == 422, back.status_code
    assert "sk-rotated" in path.read_text() and "new.example" in path.read_text()
    (path.parent / CUSTOM_TOOLS).unlink()


def test_a_token_saved_while_a_change_was_checked_is_checked_again_at_the_write(
    make_client: ClientFactory,
) -> None:
    """The check of a change and its write are apart (Solr asked whether the service could
    start with it, in between): a token saved meanwhile is checked again under the file's
    lock, on the file as it is then, and the move refused."""
    client = make_client()
    runtime = client.app.state.runtime
    moved = {"ai.api.endpoint": "https://attacker.example/v1/"}
    keep = partial(_keep_tokens_with_their_endpoints, runtime.config, runtime.settings(), moved)
    keep(runtime.config.as_is(), runtime.config.preview(moved))  # no token yet: no objection
    saved = client.patch("/admin/config", json={"ai.api.token": "sk-real"}, headers=ADMIN)
    assert saved.status_code == 200, saved.text
    with pytest.raises(InvalidConfigChange, match=r"ai\.api\.token"):
        runtime.config.update(moved, check=keep)
    assert values(client)["ai.api.endpoint"] != moved["ai.api.endpoint"]


def test_a_check_that_reads_the_settings_in_force_cannot_lock_the_store(tmp_path: Path) -> None:
    """The check runs with the store's lock held; the file changed meanwhile (another
    worker's edit, a rotated secret), a check reading the settings in force reloads them
    under that lock: it must not wait on itself (every later request would wait too)."""
    path = tmp_path / "rag.properties"
    path.write_text("llm.model=first\n")
    store = ConfigStore(path, env={})
    path.write_text("llm.model=second\n")
    os.utime(path, ns=(1, 1))  # seen as changed, whatever the clock's grain
    seen: list[str] = []
    done = threading.Thread(
        target=store.update,
        args=({"llm.temperature": "0.5"},),
        kwargs={"check": lambda as_is, after: seen.append(store.current().llm.model)},
        daemon=True,
    )
    done.start()
    done.join(timeout=60)
    assert not done.is_alive(), "update waits on its own lock"
    assert seen == ["second"] and store.current().llm.temperature == 0.5


def test_a_zookeeper_chroot_dropped_or_changed_needs_the_token_again(
    make_client: ClientFactory,
) -> None:
    """The chroot ends a host list ("zk1:2181,zk2:2181/solr") and moves where every host
    is read: a list without it, or with another, sends the digest login elsewhere."""
    login = {"solr.zk.digest.password": "sk-stored-secret", **COMPANIONS["solr.zk.digest.password"]}
    client = make_client({**login, "solr.zk.hosts": "127.0.0.1:2181,127.0.0.2:2181/solr"})
    for moved in ("127.0.0.1:2181", "127.0.0.1:2181,127.0.0.2:2181/other"):
        refused = client.patch("/admin/config", json={"solr.zk.hosts": moved}, headers=ADMIN)
        assert refused.status_code == 422, refused.text
        assert "solr.zk.digest.password" in refused.json()["content"]["reason"]
    fewer = client.patch(
        "/admin/config", json={"solr.zk.hosts": "127.0.0.1:2181/solr"}, headers=ADMIN
    )
    assert fewer.status_code == 200, fewer.text


@pytest.mark.parametrize("with_file", [False, True])
def test_a_variable_set_empty_is_the_keys_source_too(
    make_client: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_file: bool
) -> None:
    """docker-compose.yml sets SOLR_RAG_AI_API_TOKEN: ${AI_API_TOKEN:-}, empty when unset:
    the token is blank by the environment, so the admin API does not write one (it would sit
    in rag.properties in clear, unused); a _FILE beside the empty variable gives the token."""
    monkeypatch.setenv("SOLR_RAG_AI_API_TOKEN", "")
    secret = tmp_path / "llm.token"
    secret.write_text("sk-from-a-file")
    if with_file:
        monkeypatch.setenv("SOLR_RAG_AI_API_TOKEN_FILE", str(secret))
    client = make_client()
    runtime = client.app.state.runtime
    variable = "SOLR_RAG_AI_API_TOKEN" + ("_FILE" if with_file else "")
    shown = client.get("/admin/config", headers=ADMIN).json()["settings"]
    assert [k["environment"] for k in shown if k["key"] == "ai.api.token"] == [variable]
    in_force = runtime.settings().llm.token.get_secret_value()
    assert in_force == ("sk-from-a-file" if with_file else "")
    written = client.patch("/admin/config", json={"ai.api.token": "sk-typed"}, headers=ADMIN)
    assert written.status_code == 422, written.text
    assert variable in written.json()["content"]["reason"]


def test_an_optional_number_is_a_number_that_may_be_left_blank(make_client: ClientFactory) -> None:
    """rerank.min.score (`float | None`): the admin page shows a number field that may stay
    empty; null (blank) is its value, sent back unchanged it is no change, and a number sets it."""
    (info,) = [info for info in catalog() if info.key == "rerank.min.score"]
    assert info.kind == "number" and info.optional and info.maximum == 1000
    client = make_client()
    shown = client.get("/admin/config", headers=ADMIN).json()["settings"]
    (key,) = [key for key in shown if key["key"] == "rerank.min.score"]
    assert key["type"] == "number" and key["optional"] is True and key["value"] is None
    for sent, kept in ((-3, -3.0), (None, None)):
        changed = client.patch("/admin/config", json={"rerank.min.score": sent}, headers=ADMIN)
        assert changed.status_code == 200, changed.text
        shown = changed.json()["settings"]
        assert [k["value"] for k in shown if k["key"] == "rerank.min.score"] == [kept]

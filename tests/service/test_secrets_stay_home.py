"""Issue 66: Solr's login never follows an address an admin session picks, and a login pasted
whole into a user key is never echoed.

1. `PATCH /admin/config {"solr.zk.hosts": "<their host>"}` was accepted without the password,
   and the layout check then called the node that ZooKeeper names with `Authorization: Basic
   <the real login>`. Shown for real: the attacker's ZooKeeper is a chroot of the test Solr's
   own ZooKeeper whose /live_nodes names the attacker's "node", an HTTP server recording what
   it is sent.
2. `solr.auth.user=user:password` was echoed in the reload's ERROR line and in the admin
   API's 422.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from kazoo.client import KazooClient

from service.config.store import ConfigStore
from testing.service import ADMIN_TOKEN, ClientFactory, write_properties

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PASSWORD = "stored-Pa55-6d1a"
LOGIN = {"solr.auth.user": "solr-rag", "solr.auth.password": PASSWORD}


class Recorder(ThreadingHTTPServer):
    """The attacker's node: records the Authorization header of every request."""

    def __init__(self) -> None:
        self.seen: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(handler) -> None:
                self.seen.append(handler.headers.get("Authorization", ""))
                body = b'{"responseHeader":{"status":0}}'
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            do_POST = do_GET

            def log_message(handler, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def attacker(solr_url: str) -> Iterator[tuple[str, Recorder]]:
    """(solr.zk.hosts of the attacker's ZooKeeper, the node it names)."""
    recorder = Recorder()
    thread = threading.Thread(target=recorder.serve_forever, daemon=True)
    thread.start()
    system = httpx.get(f"{solr_url}/admin/info/system", params={"wt": "json"}, timeout=30)
    zk_host = system.json()["zkHost"]
    chroot = f"/attacker-{uuid.uuid4().hex[:8]}"
    zookeeper = KazooClient(hosts=zk_host)
    zookeeper.start(timeout=30)
    try:
        node = f"127.0.0.1:{recorder.server_address[1]}_solr"
        zookeeper.ensure_path(f"{chroot}/live_nodes/{node}")
        yield f"{zk_host}{chroot}", recorder
    finally:
        zookeeper.delete(chroot, recursive=True)
        zookeeper.stop()
        recorder.shutdown()
        recorder.server_close()


def test_pointing_zookeeper_elsewhere_needs_the_solr_password_again(
    make_client: ClientFactory, attacker: tuple[str, Recorder]
) -> None:
    their_zookeeper, their_node = attacker
    client = make_client(LOGIN)
    path = client.app.state.runtime.config.path  # type: ignore[attr-defined]
    before = path.read_bytes()

    refused = client.patch("/admin/config", json={"solr.zk.hosts": their_zookeeper}, headers=ADMIN)
    assert their_node.seen == []  # before issue 66: three requests with the Basic login
    assert refused.status_code == 422, refused.text
    reason = refused.json()["content"]["reason"]
    assert "solr.zk.hosts" in reason and "solr.auth.password" in reason
    assert path.read_bytes() == before
    assert PASSWORD not in refused.text

    # solr.nodes.discover decides where the login goes too: off sends it to fewer places
    # (no password needed), on again to nodes the cluster names (needed)
    fewer = client.patch("/admin/config", json={"solr.nodes.discover": False}, headers=ADMIN)
    assert fewer.status_code == 200, fewer.status_code
    discover = client.patch("/admin/config", json={"solr.nodes.discover": True}, headers=ADMIN)
    assert discover.status_code == 422, discover.status_code
    assert "solr.nodes.discover" in discover.json()["content"]["reason"]


@pytest.mark.parametrize("key", ["solr.auth.user", "solr.zk.digest.user"])
def test_a_login_pasted_into_a_user_key_is_never_echoed_by_the_admin_api(
    make_client: ClientFactory, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client()
    pasted = {key: f"solr-rag:{PASSWORD}"}
    response = client.patch("/admin/config", json=pasted, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert f"{key} = 'solr-rag:***'" in response.json()["content"]["reason"]
    assert PASSWORD not in response.text
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize("key", ["solr.auth.user", "solr.zk.digest.user"])
def test_a_login_pasted_into_a_user_key_is_never_echoed_by_the_reload_log(
    tmp_path: Path, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_properties(tmp_path / "rag.properties", {"llm.model": "m"})
    store = ConfigStore(path, env={})
    write_properties(path, {"llm.model": "m", key: f"solr-rag:{PASSWORD}"})
    with caplog.at_level(logging.ERROR, logger="service.config.store"):
        assert store.current().llm.model == "m"  # the previous configuration is kept
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "configuration not reloaded" in line and f"{key} = 'solr-rag:***'" in line
    assert PASSWORD not in caplog.text

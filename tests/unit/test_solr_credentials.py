"""`solr-rag solr-credentials`: Solr's security.json and its users' passwords, made once (what
the compose stack's first start runs); the secured-Solr tests run Solr on what it writes."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from service.cli import main as cli


def matches(credential: str, password: str) -> bool:
    """Whether Solr's BasicAuthPlugin would take `password` for this credential."""
    digest, salt = (base64.b64decode(part) for part in credential.split())
    twice = hashlib.sha256(hashlib.sha256(salt + password.encode()).digest()).digest()
    return twice == digest


def test_credentials_are_made_once_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    assert cli(["solr-credentials", str(folder)]) == 0
    security = json.loads((folder / "security.json").read_text())
    admin = (folder / "solr-admin.password").read_text().strip()
    service = (folder / "solr-rag.password").read_text().strip()
    assert len(admin) >= 24 and len(service) >= 24 and admin != service
    authentication = security["authentication"]
    assert authentication["class"] == "solr.BasicAuthPlugin" and authentication["blockUnknown"]
    credentials = authentication["credentials"]
    assert matches(credentials["solr-admin"], admin)
    assert matches(credentials["solr-rag"], service)
    assert not matches(credentials["solr-rag"], admin)
    assert admin not in json.dumps(security) and service not in json.dumps(security)
    rules = {rule["name"]: rule["role"] for rule in security["authorization"]["permissions"]}
    assert "rag" in rules["read"] and "rag" in rules["update"]
    assert rules["all"] == ["admin"]  # the service's user may not administer Solr
    assert security["authorization"]["user-role"] == {"solr-admin": ["admin"], "solr-rag": ["rag"]}
    zookeeper = (folder / "zookeeper.properties").read_text()
    assert "zkDigestReadonlyUsername=zk-reader" in zookeeper
    assert (folder / "zk-reader.password").read_text().strip() in zookeeper

    before = {path.name: path.read_text() for path in folder.iterdir()}
    assert cli(["solr-credentials", str(folder)]) == 0  # a restart changes nothing
    assert {path.name: path.read_text() for path in folder.iterdir()} == before


def test_passwords_given_in_the_environment_are_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOLR_SERVICE_PASSWORD", "chosen-by-the-operator")
    monkeypatch.setenv("ZK_READER_PASSWORD", "a=b:c")
    assert cli(["solr-credentials", str(tmp_path)]) == 0
    security = json.loads((tmp_path / "security.json").read_text())
    assert matches(security["authentication"]["credentials"]["solr-rag"], "chosen-by-the-operator")
    assert "zkDigestReadonlyPassword=a\\=b\\:c\n" in (tmp_path / "zookeeper.properties").read_text()

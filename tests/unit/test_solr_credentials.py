"""`solr-rag solr-credentials`: Solr's security.json and its users' passwords, made once (what
the compose stack's first start runs); the secured-Solr tests run Solr on what it writes."""

from __future__ import annotations

import base64
import hashlib
import json
import os
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


def modes(folder: Path) -> dict[str, int]:
    return {path.name: path.stat().st_mode & 0o777 for path in folder.iterdir()}


def test_every_secret_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    """Issue 66: the files were 0644 (any user of the host or of a container mounting the
    volume could read Solr's admin password)."""
    folder = tmp_path / "secrets"
    assert cli(["solr-credentials", str(folder)]) == 0
    assert modes(folder) == {
        name: 0o600
        for name in (
            "security.json",
            "solr-admin.password",
            "solr-rag.password",
            "zk-admin.password",
            "zk-reader.password",
            "zookeeper.properties",
        )
    }
    assert folder.stat().st_mode & 0o777 == 0o700


def test_the_service_gets_a_folder_with_its_own_passwords_only(tmp_path: Path) -> None:
    """What the compose stack runs: Solr's secrets in one folder (one volume), the service's
    own (its Solr password, ZooKeeper's reader's) in another, the only one it mounts."""
    solr, service = tmp_path / "solr-secrets", tmp_path / "rag-secrets"
    run = ["solr-credentials", str(solr), "--service-folder", str(service)]
    assert cli(run) == 0
    assert set(modes(service)) == {"solr-rag.password", "zk-reader.password"}
    assert set(modes(solr)) == {
        "security.json",
        "solr-admin.password",
        "zk-admin.password",
        "zookeeper.properties",
    }
    assert set(modes(solr).values()) == set(modes(service).values()) == {0o600}
    security = json.loads((solr / "security.json").read_text())
    password = (service / "solr-rag.password").read_text().strip()
    assert matches(security["authentication"]["credentials"]["solr-rag"], password)
    reader = (service / "zk-reader.password").read_text().strip()
    assert f"zkDigestReadonlyPassword={reader}\n" in (solr / "zookeeper.properties").read_text()

    before = {path: path.read_text() for path in (*solr.iterdir(), *service.iterdir())}
    assert cli(run) == 0  # a restart changes nothing
    assert {path: path.read_text() for path in (*solr.iterdir(), *service.iterdir())} == before


def test_a_stack_made_by_an_older_version_is_tightened_and_keeps_its_passwords(
    tmp_path: Path,
) -> None:
    """The former layout: every file in one folder, 0644. The next start moves the service's
    passwords to its own folder (security.json keeps matching them) and makes every file 0600."""
    solr, service = tmp_path / "solr-secrets", tmp_path / "rag-secrets"
    assert cli(["solr-credentials", str(solr)]) == 0
    for path in solr.iterdir():
        path.chmod(0o644)
    password = (solr / "solr-rag.password").read_text()
    reader = (solr / "zk-reader.password").read_text()
    security = (solr / "security.json").read_text()
    assert cli(["solr-credentials", str(solr), "--service-folder", str(service)]) == 0
    assert (service / "solr-rag.password").read_text() == password
    assert (service / "zk-reader.password").read_text() == reader
    assert not (solr / "solr-rag.password").exists()
    assert not (solr / "zk-reader.password").exists()
    assert (solr / "security.json").read_text() == security
    assert set(modes(solr).values()) == set(modes(service).values()) == {0o600}


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to other users needs root")
def test_each_folder_is_given_to_the_user_that_reads_it(tmp_path: Path) -> None:
    """As root (the compose stack's credentials step): Solr's files to Solr's user, the
    service's to the service's, so each container reads its own and no other."""
    solr, service = tmp_path / "solr-secrets", tmp_path / "rag-secrets"
    run = ["solr-credentials", str(solr), "--owner=8983:8983"]
    assert cli([*run, f"--service-folder={service}", "--service-owner=10001:10001"]) == 0
    for folder, owner in ((solr, (8983, 8983)), (service, (10001, 10001))):
        for path in (folder, *folder.iterdir()):
            assert (path.stat().st_uid, path.stat().st_gid) == owner, path

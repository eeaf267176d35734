"""`solr-rag solr-credentials FOLDER`: the credentials of a Solr secured for this service, made
once: Solr's security.json (BasicAuthPlugin, anonymous requests refused; RuleBasedAuthorization
with an `admin` role that may do all and a `rag` role with what the service needs: Solr's read,
schema-read, config-read, collection-admin-read, ping and update permissions) and the two
users' passwords, each in a file of its own (FOLDER/solr-admin.password,
FOLDER/solr-rag.password) for the service (SOLR_RAG_SOLR_AUTH_PASSWORD_FILE) and Solr's
init to read. For a SolrCloud whose ZooKeeper data is under digest ACLs, the same for
ZooKeeper: FOLDER/zookeeper.properties, the file Solr's VMParamsZkCredentialsInjector reads
(-DzkDigestCredentialsFile: zk-admin may do all, zk-reader may read), and
FOLDER/zk-reader.password for the service (SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD_FILE). What the
compose stack runs on first start (docs/operations.md).

Passwords come from SOLR_ADMIN_PASSWORD, SOLR_SERVICE_PASSWORD, ZK_ADMIN_PASSWORD and
ZK_READER_PASSWORD when set, else are generated (32 random URL-safe characters); files
already there are kept, so a restart changes nothing.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from service.cli.common import Commands

ADMIN_USER = "solr-admin"
SERVICE_USER = "solr-rag"
# what answering needs of Solr (search, real-time get, the schema and config checks, the
# cluster's nodes), and what writing adds (ingestion, the answer cache, conversations)
READ_PERMISSIONS = ("read", "schema-read", "config-read", "collection-admin-read")
WRITE_PERMISSIONS = ("update",)


def add(commands: Commands) -> None:
    """solr-credentials."""
    what = "write a security.json and passwords for a Solr of this service's own, once"
    command = commands.add_parser(
        "solr-credentials", help=what, description=what[0].upper() + what[1:]
    )
    command.add_argument("folder", type=Path, help="where security.json and the passwords go")
    command.set_defaults(run=_write)


def password_hash(password: str, salt: bytes) -> str:
    """Solr's BasicAuthPlugin credential: base64(sha256(sha256(salt + password))), a space,
    base64(salt)."""
    once = hashlib.sha256(salt + password.encode()).digest()
    twice = hashlib.sha256(once).digest()
    return f"{base64.b64encode(twice).decode()} {base64.b64encode(salt).decode()}"


def security_document(
    users: Mapping[str, tuple[str, Sequence[str]]],
    *,
    readers: Sequence[str],
    writers: Sequence[str],
) -> dict[str, object]:
    """Solr's security.json: BasicAuth for `users` (name -> password, roles), anonymous
    requests refused; the `readers` roles may answer, the `writers` may also update, the
    `admin` role may do everything (the admin UI, the Collections API)."""
    reading = sorted({*readers, *writers, "admin"})
    permissions: list[dict[str, object]] = [
        {"name": name, "role": reading} for name in READ_PERMISSIONS
    ]
    permissions.append({"name": "ping", "collection": "*", "path": "/admin/ping", "role": reading})
    permissions += [
        {"name": name, "role": sorted({*writers, "admin"})} for name in WRITE_PERMISSIONS
    ]
    permissions.append({"name": "all", "role": ["admin"]})
    return {
        "authentication": {
            "class": "solr.BasicAuthPlugin",
            "blockUnknown": True,
            "forwardCredentials": False,
            "credentials": {
                name: password_hash(password, os.urandom(16))
                for name, (password, _) in users.items()
            },
        },
        "authorization": {
            "class": "solr.RuleBasedAuthorizationPlugin",
            "permissions": permissions,
            "user-role": {name: list(roles) for name, (_, roles) in users.items()},
        },
    }


def _password(folder: Path, user: str, variable: str) -> str:
    """The user's password: its file's, else the variable's (written there), else new."""
    path = folder / f"{user}.password"
    if path.is_file():
        return path.read_text(encoding="utf-8").strip()
    password = os.environ.get(variable, "").strip() or secrets.token_urlsafe(24)
    path.write_text(password + "\n", encoding="utf-8")
    return password


def _write(args: argparse.Namespace) -> int:
    folder: Path = args.folder
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "security.json"
    admin = _password(folder, ADMIN_USER, "SOLR_ADMIN_PASSWORD")
    service = _password(folder, SERVICE_USER, "SOLR_SERVICE_PASSWORD")
    zookeeper = folder / "zookeeper.properties"
    if not zookeeper.is_file():
        admin_zk = _password(folder, "zk-admin", "ZK_ADMIN_PASSWORD")
        reader_zk = _password(folder, "zk-reader", "ZK_READER_PASSWORD")
        lines = {
            "zkDigestUsername": "zk-admin",
            "zkDigestPassword": admin_zk,
            "zkDigestReadonlyUsername": "zk-reader",
            "zkDigestReadonlyPassword": reader_zk,
        }
        text = "".join(f"{key}={_escaped(value)}\n" for key, value in lines.items())
        zookeeper.write_text(text, encoding="utf-8")
    if target.is_file():
        print(f"{target} is there: kept", file=sys.stderr)
        return 0
    document = security_document(
        {ADMIN_USER: (admin, ["admin"]), SERVICE_USER: (service, ["rag"])},
        readers=["rag"],
        writers=["rag"],
    )
    written = target.with_suffix(".tmp")
    written.write_text(json.dumps(document, indent=2), encoding="utf-8")
    written.replace(target)
    print(f"wrote {target} (users {ADMIN_USER}, {SERVICE_USER})", file=sys.stderr)
    return 0


def _escaped(value: str) -> str:
    """A value as a Java properties file reads it back."""
    for special in ("\\", "=", ":", "#", "!"):
        value = value.replace(special, "\\" + special)
    return value

"""`solr-rag solr-credentials FOLDER`: the credentials of a Solr secured for this service, made
once: Solr's security.json (BasicAuthPlugin, anonymous requests refused; RuleBasedAuthorization
with an `admin` role that may do all and a `rag` role with what the service needs: Solr's read,
schema-read, config-read, collection-admin-read, ping and update permissions) and the two
users' passwords, each in a file of its own (FOLDER/solr-admin.password,
FOLDER/solr-rag.password) for Solr's init and the service (SOLR_RAG_SOLR_AUTH_PASSWORD_FILE)
to read. For a SolrCloud whose ZooKeeper data is under digest ACLs, the same for ZooKeeper:
FOLDER/zookeeper.properties, the file Solr's VMParamsZkCredentialsInjector reads
(-DzkDigestCredentialsFile: zk-admin may do all, zk-reader may read), and
FOLDER/zk-reader.password for the service (SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD_FILE). What the
compose stack runs on first start (docs/operations.md).

Least privilege: every file is written 0600 (the folder 0700). `--service-folder DIR` puts the
service's own passwords (solr-rag.password, zk-reader.password) there instead of FOLDER, so the
service is given DIR only and never sees Solr's admin or ZooKeeper's admin password;
`--owner UID[:GID]` and `--service-owner UID[:GID]` give FOLDER's and DIR's files to the users
that read them (the compose stack: Solr's 8983, the service's 10001). Files already there keep
their text and are given these modes and owners again (a stack made by an older version is
tightened on its next start); a service password found in FOLDER is moved to DIR.

The document itself is service.retrieval.solr_security's (the tests secure their Solr with
it too).

Passwords come from SOLR_ADMIN_PASSWORD, SOLR_SERVICE_PASSWORD, ZK_ADMIN_PASSWORD and
ZK_READER_PASSWORD when set, else are generated (32 random URL-safe characters); files
already there are kept, so a restart changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from service.cli.common import Commands
from service.retrieval.solr_security import security_document

ADMIN_USER = "solr-admin"
SERVICE_USER = "solr-rag"


def add(commands: Commands) -> None:
    """solr-credentials."""
    what = "write a security.json and passwords for a Solr of this service's own, once"
    command = commands.add_parser(
        "solr-credentials", help=what, description=what[0].upper() + what[1:]
    )
    command.add_argument("folder", type=Path, help="where security.json and the passwords go")
    command.add_argument(
        "--service-folder",
        type=Path,
        help="where the service's own passwords go (solr-rag.password, zk-reader.password), "
        "instead of FOLDER: the service is then given this folder only",
    )
    command.add_argument(
        "--owner", type=_owner, help="UID[:GID] that owns FOLDER's files (Solr's user)"
    )
    command.add_argument(
        "--service-owner",
        type=_owner,
        help="UID[:GID] that owns --service-folder's files (the service's user)",
    )
    command.set_defaults(run=_write)


def _owner(text: str) -> tuple[int, int]:
    user, _, group = text.partition(":")
    try:
        return int(user), int(group or user)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: UID or UID:GID, numbers") from None


@dataclass(frozen=True)
class _Place:
    """A folder of secrets and who may read them (None: whoever writes them)."""

    folder: Path
    owner: tuple[int, int] | None = None

    def make(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        if self.owner is not None:
            os.chown(self.folder, *self.owner)

    def protect_all(self) -> None:
        """Every file of the folder, made by an older version too, 0600 and its owner's."""
        for path in self.folder.iterdir():
            if path.is_file() and not path.is_symlink():
                self.protect(path)

    def protect(self, path: Path) -> None:
        """`path` readable by this place's owner only (0600)."""
        path.chmod(0o600)
        if self.owner is not None:
            os.chown(path, *self.owner)

    def write(self, name: str, text: str) -> Path:
        """A new file of this place, 0600 from its creation (never readable by others)."""
        path = self.folder / name
        written = path.with_name(f".{name}.tmp")
        written.unlink(missing_ok=True)
        descriptor = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
        self.protect(written)
        written.replace(path)
        return path


def _password(place: _Place, user: str, variable: str, *, formerly: Path | None = None) -> str:
    """The user's password: its file's (or its former file's, moved here), else the
    variable's (written there), else new."""
    path = place.folder / f"{user}.password"
    former = formerly / f"{user}.password" if formerly else None
    if not path.is_file() and former is not None and former.is_file():
        place.write(path.name, former.read_text(encoding="utf-8"))
        former.unlink()
    if path.is_file():
        place.protect(path)
        return path.read_text(encoding="utf-8").strip()
    password = os.environ.get(variable, "").strip() or secrets.token_urlsafe(24)
    place.write(path.name, password + "\n")
    return password


def _write(args: argparse.Namespace) -> int:
    solr = _Place(args.folder, args.owner)
    service, formerly = solr, None
    if args.service_folder and args.service_folder.resolve() != args.folder.resolve():
        service, formerly = _Place(args.service_folder, args.service_owner), args.folder
    solr.make()
    service.make()
    target = args.folder / "security.json"
    admin = _password(solr, ADMIN_USER, "SOLR_ADMIN_PASSWORD")
    service_password = _password(service, SERVICE_USER, "SOLR_SERVICE_PASSWORD", formerly=formerly)
    zookeeper = args.folder / "zookeeper.properties"
    if zookeeper.is_file():
        if formerly is not None and (formerly / "zk-reader.password").is_file():
            _password(service, "zk-reader", "ZK_READER_PASSWORD", formerly=formerly)  # moved
    else:
        reader_zk = _password(service, "zk-reader", "ZK_READER_PASSWORD", formerly=formerly)
        admin_zk = _password(solr, "zk-admin", "ZK_ADMIN_PASSWORD")
        lines = {
            "zkDigestUsername": "zk-admin",
            "zkDigestPassword": admin_zk,
            "zkDigestReadonlyUsername": "zk-reader",
            "zkDigestReadonlyPassword": reader_zk,
        }
        text = "".join(f"{key}={_escaped(value)}\n" for key, value in lines.items())
        solr.write(zookeeper.name, text)
    if target.is_file():
        for place in {solr, service}:
            place.protect_all()
        print(f"{target} is there: kept", file=sys.stderr)
        return 0
    document = security_document(
        {ADMIN_USER: (admin, ["admin"]), SERVICE_USER: (service_password, ["rag"])},
        readers=["rag"],
        writers=["rag"],
    )
    solr.write(target.name, json.dumps(document, indent=2))
    for place in {solr, service}:
        place.protect_all()
    print(f"wrote {target} (users {ADMIN_USER}, {SERVICE_USER})", file=sys.stderr)
    return 0


def _escaped(value: str) -> str:
    """A value as a Java properties file reads it back."""
    for special in ("\\", "=", ":", "#", "!"):
        value = value.replace(special, "\\" + special)
    return value

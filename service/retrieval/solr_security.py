"""Solr's security.json for a Solr secured for this service: BasicAuthPlugin users, anonymous
requests refused, and RuleBasedAuthorizationPlugin roles that give the service what it needs
of Solr and no more (service.retrieval.access names the same permissions when Solr refuses).
Written by `solr-rag solr-credentials` (service.cli.credentials); the tests secure their Solr
with the same document (testing.secured_solr).

    >>> security_document({"solr-rag": (password, ["rag"])}, readers=["rag"], writers=["rag"])
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping, Sequence

# what answering needs of Solr (search, real-time get, the schema and config checks, the
# cluster's nodes), and what writing adds (ingestion, the answer cache, conversations)
READ_PERMISSIONS = ("read", "schema-read", "config-read", "collection-admin-read")
WRITE_PERMISSIONS = ("update",)


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

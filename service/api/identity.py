"""Who is calling: the one `Caller` every way in (HTTP, Datafari 7's WebSocket, MCP, streams)
is given by the door (service.api.door), made here from the request's credentials.

- The API key (`api.keys`), when one is configured: none sent, or a wrong one, is a 401.
- The person: the `sub` of a verified JWT (`security.identity=jwt`, its key set), or the user
  the trusted proxy names in `security.user.header` (`security.identity=header`), whether or
  not document-level security is on (`security.enabled` decides the groups, not the person).
- The groups, for document-level security: from the header a trusted proxy sets, or from the
  verified JWT's groups claim.

What a caller owns (conversations, memories) belongs to the person when there is one, else to
the key; an address owns nothing (`Caller.owner` is then None).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import jwt
from starlette.requests import HTTPConnection

from service.api.auth import api_keys, bearer_token, matching_api_key
from service.config.settings import SecuritySettings, Settings
from service.errors import BadRequest, TechnicalError, Unauthorized
from service.retrieval import Scope
from service.retrieval.scope import EVERYTHING

GROUP = re.compile(r"^[\w.@:-]{1,128}$")
USER = re.compile(r"^[\w.@:+-]{1,256}$")
MAX_GROUPS = 200
MAX_SUBJECT = 200  # characters of a token's sub kept as they are (longer: its hash)


@dataclass(frozen=True)
class Caller:
    """One caller, as its credentials prove it: its key, the person, its groups' scope."""

    key: str | None  # "key:<hash>" of the API key it sent, when one matched
    person: str | None  # "sub:<JWT subject>" or "user:<the proxy's user>", when verified
    address: str
    scope: Scope
    expires: float | None = None  # when its identity token ends (epoch seconds)
    nameless: bool = False  # it sent a verified identity token that names nobody (no sub)

    @property
    def owner(self) -> str | None:
        """Whose conversations and memories its are: the person, else the key, with the
        groups it has (security on); None for an anonymous caller, and for a token that
        names nobody (it is not the key's), who own nothing."""
        who = None if self.nameless else self.person or self.key
        if who is None:
            return None
        groups = "" if self.scope.groups is None else ",".join(sorted(self.scope.groups))
        return f"{who}|{groups}"

    @property
    def name(self) -> str:
        """Whose share of the service (the per-caller cap): the person, else the key, else
        the address."""
        return self.person or self.key or "address:" + self.address


def identify(connection: HTTPConnection, settings: Settings) -> Caller:
    """The caller of this request or socket; Unauthorized when a key is required and missing
    or wrong, or its identity token does not verify; BadRequest when the proxy's headers are
    not what they must be."""
    security = settings.security
    key = matching_api_key(connection, security)
    if api_keys(security) and key is None:
        raise Unauthorized("missing or wrong API key (Authorization: Bearer or X-API-Key)")
    client = connection.client
    address = client.host if client else "unknown"
    key_name = "key:" + hashlib.sha256(key.encode()).hexdigest()[:16] if key else None
    if security.identity == "jwt":
        token = bearer_token(connection)
        if token and token == key:
            token = ""  # the API key in Authorization: no identity token
        verifying = security.enabled or bool(security.jwt_key.get_secret_value())
        claims = verified_claims(token, security) if token and verifying else {}
        person = _subject(claims)
        scope = EVERYTHING
        if security.enabled:
            groups = _groups_claim(claims, security)
            scope = groups_scope(groups, security, security.jwt_groups_claim)
        nameless = bool(claims) and person is None
        return Caller(key_name, person, address, scope, _expiry(claims), nameless)
    scope = EVERYTHING
    if security.enabled:
        raw = connection.headers.get(security.groups_header, "")
        scope = groups_scope(raw.split(","), security, security.groups_header)
    return Caller(key_name, _proxy_user(connection, security), address, scope)


def _subject(claims: dict[str, Any]) -> str | None:
    """The person a verified token names (its whole `sub`: a long one by its hash)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return None
    if len(subject) > MAX_SUBJECT:
        return "sub:#" + hashlib.sha256(subject.encode("utf-8", "replace")).hexdigest()
    return "sub:" + subject


def _expiry(claims: dict[str, Any]) -> float | None:
    """When a verified token ends (its `exp`, as the JWT library read it)."""
    expires = claims.get("exp")
    if isinstance(expires, bool):
        return None
    if isinstance(expires, int | float):
        return float(expires)
    if isinstance(expires, str):
        try:
            return float(int(expires))  # PyJWT reads a string of digits too
        except ValueError:
            return None
    return None


def _proxy_user(connection: HTTPConnection, security: SecuritySettings) -> str | None:
    """The user the trusted proxy names (security.user.header), if it is configured."""
    if not security.user_header:
        return None
    user = connection.headers.get(security.user_header, "").strip()
    if not user:
        return None
    if not USER.match(user):
        raise BadRequest(
            f"{security.user_header} must name one user (at most 256 letters, digits, . _ @ : + -)"
        )
    return "user:" + user


def groups_scope(groups: list[str], security: SecuritySettings, where: str) -> Scope:
    """What callers of these groups may see (security on); BadRequest naming `where` the
    groups came from when they are not group names."""
    if not security.enabled:
        return EVERYTHING
    unique = tuple(dict.fromkeys(group.strip() for group in groups if group.strip()))
    if len(unique) > MAX_GROUPS or not all(GROUP.match(group) for group in unique):
        raise BadRequest(
            f"{where} must list at most {MAX_GROUPS} group names "
            "(letters, digits, . _ @ : -), separated by commas"
        )
    return Scope(groups=unique, security=security.model)


def _groups_claim(claims: dict[str, Any], security: SecuritySettings) -> list[str]:
    """The verified token's groups claim (no token: no groups)."""
    groups = claims.get(security.jwt_groups_claim, [])
    if isinstance(groups, str):
        groups = groups.split(",")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise BadRequest(f"the token's {security.jwt_groups_claim} claim must list group names")
    return [group.strip() for group in groups]


def verified_claims(token: str, security: SecuritySettings) -> dict[str, Any]:
    """The claims of a JWT whose signature, expiry and (when configured) audience and issuer
    verify; Unauthorized otherwise."""
    key = security.jwt_key.get_secret_value()
    if not key:
        raise TechnicalError("security.identity is jwt but security.jwt.key is empty")
    algorithms = [a.strip() for a in security.jwt_algorithms.split(",")]
    try:
        return jwt.decode(
            token,
            key,
            algorithms=algorithms,
            audience=security.jwt_audience or None,
            issuer=security.jwt_issuer or None,
            options={"require": ["exp"], "verify_aud": bool(security.jwt_audience)},
        )
    except jwt.PyJWTError as error:
        raise Unauthorized(f"the identity token is not valid: {error}") from None

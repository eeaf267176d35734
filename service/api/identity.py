"""Who is calling: the one `Caller` every way in (HTTP, Datafari 7's WebSocket, MCP, streams)
is given by the door (service.api.door), made here from the request's credentials.

- The API key (`api.keys`), when one is configured: none sent, or a wrong one, is a 401.
- The person: the `sub` of a verified JWT (`security.identity=jwt`, its key set), or the user
  the trusted proxy names in `security.user.header` (`security.identity=header`), whether or
  not document-level security is on (`security.enabled` decides the groups, not the person).
- The groups, for document-level security: from the header a trusted proxy sets, or from the
  verified JWT's groups claim.
- Where an identity source is configured (a JWT key, or the proxy's security.user.header), a
  request that sends no identity is a 401 (security.identity.required, the default); allowed,
  its groups are unknown, and it sees no document that denies any group.

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
# a hashed subject's mark ("sub:#<sha256>"); a subject that begins with it is kept with it
# doubled ("sub:##..."), so that no subject, whatever its text, is another's hash
HASHED = "#"


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
        unknown = verifying and not token  # an identity source, and no identity sent
        if unknown and security.identity_required:
            raise Unauthorized(
                "an identity token is required (security.identity.required): send it in "
                "Authorization: Bearer, and the API key in X-API-Key"
            )
        person = _subject(claims)
        scope = EVERYTHING
        if security.enabled:
            groups = _groups_claim(claims, security)
            # a token without its groups claim (Azure AD's overage sends `_claim_names`
            # instead) tells nothing of the groups: what it left out may be a denied one
            unknown = unknown or security.jwt_groups_claim not in claims
            scope = groups_scope(groups, security, security.jwt_groups_claim, unknown=unknown)
        nameless = bool(claims) and person is None
        return Caller(key_name, person, address, scope, _expiry(claims), nameless)
    user = _proxy_user(connection, security)
    unknown = bool(security.user_header) and user is None  # the proxy named nobody
    if unknown and security.identity_required:
        raise Unauthorized(
            f"the request names no person ({security.user_header}, set by the trusted proxy), "
            "and an identity is required (security.identity.required)"
        )
    scope = EVERYTHING
    if security.enabled:
        raw = connection.headers.get(security.groups_header, "")
        scope = groups_scope(raw.split(","), security, security.groups_header, unknown=unknown)
    return Caller(key_name, user, address, scope)


def _subject(claims: dict[str, Any]) -> str | None:
    """The person a verified token names (its whole `sub`: a long one by its hash, marked
    HASHED; a short one that begins with the mark has it doubled, so no subject spells
    another's hash, and every other subject keeps the key it always had)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        return None
    if len(subject) > MAX_SUBJECT:
        return "sub:" + HASHED + hashlib.sha256(subject.encode("utf-8", "replace")).hexdigest()
    if subject.startswith(HASHED):
        return "sub:" + HASHED + subject
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


def groups_scope(
    groups: list[str], security: SecuritySettings, where: str, *, unknown: bool = False
) -> Scope:
    """What callers of these groups may see (security on); BadRequest naming `where` the
    groups came from when they are not group names. `unknown`: the caller sent no identity
    where one is configured (no document that denies any group is seen)."""
    if not security.enabled:
        return EVERYTHING
    unique = tuple(dict.fromkeys(group.strip() for group in groups if group.strip()))
    if len(unique) > MAX_GROUPS or not all(GROUP.match(group) for group in unique):
        raise BadRequest(
            f"{where} must list at most {MAX_GROUPS} group names "
            "(letters, digits, . _ @ : -), separated by commas"
        )
    return Scope(groups=unique, security=security.model, groups_unknown=unknown)


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

"""The caller's groups, for document-level security: from the header a trusted proxy sets, or
from a verified JWT (`security.identity`)."""

from __future__ import annotations

import re
from typing import Any

import jwt
from fastapi import Request

from service.api.auth import bearer_token
from service.config.settings import SecuritySettings
from service.errors import BadRequest, TechnicalError, Unauthorized
from service.retrieval import Scope
from service.retrieval.scope import EVERYTHING

GROUP = re.compile(r"^[\w.@:-]{1,128}$")
MAX_GROUPS = 200


def caller_scope(request: Request, security: SecuritySettings) -> Scope:
    """Everything with security off; else the caller's groups (none: public only)."""
    if not security.enabled:
        return EVERYTHING
    if security.identity == "jwt":
        groups, where = _groups_from_jwt(request, security), security.jwt_groups_claim
    else:
        raw = request.headers.get(security.groups_header, "")
        groups, where = raw.split(","), security.groups_header
    return groups_scope(groups, security, where)


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


def _groups_from_jwt(request: Request, security: SecuritySettings) -> list[str]:
    """The groups claim of the bearer token, once its signature, expiry and (when configured)
    audience and issuer are verified; no token: no groups."""
    token = bearer_token(request)
    if not token:
        return []
    claims = verified_claims(token, security)
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

"""Bearer tokens: the admin token for endpoints that change the index or the configuration,
and the optional API keys of the public endpoints."""

from __future__ import annotations

import hmac

from fastapi import Request
from starlette.requests import HTTPConnection

from service.config.settings import SecuritySettings
from service.errors import FeatureDisabled, Unauthorized
from service.runtime import Runtime


def bearer_token(request: HTTPConnection) -> str:
    """The token of `Authorization: Bearer <token>`, or "" without one."""
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return given.strip() if scheme.lower() == "bearer" else ""


def _matches(given: str, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def is_admin(request: Request) -> bool:
    """Whether the request carries the admin token (no token configured: nobody is)."""
    runtime: Runtime = request.app.state.runtime
    expected = runtime.settings().security.admin_token.get_secret_value()
    return bool(expected) and _matches(bearer_token(request), expected)


async def require_admin(request: Request) -> None:
    """A FastAPI dependency: `Authorization: Bearer <admin.token>`, compared in constant time.
    With no admin token configured, admin endpoints are off (not open). Async, as every
    dependency here: FastAPI runs a plain function in a thread, a hop per request."""
    runtime: Runtime = request.app.state.runtime
    if not runtime.settings().security.admin_token.get_secret_value():
        raise FeatureDisabled("no admin token is configured: set ADMIN_TOKEN or admin.token")
    if not is_admin(request):
        raise Unauthorized("missing or wrong admin bearer token")


async def require_api_key(request: Request) -> None:
    """A FastAPI dependency of the public endpoints: one of `api.keys`, when any is set."""
    runtime: Runtime = request.app.state.runtime
    security = runtime.settings().security
    if api_keys(security) and matching_api_key(request, security) is None:
        raise Unauthorized("missing or wrong API key (Authorization: Bearer or X-API-Key)")


def api_keys(security: SecuritySettings) -> list[str]:
    """The configured `api.keys` (none: the public endpoints are open)."""
    return [key.strip() for key in security.api_keys.get_secret_value().split(",") if key.strip()]


def matching_api_key(request: HTTPConnection, security: SecuritySettings) -> str | None:
    """The configured key the request sends, compared in constant time, or None."""
    # X-API-Key as well as the bearer token: with JWT identity, Authorization holds the JWT
    given = [request.headers.get("x-api-key", "").strip(), bearer_token(request)]
    return next(
        (key for key in api_keys(security) for candidate in given if _matches(candidate, key)),
        None,
    )

"""The admin token: bearer auth for endpoints that change the index or the configuration."""

from __future__ import annotations

import hmac

from fastapi import Request

from service.api.runtime import Runtime
from service.errors import FeatureDisabled, ServiceError


class Unauthorized(ServiceError):
    kind = "Unauthorized"
    status = 401
    message = "Sorry, this needs an administrator's token."


def require_admin(request: Request) -> None:
    """A FastAPI dependency: `Authorization: Bearer <admin.token>`, compared in constant time.
    With no admin token configured, admin endpoints are off (not open)."""
    runtime: Runtime = request.app.state.runtime
    expected = runtime.settings().admin_token.get_secret_value()
    if not expected:
        raise FeatureDisabled("no admin token is configured: set ADMIN_TOKEN or admin.token")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("missing or wrong bearer token")

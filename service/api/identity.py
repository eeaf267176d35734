"""The caller's groups, for document-level security, from the header the trusted proxy sets."""

from __future__ import annotations

import re

from fastapi import Request

from service.config import Settings
from service.errors import BadRequest
from service.retrieval import Scope
from service.retrieval.scope import EVERYTHING

GROUP = re.compile(r"^[\w.@:-]{1,128}$")
MAX_GROUPS = 200


def caller_scope(request: Request, settings: Settings) -> Scope:
    """Everything with security off; else the groups in the header (none: public only)."""
    if not settings.security_enabled:
        return EVERYTHING
    raw = request.headers.get(settings.security_groups_header, "")
    groups = tuple(dict.fromkeys(g.strip() for g in raw.split(",") if g.strip()))
    if len(groups) > MAX_GROUPS or not all(GROUP.match(group) for group in groups):
        raise BadRequest(
            f"{settings.security_groups_header} must list at most {MAX_GROUPS} group names "
            "(letters, digits, . _ @ : -), separated by commas"
        )
    return Scope(groups=groups)

"""A JSON body is checked once, before any route reads it: what Python's parser accepts but
nothing downstream can carry is a 400 here, never a 500 later.

- nesting deeper than MAX_DEPTH (a 50,000-deep array makes the parser recurse until it fails);
- `NaN`, `Infinity` and numbers too large for a float or for Python's int parser;
- lone UTF-16 surrogates (`"\\ud800"`): valid JSON escapes, but no UTF-8 text can hold them,
  so the first upstream call that encodes one would fail.

A body that is not JSON at all is left to the route, which says so in its own words; multipart
and form bodies are not JSON and pass untouched. BodySizeLimit runs first, so the body read
here is bounded.
"""

from __future__ import annotations

import json
import math
import re

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response
from service.errors import BadRequest

MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_JSON = ("multipart/form-data", "application/x-www-form-urlencoded")


class _Constant(ValueError):
    """NaN, Infinity or -Infinity in the body."""


def _refuse_constant(name: str) -> object:
    raise _Constant(name)


def json_problem(body: bytes) -> str | None:
    """Why `body` must be refused, or None (also when it is not JSON: the route says so)."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except _Constant as constant:
        return f"{constant} is not a JSON number: send a finite number"
    except RecursionError:
        return f"the JSON is nested too deep (at most {MAX_DEPTH} levels)"
    except json.JSONDecodeError:
        return None
    except (ValueError, UnicodeDecodeError) as error:  # an int of over 4,300 digits, ...
        return f"the JSON cannot be read: {error}"
    return _value_problem(value)


def _value_problem(value: object) -> str | None:
    """Walks the parsed body without recursion (it may still be a few hundred levels deep)."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > MAX_DEPTH:
            return f"the JSON is nested too deep (at most {MAX_DEPTH} levels)"
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), not text"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "a number is too large: send a finite number"
        elif isinstance(item, dict):
            pending.extend((key, depth) for key in item)
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return None


class JsonGuard:
    """ASGI middleware: refuses, with the endpoint's own 400, the JSON bodies described above."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        content_type = Headers(scope=scope).get("content-type", "").lower()
        if content_type.startswith(_NOT_JSON):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to answer
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = json_problem(body) if body.strip() else None
        if problem:
            await error_response(Request(scope), BadRequest(problem))(scope, receive, send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

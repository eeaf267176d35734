"""A JSON body is read by its route, once: after the caller is authenticated, within the
route's own size limit, parsed off the event loop when it is large, and checked. What Python's
parser accepts but nothing downstream can carry is a 400 here, never a 500 later:

- nesting deeper than MAX_DEPTH (a 50,000-deep array makes the parser recurse until it fails);
- `NaN`, `Infinity` and numbers too large for a float or for Python's int parser;
- lone UTF-16 surrogates (`"\\ud800"`): valid JSON escapes, but no UTF-8 text can hold them,
  so the first upstream call that encodes one would fail.

Nothing is parsed for a path no route serves, nor before the route's API key or admin token
is checked, so an anonymous body costs no more than reading it. The checks cost less than the
parse: the depth is counted on the body's brackets (numpy), the surrogates by encoding the
parsed value (C), only when the body holds a surrogate at all. A body that is not JSON at all
is left to the route, which says so in its own words; multipart and form bodies pass
untouched. The parsed value is handed to FastAPI, which would otherwise parse the body again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine
from typing import Any

import anyio.to_thread
import numpy as np
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from service.api.auth import require_admin, require_api_key
from service.errors import BadRequest, PayloadTooLarge

MAX_DEPTH = 64
# what a question-shaped body (a query, its history and options; a chat conversation) may
# weigh: questions need kilobytes, a long conversation some hundreds
QUESTION_BYTES = 512 * 1024
# bodies larger than this are parsed in a worker thread, so the event loop keeps serving
OFF_LOOP_BYTES = 64 * 1024
_NOT_JSON = ("multipart/form-data", "application/x-www-form-urlencoded")
# a surrogate can only come from a \uD800-\uDFFF escape or its raw (surrogatepass) bytes
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1
_AUTHENTICATION = (require_api_key, require_admin)


class _Refused(ValueError):
    """A number the body may not hold; its message is the reason."""


def _refuse_constant(name: str) -> object:
    raise _Refused(f"{name} is not a JSON number: send a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("a number is too large: send a finite number")
    return value


class NotJson:
    """The body is not JSON: the route says so in its own words."""


NOT_JSON = NotJson()


def read_json(body: bytes) -> tuple[object, str | None]:
    """(the parsed value, or NOT_JSON; why it must be refused, or None)."""
    try:
        value = json.loads(body, parse_constant=_refuse_constant, parse_float=_finite)
    except _Refused as refused:
        return NOT_JSON, str(refused)
    except RecursionError:
        return NOT_JSON, f"the JSON is nested too deep (at most {MAX_DEPTH} levels)"
    except json.JSONDecodeError:
        return NOT_JSON, None
    except (ValueError, UnicodeDecodeError) as error:  # an int of over 4,300 digits, ...
        return NOT_JSON, f"the JSON cannot be read: {error}"
    if _depth(body) > MAX_DEPTH:
        return NOT_JSON, f"the JSON is nested too deep (at most {MAX_DEPTH} levels)"
    if _MAY_HOLD_SURROGATE.search(body):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return NOT_JSON, "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), not text"
    return value, None


def json_problem(body: bytes) -> str | None:
    """Why `body` must be refused, or None (also when it is not JSON: the route says so)."""
    return read_json(body)[1]


def _depth(body: bytes) -> int:
    """How deep the arrays and objects of a valid JSON body nest (brackets inside strings do
    not count)."""
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return 0
    structure = _STRING.sub(b"", body)
    steps = _OPEN[np.frombuffer(structure, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


async def bounded_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(_too_large(int(declared), limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(_too_large(size, limit))
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # what FastAPI's request.body() then returns
    return body


def _too_large(size: int, limit: int) -> str:
    return f"the request body ({size} bytes or more) exceeds this endpoint's {limit} bytes"


def json_route(max_bytes: int | None = QUESTION_BYTES) -> type[APIRoute]:
    """An APIRoute class whose JSON bodies are read as this module says, up to `max_bytes`
    (None: request.max.bytes only, for ingestion). Give it to an APIRouter as `route_class`."""

    class JsonRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()
            guards = [d.dependency for d in self.dependencies if d.dependency in _AUTHENTICATION]

            async def guarded(request: Request) -> Response:
                if request.method in ("POST", "PUT", "PATCH"):
                    content_type = request.headers.get("content-type", "").lower()
                    if not content_type.startswith(_NOT_JSON):
                        for guard in guards:  # who may send a body, before it is read
                            await guard(request)  # type: ignore[operator]
                        await _checked_json(request, max_bytes)
                return await handler(request)

            return guarded

    return JsonRoute


async def checked_body(request: Request, max_bytes: int | None) -> tuple[bytes, object]:
    """The body, within `max_bytes` (None: request.max.bytes, BodySizeLimit's), and its JSON
    value (NOT_JSON when it is none: left to the route); BadRequest when it is JSON nothing
    downstream can carry (this module's docstring)."""
    if max_bytes is None:
        body = await request.body()  # bounded by request.max.bytes (BodySizeLimit)
    else:
        body = await bounded_body(request, max_bytes)
    if not body.strip():
        return body, NOT_JSON
    if len(body) > OFF_LOOP_BYTES:
        value, problem = await anyio.to_thread.run_sync(read_json, body)
    else:
        value, problem = read_json(body)
    if problem:
        raise BadRequest(problem)
    return body, value


async def _checked_json(request: Request, max_bytes: int | None) -> None:
    _, value = await checked_body(request, max_bytes)
    if value is not NOT_JSON:
        request._json = value  # what FastAPI's request.json() then returns: parsed once

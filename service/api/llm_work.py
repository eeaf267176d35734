"""What one caller's questions may take of what every caller shares (the LLM's connection
pool, its circuit breaker, the workers' time): two ASGI middlewares around the endpoints that
call the LLM.

- CallerLimit: at most `llm.max.concurrent.per.caller` requests of one caller at once in this
  worker (streams count until their last byte); the next one is a 429 with Retry-After, at
  once, so one client opening 200 slow streams cannot take the pool from the others. The
  caller is its API key when it sends a valid one, else the subject of a valid JWT (with
  `security.identity=jwt`), else its address: a credential that does not verify never names
  a caller, so nobody escapes the cap by sending made-up tokens.
- CancelOnDisconnect: when the client leaves before its answer is sent, the request's work
  (Solr, the LLM call) is cancelled instead of running on for nobody; it is logged as 499.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import bearer_token, matching_api_key
from service.api.errors import error_response
from service.api.identity import verified_claims
from service.config.settings import Settings
from service.errors import CallerOverLimit, ServiceError

# the endpoints whose requests call the LLM (after DatafariPaths has rewritten its aliases)
LLM_PATHS = ("/ai/rag", "/ai/summarize", "/v1/chat/completions", "/search/select", "/mcp")
RETRY_AFTER_SECONDS = 2
_NO_BODY = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def calls_the_llm(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["path"] in LLM_PATHS


def caller_of(request: Request, settings: Settings) -> str:
    """Who is asking, for the per-caller cap (see the module's docstring)."""
    security = settings.security
    key = matching_api_key(request, security)
    if key is not None:
        return "key:" + hashlib.sha256(key.encode()).hexdigest()[:16]
    token = bearer_token(request)
    if security.enabled and security.identity == "jwt" and token:
        try:
            subject = verified_claims(token, security).get("sub")
        except (ServiceError, ValueError, TypeError):  # not verified: names nobody
            subject = None
        if isinstance(subject, str) and subject:
            return "sub:" + subject[:256]
    client = request.client
    return "address:" + (client.host if client else "unknown")


class CallerLimit:
    """ASGI middleware: the per-caller cap on concurrent LLM requests (module docstring)."""

    def __init__(self, app: ASGIApp, settings: Callable[[], Settings]) -> None:
        self.app = app
        self.settings = settings
        self.active: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not calls_the_llm(scope):
            await self.app(scope, receive, send)
            return
        settings = self.settings()
        cap = settings.llm.max_concurrent_per_caller
        if not cap:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        caller = caller_of(request, settings)
        if self.active[caller] >= cap:
            refused = CallerOverLimit(
                f"{self.active[caller]} of this caller's questions are being answered, the "
                f"most llm.max.concurrent.per.caller allows ({cap}); retry after one ends",
                retry_after=RETRY_AFTER_SECONDS,
            )
            await error_response(request, refused)(scope, receive, send)
            return
        self.active[caller] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active[caller] -= 1
            if not self.active[caller]:
                del self.active[caller]


class CancelOnDisconnect:
    """ASGI middleware: a request to an LLM endpoint is cancelled when its client leaves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not calls_the_llm(scope):
            await self.app(scope, receive, send)
            return
        left = anyio.Event()
        early: list[Message] = []  # what the watcher read before the app asked for it
        watching = False

        try:
            async with anyio.create_task_group() as tasks:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            scope.setdefault("state", {})["client_left"] = True
                            left.set()
                            tasks.cancel_scope.cancel()
                            return
                        early.append(message)

                def start_watching() -> None:
                    nonlocal watching
                    watching = True
                    tasks.start_soon(watch)

                async def app_receive() -> Message:
                    if watching:
                        if early:
                            return early.pop(0)
                        await left.wait()
                        return {"type": "http.disconnect"}
                    message = await receive()
                    if message["type"] == "http.request" and not message.get("more_body", False):
                        start_watching()  # the body is read: what comes next is the disconnect
                    return message

                if scope["method"] in _NO_BODY:
                    start_watching()
                await self.app(scope, app_receive, send)
                tasks.cancel_scope.cancel()  # answered: stop watching
        except BaseExceptionGroup as group:  # the task group wraps what the app raised
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

"""The one door every way in passes: HTTP requests, each turn of Datafari 7's WebSocket, MCP
over HTTP, streams. What is decided here, and nowhere else:

- who is calling (service.api.identity: the API key, the person, the groups), once per
  request and again at every turn of a socket, with the configuration of that moment (a
  removed key or an expired identity token ends the socket's rights: 1008);
- which pages may open a socket, or (with a person a proxy names from the visitor's cookies,
  security.user.header) send anything but a GET: no `Origin` (not a browser), the page's own
  origin, or one of `cors.allowed.origins`; any other (`null` included) is a 403 (a socket:
  closed, 1008), with the reason;
- whether a question is admitted: the per-caller cap (`llm.max.concurrent.per.caller`, the
  caller being the person, else the key, else the address) and the LLM's admission
  (`llm.admission`: a question the LLM could not answer in time, by this worker's count and
  by the queue the LLM server reports, is a 503 with Retry-After at once); only questions
  that called the LLM count in its pace;
- the access log line and the metrics of each request and of each socket turn.

    >>> door = Door(runtime.settings)
    >>> caller = door.identify(connection)                # or Unauthorized, BadRequest
    >>> with door.question(caller, settings):             # or CallerOverLimit, LlmBusy
    ...     answer()
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response
from service.api.identity import Caller, identify
from service.api.llm_work import Callers, LlmPace, calls_the_llm, refusal
from service.config.settings import Settings
from service.errors import Forbidden, LlmBusy, ServiceError, Unauthorized
from service.llm.queue import LlmLoads
from service.models.local import LOCAL_MODELS
from service.observability import Work, work_var

log = logging.getLogger(__name__)

POLICY_VIOLATION = 1008  # WebSocket close code: refused by the door
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MCP_EVENTS = "/mcp"  # its GET: the event stream an MCP client holds open


def caller_of(connection: HTTPConnection) -> Caller:
    """The caller the door identified for this request (identified now, and kept, on a path
    the door does not guard); Unauthorized or BadRequest as `identify`."""
    state = connection.scope.setdefault("state", {})
    caller = state.get("caller")
    if caller is None:
        caller = identify(connection, connection.app.state.runtime.settings())
        state["caller"] = caller
    return caller


def owner_of(connection: HTTPConnection) -> str:
    """Whose conversations the caller reads (service.api.identity: the person, else the key);
    Unauthorized for an anonymous caller, who owns none."""
    owner = caller_of(connection).owner
    if owner is None:
        raise Unauthorized(
            "the conversations are an authenticated caller's: send an API key (api.keys) or "
            "an identity token naming its person (security.identity=jwt, with a sub)"
        )
    return owner


def admission_on(settings: Settings) -> bool:
    mode = settings.llm.admission
    return mode == "on" or (mode == "auto" and settings.llm.model in LOCAL_MODELS)


class Door:
    """What every transport asks before it serves (the module's docstring)."""

    def __init__(self, settings: Callable[[], Settings], loads: LlmLoads | None = None) -> None:
        self.settings = settings
        self.callers = Callers()  # each caller's questions in progress, in this worker
        self.pace = LlmPace()
        self.loads = loads  # what the LLM reports of its queue, and its pace per call

    def identify(self, connection: HTTPConnection) -> Caller:
        """The caller, with the configuration of this moment (kept in the connection's state
        for the routes)."""
        caller = identify(connection, self.settings())
        connection.scope.setdefault("state", {})["caller"] = caller
        return caller

    def check_origin(self, connection: HTTPConnection, settings: Settings) -> None:
        """Forbidden unless the connection comes from no browser page, from the page's own
        origin (its host and port those of `Host`, or of `X-Forwarded-Host` behind a proxy:
        no page of another site can set either), or from one of cors.allowed.origins."""
        origin = connection.headers.get("origin")
        if origin is None:
            return
        given = _origin(origin)
        allowed = {_origin(o) for o in settings.server.cors_origins.split(",") if o.strip()}
        hosts = [connection.headers.get("host", ""), connection.headers.get("x-forwarded-host", "")]
        own = any(_same_host(given, host.split(",")[0]) for host in hosts if host)
        if given and (given in allowed or own):
            return
        raise Forbidden(
            f"a page of origin {origin[:100]!r} may not call this service from a browser: only "
            "the service's own pages and those of cors.allowed.origins may"
        )

    @contextmanager
    def question(self, caller: Caller, settings: Settings) -> Iterator[Work]:
        """One question of `caller` while the block runs: CallerOverLimit when it has its cap
        in progress already, LlmBusy when the LLM would not answer it in time; its LLM calls
        counted (a question that made none does not count in the LLM's pace)."""
        with self.asking(caller, settings) as work, self.pace.admitted(work):
            yield work

    @contextmanager
    def asking(self, caller: Caller, settings: Settings) -> Iterator[Work]:
        """`question` but for the LLM's pace, which its caller enters once the question is
        whole (`pace.admitted`: an HTTP request's body read; a body still arriving, or
        trickled a byte at a time, is no question the LLM is answering)."""
        with self.callers.asking(caller.name, settings.llm.max_concurrent_per_caller):
            if admission_on(settings):
                self.admit(settings)
            work = Work()
            bound = work_var.set(work)
            try:
                yield work
            finally:
                work_var.reset(bound)

    async def observe(self, settings: Settings) -> None:
        """A fresh reading of the LLM's queue for `admit` (at most every half second, waited
        for a quarter of a second at most; a server that reports none: this worker's counts)."""
        if self.loads is not None and admission_on(settings):
            token = settings.llm.token.get_secret_value()
            await self.loads.observe(settings.llm.endpoint, token)

    def admit(self, settings: Settings) -> None:
        """LlmBusy when the LLM, at its pace and with its queue, would not answer one more
        question in time (asked when a question comes, and again once its body is whole)."""
        # the answer's call must end within both (a streamed answer's first words within the
        # read timeout): the smaller is what a question can wait
        deadline = min(settings.server.request_timeout, settings.llm.timeout_read)
        load = self.loads.of(settings.llm.endpoint) if self.loads is not None else None
        refused = refusal(self.pace, load, deadline)
        if refused is not None:
            raise LlmBusy(refused.reason, retry_after=refused.retry_after)


class DoorMiddleware:
    """ASGI middleware: every WebSocket handshake (origin, caller), every HTTP request that
    is not a GET (origin) and every HTTP request to an endpoint that calls the LLM (caller,
    cap, admission) passes the door."""

    def __init__(self, app: ASGIApp, door: Door) -> None:
        self.app = app
        self.door = door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            request = Request(scope)
            settings = self.door.settings()
            try:  # a form another site posts with its visitor's cookies changes nothing
                if _ambient(settings):
                    self.door.check_origin(request, settings)
            except ServiceError as refused:
                await error_response(request, refused)(scope, receive, send)
                return
        if calls_the_llm(scope):
            await self._question(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _question(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A question admitted (caller, cap, admission) before its body is read, and again
        once it is whole, when it starts counting in the LLM's pace: a body still arriving,
        or trickled a byte at a time, is no question the LLM is answering. A GET counts at
        once, but MCP's event stream, which is no question."""
        request = Request(scope)
        with ExitStack() as held:
            try:
                caller = self.door.identify(request)
                await self.door.observe(self.door.settings())
                work = held.enter_context(self.door.asking(caller, self.door.settings()))
            except ServiceError as refused:
                await error_response(request, refused)(scope, receive, send)
                return
            if scope["method"] in SAFE_METHODS:
                # a GET asks at once (/search/select?action=rag answers with the LLM); MCP's
                # event stream, held open for notifications, is no question
                if scope["path"] != MCP_EVENTS:
                    held.enter_context(self.door.pace.admitted(work))
                await self.app(scope, receive, send)
                return
            counted = False

            async def read() -> Message:
                nonlocal counted
                message = await receive()
                whole = message["type"] == "http.request" and not message.get("more_body")
                if whole and not counted:
                    counted = True
                    settings = self.door.settings()
                    if admission_on(settings):  # again: others were admitted meanwhile
                        self.door.admit(settings)  # LlmBusy, answered as a 503 as ever
                    held.enter_context(self.door.pace.admitted(work))
                return message

            await self.app(scope, read, send)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = HTTPConnection(scope)
        try:
            self.door.check_origin(connection, self.door.settings())
            self.door.identify(connection)
        except ServiceError as refused:
            log.info("WebSocket %s refused: %s", scope.get("path", ""), refused.reason)
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            reason = refused.reason.encode("utf-8")[:120].decode("utf-8", errors="ignore")
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": reason})
            return
        await self.app(scope, receive, send)


def _ambient(settings: Settings) -> bool:
    """Whether this request's rights may come from what a browser sends without its page's
    say: the person a proxy names from the visitor's cookies (security.user.header). The
    service reads no cookie itself, and a key or token a page must add itself; a site's own
    unrelated cookies (analytics, a load balancer's) must not turn its widget away."""
    return bool(settings.security.user_header)


def _origin(text: str) -> str:
    """scheme://host[:port] of an origin, lowercased, its default port left out ("" when it
    is not one: `null`, a path)."""
    try:
        parts = urlsplit(text.strip().lower())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return ""
    shown = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != DEFAULT_PORTS[parts.scheme]:
        shown += f":{port}"
    return f"{parts.scheme}://{shown}"


def _same_host(origin: str, host: str) -> bool:
    """Whether an origin (as `_origin` writes it) names the host and port of a Host header
    (one without a port: the origin's scheme's default)."""
    if not origin:
        return False
    scheme = origin.partition("://")[0]
    try:
        parts = urlsplit(f"{scheme}://{host.strip().lower()}")
        port = parts.port
    except ValueError:
        return False
    if not parts.hostname or parts.path or parts.query or "@" in host:
        return False
    shown = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is None:  # nginx's $host drops the port; a port is no boundary to cookies either
        return _origin_host(origin) == shown
    if port != DEFAULT_PORTS[scheme]:
        shown += f":{port}"
    return origin == f"{scheme}://{shown}"


def _origin_host(origin: str) -> str:
    """The host of an origin as `_origin` writes it, without its port."""
    netloc = origin.partition("://")[2]
    if netloc.startswith("["):
        return netloc.partition("]")[0] + "]"
    return netloc.partition(":")[0]

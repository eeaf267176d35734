"""The wire under every upstream pool: httpx's API above, aiohttp's connections below.

httpx's own transport (httpcore and h11, pure Python, a cancel scope around each read and
write) costs about a millisecond of CPU a request on this box, and a question makes five to
seven upstream requests (issue 84: most of the service's own CPU a question). aiohttp's
connections and its C HTTP parser do the same work for a fifth of that (about half with
httpx's client above, bench/results/2026-12-07-issues-82-83-84.md). Everything above the wire
stays httpx's: requests, responses, streams, cookies, redirects, proxies (the proxies the
environment names go through httpx's own transport: `upstream_pool`), and the exceptions the
service maps (service.upstream): each aiohttp failure is raised as the httpx exception httpx's
own transport raises for it, caused by the OS or TLS error beneath (so a TLS failure still
reads as one; aiohttp's own exception, which holds the URL and the headers, is left out).

    >>> upstream_pool(verify=context)   # an httpx.AsyncClient on this wire

Limits as httpx's: `max_connections` at once (a request waits for one at most the request's
`pool` timeout, then PoolTimeout), idle connections kept `keepalive_expiry` seconds, and one
that received bytes while idle never reused. Timeouts as httpx's: `connect` (the name's lookup,
the TCP and TLS handshakes), `read` (each wait for bytes, the response's head included),
`write` (each 64 KB of a long body: an upstream that stops reading ends the request).
Better than httpx's: a request whose pooled connection the server closed as it was taken
(its keep-alive timeout racing ours: uvicorn's, llama.cpp's and Node's are 5 s, as ours) is
sent once more on a new connection, instead of failing as "the server hung up": only when
not a byte of an answer came back, within RACE_SECONDS of taking it (a server that worked on
the request and then died, or began to answer, is not asked twice).
tests/service/test_transport.py holds it to each of these on real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
import yarl
from aiohttp.client_proto import ResponseHandler
from httpx._utils import get_environment_proxies

from service.upstream import UpstreamClient

HEAD_LIMIT = 64 * 1024
# a body past this is sent a chunk at a time, each given the write timeout; a smaller one goes
# into the socket's buffer at once
PACED_BODY = 64 * 1024
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's
POOL_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)  # the service's
# aiohttp's failure -> the httpx exception httpx's transport raises for the same event; the
# first that matches wins (subclasses before their bases)
_FAILURES: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),  # refused, DNS, TLS handshake
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.ReadError),  # a body cut short or malformed
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),  # a head that is not HTTP
    (aiohttp.ClientOSError, httpx.ReadError),
    (aiohttp.ClientError, httpx.RemoteProtocolError),
)


@contextlib.contextmanager
def _as_httpx(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except httpx.TransportError:
        raise
    except (TimeoutError, aiohttp.ClientError) as error:
        for failure, raised in _FAILURES:
            if isinstance(error, failure):
                raise raised(_said(error), request=request) from _root(error)
        raise  # pragma: no cover - the last pair matches every ClientError


def _root(error: BaseException) -> BaseException | None:
    """The OS or TLS error beneath aiohttp's, kept as the cause (a TLS failure still reads as
    one); aiohttp's own is left out: it holds the request, its URL and headers."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            break
        if isinstance(seen, OSError) and not isinstance(seen, aiohttp.ClientError):
            return seen
        seen = seen.__cause__
    return None


def _said(error: BaseException) -> str:
    """What went wrong, without the address aiohttp writes into its messages (an endpoint's
    URL may carry a login)."""
    if isinstance(error, aiohttp.ClientConnectorError):
        return f"{type(error).__name__}: {error.os_error}"  # refused, unknown host, TLS's reason
    if isinstance(error, aiohttp.ClientResponseError):
        return f"{type(error).__name__}: {error.message}"
    return type(error).__name__


def _ssl_context(verify: ssl.SSLContext | bool) -> ssl.SSLContext | bool:
    """What aiohttp checks a server with: the context given, httpx's default one (certifi's
    CAs, SSL_CERT_FILE) for True, no check for False."""
    if isinstance(verify, ssl.SSLContext):
        return verify
    return httpx.create_ssl_context() if verify else False


class _Body(httpx.AsyncByteStream):
    """A response's body as aiohttp reads it; closing it gives its connection back (kept
    alive once the body was read whole, closed otherwise) and its place in the pool."""

    def __init__(
        self, response: aiohttp.ClientResponse, request: httpx.Request, slot: asyncio.Semaphore
    ) -> None:
        self._response = response
        self._request = request
        self._slot: asyncio.Semaphore | None = slot

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx(self._request):
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        if self._slot is None:
            return
        slot, self._slot = self._slot, None
        try:
            self._response.release() if self._response.content.at_eof() else self._response.close()
        finally:
            slot.release()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over an aiohttp session of its own (opened on the first
    request, in that request's event loop; a new loop gets a new session)."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        self._ssl = _ssl_context(verify)
        self._limits = limits
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None

    def _open(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = _Connector(
                limit=0,  # the slots below count connections, with httpx's pool timeout
                keepalive_timeout=self._limits.keepalive_expiry,  # None: kept, as httpx's
                ssl=self._ssl,
                resolver=aiohttp.ThreadedResolver(),  # getaddrinfo, as httpx: /etc/hosts too
                use_dns_cache=False,  # each new connection looks up its host, as httpx's
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
                auto_decompress=False,  # httpx's response decodes what the server encoded
                # httpx's request has its own; aiohttp would add a Content-Type to a POST
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                # a response head as long as h11's limit allows (aiohttp's default: 8 KB)
                max_line_size=HEAD_LIMIT,
                max_field_size=HEAD_LIMIT,
            )
            # aiohttp sends a GET, PUT or DELETE again whenever the server hung up, even on
            # a new connection (a struggling Solr or LLM would see twice the load, its breaker
            # half the failures); the wire does so only when it lost the keep-alive race
            # (handle_async_request). No public option in aiohttp 3.14.
            self._session._retry_connection = False
            self._loop = loop
            limit = self._limits.max_connections
            self._slots = asyncio.Semaphore(limit if limit else 1 << 30)
        assert self._slots is not None
        return self._session, self._slots

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session, slots = self._open()
        timeout = request.extensions.get("timeout", {})
        try:
            async with asyncio.timeout(timeout.get("pool")):
                await slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no connection free in time", request=request) from None
        try:
            try:
                body: bytes | httpx.AsyncByteStream | None = request.content or None
                headers = request.headers
            except httpx.RequestNotRead:  # a streamed body: aiohttp sends it chunked
                body = request.stream  # type: ignore[assignment]
                headers = request.headers.copy()
                headers.pop("Transfer-Encoding", None)
            # a pooled connection the server closed as it was taken (its keep-alive timeout
            # racing ours) is no answer: the request goes once more, on a new connection, when
            # its body can be sent again (see _Taken.lost_the_race)
            replayable = not isinstance(body, httpx.AsyncByteStream)
            for second_try in (False, True):
                taken = _Taken(new_connection=second_try)
                token = _TAKEN.set(taken)
                try:
                    response = await self._send(session, request, body, headers, timeout)
                    break
                except httpx.TransportError as error:
                    if second_try or not replayable or not _hung_up(error):
                        raise
                    if not taken.lost_the_race():
                        raise
                finally:
                    _TAKEN.reset(token)
        except BaseException:
            slots.release()
            raise
        version = response.version
        extensions = {"http_version": f"HTTP/{version.major}.{version.minor}".encode()}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request, slots),
            request=request,
            extensions=extensions,
        )

    async def _send(
        self,
        session: aiohttp.ClientSession,
        request: httpx.Request,
        body: bytes | httpx.AsyncByteStream | None,
        headers: httpx.Headers,
        timeout: dict[str, float | None],
    ) -> aiohttp.ClientResponse:
        """One sending of the request, up to its answer's head."""
        sending = asyncio.timeout(None)  # the body's write timeout (see _paced)
        try:
            with _as_httpx(request):
                async with sending:
                    return await session.request(
                        request.method,
                        yarl.URL(_address(request.url), encoded=True),  # as httpx wrote it
                        headers=[
                            (k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.raw
                        ],
                        data=_paced(body, sending, timeout.get("write")),
                        allow_redirects=False,  # httpx follows them, when asked
                        compress=False,
                        timeout=aiohttp.ClientTimeout(
                            total=None,
                            connect=timeout.get("connect"),  # the name's lookup too
                            sock_connect=timeout.get("connect"),
                            sock_read=timeout.get("read"),
                        ),
                        server_hostname=_sni(request),
                    )
        except httpx.ReadTimeout:
            if sending.expired():
                raise httpx.WriteTimeout("WriteTimeout", request=request) from None
            raise

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


# a hang-up this soon after a pooled connection was taken, with not a byte heard on it, is the
# keep-alive race: the server's timer closed it as our request left (the FIN arrives within a
# round trip; a busy event loop reads it late)
RACE_SECONDS = 2.0


@dataclass
class _Taken:
    """The connection a request was given (set by _Connector._get): a pooled one, and when;
    `new_connection` makes _get open a new one (the second try)."""

    new_connection: bool = False
    pooled: _Heard | None = None
    at: float = 0.0

    def lost_the_race(self) -> bool:
        """The server closed a pooled connection as it was taken: nothing of an answer was
        heard (not a byte of a head, not a 100 Continue), and soon. A server that worked on
        the request and then died, or answered in part, is not asked again."""
        return (
            self.pooled is not None
            and not self.pooled.heard
            and time.monotonic() - self.at < RACE_SECONDS
        )


_TAKEN: contextvars.ContextVar[_Taken | None] = contextvars.ContextVar("taken", default=None)


class _Heard(ResponseHandler):
    """aiohttp's connection protocol, noting whether any byte came since it was taken."""

    heard = False

    def data_received(self, data: bytes) -> None:
        if data:
            self.heard = True
        super().data_received(data)


def _hung_up(error: httpx.TransportError) -> bool:
    """The server closed the connection, or reset it, before answering (aiohttp's failure is
    the context _as_httpx raised `error` in; the OS error its cause)."""
    hang_ups = (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError)
    return isinstance(error.__context__, hang_ups) or (
        isinstance(error.__context__, aiohttp.ClientOSError)
        and isinstance(error.__cause__, (ConnectionResetError, BrokenPipeError))
    )


def _address(url: httpx.URL) -> str:
    """The URL aiohttp connects to: a login written in it is already httpx's Authorization
    header (aiohttp refuses both at once)."""
    return str(url.copy_with(userinfo=b"") if url.userinfo else url)


def _sni(request: httpx.Request) -> str | None:
    sni = request.extensions.get("sni_hostname")
    if isinstance(sni, bytes):
        return sni.decode("ascii")
    return sni


def _paced(
    body: bytes | httpx.AsyncByteStream | None, sending: asyncio.Timeout, write: float | None
) -> bytes | AsyncIterator[bytes] | None:
    """The body as aiohttp sends it: a long or streamed one a chunk at a time, each given
    `write` seconds to leave (httpx's write timeout: an upstream that stops reading a batch
    of documents ends the request rather than holding its connection)."""
    if body is None or write is None or (isinstance(body, bytes) and len(body) <= PACED_BODY):
        return body
    loop = asyncio.get_running_loop()

    async def chunks() -> AsyncIterator[bytes]:
        if isinstance(body, bytes):
            parts: AsyncIterator[bytes] | None = None
            pieces = [body[at : at + PACED_BODY] for at in range(0, len(body), PACED_BODY)]
        else:
            parts, pieces = aiter(body), []
        for piece in pieces:
            pace(write)
            yield piece
        if parts is not None:
            while True:
                pace(write)
                try:
                    piece = await anext(parts)
                except StopAsyncIteration:
                    break
                yield piece
        pace(None)  # sent: the read timeout takes over

    def pace(seconds: float | None) -> None:
        # an answer begun before the body is all sent (an early reply of a server still
        # reading) has ended the write timeout: the rest of the body leaves unpaced
        with contextlib.suppress(RuntimeError):
            sending.reschedule(None if seconds is None else loop.time() + seconds)

    return chunks()


class _Connector(aiohttp.TCPConnector):
    """aiohttp's connector, but a pooled connection that received bytes while idle (a 408
    sent before closing, a body longer than it said) is closed rather than given to the next
    request, which would read them as its answer: httpcore's check before reusing one. Its
    connections note the bytes they hear (_Heard), and the request they serve is told which
    one it was given (_Taken)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._factory = functools.partial(_Heard, loop=self._loop)

    async def _get(self, key, *args, **kwargs):  # type: ignore[no-untyped-def]
        taken = _TAKEN.get()
        if taken is not None and taken.new_connection:
            return None  # the second try: a new connection, not another pooled one
        idle = getattr(self, "_conns", {}).get(key)
        if idle:
            for entry in [entry for entry in idle if _has_unread_bytes(entry[0])]:
                idle.remove(entry)
                entry[0].close()
            if not idle:
                del self._conns[key]
        connection = await super()._get(key, *args, **kwargs)
        if connection is not None and taken is not None and isinstance(connection.protocol, _Heard):
            connection.protocol.heard = False
            taken.pooled, taken.at = connection.protocol, time.monotonic()
        return connection


def _has_unread_bytes(protocol: object) -> bool:
    return bool(getattr(protocol, "should_close", False))


def upstream_pool(
    *,
    verify: ssl.SSLContext | bool = True,
    limits: httpx.Limits = POOL_LIMITS,
    transport: httpx.AsyncBaseTransport | None = None,
) -> UpstreamClient:
    """One upstream's connection pool (Runtime.pool): this module's wire, or `transport` (the
    tests' in-process apps); the environment's proxies through httpx's own."""
    return UpstreamClient(
        limits=limits,
        follow_redirects=False,
        transport=transport or AiohttpTransport(verify=verify, limits=limits),
        # httpx reads the environment's proxies only when it is given no transport
        mounts=None if transport else environment_proxies(verify, limits),
        verify=verify,
    )


def environment_proxies(
    verify: ssl.SSLContext | bool, limits: httpx.Limits
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """httpx's mounts for the proxies the environment names (HTTP_PROXY, HTTPS_PROXY,
    ALL_PROXY; NO_PROXY's hosts left to the default transport), as httpx makes them when it is
    given no transport: a proxied request keeps httpx's own transport."""
    return {
        pattern: httpx.AsyncHTTPTransport(verify=verify, limits=limits, proxy=proxy)
        if proxy
        else None
        for pattern, proxy in get_environment_proxies().items()
    }

"""The wire under every upstream pool: httpx's API above, aiohttp's connections below.

httpx's own transport (httpcore and h11, pure Python, a cancel scope around each read and
write) costs about a millisecond of CPU a request on this box, and a question makes five to
seven upstream requests (issue 84: most of the service's own CPU a question). aiohttp's
connections and its C HTTP parser do the same work for a fifth of that. Everything above the
wire stays httpx's: requests, responses, streams, cookies, redirects, proxies (httpx mounts
its own transports for the proxies the environment names), and the exceptions the service
maps (service.upstream): each aiohttp failure is raised as the httpx exception httpx's own
transport raises for it, the aiohttp error as its cause (so a TLS failure still reads as one).

    >>> httpx.AsyncClient(transport=AiohttpTransport(verify=context, limits=limits))

Limits as httpx's: `max_connections` at once (a request waits for one at most the request's
`pool` timeout, then PoolTimeout), idle connections kept `keepalive_expiry` seconds. Timeouts
as httpx's: `connect` (the TCP and TLS handshakes), `read` (each wait for bytes, the response's
head included); `write` has no counterpart (aiohttp writes without a limit; a request body
here is at most a batch of documents).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import httpx

DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's

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


@contextmanager
def _as_httpx(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except httpx.TransportError:
        raise
    except (TimeoutError, aiohttp.ClientError) as error:
        for failure, raised in _FAILURES:
            if isinstance(error, failure):
                raise raised(_said(error), request=request) from error
        raise  # pragma: no cover - the last pair matches every ClientError


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
            connector = aiohttp.TCPConnector(
                limit=0,  # the slots below count connections, with httpx's pool timeout
                keepalive_timeout=self._limits.keepalive_expiry or 0,
                ssl=self._ssl,
                resolver=aiohttp.ThreadedResolver(),  # getaddrinfo, as httpx: /etc/hosts too
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
                auto_decompress=False,  # httpx's response decodes what the server encoded
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),  # httpx's own
            )
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
            with _as_httpx(request):
                response = await session.request(
                    request.method,
                    _address(request.url),
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.raw],
                    data=body,
                    allow_redirects=False,  # httpx follows them, when asked
                    compress=False,
                    timeout=aiohttp.ClientTimeout(
                        total=None,
                        sock_connect=timeout.get("connect"),
                        sock_read=timeout.get("read"),
                    ),
                    server_hostname=_sni(request),
                )
        except BaseException:
            slots.release()
            raise
        extensions = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        return httpx.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=_Body(response, request, slots),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


def _address(url: httpx.URL) -> str:
    """The URL aiohttp connects to: a login written in it is already httpx's Authorization
    header (aiohttp refuses both at once)."""
    return str(url.copy_with(userinfo=b"") if url.userinfo else url)


def _sni(request: httpx.Request) -> str | None:
    sni = request.extensions.get("sni_hostname")
    if isinstance(sni, bytes):
        return sni.decode("ascii")
    return sni

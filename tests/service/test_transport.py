"""service/transport.py against real sockets: every upstream pool's wire behaves as httpx's own
transport does where the service relies on it (limits and the pool's wait, timeouts, the
failures service.upstream maps, streamed bodies, encodings, cookies, TLS)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from service.errors import Overloaded, UpstreamRefused, UpstreamTimeout, UpstreamUnavailable
from service.transport import RACE_SECONDS, AiohttpTransport, upstream_pool
from service.upstream import UntrustedCertificate, UpstreamClient, upstream_call

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def server(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """A raw HTTP server on a free port running `handler` per connection; its base URL."""
    started = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = started.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        started.close()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n")
         if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    return head, (await reader.readexactly(length) if length else b"")


def reply(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (len(body), head.encode()) + body


async def keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request of the connection with its own body, and the Cookie and
    Authorization it carried."""
    try:
        while True:
            head, body = await read_request(reader)
            carried = {
                name: next(
                    (line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                     if line.lower().startswith(name + b":")),
                    b"",
                )
                for name in (b"cookie", b"authorization")
            }  # fmt: skip
            writer.write(
                reply(b'{"echo": "%s", "cookie": "%s", "authorization": "%s"}'
                      % (body, carried[b"cookie"], carried[b"authorization"]))
            )  # fmt: skip
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


def client(limits: httpx.Limits | None = None, **options) -> UpstreamClient:
    limits = limits or httpx.Limits(max_connections=200, max_keepalive_connections=50)
    verify = options.pop("verify", True)
    return UpstreamClient(
        transport=AiohttpTransport(verify=verify, limits=limits), follow_redirects=False, **options
    )


async def test_requests_come_back_whole_and_give_their_connection_back() -> None:
    async with server(keep_answering) as base, client(httpx.Limits(max_connections=2)) as http:
        for number in range(40):  # 40 requests through 2 connections: each one given back
            answer = await http.post(f"{base}/x", content=b"n%d" % number, timeout=5)
            assert answer.status_code == 200 and answer.json()["echo"] == f"n{number}"
        async with http.stream("GET", f"{base}/x", timeout=5) as streamed:
            assert b"echo" in await streamed.aread()
        # a streamed response left unread and closed gives its place back too
        for _ in range(3):
            async with http.stream("GET", f"{base}/x", timeout=5):
                pass
        replies = await asyncio.gather(*(http.get(f"{base}/x", timeout=5) for _ in range(20)))
        assert {r.status_code for r in replies} == {200}
        # a login in the address goes as httpx sends it: an Authorization header
        logged = await http.get(base.replace("//", "//solr:pw@") + "/x", timeout=5)
        assert logged.json()["authorization"] == "Basic c29scjpwdw=="


async def test_a_full_pool_is_overloaded_not_an_upstream_failure() -> None:
    held = asyncio.Event()

    async def never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await held.wait()
        writer.close()

    async with server(never) as base, client(httpx.Limits(max_connections=1)) as http:
        timeout = httpx.Timeout(30, pool=0.5)
        first = asyncio.create_task(http.get(f"{base}/x", timeout=timeout))
        await asyncio.sleep(0.3)
        with pytest.raises(Overloaded), upstream_call("Solr", timed_out="late", unreachable="gone"):
            await http.get(f"{base}/x", timeout=timeout)
        held.set()
        with pytest.raises(httpx.TransportError):
            await first


async def test_timeouts_and_failures_are_httpx_s() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf")
        await writer.drain()
        writer.close()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        await writer.drain()
        writer.close()

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async with client() as http:
        async with server(silent) as base:
            with pytest.raises(httpx.ReadTimeout):
                await http.get(f"{base}/x", timeout=0.5)
            with (
                pytest.raises(UpstreamTimeout, match="Solr late"),
                upstream_call("Solr", timed_out="late", unreachable="gone"),
            ):
                await http.get(f"{base}/x", timeout=0.5)
        for handler in (cut, garbage, hang_up):
            async with server(handler) as base:
                with (
                    pytest.raises(UpstreamUnavailable, match=r"Solr gone \(\w+Error\)"),
                    upstream_call("Solr", timed_out="late", unreachable="gone"),
                ):
                    await http.get(f"{base}/x", timeout=5)
                # what the failure says, and what it was caused by, never carries a secret
                # of the request: the address's login, a key in the query, a header's token
                with pytest.raises(httpx.TransportError) as failed:
                    await http.get(
                        base.replace("//", "//solr:s3cret@") + "/x?key=s3cret",
                        headers={"X-Api-Key": "s3cret"},
                        timeout=5,
                    )
                # (the chain a traceback prints; httpx's own exception holds the request, as
                # it always did, and is left out)
                chain, seen = [str(failed.value)], failed.value.__cause__
                while seen is not None:
                    chain.append(f"{seen!s} {seen!r} {vars(seen)!r}")
                    seen = seen.__cause__ or (
                        None if seen.__suppress_context__ else seen.__context__
                    )
                assert "s3cret" not in " ".join(chain), chain
        async with server(keep_answering) as base:
            closed = base  # the port freed once the server is gone
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{closed}/x", timeout=5)


async def test_a_streamed_body_arrives_as_it_is_written() -> None:
    go_on = asyncio.Event()

    async def events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(b"e\r\ndata: first\n\n\r\n")
        await writer.drain()
        await go_on.wait()  # the rest only once the client has read the first event
        writer.write(b"f\r\ndata: second\n\n\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    async with server(events) as base, client() as http:
        async with http.stream("POST", f"{base}/v1/chat", json={"stream": True}) as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "data: first"
            go_on.set()
            rest = [line async for line in lines]
        assert "data: second" in rest


async def test_an_encoded_body_is_decoded_and_cookies_are_kept_by_httpx() -> None:
    packed = gzip.compress(b'{"answer": "packed"}')

    async def encoded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head, _ = await read_request(reader)
        assert b"accept-encoding" in head.lower()
        writer.write(reply(packed, "Content-Encoding: gzip", "Set-Cookie: session=s1; Path=/"))
        await writer.drain()
        await keep_answering(reader, writer)

    async with server(encoded) as base, client() as http:
        first = await http.get(f"{base}/x", timeout=5)
        assert first.json() == {"answer": "packed"}
        assert (await http.get(f"{base}/x", timeout=5)).json()["cookie"] == "session=s1"


def _certificate(folder: Path) -> tuple[Path, Path]:
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


async def test_tls_is_checked_with_the_context_given(tmp_path: Path) -> None:
    key, cert = _certificate(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    untrusted = UntrustedCertificate("is not trusted", "refused the handshake")
    async with server(keep_answering, tls=served) as base:
        async with client() as http:  # the default CAs: a self-signed certificate is refused
            with (
                pytest.raises(UpstreamRefused, match="Solr is not trusted"),
                upstream_call("Solr", timed_out="", unreachable="", untrusted=untrusted),
            ):
                await http.get(f"{base}/x", timeout=5)
        trusting = ssl.create_default_context(cafile=str(cert))
        async with client(verify=trusting) as http:
            assert (await http.post(f"{base}/x", content=b"tls", timeout=5)).json()["echo"] == "tls"


async def test_an_upstream_that_stops_reading_a_long_body_is_a_write_timeout() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the head, then nothing more is read
        await asyncio.sleep(30)

    async with server(deaf) as base, client() as http:
        with pytest.raises(httpx.WriteTimeout):  # not a wait for ever (20 s: this test fails)
            sent = http.post(f"{base}/update", content=b"x" * 32_000_000, timeout=1)
            await asyncio.wait_for(sent, 20)


async def test_bytes_sent_on_an_idle_connection_are_not_the_next_answer() -> None:
    async def impatient(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply(b"ok"))
        await writer.drain()
        await asyncio.sleep(0.1)  # idle: a 408, then the connection closed a moment later
        writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)
        writer.close()

    async with server(impatient) as base, client() as http:
        assert (await http.get(f"{base}/a", timeout=5)).text == "ok"
        await asyncio.sleep(0.3)
        second = await http.get(f"{base}/b", timeout=5)  # on a new connection
        assert (second.status_code, second.text) == (200, "ok")


async def test_what_goes_on_the_wire_is_what_httpx_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    heads: list[bytes] = []

    async def recorder(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append((await read_request(reader))[0])
        writer.write(reply(b"seen", "Connection: close"))
        await writer.drain()
        writer.close()

    async with server(recorder) as base, client() as http:
        await http.post(f"{base}/select?q=a%2Fb%3Fc&fq=x%3A1", content=b"body", timeout=5)
    line, *fields = heads[0].decode().split("\r\n")
    assert line == "POST /select?q=a%2Fb%3Fc&fq=x%3A1 HTTP/1.1"
    assert not any(f.lower().startswith("content-type") for f in fields), fields


async def test_the_environment_s_proxy_carries_the_pool_s_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append((await read_request(reader))[0].split(b"\r\n")[0])
        writer.write(reply(b"via the proxy", "Connection: close"))
        await writer.drain()
        writer.close()

    async with server(proxy) as base, server(keep_answering) as direct:
        monkeypatch.setenv("HTTP_PROXY", base)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the local one asked directly
        async with upstream_pool() as http:
            proxied = await http.get("http://llm.internal.example/v1/models", timeout=5)
            assert proxied.text == "via the proxy"
            assert seen == [b"GET http://llm.internal.example/v1/models HTTP/1.1"]
            assert (await http.post(f"{direct}/x", content=b"d", timeout=5)).json()["echo"] == "d"
        assert len(seen) == 1


async def test_an_answer_begun_before_a_long_body_is_sent_is_read_whole() -> None:
    """A server that answers while it still reads a long body: the rest of the body leaves
    (the write timeout, ended by the answer's head, is not paced any more) and the answer is
    read whole, as httpx's own transport reads it."""

    async def answers_while_reading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(20):
            writer.write(b"3\r\nabc\r\n")
            await writer.drain()
            await reader.read(1 << 20)
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            while await reader.read(1 << 20):
                pass
        writer.close()

    async with server(answers_while_reading) as base:
        for transport in (AiohttpTransport(), httpx.AsyncHTTPTransport()):
            async with httpx.AsyncClient(transport=transport) as http:
                body = b"x" * (32 << 20)
                async with http.stream("POST", f"{base}/x", content=body, timeout=5) as got:
                    assert await got.aread() == b"abc" * 20, transport


async def test_a_request_the_server_hung_up_on_is_sent_once() -> None:
    """aiohttp sends a GET again when the server hangs up; httpx does not, and neither does
    the wire (a struggling upstream would see twice the load, its breaker half the
    failures)."""
    seen = 0

    async def hangs_up_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        nonlocal seen
        seen += 1
        await reader.readuntil(b"\r\n\r\n")
        if seen > 1:
            writer.write(reply(b"ok", "Connection: close"))
            await writer.drain()
        writer.close()

    async with (
        server(hangs_up_first) as base,
        httpx.AsyncClient(transport=AiohttpTransport()) as http,
    ):
        with pytest.raises(httpx.TransportError):
            await http.get(f"{base}/x", timeout=5)
    assert seen == 1


@pytest.mark.parametrize("how", ["closed", "reset"])
async def test_a_pooled_connection_closed_as_it_was_taken_is_asked_again_on_a_new_one(
    how: str,
) -> None:
    """The keep-alive race: the server's idle timeout closes a connection while the pool hands
    it to a request. The request (its body too) goes once more on a new connection; a new
    connection the server hangs up on is not asked a third time."""
    bodies: list[tuple[int, bytes]] = []
    connections = 0

    async def closes_its_idle_connection(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal connections
        connections += 1
        number = connections
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head, body = await read_request(reader)
                bodies.append((number, body))
                if b"/again" in head and (number == 1 or b"hang-up" in body):
                    if how == "reset":  # RST, not FIN: the socket closed with linger 0
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    writer.transport.abort() if how == "reset" else writer.close()
                    return
                writer.write(reply(body or b"first"))
                await writer.drain()
        writer.close()

    async with server(closes_its_idle_connection) as base, client() as http:
        assert (await http.get(f"{base}/first", timeout=5)).text == "first"
        again = await http.post(f"{base}/again", content=b'{"q": 1}', timeout=5)
        assert (again.status_code, again.text) == (200, '{"q": 1}')
        assert bodies == [(1, b""), (1, b'{"q": 1}'), (2, b'{"q": 1}')]

        bodies.clear()  # the new connection (2) is pooled now; both of its tries hang up
        with pytest.raises(httpx.TransportError):
            await http.post(f"{base}/again", content=b"hang-up", timeout=5)
        assert bodies == [(2, b"hang-up"), (3, b"hang-up")]


async def test_a_streamed_body_is_not_sent_again() -> None:
    """A body read from a stream cannot be sent twice: its request fails as httpx's would."""
    heads: list[bytes] = []
    connections = 0

    async def hangs_up_on_the_second(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                if len(heads) > 1:
                    break
                writer.write(reply(b"ok"))
                await writer.drain()
        writer.close()

    async def parts() -> AsyncIterator[bytes]:
        yield b"a"
        yield b"b"

    async with server(hangs_up_on_the_second) as base, client() as http:
        assert (await http.get(f"{base}/first", timeout=5)).text == "ok"
        with pytest.raises(httpx.TransportError):
            await http.post(f"{base}/stream", content=parts(), timeout=5)
    assert (len(heads), connections) == (2, 1)


@pytest.mark.parametrize(
    ("said", "sent"),
    [
        (b"", 2),  # nothing heard: the keep-alive race, asked again
        (b"HTTP/1.1 200 OK\r\nContent-Le", 1),  # an answer begun: the request was taken
        (b"HTTP/1.1 100 Continue\r\n\r\n", 1),
    ],
    ids=["nothing", "half a head", "100 Continue"],
)
async def test_a_server_that_began_to_answer_is_not_asked_again(said: bytes, sent: int) -> None:
    posts = 0

    async def answers_then_closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        nonlocal posts
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head, _ = await read_request(reader)
                if head.startswith(b"POST") and posts == 0:
                    posts += 1
                    writer.write(said)
                    await writer.drain()
                    break
                posts += head.startswith(b"POST")
                writer.write(reply(b"ok"))
                await writer.drain()
        writer.close()

    async with server(answers_then_closes) as base, client() as http:
        assert (await http.get(f"{base}/warm", timeout=5)).text == "ok"  # a pooled connection
        if sent == 2:
            assert (await http.post(f"{base}/p", content=b"x", timeout=5)).text == "ok"
        else:
            with pytest.raises(httpx.TransportError):
                await http.post(f"{base}/p", content=b"x", timeout=5)
    assert posts == sent


async def test_a_server_that_worked_then_hung_up_is_not_asked_again() -> None:
    """Past RACE_SECONDS, a hang-up on a pooled connection is the server's failure (a worker
    killed at its own timeout), not the keep-alive race."""
    posts = 0

    async def works_then_dies(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        nonlocal posts
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head, _ = await read_request(reader)
                if head.startswith(b"POST"):
                    posts += 1
                    await asyncio.sleep(RACE_SECONDS + 0.5)
                    break
                writer.write(reply(b"ok"))
                await writer.drain()
        writer.close()

    async with server(works_then_dies) as base, client() as http:
        assert (await http.get(f"{base}/warm", timeout=5)).text == "ok"
        with pytest.raises(httpx.TransportError):
            await http.post(f"{base}/p", content=b"x", timeout=10)
    assert posts == 1


async def test_the_second_try_is_on_a_new_connection() -> None:
    """Two pooled connections the server closes together: the second try does not take the
    other stale one."""
    connections = 0
    sent_on: list[int] = []

    async def one_answer_each(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        nonlocal connections
        connections += 1
        number = connections
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            for served in range(2):
                await read_request(reader)
                sent_on.append(number)
                if served:  # its second request: closed, unanswered
                    break
                await asyncio.sleep(0.1)  # the two warming requests overlap: two connections
                writer.write(reply(b"ok"))
                await writer.drain()
        writer.close()

    async with server(one_answer_each) as base, client() as http:
        await asyncio.gather(*(http.get(f"{base}/{n}", timeout=5) for n in "ab"))
        sent_on.clear()
        assert (await http.post(f"{base}/p", content=b"x", timeout=5)).text == "ok"
    assert len(sent_on) == 2 and sent_on[1] == 3, sent_on

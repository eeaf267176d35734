"""What issue 84 cut from a question's CPU does what it did: the upstream pools read a
response's cookies only when it sets some (and keep those), and ASCII text is folded without
NFKD to the same words."""

from __future__ import annotations

import http.cookiejar
import string
import unicodedata

import httpx
import pytest

from service.text.fold import folded
from service.upstream import UpstreamClient


def _upstream(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/login":
        return httpx.Response(200, headers={"Set-Cookie": "session=s1; Path=/"})
    return httpx.Response(200, json={"cookie": request.headers.get("cookie")})


async def test_cookies_are_read_only_from_a_response_that_sets_some_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[object] = []
    extract = http.cookiejar.CookieJar.extract_cookies

    def counted(jar: http.cookiejar.CookieJar, *args: object) -> None:
        read.append(args)
        extract(jar, *args)

    monkeypatch.setattr(http.cookiejar.CookieJar, "extract_cookies", counted)
    async with UpstreamClient(transport=httpx.MockTransport(_upstream)) as client:
        assert (await client.get("http://solr/select")).json() == {"cookie": None}
        assert read == []
        await client.get("http://solr/login")
        assert len(read) == 1 and dict(client.cookies) == {"session": "s1"}
        assert (await client.get("http://solr/select")).json() == {"cookie": "session=s1"}
        client.cookies = {"other": "o"}  # a jar set later reads as the first did
        await client.get("http://solr/select")
        assert len(read) == 1 and dict(client.cookies) == {"other": "o"}


@pytest.mark.parametrize(
    "text", [string.printable, "Symphony No. 7, 1,5 km; l'État", "Réglementé № 7 ǅ ﬁ", ""]
)
def test_folding_ascii_skips_nfkd_and_reads_the_same(text: str) -> None:
    decomposed = unicodedata.normalize("NFKD", text)
    general = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    assert folded(text) == general


async def test_an_upstream_setting_a_new_cookie_at_every_answer_fills_no_jar() -> None:
    """A hostile upstream's cookies are bounded: the jar, and the Cookie header every later
    request to it carries, do not grow with each of its answers."""
    answers = iter(range(10_000))

    def setting(request: httpx.Request) -> httpx.Response:
        headers = {"Set-Cookie": f"c{next(answers)}=x; Path=/"}
        return httpx.Response(200, headers=headers, json={"cookie": request.headers.get("cookie")})

    async with UpstreamClient(transport=httpx.MockTransport(setting)) as client:
        for _ in range(300):
            sent = (await client.get("http://llm/v1/chat/completions")).json()["cookie"]
        assert len(client.cookies.jar) <= 64 and len(sent or "") < 64 * 16

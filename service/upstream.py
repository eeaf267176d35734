"""The one mapping from httpx's failures to the service's upstream errors, for Solr, the LLM
and the embeddings API alike.

    >>> with upstream_call("Solr", timed_out="did not answer in time", unreachable="..."):
    ...     response = await http.get(url)

Their connection pools are UpstreamClients: httpx's AsyncClient, a response's cookies read only
when it sets some.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import httpx

from service.errors import Overloaded, UpstreamRefused, UpstreamTimeout, UpstreamUnavailable

# how long a request waits for a free connection of a shared pool: a full pool means the
# service is busy, not that the upstream failed, and says so quickly (Overloaded)
POOL_WAIT_SECONDS = 5.0


class UpstreamClient(httpx.AsyncClient):
    """httpx's AsyncClient, whose cookie jar reads a response's cookies only when it sets
    some: httpx reads every response's through urllib's cookie machinery (a request and a
    response made for it, about a tenth of a millisecond of CPU on each of a question's five
    to seven upstream requests, issue 84), and Solr, the LLM and the model server set none.
    An upstream that sets cookies has them kept and sent back as before (MAX_COOKIES of
    them at most)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._jar = _CookiesWhenSet(super().cookies)

    @property
    def cookies(self) -> httpx.Cookies:
        return self._jar

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._jar = _CookiesWhenSet(cookies)


# cookies one pool keeps: an upstream that sets a new one at every answer (hostile, or a
# misconfigured proxy) would grow the jar and every later request's Cookie header for ever
MAX_COOKIES = 64


class _CookiesWhenSet(httpx.Cookies):
    def extract_cookies(self, response: httpx.Response) -> None:
        # urllib's jar reads these two headers alone (CookieJar.make_cookies)
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)
            if len(self.jar) > MAX_COOKIES:  # the expired ones first, else all: set again
                self.jar.clear_expired_cookies()
                if len(self.jar) > MAX_COOKIES:
                    self.jar.clear()


class UntrustedCertificate(NamedTuple):
    """What to say when TLS fails: the upstream's certificate is not trusted here, or the
    upstream refused the handshake (it wants a client certificate, or not ours)."""

    certificate: str
    handshake: str


@contextmanager
def upstream_call(
    where: str, *, timed_out: str, unreachable: str, untrusted: UntrustedCertificate | None = None
) -> Iterator[None]:
    """httpx's failures inside the block, as UpstreamTimeout (`where timed_out`) or
    UpstreamUnavailable (`where unreachable (the failure's kind)`): no address, no token; a
    wait for a pooled connection past POOL_WAIT_SECONDS is Overloaded, no upstream failure;
    with `untrusted`, a TLS failure is UpstreamRefused saying which key mends it."""
    try:
        yield
    except httpx.PoolTimeout:
        raise Overloaded(
            f"every connection to {where} is in use by other requests; retry shortly",
            retry_after=2,
        ) from None
    except httpx.TimeoutException:
        raise UpstreamTimeout(f"{where} {timed_out}") from None
    except (httpx.TransportError, ssl.SSLError) as error:  # ssl's own: a refusal mid-read
        tls = _tls_failure(error)
        if untrusted is not None and tls is not None:
            said = untrusted.certificate if tls == "certificate" else untrusted.handshake
            raise UpstreamRefused(f"{where} {said}") from None
        raise UpstreamUnavailable(f"{where} {unreachable} ({type(error).__name__})") from None


def _tls_failure(error: BaseException) -> str | None:
    """ "certificate" when the peer's certificate failed our check, "handshake" when TLS failed
    otherwise (the peer refused ours, or wanted one), None when TLS played no part."""
    seen: BaseException | None = error
    for _ in range(8):  # httpx -> httpcore -> ssl: a short chain
        if seen is None:
            break
        if isinstance(seen, ssl.SSLCertVerificationError):
            return "certificate"
        if isinstance(seen, ssl.SSLError):
            return "handshake"
        seen = seen.__cause__ or seen.__context__
    text = str(error)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "certificate"
    return "handshake" if "SSL" in text or "TLS" in text else None

"""How the service proves itself to a secured Solr: its login (Solr's BasicAuthPlugin user and
password, or a JWTAuthPlugin bearer token) and its TLS (the CA bundle that signs Solr's
certificate, a client certificate for mutual TLS).

    >>> access = SolrAccess.of(settings.solr)
    >>> access.pool(pools)                           # TLS lives in the connection pool
    >>> http.get(url, headers=access.headers)        # the login in each request's headers

Both are paired in one place, `SolrClient.of(layout, pools)`: the client of a layout, over
the pool of its TLS, with its login. `pools` opens (or reuses) a pool by name: the runtime's
(`Runtime.pool`, shared by every request), or a command's own `SolrPools`:

    >>> async with SolrPools() as pools:
    ...     solr = SolrClient.of(settings.solr, pools)

The login goes only to Solr's nodes (solr.url's, and the nodes their cluster or ZooKeeper
names); the keys that hold it are declared `sent_to=SOLR_NODES` (solr.url, solr.zk.hosts,
solr.nodes.discover), so an admin who changes any of them must give them again. Every file
and value is checked when rag.properties loads (`tls_context`), so a wrong one is a config
error naming its key, never a request's failure.
"""

from __future__ import annotations

import base64
import hashlib
import ssl
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol

import httpx

from service.config.tls import TlsFiles, tls_context

if TYPE_CHECKING:
    from service.config.settings import SolrSettings

Login = Literal["none", "password", "token"]
# where an operator sets each secret (the environment, never the file in production)
PASSWORD_VARIABLE = "SOLR_RAG_SOLR_AUTH_PASSWORD"
TOKEN_VARIABLE = "SOLR_RAG_SOLR_AUTH_TOKEN"


@dataclass(frozen=True)
class SolrAccess:
    """One Solr's login and TLS, as rag.properties gives them."""

    login: Login = "none"
    headers: tuple[tuple[str, str], ...] = ()
    tls: TlsFiles = field(default_factory=TlsFiles)

    @classmethod
    def of(cls, layout: SolrSettings) -> SolrAccess:
        token = layout.auth_token.get_secret_value()
        password = layout.auth_password.get_secret_value()
        tls = layout.tls
        if token:
            return cls("token", (("Authorization", f"Bearer {token}"),), tls)
        if layout.auth_user:
            pair = f"{layout.auth_user}:{password}".encode()
            basic = base64.b64encode(pair).decode("ascii")
            return cls("password", (("Authorization", f"Basic {basic}"),), tls)
        return cls("none", (), tls)

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What httpx checks Solr's certificate with."""
        return tls_context(self.tls) or True

    def pool_name(self) -> str:
        """The connection pool for this TLS (a pool's TLS is fixed when it opens)."""
        if not self.tls.any:
            return "solr"
        digest = hashlib.sha256(repr(self.tls).encode()).hexdigest()[:12]
        return f"solr-tls-{digest}"

    def pool(self, pools: Pools) -> httpx.AsyncClient:
        """The connection pool of this TLS, from `pools`."""
        return pools(self.pool_name(), verify=self.verify)

    def refusal(self, status: int, method: str, path: str) -> str:
        """What to tell an operator when Solr answers 401 or 403 (no secret, no address)."""
        if status == 401:
            if self.login == "none":
                return (
                    "Solr asks for credentials (401): set solr.auth.user and its password in "
                    f"{PASSWORD_VARIABLE} (BasicAuth), or a token in {TOKEN_VARIABLE} (JWT)"
                )
            if self.login == "token":
                return f"Solr refused the token (401): check {TOKEN_VARIABLE}"
            return (
                f"Solr refused the credentials (401): check solr.auth.user and {PASSWORD_VARIABLE}"
            )
        if path.endswith("/update"):
            return (
                f"Solr's authorization refused a write to {path.strip('/').split('/')[0]} "
                "(403): the Solr user may read but not write; ingestion, the answer cache and "
                "conversations need Solr's update permission (docs/security.md)"
            )
        return (
            f"Solr's authorization refused {method} {path} (403): the Solr user needs Solr's "
            "read, schema-read, config-read and collection-admin-read permissions to answer "
            "(docs/security.md)"
        )


class Pools(Protocol):
    """Where connection pools come from, one per name, opened with the TLS given on first use
    (Runtime.pool, SolrPools)."""

    def __call__(
        self, upstream: str, *, verify: ssl.SSLContext | bool = True
    ) -> httpx.AsyncClient: ...


class SolrPools:
    """The connection pools a command or a one-off job opens for Solr (requests use the
    runtime's), closed when it is done: `async with SolrPools() as pools`."""

    def __init__(self) -> None:
        self._pools: dict[str, httpx.AsyncClient] = {}

    def __call__(self, upstream: str, *, verify: ssl.SSLContext | bool = True) -> httpx.AsyncClient:
        if upstream not in self._pools:
            self._pools[upstream] = httpx.AsyncClient(verify=verify, follow_redirects=False)
        return self._pools[upstream]

    async def __aenter__(self) -> SolrPools:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        pools, self._pools = self._pools, {}
        for pool in pools.values():
            await pool.aclose()

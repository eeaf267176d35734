"""An async client for the parts of Solr's HTTP API we use: select, update, ping.

Every request turns Solr's macro expansion off (`expandMacros=false`): a caller's value that
holds `${...}` (an id, a question, a filter) is sent as the text it is, never a template.

httpx rather than pysolr: the service is async end to end (pysolr would block the event loop),
and one pooled httpx client serves Solr and the LLM alike. Every failure becomes one of the
service's upstream errors, with a reason that names Solr and what to check.

Several nodes (SolrCloud): each request goes to the next node in turn (service.retrieval.nodes)
and, when that node cannot be reached or answers 5xx, to another, up to MAX_ATTEMPTS nodes.
Writes are retried too: every update the service sends is idempotent (documents carry their
ids, deletes name ids or queries, a commit commits), so sending one twice changes nothing; a
write that every node failed (timed out, unreachable, 5xx) is sent again solr.write.retries
times, after 1, 2, 4... s (WRITE_BACKOFF_MAX at most), so a Solr that stalls once costs an
ingestion a pause, not the run. A write that timed out is given twice the read timeout on its
next try (up to WRITE_PATIENCE_MAX_SECONDS) by a command's client (`patient`: ingest, sync): a
busy Solr embedding passages is still at work. The service's own writes (a conversation kept
after its answer) keep solr.timeout.read.

A secured Solr (service.retrieval.access): the login rides on every request's headers, the
TLS in the connection pool the client is given (`SolrClient.of` pairs them); a 401 or 403
is an UpstreamRefused naming the key to set, never tried again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import orjson

from service import tracing
from service.config.field_map import SchemaFields
from service.errors import (
    TechnicalError,
    UpstreamBadResponse,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from service.flights import Flights
from service.metrics import SOLR_FAILOVERS, upstream_error
from service.observability import request_headers, request_id_var
from service.retrieval.access import Pools, SolrAccess
from service.retrieval.counts import Counts
from service.retrieval.nodes import SolrNodes
from service.retrieval.zookeeper import ZooKeeperUnavailable, live_nodes
from service.upstream import POOL_WAIT_SECONDS, UntrustedCertificate, upstream_call

if TYPE_CHECKING:
    from service.config.settings import SolrSettings

log = logging.getLogger(__name__)
_JSON = {"wt": "json"}
NO_MACROS = {"expandMacros": "false"}

Params = Mapping[str, str | int | float | Sequence[str]]
MAX_ATTEMPTS = 3  # nodes one call may try
DISCOVERY_TIMEOUT = httpx.Timeout(5.0, connect=2.0)  # learning the nodes must not hold a request
ZOOKEEPER_TIMEOUT = 2.0  # seconds to connect to ZooKeeper and read the live nodes
SCHEMA_SECONDS = 60.0  # how long a collection's fields are taken as known
MAX_SCHEMAS = 64  # collections whose fields are remembered
PING_TIMEOUT = httpx.Timeout(2.0)  # two nodes' tries fit in a health probe's 5 s
WRITE_BACKOFF_MAX = 8.0  # seconds between two tries of a write, at most
WRITE_PATIENCE_MAX_SECONDS = 300.0  # a retried write's read timeout grows to this, at most


class _ServerError(UpstreamBadResponse):
    """Solr answered 5xx: in a cluster, often one node's trouble reaching another (a replica
    just gone), so the call is tried on another node; the node is not marked down, as a
    request of a hostile client might be what fails."""


class SolrRefusedRequest(UpstreamBadResponse):
    """Solr answered 400: the request, as written, is not one it can run (a filter's value
    that does not suit its field's type). `solr_message` is Solr's own words for it."""

    def __init__(self, reason: str, solr_message: str = "") -> None:
        super().__init__(reason)
        self.solr_message = solr_message


# what makes a call try another node: the node not reached or unavailable (503), or a 5xx
RETRY_ON: tuple[type[TechnicalError], ...] = (UpstreamUnavailable, _ServerError)
# what makes a write be sent again later, once every node was tried: a timeout too (the write
# may have been applied; sending it again changes nothing)
WRITE_RETRY_ON: tuple[type[TechnicalError], ...] = (*RETRY_ON, UpstreamTimeout)


class SchemaCache(dict[str, tuple[float, "SchemaFields"]]):
    """Each collection's fields as Solr last listed them, and when (SchemaFields): shared by
    the clients of one Solr, so a request does not ask Solr for them again; and the readings
    under way (`reading`), so requests that come together wait for one reading, not one each;
    and how many documents each collection's filters kept lately, and when (`counts`)."""

    def __init__(self) -> None:
        super().__init__()
        self.reading: Flights[str, SchemaFields] = Flights()
        self.counts = Counts()


class SolrClient:
    """Talks to Solr (`http://host:8983/solr`, or several nodes) over a shared httpx client.

    `schemas`: the fields known of each collection, shared by the clients of one Solr (the
    runtime's); a client of its own otherwise."""

    @classmethod
    def of(
        cls,
        layout: SolrSettings,
        pools: Pools,
        *,
        nodes: SolrNodes | None = None,
        schemas: SchemaCache | None = None,
        patient: bool = False,
    ) -> SolrClient:
        """The client of the Solr `layout` names (solr.url and its nodes, its timeouts, its
        login, its write retries), over the pool of its TLS (solr.tls.*) that `pools` gives:
        the one way the runtime (`Runtime.pool`, with what it learnt of the `nodes` and their
        `schemas`) and a command (`SolrPools`) make one."""
        access = SolrAccess.of(layout)
        return cls(
            access.pool(pools),
            SolrNodes.configured(layout) if nodes is None else nodes,
            connect_timeout=layout.timeout_connect,
            read_timeout=layout.timeout_read,
            schemas=schemas,
            access=access,
            write_retries=layout.write_retries,
            patient=patient,
        )

    def __init__(
        self,
        http: httpx.AsyncClient,
        nodes: SolrNodes | str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        schemas: SchemaCache | None = None,
        access: SolrAccess | None = None,
        write_retries: int = 0,
        patient: bool = False,
    ) -> None:
        """`patient`: a write that timed out waits twice as long on its next try (`_longer`):
        a command's (ingest, sync), never the service's, whose requests have their deadline."""
        self._http = http
        self._access = access or SolrAccess()
        self._write_retries = write_retries
        self._patient = patient
        self.nodes = SolrNodes.parse(nodes) if isinstance(nodes, str) else nodes
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout, pool=POOL_WAIT_SECONDS)
        self._schemas = SchemaCache() if schemas is None else schemas
        self.counts = self._schemas.counts  # service.retrieval.counts

    async def select(self, collection: str, params: Params) -> dict[str, Any]:
        """Run a search; `params` go in a POST body (Solr's JSON request API: its `params`
        block) so long queries never hit URL limits, and a kNN query's vector is written by
        json's encoder rather than URL-encoded a character at a time."""
        form = {**params, **NO_MACROS}  # in the body's params too: Solr reads both
        form.setdefault("wt", "json")
        form.setdefault("rid", request_id_var.get())  # Solr's request log shows it
        return await self._request("POST", f"/{collection}/select", json={"params": form})

    async def add(
        self, collection: str, documents: Sequence[Mapping[str, Any]], *, commit: bool = False
    ) -> None:
        await self._request(
            "POST",
            f"/{collection}/update",
            write=True,
            params={"commit": str(commit).lower()},
            content=orjson.dumps(list(documents)),
            headers={"Content-Type": "application/json"},
        )

    async def update(
        self, collection: str, commands: Sequence[tuple[str, object]], *, commit: bool = False
    ) -> None:
        """Several update commands in one request, in order: `("delete", {"query": q})`,
        `("add", {"doc": d})`... Solr's JSON update format repeats keys, so the body is
        written by hand rather than from a dict."""
        body = b",".join(
            orjson.dumps(name) + b":" + orjson.dumps(value) for name, value in commands
        )
        await self._request(
            "POST",
            f"/{collection}/update",
            write=True,
            params={"commit": str(commit).lower()},
            content=b"{" + body + b"}",
            headers={"Content-Type": "application/json"},
        )

    async def delete_by_query(self, collection: str, query: str, *, commit: bool = True) -> None:
        await self._request(
            "POST",
            f"/{collection}/update",
            write=True,
            params={"commit": str(commit).lower()},
            json={"delete": {"query": query}},
        )

    async def get(
        self, collection: str, document_id: str, fields: str = "*"
    ) -> dict[str, Any] | None:
        """One document by id as the latest update left it, committed or not (Solr's
        real-time get), or None."""
        body = await self._request(
            "GET", f"/{collection}/get", params={"id": document_id, "fl": fields, "wt": "json"}
        )
        found = body.get("doc")
        return found if isinstance(found, dict) else None

    async def commit(self, collection: str) -> None:
        await self._request(
            "POST", f"/{collection}/update", write=True, params={"commit": "true"}, json={}
        )

    async def ping(self, collection: str) -> None:
        """A probe asks whether some node answers: with several, a slow node is passed over
        like a dead one."""
        several = self.nodes.counts()[1] > 1
        await self._request(
            "GET",
            f"/{collection}/admin/ping",
            params={"wt": "json"},
            timeout=PING_TIMEOUT if several else self._timeout,
            retry_on=(*RETRY_ON, UpstreamTimeout),
        )

    async def schema_fields(self, collection: str) -> SchemaFields:
        """The collection's declared and dynamic fields (which are searchable), asked of Solr
        at most once every SCHEMA_SECONDS: what a filter or a search may name."""
        held = self._schemas.get(collection)
        if held is not None and time.monotonic() - held[0] < SCHEMA_SECONDS:
            return held[1]
        return await self._schemas.reading.join(collection, lambda: self._read_schema(collection))

    async def _read_schema(self, collection: str) -> SchemaFields:
        now = time.monotonic()
        params = {"wt": "json", "showDefaults": "true"}
        # one after the other: a Solr that fails is asked once, its failure counted once
        declared = await self._request("GET", f"/{collection}/schema/fields", params=params)
        dynamic = await self._request("GET", f"/{collection}/schema/dynamicfields", params=_JSON)
        fields = declared.get("fields", [])
        schema = SchemaFields(
            declared=frozenset(str(f.get("name")) for f in fields),
            dynamic=tuple(str(f.get("name")) for f in dynamic.get("dynamicFields", [])),
            unsearchable=frozenset(str(f.get("name")) for f in fields if f.get("indexed") is False),
        )
        if len(self._schemas) > MAX_SCHEMAS:
            self._schemas.clear()
        self._schemas[collection] = (now, schema)
        return schema

    async def field_type(self, collection: str, field: str) -> dict[str, Any]:
        """The type of a declared field, with its properties (`class`, `vectorDimension`)."""
        name = quote(field, safe="")
        found = await self._request("GET", f"/{collection}/schema/fields/{name}", params=_JSON)
        type_name = quote(str(found.get("field", {}).get("type", "")), safe="")
        body = await self._request(
            "GET", f"/{collection}/schema/fieldtypes/{type_name}", params=_JSON
        )
        return dict(body.get("fieldType", {}))

    async def config(self, collection: str, section: str) -> object:
        """One section of the collection's effective configuration (Solr's Config API:
        `queryParser`, `updateRequestProcessorChain`...); None when it has none."""
        path = f"/{collection}/config/{quote(section, safe='')}"
        body = await self._request("GET", path, params={"wt": "json", "omitHeader": "true"})
        return body.get("config", {}).get(section)

    async def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One call, a span of the question's trace when tracing is on (its collection and
        kind: service.tracing, never its text), whichever nodes and tries it takes."""
        with tracing.solr_call(method, path, kwargs.get("json")):
            return await self._call(method, path, **kwargs)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        retry_on: tuple[type[TechnicalError], ...] = RETRY_ON,
        write: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """One call, on the nodes in turn; a `write` every node failed is sent again,
        solr.write.retries times, after a pause that doubles."""
        if not write or not self._write_retries:
            return await self._on_some_node(method, path, retry_on, **kwargs)
        patience = self._timeout
        for attempt in range(self._write_retries + 1):
            try:
                return await self._on_some_node(
                    method, path, WRITE_RETRY_ON, timeout=patience, **kwargs
                )
            except WRITE_RETRY_ON as error:
                if attempt == self._write_retries:
                    raise
                if self._patient and isinstance(error, UpstreamTimeout):  # a busy Solr
                    patience = _longer(patience)
                pause = min(2.0**attempt, WRITE_BACKOFF_MAX)
                log.warning(
                    "%s; the write is sent again in %gs (try %d of %d)",
                    error.reason,
                    pause,
                    attempt + 2,
                    self._write_retries + 1,
                )
                await asyncio.sleep(pause)
        raise AssertionError("the last try returns or raises")  # pragma: no cover

    async def _on_some_node(
        self,
        method: str,
        path: str,
        retry_on: tuple[type[TechnicalError], ...],
        **kwargs: Any,
    ) -> dict[str, Any]:
        await self._learn_nodes()
        tries = self.nodes.candidates()[:MAX_ATTEMPTS]
        answered: TechnicalError | None = None  # the last failure a node answered with
        for attempt, node in enumerate(tries, start=1):
            try:
                body = await self._request_once(node, method, path, **kwargs)
            except UpstreamRefused as error:  # the configuration's fault: every node refuses
                upstream_error("solr", error.metric)
                log.warning("%s (Solr node %s)", error.reason, node)
                raise
            except retry_on as error:  # another node may serve
                if isinstance(error, UpstreamUnavailable):  # not reached, or 503: the node's
                    self.nodes.failed(node, error.reason)  # fault (a 500 may be the request's)
                else:
                    answered = error
                upstream_error("solr", error.metric)
                if attempt == len(tries):
                    log.warning("%s (Solr node %s, the last one to try)", error.reason, node)
                    raise (answered or error) from None  # what a node said tells more
                log.warning("%s (Solr node %s); trying another node", error.reason, node)
                SOLR_FAILOVERS.inc()
                continue
            except TechnicalError as error:
                upstream_error("solr", error.metric)
                # reasons reach anonymous callers, so they name Solr without its address
                log.warning("%s (Solr node %s)", error.reason, node)
                raise
            self.nodes.succeeded(node)
            return body
        raise AssertionError("SolrNodes always lists a node")  # pragma: no cover

    async def _learn_nodes(self) -> None:
        """In SolrCloud, the live nodes, asked of ZooKeeper (solr.zk.hosts) or of a node, now
        and then (see SolrNodes)."""
        if not self.nodes.claim_refresh():
            return
        live: list[str] | None = None
        scheme: str | None = None
        try:
            if self.nodes.zk_hosts:
                try:
                    live, scheme = await asyncio.to_thread(
                        live_nodes, self.nodes.zk_hosts, ZOOKEEPER_TIMEOUT, self.nodes.zk_digest
                    )
                    return
                except ZooKeeperUnavailable as error:
                    log.warning("%s (solr.zk.hosts); asking solr.url's nodes", error)
            for node in self.nodes.candidates()[:MAX_ATTEMPTS]:
                try:
                    status = await self._request_once(
                        node,
                        "GET",
                        "/admin/collections",
                        params={"action": "CLUSTERSTATUS", "wt": "json"},
                        timeout=DISCOVERY_TIMEOUT,
                    )
                except TechnicalError:
                    continue  # a standalone Solr answers 400: it is its own only node
                names = status.get("cluster", {}).get("live_nodes")
                if isinstance(names, list) and names:
                    live = [str(name) for name in names]
                break
        finally:
            self.nodes.refreshed(live, scheme)

    def _unreachable(self, node: str) -> str:
        """What a connection that failed says; over https without a client certificate, that
        Solr may want one (TLS 1.3 lets a server refuse it after the handshake: the client
        then sees only a closed connection)."""
        said = "is unreachable; check that Solr runs and solr.url is right"
        if node.startswith("https://") and not self._access.tls.cert:
            said += ", and whether it asks for a client certificate (solr.tls.cert, solr.tls.key)"
        return said

    async def _request_once(
        self, node: str, method: str, path: str, **kwargs: Any
    ) -> dict[str, Any]:
        where = "Solr"
        kwargs["headers"] = {
            **request_headers(),
            **dict(self._access.headers),
            **kwargs.get("headers", {}),
        }
        # no value we send is ever a template: Solr would expand ${...} in any parameter (an
        # id, a query, a filter) from the request's other parameters
        kwargs["params"] = {**kwargs.get("params", {}), **NO_MACROS}
        kwargs.setdefault("timeout", self._timeout)
        with upstream_call(
            where,
            timed_out=f"did not answer {path} in time; check Solr's load or raise "
            "solr.timeout.read",
            unreachable=self._unreachable(node),
            untrusted=UntrustedCertificate(
                "presents a certificate this service does not trust: set solr.tls.ca to the "
                "PEM file of the CA that signs it",
                "refused the TLS handshake: it may ask for a client certificate "
                "(solr.tls.cert, solr.tls.key)",
            ),
        ):
            response = await self._http.request(method, node + path, **kwargs)
        if response.status_code in (401, 403):
            raise UpstreamRefused(self._access.refusal(response.status_code, method, path))
        if response.status_code == 503:  # no leader yet, a core loading: another node may do
            raise UpstreamUnavailable(f"{where} answered 503 to {path}: {_solr_message(response)}")
        if response.status_code >= 400:
            # 502: what Solr itself calls failed (the text-to-vector plugin's embeddings API),
            # and every node would fail alike: not tried again
            retried = response.status_code >= 500 and response.status_code != 502
            message = _solr_message(response)
            said = f"{where} answered {response.status_code} to {path}: {message}"
            if response.status_code == 400:
                raise SolrRefusedRequest(said, message)
            raise (_ServerError if retried else UpstreamBadResponse)(said)
        try:
            return _parsed(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise UpstreamBadResponse(f"{where} answered {path} with something not JSON") from None


def _longer(timeout: httpx.Timeout) -> httpx.Timeout:
    """A write's read timeout for its next try once it timed out: twice the last, up to
    WRITE_PATIENCE_MAX_SECONDS (never below solr.timeout.read). Solr may still be at work on
    the last try (embedding its passages on a busy box): the same wait would time out again,
    each try adding to its load."""
    if timeout.read is None:  # no limit: none to grow
        return timeout
    read = timeout.read
    return httpx.Timeout(
        max(read, min(read * 2, WRITE_PATIENCE_MAX_SECONDS)),
        connect=timeout.connect,
        pool=timeout.pool,
    )


def _parsed(body: bytes) -> dict[str, Any]:
    """Solr's JSON, by orjson: several times faster than json on long stored texts, which
    matters as no parser lets the event loop run meanwhile; json reads what orjson refuses
    (Solr writes a NaN score as NaN)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _solr_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("error", {}).get("msg", ""))[:300] or response.reason_phrase
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return response.reason_phrase

"""An async client for the parts of Solr's HTTP API we use: select, update, ping.

httpx rather than pysolr: the service is async end to end (pysolr would block the event loop),
and one pooled httpx client serves Solr and the LLM alike. Every failure becomes one of the
service's upstream errors, with a reason that names Solr and what to check.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from service.errors import (
    TechnicalError,
    UpstreamBadResponse,
)
from service.metrics import upstream_error
from service.observability import request_headers, request_id_var
from service.upstream import upstream_call

log = logging.getLogger(__name__)
_JSON = {"wt": "json"}

Params = Mapping[str, str | int | float | Sequence[str]]


class SolrClient:
    """Talks to one Solr base URL (`http://host:8983/solr`) over a shared httpx client."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
    ) -> None:
        self._http = http
        self.base_url = base_url.rstrip("/")
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)

    async def select(self, collection: str, params: Params) -> dict[str, Any]:
        """Run a search; `params` go in a POST form so long queries never hit URL limits."""
        form = {key: value for key, value in params.items()}
        form.setdefault("wt", "json")
        form.setdefault("rid", request_id_var.get())  # Solr's request log shows it
        return await self._request("POST", f"/{collection}/select", data=form)

    async def add(
        self, collection: str, documents: Sequence[Mapping[str, Any]], *, commit: bool = False
    ) -> None:
        await self._request(
            "POST",
            f"/{collection}/update",
            params={"commit": str(commit).lower()},
            json=list(documents),
        )

    async def update(
        self, collection: str, commands: Sequence[tuple[str, object]], *, commit: bool = False
    ) -> None:
        """Several update commands in one request, in order: `("delete", {"query": q})`,
        `("add", {"doc": d})`... Solr's JSON update format repeats keys, so the body is
        written by hand rather than from a dict."""
        body = "{" + ",".join(f"{json.dumps(name)}:{json.dumps(value)}" for name, value in commands)
        body += "}"
        await self._request(
            "POST",
            f"/{collection}/update",
            params={"commit": str(commit).lower()},
            content=body.encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )

    async def delete_by_query(self, collection: str, query: str, *, commit: bool = True) -> None:
        await self._request(
            "POST",
            f"/{collection}/update",
            params={"commit": str(commit).lower()},
            json={"delete": {"query": query}},
        )

    async def commit(self, collection: str) -> None:
        await self._request("POST", f"/{collection}/update", params={"commit": "true"}, json={})

    async def ping(self, collection: str) -> None:
        await self._request("GET", f"/{collection}/admin/ping", params={"wt": "json"})

    async def field_names(self, collection: str) -> set[str]:
        """The fields the collection's schema declares (not dynamic ones)."""
        body = await self._request("GET", f"/{collection}/schema/fields", params={"wt": "json"})
        return {str(field.get("name")) for field in body.get("fields", [])}

    async def field_type(self, collection: str, field: str) -> dict[str, Any]:
        """The type of a declared field, with its properties (`class`, `vectorDimension`)."""
        name = quote(field, safe="")
        found = await self._request("GET", f"/{collection}/schema/fields/{name}", params=_JSON)
        type_name = quote(str(found.get("field", {}).get("type", "")), safe="")
        body = await self._request(
            "GET", f"/{collection}/schema/fieldtypes/{type_name}", params=_JSON
        )
        return dict(body.get("fieldType", {}))

    async def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            return await self._request_once(method, path, **kwargs)
        except TechnicalError as error:
            upstream_error("solr", error.metric)
            # reasons reach anonymous callers, so they name Solr without its address
            log.warning("%s (Solr at %s)", error.reason, self.base_url)
            raise

    async def _request_once(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        url = self.base_url + path
        where = "Solr"
        kwargs["headers"] = {**request_headers(), **kwargs.get("headers", {})}
        with upstream_call(
            where,
            timed_out=f"did not answer {path} in time; check Solr's load or raise "
            "solr.timeout.read",
            unreachable="is unreachable; check that Solr runs and solr.url is right",
        ):
            response = await self._http.request(method, url, timeout=self._timeout, **kwargs)
        if response.status_code >= 400:
            raise UpstreamBadResponse(
                f"{where} answered {response.status_code} to {path}: {_solr_message(response)}"
            )
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise UpstreamBadResponse(f"{where} answered {path} with something not JSON") from None


def _solr_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("error", {}).get("msg", ""))[:300] or response.reason_phrase
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return response.reason_phrase

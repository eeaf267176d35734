"""The kept conversations' collection (conversations.collection), as Solr holds it: one record
a conversation, found by its id, listed by owner, deleted when expired — the queries the
store needs, so that the rest of service.conversations never speaks to Solr."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from service.errors import UpstreamBadResponse
from service.retrieval.solr import SolrClient

T = TypeVar("T")
# not expired: checked on the records the query found, never cached (NOW, to the millisecond,
# made each read a filterCache entry of every live record: a read cost what the collection
# held, 21 ms at 200,000 records, and pushed out the useful entries; now 5 ms)
LIVE = "{!cache=false}expires_dt:[NOW TO *]"


class ConversationRecords:
    """The records of one collection (configset solr/configsets/Conversations)."""

    def __init__(self, solr: SolrClient, collection: str) -> None:
        self._solr = solr
        self._collection = collection

    async def messages_of(self, record_id: str) -> tuple[str, str] | None:
        """The messages (JSON) of the record of that id and when it was written, unless it
        expired; None otherwise. The id travels in its own parameter, never parsed as
        syntax."""
        found = await self._call(
            self._solr.select(
                self._collection,
                {
                    "q": "{!term f=id v=$record}",
                    "record": record_id,
                    "fq": LIVE,
                    "fl": "messages_json,updated_dt",
                    "rows": 1,
                },
            )
        )
        docs = found.get("response", {}).get("docs", [])
        if not docs:
            return None
        return str(docs[0].get("messages_json") or "[]"), str(docs[0].get("updated_dt", ""))

    async def owned(self, owner: str, rows: int) -> list[tuple[str, str]]:
        """The owner's records that have not expired, the latest first: (messages JSON,
        when it was written)."""
        found = await self._call(
            self._solr.select(
                self._collection,
                {
                    "q": "{!term f=owner_s v=$owner}",
                    "owner": owner,
                    "fq": LIVE,
                    "sort": "updated_dt desc",
                    "fl": "messages_json,updated_dt",
                    "rows": rows,
                },
            )
        )
        docs = found.get("response", {}).get("docs", [])
        return [(str(d.get("messages_json") or "[]"), str(d.get("updated_dt", ""))) for d in docs]

    async def older_than_newest(self, owner: str, keep: int, rows: int = 100) -> list[str]:
        """The ids of the owner's records past its `keep` most recently updated."""
        found = await self._call(
            self._solr.select(
                self._collection,
                {
                    "q": "{!term f=owner_s v=$owner}",
                    "owner": owner,
                    "sort": "updated_dt desc",
                    "fl": "id",
                    "start": keep,
                    "rows": rows,
                },
            )
        )
        return [str(doc["id"]) for doc in found.get("response", {}).get("docs", [])]

    async def write(self, record: dict[str, Any]) -> None:
        await self._call(self._solr.add(self._collection, [record], commit=True))

    async def delete(self, record_ids: list[str]) -> None:
        await self._call(self._solr.update(self._collection, [("delete", record_ids)], commit=True))

    async def delete_expired(self) -> None:
        await self._call(self._solr.delete_by_query(self._collection, "expires_dt:[* TO NOW]"))

    async def _call(self, work: Awaitable[T]) -> T:
        try:
            return await work
        except UpstreamBadResponse as error:
            if " 404 " not in error.reason:
                raise
            raise UpstreamBadResponse(
                f"Solr has no collection {self._collection!r} (conversations.collection): "
                "create it from the configset solr/configsets/Conversations, or set "
                "conversations.enabled=false"
            ) from None

"""What the service needs of Solr: both collections, with the fields it reads and writes.

Checked once at startup, so a Solr without our configsets stops the service with a message
that says what is missing and how to fix it, instead of failing every request later.
"""

from __future__ import annotations

import asyncio
import logging
import time

from service.config.settings import SolrSettings
from service.errors import (
    SolrLayoutError,
    UpstreamBadResponse,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from service.retrieval.solr import SolrClient

log = logging.getLogger(__name__)

SHARED_FIELDS = ("id", "title", "url", "content", "language", "allowed_groups", "denied_groups")
PASSAGE_FIELDS = ("parent_id", "chunk_index")
RETRY_SECONDS = 1.0


def required_fields(layout: SolrSettings) -> dict[str, tuple[str, ...]]:
    return {
        layout.documents_collection: SHARED_FIELDS,
        layout.passages_collection: (*SHARED_FIELDS, *PASSAGE_FIELDS, layout.vector_field),
    }


async def verify_layout(
    solr: SolrClient, layout: SolrSettings, *, wait: float | None = None
) -> None:
    """Returns when every collection and field is there; waits up to `wait` seconds
    (solr.startup.wait) for Solr to answer at all, then raises SolrLayoutError."""
    wait = layout.startup_wait if wait is None else wait
    for collection, fields in required_fields(layout).items():
        present = await _fields_when_reachable(solr, collection, wait)
        missing = [name for name in fields if name not in present]
        if missing:
            raise SolrLayoutError(
                f"Solr collection {collection!r} lacks the field(s) {', '.join(missing)} that "
                f"the service uses: create it from solr/configsets/{collection} (README, "
                "'Solr'), or fix solr.vector.field in rag.properties"
            )
    log.info("Solr layout checked: %s", ", ".join(required_fields(layout)))


async def _fields_when_reachable(solr: SolrClient, collection: str, wait: float) -> set[str]:
    give_up = time.monotonic() + wait
    while True:
        try:
            return await solr.field_names(collection)
        except UpstreamBadResponse as error:
            raise SolrLayoutError(
                f"Solr at {solr.base_url} has no usable collection {collection!r} "
                f"({error.reason}): "
                f"create it from solr/configsets/{collection} (README, 'Solr'), or name "
                "yours in solr.collection.documents / solr.collection.passages"
            ) from None
        except (UpstreamUnavailable, UpstreamTimeout) as error:
            if time.monotonic() >= give_up:
                raise SolrLayoutError(
                    f"{error} (waited {wait:g}s, solr.startup.wait); start Solr first, or set "
                    "solr.startup.check=false to start without it"
                ) from None
            log.info("waiting for Solr at %s: %s", solr.base_url, error)
            await asyncio.sleep(RETRY_SECONDS)

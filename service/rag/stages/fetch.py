"""Fetch: the one document a summary is of (or the posted text)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from service.config.settings import (
    SolrSettings,
)
from service.errors import (
    SummarySourceNotFound,
)
from service.rag.stages.state import Documents, EveryRequest, SummaryState
from service.retrieval import (
    DocumentById,
    RetrievedDocument,
    SolrClient,
)
from service.retrieval.scope import Scope


@dataclass
class Fetch(EveryRequest):
    """The document to summarize: by its FileShare id, or the text posted."""

    solr: SolrClient
    layout: SolrSettings
    name: ClassVar[str] = "fetch"

    async def run(self, state: SummaryState) -> Documents:
        request = state.query
        if request.document_id is None:
            document = RetrievedDocument(id="", title="", url="", content=request.text or "")
        else:
            scope = replace(request.scope, lang=request.lang)
            found = await fetch(self.solr, self.layout, request.document_id, scope)
            if found is None:
                raise SummarySourceNotFound(
                    f"no document with id {request.document_id!r} in FileShare"
                )
            document = found
        return Documents([document])


async def fetch(
    solr: SolrClient, layout: SolrSettings, document_id: str, scope: Scope
) -> RetrievedDocument | None:
    """One FileShare document by id, if the caller may see it."""
    found = DocumentById(solr, layout.documents_collection, layout.documents_map)
    return await found.run(document_id, scope)

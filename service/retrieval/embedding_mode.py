"""Who turns text into VectorMain's vectors: the service, or Solr with our text-to-vector plugin.

`service`: the service embeds passages at ingestion and each question, and sends Solr vectors;
it works with any Solr. `solr`: the passages collection embeds by itself (the plugin in its
default update chain), so ingestion sends text only, anything else that indexes into it gets
vectors too, and a search sends the question's text to `{!text_to_vector_knn}`. The plugin
leaves a vector it is sent alone, so service mode stays right on a Solr that embeds.
`auto` (rag.properties solr.embeddings.mode) asks Solr's Config API which it can be.
"""

from __future__ import annotations

import logging
from typing import Any

from service.config.settings import Settings, SolrSettings
from service.errors import ServiceError, SolrLayoutError
from service.retrieval.solr import SolrClient

log = logging.getLogger(__name__)

PROCESSOR_CLASS = "org.solrrag.vectors.TextToVectorUpdateProcessorFactory"
PARSER_CLASS = "org.solrrag.vectors.TextToVectorKnnQParserPlugin"
PARSER_NAME = "text_to_vector_knn"
# what the service embeds of a passage (Passage.embedding_text): its title, a line break, its text
EMBEDDED_FIELDS = ["title", "content"]
ENABLE_HINT = (
    "turn the plugin on (solr/local/solr.sh start --text-to-vector URL; docker compose: "
    "SOLR_TEXT_TO_VECTOR=true; any Solr: docs/operations.md 'Solr computes the vectors')"
)


async def plugin_gap(solr: SolrClient, layout: SolrSettings, model: str) -> str | None:
    """None when the passages collection embeds as the service would: its default update
    chain embeds title and content into solr.vector.field with `model`, and its
    `{!text_to_vector_knn}` embeds with `model` too; otherwise what is missing."""
    collection = layout.passages_collection
    chains = await solr.config(collection, "updateRequestProcessorChain")
    processors = [
        processor
        for chain in (chains if isinstance(chains, list) else [])
        if isinstance(chain, dict) and str(chain.get("default")).lower() == "true"
        for processor in _children(chain)
        if processor.get("class") == PROCESSOR_CLASS
    ]
    if not processors:
        return f"{collection}'s default update chain has no {PROCESSOR_CLASS}"
    processor = processors[0]
    fields = processor.get("inputField")
    fields = fields if isinstance(fields, list) else [fields]
    if fields != EMBEDDED_FIELDS or processor.get("outputField") != layout.vector_field:
        return (
            f"{collection}'s text-to-vector embeds {fields} into "
            f"{processor.get('outputField')!r}, the service embeds {EMBEDDED_FIELDS} into "
            f"{layout.vector_field!r} (solr.vector.field)"
        )
    parsers = await solr.config(collection, "queryParser")
    parser = parsers.get(PARSER_NAME) if isinstance(parsers, dict) else None
    if not isinstance(parser, dict) or parser.get("class") != PARSER_CLASS:
        return f"{collection} has no {PARSER_NAME} query parser ({PARSER_CLASS})"
    models = {str(processor.get("model")), str(parser.get("model"))}
    if models != {model}:
        return (
            f"{collection}'s text-to-vector embeds with {sorted(models)}, the service's "
            f"ai.embeddings.model is {model!r}"
        )
    return None


def _children(chain: dict[str, Any]) -> list[dict[str, Any]]:
    """A chain's processors (the Config API lists them under an empty name)."""
    return [
        item
        for value in chain.values()
        if isinstance(value, list)
        for item in value
        if isinstance(item, dict)
    ]


class EmbeddingMode:
    """solr.embeddings.mode for one layout and model: `auto` asks Solr once (again after Solr
    could not be asked, when the service embeds meanwhile)."""

    def __init__(self, layout: SolrSettings, model: str) -> None:
        self._layout = layout
        self._model = model
        self._solr_embeds: bool | None = None

    @classmethod
    def of(cls, settings: Settings) -> EmbeddingMode:
        """The mode for the passages collection and the embeddings model `settings` name."""
        return cls(settings.solr, settings.embeddings.model)

    async def solr_embeds(self, solr: SolrClient) -> bool:
        """Does Solr embed the passages and the questions (solr mode)?"""
        setting = self._layout.embeddings_mode
        if setting != "auto":
            return setting == "solr"
        if self._solr_embeds is None:
            try:
                gap = await plugin_gap(solr, self._layout, self._model)
            except ServiceError as error:
                log.warning("solr.embeddings.mode auto: Solr not asked (%s)", error.reason)
                return False
            self._solr_embeds = gap is None
            who = "Solr embeds (text-to-vector)" if gap is None else f"the service embeds: {gap}"
            log.info("solr.embeddings.mode auto: %s", who)
        return self._solr_embeds

    async def verify(self, solr: SolrClient) -> None:
        """At startup: solr mode needs the plugin (SolrLayoutError saying what lacks)."""
        if self._layout.embeddings_mode == "solr":
            gap = await plugin_gap(solr, self._layout, self._model)
            if gap is not None:
                raise SolrLayoutError(
                    f"solr.embeddings.mode is solr, but {gap}: {ENABLE_HINT}; or set "
                    "solr.embeddings.mode=service"
                )
        else:
            await self.solr_embeds(solr)

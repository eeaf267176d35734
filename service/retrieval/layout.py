"""What the service needs of Solr: both collections, with the fields it reads and writes.

Checked once at startup, so a Solr without our configsets stops the service with a message
that says what is missing and how to fix it, instead of failing every request later.
"""

from __future__ import annotations

import asyncio
import logging
import time

from service.config.field_map import LANG, REQUIRED, FieldMap, SchemaFields
from service.config.settings import SolrSettings
from service.errors import (
    ServiceError,
    SolrLayoutError,
    UpstreamBadResponse,
    UpstreamRefused,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from service.llm.embeddings import EmbeddingsClient
from service.retrieval.scope import SecurityModel, security_fields
from service.retrieval.solr import SolrClient

log = logging.getLogger(__name__)

# our configsets' fields: checked when the mapping names none (the collections are ours)
SHARED_FIELDS = ("id", "title", "url", "content", "language")
PASSAGE_FIELDS = ("parent_id", "chunk_index")
CACHE_FIELDS = ("id", "question", "variant_s", "index_version_s", "created_dt", "answer_json")
# what a passage's vector is: its field, and the model that computed it, by name
EMBEDDING_FIELD, EMBEDDING_MODEL = "embedding_field_s", "embedding_model_s"
# What Solr makes of a document written to our configsets beyond its fields: the language
# chain (its language's analysed twins). Part of what ingestion hashes, so a document written
# before a change of it is written again by the next ingestion or sync (vectors reused).
ANALYSIS_VERSION = "languages-1"
ANALYSIS_FIELD = "analysis_language"  # set on every document the language chain saw
RETRY_SECONDS = 1.0


def required_fields(
    layout: SolrSettings, *, cache: bool = False, security: SecurityModel | None = None
) -> dict[str, tuple[str, ...]]:
    """The fields each collection must declare, each a field or a role's alternatives
    (`content_{lang}|content`: one of them); the answer cache's only when it is on, the
    security model's (`security`) only when security is on."""
    guarded = security_fields(security) if security else ()
    documents, passages = layout.documents_map, layout.passages_map
    fields = {
        layout.documents_collection: (*_mapped(documents, "documents", SHARED_FIELDS), *guarded),
        layout.passages_collection: (
            *_mapped(passages, "passages", (*SHARED_FIELDS, *PASSAGE_FIELDS)),
            passages.field("vector"),
            *guarded,
        ),
    }
    if cache:
        fields[layout.cache_collection] = (*CACHE_FIELDS, layout.vector_field)
    return fields


def _mapped(field_map: FieldMap, kind: str, ours: tuple[str, ...]) -> tuple[str, ...]:
    """Our configset's fields when the map names no role; else the roles the service cannot
    do without and those the map names."""
    if not field_map.named:
        return ours
    roles = dict.fromkeys((*REQUIRED[kind], *sorted(field_map.named - {"vector"})))
    return tuple("|".join(field_map.fields(role)) for role in roles)


def _present(field: str, schema: SchemaFields) -> bool:
    """One of a role's alternatives is in the schema (a {lang} one: in some language)."""
    for name in field.split("|"):
        if LANG in name:
            before, _, after = name.partition(LANG)
            if any(n.startswith(before) and n.endswith(after) for n in schema.declared):
                return True
        elif schema.has(name):
            return True
    return False


async def verify_layout(
    solr: SolrClient,
    layout: SolrSettings,
    *,
    wait: float | None = None,
    embeddings: EmbeddingsClient | None = None,
    cache: bool = False,
    security: SecurityModel | None = None,
    rescore: bool | None = None,
) -> None:
    """Returns when every collection and field is there, and the vector field is a
    DenseVectorField whose dimension is the embeddings model's (asked of `embeddings`, when
    it answers); waits up to `wait` seconds (solr.startup.wait) for Solr to answer at all,
    then raises SolrLayoutError. A quantized vector field read without `rescore`
    (knn.rescore=false) is said in a warning, with the fix."""
    wait = layout.startup_wait if wait is None else wait
    required = required_fields(layout, cache=cache, security=security)
    roles = {  # each collection: the key that names it, the configset it is made from
        layout.documents_collection: ("solr.collection.documents", "FileShare"),
        layout.passages_collection: ("solr.collection.passages", "VectorMain"),
        layout.cache_collection: ("solr.collection.cache", "AnswerCache"),
    }
    for collection, fields in required.items():
        key, configset = roles[collection]
        schema = await _fields_when_reachable(solr, collection, wait, key, configset)
        missing = [name for name in fields if not _present(name, schema)]
        if missing:
            vector = (
                ", or set solr.vector.field to a vector field it has"
                if layout.vector_field in missing
                else ""
            )
            mapping = (
                "solr.documents.fields"
                if collection == layout.documents_collection
                else "solr.passages.fields"
            )
            raise SolrLayoutError(
                f"Solr collection {collection!r} ({key}) lacks the field(s) "
                f"{', '.join(missing)} that the service reads: create it from our configset "
                f"solr/configsets/{configset} (docs/operations.md, 'Solr'), name another "
                f"collection in {key}, or map its own fields in {mapping}{vector}"
            )
    for collection in (layout.documents_collection, layout.passages_collection):
        await _written_before_the_language_chain(solr, collection)
    dimension, quantized = await _vector_dimension(solr, layout)
    if quantized and rescore is False:
        log.warning(
            "%s's %s holds quantized vectors, searched without knn.rescore: the nearest "
            "passages come in the integers' order and scores (recall@10 at a million passages "
            "0.937, rescored 0.963, the floats' 0.924-0.965; docs/operations.md 'Quantized "
            "vectors'): set knn.rescore=true",
            layout.passages_collection,
            layout.vector_field,
        )
    if embeddings is not None:
        await _same_model(solr, layout, embeddings.options.model)
        await _same_dimension(embeddings, layout, dimension)
    log.info("Solr layout checked: %s", ", ".join(required))


async def _written_before_the_language_chain(solr: SolrClient, collection: str) -> None:
    """A warning, with the fix, when a collection whose schema has the language chain's
    fields holds documents written before it (no twins: BM25 cannot find them)."""
    schema = await solr.schema_fields(collection)
    if not schema.has(ANALYSIS_FIELD):
        return
    query = {"q": f"-{ANALYSIS_FIELD}:[* TO *]", "defType": "lucene", "rows": 0}
    older = (await solr.select(collection, query))["response"]["numFound"]
    if older:
        log.warning(
            "%s holds %d documents written before the language analysis (their title and "
            "content have no analysed twin: the BM25 search cannot find them): ingest them "
            "again (solr-rag ingest FOLDER, --samples for make run's, or sync), which rewrites "
            "every document once and keeps its vectors",
            collection,
            older,
        )


async def _vector_dimension(solr: SolrClient, layout: SolrSettings) -> tuple[int, bool]:
    """The vector field's dimension, and whether it keeps its vectors quantized (our plugin's
    ScalarQuantizedDenseVectorField, or Solr 10's of the same name)."""
    vector_field = layout.passages_map.field("vector")
    field_type = await solr.field_type(layout.passages_collection, vector_field)
    dimension = field_type.get("vectorDimension")
    if not str(field_type.get("class", "")).endswith("DenseVectorField") or dimension is None:
        raise SolrLayoutError(
            f"solr.vector.field {vector_field!r} is not a DenseVectorField in "
            f"{layout.passages_collection!r} (its type is {field_type.get('name')!r}): name a "
            "vector field (solr/configsets/VectorMain has vector_384 ... vector_1536)"
        )
    return int(dimension), "Quantized" in str(field_type.get("class", ""))


async def _same_model(solr: SolrClient, layout: SolrSettings, model: str) -> None:
    """Vectors of two models cannot be compared: the passages' vectors must all come from the
    model that embeds the questions (the indexer stores its name with each passage; passages
    indexed before it did are not counted)."""
    schema = await solr.schema_fields(layout.passages_collection)
    if not (schema.has(EMBEDDING_FIELD) and schema.has(EMBEDDING_MODEL)):
        return  # a collection another tool fills: it does not say which model
    vectors_in_field = "{!term f=" + EMBEDDING_FIELD + "}" + layout.passages_map.field("vector")
    found = await solr.select(
        layout.passages_collection,
        {"q": "*:*", "defType": "lucene", "rows": 0, "fq": vectors_in_field, "facet": "true",
         "facet.field": EMBEDDING_MODEL, "facet.mincount": 1, "facet.limit": 5},
    )  # fmt: skip
    counts = found.get("facet_counts", {}).get("facet_fields", {}).get(EMBEDDING_MODEL, [])
    others = {
        name: count for name, count in zip(counts[::2], counts[1::2], strict=False) if name != model
    }
    if others:
        held = ", ".join(f"{name[:80]!r} ({count} passages)" for name, count in others.items())
        raise SolrLayoutError(
            f"{layout.passages_collection}'s {layout.vector_field} holds vectors of {held}, "
            f"but ai.embeddings.model is {model!r}: questions would be compared with another "
            f"model's vectors. Ingest every document again with this model (`solr-rag ingest "
            f"FOLDER`: a document embedded by another model is embedded again), set "
            f"ai.embeddings.model back, or set solr.vector.field to a field this model fills"
        )


async def _same_dimension(
    embeddings: EmbeddingsClient, layout: SolrSettings, dimension: int
) -> None:
    """The embeddings model's vectors must fit the field; an API that does not answer yet is
    not a reason to stop (it is checked again by readiness and every request)."""
    try:
        [vector] = await embeddings.embed(["dimension check"], kind="query")
    except ServiceError as error:
        log.warning("embeddings dimension not checked: %s", error.reason)
        return
    if len(vector) != dimension:
        model = embeddings.options.model
        raise SolrLayoutError(
            f"solr.vector.field {layout.vector_field!r} holds {dimension}-dimension vectors, "
            f"but the embeddings model {model!r} (ai.embeddings.model) gives {len(vector)}: "
            f"set solr.vector.field to a field of {len(vector)} dimensions (VectorMain's "
            f"configset has vector_{len(vector)} for common sizes), or use a "
            f"{dimension}-dimension model"
        )


async def _fields_when_reachable(
    solr: SolrClient, collection: str, wait: float, key: str, configset: str
) -> SchemaFields:
    give_up = time.monotonic() + wait
    while True:
        try:
            return await solr.schema_fields(collection)
        except UpstreamRefused as error:  # a secured Solr: the credentials or TLS to mend
            raise SolrLayoutError(f"Solr at {solr.nodes.address}: {error.reason}") from None
        except UpstreamBadResponse as error:
            raise SolrLayoutError(
                f"Solr at {solr.nodes.address} has no usable collection {collection!r} "
                f"({key}; {error.reason}): create it from our configset "
                f"solr/configsets/{configset} (docs/operations.md, 'Solr'), or name yours in {key}"
            ) from None
        except (UpstreamUnavailable, UpstreamTimeout) as error:
            if time.monotonic() >= give_up:
                raise SolrLayoutError(
                    f"Solr at {solr.nodes.address}: {error} (waited {wait:g}s, "
                    "solr.startup.wait); start Solr first, or set "
                    "solr.startup.check=false to start without it"
                ) from None
            log.info("waiting for Solr at %s: %s", solr.nodes.address, error)
            await asyncio.sleep(RETRY_SECONDS)

"""The span of one request to Solr: its collection and the kind of request (select, knn,
update, get...), never what it asks (a question's words, a vector, a document's text)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.tracing._spans import CLIENT, KIND, NOTHING, Current, _Nothing, child_tracer

# the nearest neighbours' searches: Solr's kNN parser, our text-to-vector plugin's, and the
# exact search of a small scope (service.retrieval.vector)
_KNN = ("{!knn", "{!text_to_vector_knn", "{!func}vectorSimilarity(")


def solr_call(method: str, path: str, body: object = None) -> Current | _Nothing:
    """`solr select FileShare`, `solr knn VectorMain`, `solr update FileShare`: `path` is
    /<collection>/<handler>; `body` a JSON request's (its `params.q` tells a kNN search)."""
    tracer = child_tracer()
    if tracer is None:
        return NOTHING
    collection, _, handler = path.strip("/").partition("/")
    operation = handler or collection
    if handler == "select" and _knn(body):
        operation = "knn"
    attributes: dict[str, Any] = {
        "db.system.name": "solr",
        "db.collection.name": collection,
        "db.operation.name": operation,
        "http.request.method": method,
        KIND: "RETRIEVER" if operation in ("select", "knn") else "UNKNOWN",
    }
    return Current(tracer.start_span(f"solr {operation} {collection}", kind=CLIENT,
                                     attributes=attributes))  # fmt: skip


def _knn(body: object) -> bool:
    params = body.get("params") if isinstance(body, Mapping) else None
    query = params.get("q") if isinstance(params, Mapping) else None
    return isinstance(query, str) and query.startswith(_KNN)

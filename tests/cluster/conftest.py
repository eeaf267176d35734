"""A SolrCloud of three nodes (a process each) holding FileShare and VectorMain in 2 shards x 2
replicas, with one-shard copies of both collections in the same cluster to compare with: the
same corpus, ingested into each through the real ingestion path."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from bench.cranfield import load_documents
from service.config import Settings
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import SolrClient
from testing.corpus import load_corpus
from testing.service import ROOT, service_properties, test_settings
from testing.solr import LocalSolr, create_collection, local_solr

NODES, SHARDS, REPLICAS = 3, 2, 2
# the one-shard copy of each collection
ONE_SHARD = {"FileShare": "FileShare1", "VectorMain": "VectorMain1"}
CRANFIELD_DOCUMENTS = 150


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory, solr_jars: None) -> Iterator[LocalSolr]:
    with local_solr(
        tmp_path_factory.mktemp("cloud"), nodes=NODES, shards=SHARDS, replicas=REPLICAS
    ) as solr:
        for collection, copy in ONE_SHARD.items():
            create_collection(solr.url, copy, collection, **_creation_properties(collection))
        yield solr


@pytest.fixture
def base_properties(
    cluster: LocalSolr, llm_base_url: str, model_server_url: str
) -> dict[str, object]:
    """The service's properties on the cluster (tests/conftest.py's on the run's one-node Solr,
    which the cluster's tests never start: testing.suite runs them apart)."""
    return service_properties(cluster.url, llm_base_url, model_server_url)


@pytest.fixture(scope="package")
def corpus(cluster_corpus: list[SourceDocument]) -> list[SourceDocument]:
    """What the service fixtures wait for: the cluster's corpus."""
    return cluster_corpus


def _creation_properties(collection: str) -> dict[str, str]:
    """The configset's collection.properties (VectorMain: router.field), as the launcher
    reads them."""
    path = ROOT / "solr" / "configsets" / collection / "collection.properties"
    if not path.is_file():
        return {}
    lines = [line.strip() for line in path.read_text().splitlines()]
    pairs = [line.split("=", 1) for line in lines if line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in pairs}


def cluster_settings(
    cluster: LocalSolr, model_server_url: str, *, one_shard: bool = False, **overrides: object
) -> Settings:
    """Settings on every node of the cluster; `one_shard`: on the one-shard copies."""
    collections = ONE_SHARD if one_shard else {name: name for name in ONE_SHARD}
    return test_settings(
        ",".join(cluster.urls),
        model_server_url,
        **{
            "solr.collection.documents": collections["FileShare"],
            "solr.collection.passages": collections["VectorMain"],
            **overrides,
        },
    )


def cluster_documents() -> list[SourceDocument]:
    """The test corpus and Cranfield abstracts, some of them restricted to groups by rule."""
    documents = load_corpus() + load_documents()[:CRANFIELD_DOCUMENTS]
    ruled = []
    for position, document in enumerate(documents):
        if position % 4 == 1:
            document = replace(document, allowed_groups=("engineering",))
        elif position % 4 == 2:
            document = replace(document, allowed_groups=("sales", "engineering"))
        if position % 7 == 3:
            document = replace(document, denied_groups=("interns",))
        ruled.append(document)
    return ruled


async def ingest(settings: Settings, documents: list[SourceDocument]) -> None:
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, settings.solr.url)
        embeddings = EmbeddingsClient(
            http, LLMOptions(endpoint=settings.embeddings.endpoint, model="all-MiniLM-L6-v2")
        )
        await indexer_for(settings, solr, embeddings).run(documents)


@pytest.fixture(scope="package")
def cluster_corpus(cluster: LocalSolr, model_server_url: str) -> list[SourceDocument]:
    """The documents, in the sharded collections and in their one-shard copies."""
    documents = cluster_documents()
    for one_shard in (False, True):
        asyncio.run(
            ingest(cluster_settings(cluster, model_server_url, one_shard=one_shard), documents)
        )
    return documents


def collections_state(solr_url: str, collection: str | None = None) -> dict[str, Any]:
    """The cluster's state of its collections (or of one), as CLUSTERSTATUS gives it."""
    params = {"action": "CLUSTERSTATUS", "wt": "json"}
    if collection is not None:
        params["collection"] = collection
    status = httpx.get(f"{solr_url}/admin/collections", params=params, timeout=30).json()
    return dict(status["cluster"]["collections"])


def replica_cores(solr_url: str, collection: str) -> dict[str, list[str]]:
    """shard name -> the core URLs of its replicas, from the cluster's state."""
    shards = collections_state(solr_url, collection)[collection]["shards"]
    return {
        name: [f"{r['base_url']}/{r['core']}" for r in shard["replicas"].values()]
        for name, shard in shards.items()
    }


def count(select_url: str, **params: str) -> int:
    """How many documents a select finds (`distrib="false"` on a core: that replica's own)."""
    body = httpx.get(select_url, params={"q": "*:*", "rows": 0, **params}, timeout=30).json()
    return int(body["response"]["numFound"])

"""Solr 9.10.1 beside 9.8.1 (issue 82): the Solr a run starts is the version it asked for, every
configset (ours, VectorMainQuantized, the testing ones standing for Datafari's and other
people's schemas) loads in it, and quantized vectors (our plugin's
ScalarQuantizedDenseVectorField) take the service's vectors and rank by kNN as the floats do.

These tests are in the subset CI runs again on Solr 9.10.1 (tests/solr_versions.py lists it;
`SOLR_VERSION=9.10.1 pytest -m solr_versions`: README, "Development").
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import testing
from service.ingest.indexer import indexer_for
from service.llm import EmbeddingsClient, LLMOptions
from service.retrieval import SolrClient
from service.retrieval.layout import verify_layout
from service.retrieval.vector import VectorRetriever
from testing.corpus import load_corpus
from testing.service import test_settings
from testing.solr import (
    SolrStartError,
    create_collection,
    delete_collection,
    solr_version,
    upload_configset,
)

SHIPPED = Path(testing.__file__).resolve().parent.parent / "solr" / "configsets"
TESTING = Path(testing.__file__).resolve().parent / "configsets"
# questions of the test corpus, each with the document that answers it
QUESTIONS = {
    "When should fruit trees be cut back?": "orchard",
    "Who lights the lamp at the lighthouse?": "lighthouse",
    "What does a beekeeper do through the year?": "doc-xq17",
    "Which animals live on an island?": "quokka-only",
    "Where do zebras migrate?": "zebra-only",
    "How is a wind turbine serviced?": "turbine-manual",
}


def test_the_solr_started_is_the_version_asked(solr_url: str) -> None:
    """SOLR_VERSION=9.10.1 runs the suite on 9.10.1 indeed: a fallback to 9.8 would pass it."""
    if os.environ.get("SOLR_RAG_TEST_SOLR_URL"):
        pytest.skip("the run was given a Solr of its own (SOLR_RAG_TEST_SOLR_URL)")
    info = httpx.get(f"{solr_url}/admin/info/system", params={"wt": "json"}, timeout=30).json()
    assert info["lucene"]["solr-spec-version"] == solr_version()


@contextmanager
def collection(solr_url: str, configset: str, **properties: str) -> Iterator[str]:
    """A new collection of a configset Solr holds, with core properties; its name."""
    name = f"v_{configset.lower()}_{uuid.uuid4().hex[:8]}"
    try:
        create_collection(solr_url, name, configset, properties=properties)
        yield name
    finally:
        delete_collection(solr_url, name)  # a refused one too: what Solr kept of it


def test_every_configset_loads(solr_url: str) -> None:
    """Ours (the launcher made a collection of each but the variants) and the testing ones."""
    status = httpx.get(
        f"{solr_url}/admin/collections", params={"action": "CLUSTERSTATUS", "wt": "json"},
        timeout=60,
    ).json()["cluster"]["collections"]  # fmt: skip
    for folder in sorted(SHIPPED.iterdir()):
        if (folder / "variant-of").is_file():
            with collection(solr_url, folder.name) as name:
                assert httpx.get(f"{solr_url}/{name}/select", params={"q": "*:*"}).is_success
        elif (folder / "conf" / "solrconfig.xml").is_file():
            assert status[folder.name]["health"] == "GREEN", folder.name
    for folder in sorted(TESTING.iterdir()):
        upload_configset(solr_url, f"versions-{folder.name}", folder)
        with collection(solr_url, f"versions-{folder.name}") as name:
            assert httpx.get(f"{solr_url}/{name}/select", params={"q": "*:*"}).is_success


# -- quantized vectors: VectorMainQuantized -------------------------------------------------------


def passages(solr_url: str, name: str) -> list[dict]:
    """Every passage of a collection as stored: its fields and its vector, as a crawler or the
    service would post it again."""
    found = httpx.get(
        f"{solr_url}/{name}/select",
        params={"q": "*:*", "defType": "lucene", "rows": 10_000, "sort": "id asc",
                "fl": "id,parent_id,chunk_index,title,url,content,language,vector_384"},
        timeout=60,
    ).json()["response"]["docs"]  # fmt: skip
    return found


def index_files(solr_url: str, name: str) -> set[str]:
    """The files of the collection's index (its one core's, on this machine)."""
    cores = httpx.get(
        f"{solr_url}/admin/cores", params={"action": "STATUS", "wt": "json"}, timeout=30
    ).json()["status"]
    (core,) = [core for core in cores.values() if core["name"].startswith(f"{name}_")]
    return {path.name for path in (Path(core["dataDir"]) / "index").iterdir()}


async def rankings(solr_url: str, model_server_url: str, names: list[str]) -> dict:
    """Each collection's kNN ranking (passage ids, scores) of every question."""
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, solr_url)
        options = LLMOptions(endpoint=f"{model_server_url}/v1/", model="all-MiniLM-L6-v2")
        embeddings = EmbeddingsClient(http, options)
        ranked = {}
        for name in names:
            knn = VectorRetriever(solr, name, embeddings, field="vector_384", top_k=5)
            for question in QUESTIONS:
                found = await knn.run(question)
                ranked[name, question] = [(d.id, d.source_id, d.score) for d in found]
        return ranked


@pytest.fixture(scope="module")
def floats(solr_url: str, model_server_url: str) -> Iterator[list[dict]]:
    """The test corpus ingested by the service into a FileShare and a float VectorMain of their
    own: its passages, with their vectors."""
    with (
        collection(solr_url, "FileShare") as documents,
        collection(solr_url, "VectorMain") as vectors,
    ):
        settings = test_settings(
            solr_url,
            model_server_url,
            **{"solr.collection.documents": documents, "solr.collection.passages": vectors},
        )

        async def ingest() -> None:
            async with httpx.AsyncClient() as http:
                endpoint = settings.embeddings.endpoint
                options = LLMOptions(endpoint=endpoint, model="all-MiniLM-L6-v2")
                embeddings = EmbeddingsClient(http, options)
                await indexer_for(settings, SolrClient(http, solr_url), embeddings).run(
                    load_corpus()
                )

        asyncio.run(ingest())
        yield passages(solr_url, vectors)


@pytest.mark.parametrize(
    "properties",
    [{}, {"vectors.bits": "4", "vectors.compress": "true"}],
    ids=["7 bits", "4 bits compressed"],
)
def test_quantized_vectors_take_the_services_vectors_and_rank_as_the_floats_do(
    solr_url: str, model_server_url: str, floats: list[dict], properties: dict[str, str]
) -> None:
    assert len(floats) >= 14 and all(len(p["vector_384"]) == 384 for p in floats)
    with (
        collection(solr_url, "VectorMain") as float_copy,
        collection(solr_url, "VectorMainQuantized", **properties) as quantized,
    ):
        for name in (float_copy, quantized):
            response = httpx.post(
                f"{solr_url}/{name}/update", params={"commit": "true"}, json=floats, timeout=120
            )
            assert response.status_code == 200, response.text
        # Lucene's scalar-quantized HNSW wrote the segment: the integers (.veq) beside the floats
        files = index_files(solr_url, quantized)
        assert any(f.endswith(".veq") and "ScalarQuantized" in f for f in files), files
        assert not any(f.endswith(".veq") for f in index_files(solr_url, float_copy))
        ranked = asyncio.run(rankings(solr_url, model_server_url, [float_copy, quantized]))
    # a score moves by the quantization's error: 7 bits, within a hundredth; 4, three
    tolerance = 0.03 if properties.get("vectors.bits") == "4" else 0.01
    for question, answer in QUESTIONS.items():
        by_floats, by_integers = ranked[float_copy, question], ranked[quantized, question]
        assert by_floats[0][1] == answer, (question, by_floats)
        floats_score = {passage: score for passage, _, score in by_floats}
        (passage, document, score), *_ = by_integers
        # the answer's passage first, or one the floats score as near (a near-tie may swap),
        # scored as the floats score it; the next ones from the floats' nearest documents
        assert document == answer, (question, by_floats, by_integers)
        assert floats_score.get(passage, 0) >= by_floats[0][2] - tolerance, (question, by_floats)
        assert abs(score - floats_score[passage]) < tolerance, (question, by_floats, by_integers)
        near = {d for _, d, _ in by_floats}
        assert {d for _, d, _ in by_integers[:3]} <= near, (question, by_floats, by_integers)


def test_quantized_vectors_read_without_rescoring_are_said_at_startup(
    solr_url: str, model_server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The layout check tells the operator whose VectorMain is quantized to set knn.rescore
    (at a million passages the integers' own order loses 0.03 of recall@10); it says nothing
    once it is set, nor of float vectors."""

    def warned(passages: str, rescore: bool) -> list[str]:
        settings = test_settings(
            solr_url,
            model_server_url,
            **{"solr.collection.documents": documents, "solr.collection.passages": passages},
        )

        async def check() -> None:
            async with httpx.AsyncClient() as http:
                await verify_layout(SolrClient(http, solr_url), settings.solr, rescore=rescore)

        caplog.clear()
        with caplog.at_level("WARNING", logger="service.retrieval.layout"):
            asyncio.run(check())
        return [r.getMessage() for r in caplog.records if "knn.rescore" in r.getMessage()]

    with (
        collection(solr_url, "FileShare") as documents,
        collection(solr_url, "VectorMainQuantized") as quantized,
        collection(solr_url, "VectorMain") as plain,
    ):
        (said,) = warned(quantized, rescore=False)
        assert f"{quantized}'s vector_384 holds quantized vectors" in said
        assert said.endswith("set knn.rescore=true")
        assert warned(quantized, rescore=True) == []
        assert warned(plain, rescore=False) == []


def test_a_quantization_solr_cannot_make_is_refused_with_its_reason(solr_url: str) -> None:
    """A collection property the field type cannot take: the collection is not made, and Solr's
    log says which parameter and why (the Collections API says only that a core failed)."""
    for properties, reason in (
        ({"vectors.bits": "5"}, "bits must be 4 or 7, not '5'"),
        ({"vectors.compress": "true"}, "compress packs two 4-bit values a byte: it needs bits=4"),
        ({"vectors.confidenceInterval": "0.5"}, "confidenceInterval must be a number from 0.9"),
    ):
        with (
            pytest.raises(SolrStartError, match=r"core creation failed|Error CREATEing"),
            collection(solr_url, "VectorMainQuantized", **properties),
        ):
            pass
        logged = httpx.get(
            f"{solr_url}/admin/info/logging",
            params={"since": "0", "threshold": "ERROR", "wt": "json"},
            timeout=30,
        ).json()["history"]["docs"]
        assert any(reason in event.get("message", "") + event.get("trace", "")
                   for event in logged), reason  # fmt: skip

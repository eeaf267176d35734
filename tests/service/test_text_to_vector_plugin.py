"""Our Solr text-to-vector plugin (solr/plugins/text-to-vector): its Java tests, run by Maven
against the local model server as the embeddings endpoint (a real HTTP server, real vectors),
and the plugin inside the real Solr (solr.sh builds it into the nodes' classpath): documents
posted straight to Solr get their vectors, and `{!text_to_vector_knn}` searches by meaning.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.config import Settings, settings_from_mapping
from service.errors import SolrLayoutError, UpstreamBadResponse
from service.ingest.indexer import indexer_for
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from service.retrieval.embedding_mode import PROCESSOR_CLASS, EmbeddingMode, plugin_gap
from service.retrieval.factory import build_retriever
from service.text.chunk import Chunker
from testing.corpus import load_corpus
from testing.llm_server import LLMScript
from testing.servers import free_port
from testing.service import ADMIN_TOKEN, ROOT, ClientFactory
from testing.solr import (
    DEFAULT_VERSION,
    create_collection,
    delete_collection,
    local_solr,
    solr_version,
)
from testing.solr import SCRIPT as SOLR_SCRIPT

PLUGIN = ROOT / "solr" / "plugins" / "text-to-vector"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def test_the_plugins_java_tests_pass_against_the_local_model_server(
    model_server_url: str,
) -> None:
    """Built and tested against the Solr the run starts (SOLR_VERSION), in that version's build
    folder (target/ for 9.8.1, target-<version>/ for another: the plugin's pom)."""
    version = solr_version()
    result = subprocess.run(
        ["mvn", "-q", "-B", "test", f"-Dsolr.version={version}",
         f"-Dembeddings.endpoint={model_server_url}/v1/"],
        cwd=PLUGIN,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    target = PLUGIN / ("target" if version == DEFAULT_VERSION else f"target-{version}")
    reports = sorted((target / "surefire-reports").glob("TEST-*.xml"))
    suites = [ElementTree.parse(report).getroot() for report in reports]
    assert {suite.get("name") for suite in suites} == {
        "org.solrrag.vectors.EmbeddingsEndpointTest",
        "org.solrrag.vectors.PassageSplitterTest",
        "org.solrrag.vectors.PassagesUpdateProcessorFactoryTest",
        "org.solrrag.vectors.ScalarQuantizedDenseVectorFieldTest",
        "org.solrrag.vectors.TextToVectorUpdateProcessorFactoryTest",
    }
    assert sum(int(suite.get("tests", 0)) for suite in suites) == 21
    assert all(suite.get("failures") == "0" and suite.get("errors") == "0" for suite in suites)
    assert all(suite.get("skipped") == "0" for suite in suites)


# -- the plugin in the real Solr: a collection whose vectors Solr computes -------------------

PASSAGES = {
    "keeper": "The keeper of the Brannoch lighthouse lit the lamp every evening at dusk.",
    "orchard": "Apple trees are pruned in late winter, before the buds open.",
    "glacier": "The glacier survey measured how far the ice had retreated.",
}


@contextmanager
def collection(solr_url: str, configset: str, **properties: str) -> Iterator[str]:
    """A new collection of one of our configsets (uploaded at Solr's start), with core
    properties (`text.to.vector.enabled`...); its name."""
    name = f"{configset.lower()}_{uuid.uuid4().hex[:8]}"
    create_collection(solr_url, name, configset, properties=properties)
    try:
        yield name
    finally:
        delete_collection(solr_url, name)


@contextmanager
def embedding_collection(solr_url: str, endpoint: str, **properties: str) -> Iterator[str]:
    """A VectorMain whose text-to-vector plugin is on, calling `endpoint`: its URL."""
    with collection(
        solr_url,
        "VectorMain",
        **{"text.to.vector.enabled": "true", "text.to.vector.endpoint": endpoint, **properties},
    ) as name:
        yield f"{solr_url}/{name}"


def post(url: str, documents: list[dict]) -> httpx.Response:
    return httpx.post(f"{url}/update", params={"commit": "true"}, json=documents, timeout=60)


def test_a_document_posted_straight_to_solr_is_found_by_meaning(
    solr_url: str, model_server_url: str
) -> None:
    with embedding_collection(solr_url, f"{model_server_url}/v1/") as url:
        documents = [{"id": key, "content": text} for key, text in PASSAGES.items()]
        response = post(url, documents)  # plain Solr: no service involved
        assert response.status_code == 200, response.text
        stored = httpx.get(
            f"{url}/select", params={"q": "id:keeper", "defType": "lucene", "fl": "vector_384"}
        ).json()
        assert len(stored["response"]["docs"][0]["vector_384"]) == 384
        found = httpx.get(
            f"{url}/select",
            params={"q": "{!text_to_vector_knn f=vector_384 topK=3}who lights the beacon at night?",
                    "defType": "lucene", "fl": "id"},
        ).json()  # fmt: skip
        assert "response" in found, found
        ranked = [doc["id"] for doc in found["response"]["docs"]]
        assert ranked[0] == "keeper" and sorted(ranked) == sorted(PASSAGES)
        # as a filter: Solr's kNN as an fq takes the topK nearest of all, then the other
        # filters apply (the nearest is excluded here, so nothing is left)
        filtered = httpx.get(
            f"{url}/select",
            params={"q": "*:*", "defType": "lucene", "fl": "id", "fq": ["-id:keeper",
                    "{!text_to_vector_knn f=vector_384 topK=1}who lights the beacon at night?"]},
        ).json()  # fmt: skip
        assert filtered["response"]["numFound"] == 0
        # in q, the request's filters come first (pre-filtering): the nearest that passes them
        prefiltered = httpx.get(
            f"{url}/select",
            params={"q": "{!text_to_vector_knn f=vector_384 topK=1}who lights the beacon at night?",
                    "fq": "-id:keeper", "defType": "lucene", "fl": "id"},
        ).json()  # fmt: skip
        found_after_filters = [doc["id"] for doc in prefiltered["response"]["docs"]]
        assert len(found_after_filters) == 1 and found_after_filters != ["keeper"]
        # no text to embed: Solr's 400, not a call
        empty = httpx.get(
            f"{url}/select",
            params={"q": "{!text_to_vector_knn f=vector_384 topK=1}", "defType": "lucene"},
        )
        assert empty.status_code == 400
        assert "needs text" in empty.json()["error"]["msg"]


def test_solr_and_the_service_compute_the_same_vectors(
    solr_url: str, model_server_url: str
) -> None:
    with embedding_collection(solr_url, f"{model_server_url}/v1/") as url:
        # VectorMain's plugin embeds a passage as the service does: its title, a line break,
        # its text
        keeper = {"id": "keeper", "title": "Brannoch", "content": PASSAGES["keeper"]}
        post(url, [keeper]).raise_for_status()
        stored = httpx.get(
            f"{url}/select", params={"q": "id:keeper", "defType": "lucene", "fl": "vector_384"}
        ).json()
        by_solr = stored["response"]["docs"][0]["vector_384"]
        by_service = httpx.post(
            f"{model_server_url}/v1/embeddings",
            json={"input": [f"Brannoch\n{PASSAGES['keeper']}"], "model": "all-MiniLM-L6-v2"},
        ).json()["data"][0]["embedding"]
        assert max(abs(a - b) for a, b in zip(by_solr, by_service, strict=True)) < 1e-6


def test_with_the_endpoint_down_the_update_fails_loudly_and_indexes_nothing(
    solr_url: str,
) -> None:
    with embedding_collection(solr_url, f"http://127.0.0.1:{free_port()}/v1/") as url:
        documents = [{"id": key, "content": text} for key, text in PASSAGES.items()]
        response = post(url, documents)
        assert response.status_code == 502
        assert "3 document(s) not indexed" in response.json()["error"]["msg"]
        count = httpx.get(
            f"{url}/select", params={"q": "*:*", "defType": "lucene", "rows": 0}
        ).json()
        assert count["response"]["numFound"] == 0


# -- the service in solr mode: Solr embeds, the service sends text -----------------------------

QUESTIONS = (
    "What does the lighthouse keeper do?",
    "How are apple trees pruned?",
    "the glacier survey",
    "cooking with spices",
    "} OR *:* {!lucene}",  # hostile: text, never query syntax
)


def mode_settings(
    solr_url: str, embeddings_url: str, documents: str, passages: str, mode: str
) -> Settings:
    return settings_from_mapping(
        {
            "solr.url": solr_url,
            "ai.embeddings.endpoint": embeddings_url,
            "solr.collection.documents": documents,
            "solr.collection.passages": passages,
            "solr.embeddings.mode": mode,
            "retrieval.similarity.min": "0",
        },
        source="tests",
        env={},
    )


async def ingest_and_search(settings: Settings, mode: EmbeddingMode | None) -> dict[str, Any]:
    """The test corpus ingested, then each question searched by kNN and hybrid; the stored
    vectors and the rankings."""
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, settings.solr.url)
        embeddings = embeddings_client(http, settings, retries=0)
        await indexer_for(settings, solr, embeddings, mode=mode).run(load_corpus())
        stored = await solr.select(
            settings.solr.passages_collection,
            {"q": "*:*", "fl": "id,vector_384", "rows": 10_000, "sort": "id asc"},
        )
        rankings = {}
        for method in ("vector", "hybrid"):
            searched = settings.overridden({"retrieval.method": method})
            retriever = build_retriever(
                searched.retrieval, searched.solr, solr, embeddings, mode=mode
            )
            for question in QUESTIONS:
                found = await retriever.run(question)
                rankings[method, question] = [(d.id, round(d.score, 4)) for d in found]
    vectors = {doc["id"]: doc["vector_384"] for doc in stored["response"]["docs"]}
    return {"vectors": vectors, "rankings": rankings}


def test_the_two_modes_store_the_same_vectors_and_rank_alike(
    solr_url: str, model_server_url: str
) -> None:
    embeddings_url = f"{model_server_url}/v1/"
    dead = f"http://127.0.0.1:{free_port()}/v1/"
    with (
        collection(solr_url, "FileShare") as service_documents,
        collection(solr_url, "VectorMain") as service_passages,
        collection(solr_url, "FileShare") as solr_documents,
        embedding_collection(solr_url, embeddings_url) as solr_passages_url,
    ):
        solr_passages = solr_passages_url.rsplit("/", 1)[1]
        by_service_settings = mode_settings(
            solr_url, embeddings_url, service_documents, service_passages, "service"
        )
        # in solr mode the service's own embeddings API is dead: Solr must embed everything
        by_solr_settings = mode_settings(solr_url, dead, solr_documents, solr_passages, "auto")
        by_solr_mode = EmbeddingMode.of(by_solr_settings)
        by_service = asyncio.run(ingest_and_search(by_service_settings, None))
        by_solr = asyncio.run(ingest_and_search(by_solr_settings, by_solr_mode))
    assert by_solr["vectors"].keys() == by_service["vectors"].keys()
    assert len(by_solr["vectors"]) >= 14
    for passage, vector in by_service["vectors"].items():
        assert (
            max(abs(a - b) for a, b in zip(vector, by_solr["vectors"][passage], strict=True)) < 1e-5
        )
    assert by_solr["rankings"] == by_service["rankings"]
    assert all(by_service["rankings"]["vector", question] for question in QUESTIONS)


def test_auto_mode_asks_solr_and_solr_mode_needs_the_plugin(
    solr_url: str, model_server_url: str
) -> None:
    embeddings_url = f"{model_server_url}/v1/"

    async def modes(passages: str) -> tuple[bool, str | None]:
        settings = mode_settings(solr_url, embeddings_url, "FileShare", passages, "auto")
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            mode = EmbeddingMode.of(settings)
            return await mode.solr_embeds(solr), await plugin_gap(
                solr, settings.solr, settings.embeddings.model
            )

    async def verify_solr_mode(passages: str) -> None:
        settings = mode_settings(solr_url, embeddings_url, "FileShare", passages, "solr")
        async with httpx.AsyncClient() as http:
            mode = EmbeddingMode.of(settings)
            await mode.verify(SolrClient(http, solr_url))

    assert asyncio.run(modes("VectorMain")) == (
        False,
        "VectorMain's default update chain has no " + PROCESSOR_CLASS,
    )
    with pytest.raises(SolrLayoutError, match=r"solr\.embeddings\.mode is solr, but VectorMain"):
        asyncio.run(verify_solr_mode("VectorMain"))
    with embedding_collection(solr_url, embeddings_url) as url:
        name = url.rsplit("/", 1)[1]
        assert asyncio.run(modes(name)) == (True, None)
        asyncio.run(verify_solr_mode(name))
    # the plugin on with another model: its vectors and the service's cannot be compared
    with embedding_collection(
        solr_url, embeddings_url, **{"text.to.vector.model": "bge-small-en-v1.5"}
    ) as url:
        solr_embeds, gap = asyncio.run(modes(url.rsplit("/", 1)[1]))
        assert not solr_embeds and gap is not None and "bge-small-en-v1.5" in gap


def test_in_solr_mode_an_embeddings_failure_is_a_clear_error_not_a_dead_node(
    solr_url: str,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1/"

    async def search(passages: str) -> tuple[str, tuple[int, int]]:
        settings = mode_settings(solr_url, dead, "FileShare", passages, "solr")
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            mode = EmbeddingMode.of(settings)
            retriever = build_retriever(
                settings.overridden({"retrieval.method": "vector"}).retrieval,
                settings.solr,
                solr,
                embeddings_client(http, settings, retries=0),
                mode=mode,
            )
            with pytest.raises(UpstreamBadResponse) as failure:
                await retriever.run("Who lights the lamp?")
            return failure.value.reason, solr.nodes.counts()

    with embedding_collection(solr_url, dead) as url:
        reason, (up, known) = asyncio.run(search(url.rsplit("/", 1)[1]))
    assert "502" in reason and "text-to-vector" in reason
    assert up == known  # Solr answered: no node is taken out of rotation


def test_the_service_answers_from_passages_solr_embedded(
    make_client: ClientFactory, solr_url: str, model_server_url: str, llm: LLMScript
) -> None:
    embeddings_url = f"{model_server_url}/v1/"
    with (
        collection(solr_url, "FileShare") as documents,
        embedding_collection(solr_url, embeddings_url) as passages_url,
    ):
        passages = passages_url.rsplit("/", 1)[1]
        settings = mode_settings(solr_url, embeddings_url, documents, passages, "auto")
        asyncio.run(ingest_and_search(settings, EmbeddingMode.of(settings)))
        client = make_client(
            {
                "solr.collection.documents": documents,
                "solr.collection.passages": passages,
                "retrieval.method": "vector",
                "solr.embeddings.mode": "solr",
            }
        )
        response = client.post("/ai/rag", json={"query": "What does the lighthouse keeper do?"})
        health = client.get("/health", headers=ADMIN).json()
    assert response.status_code == 200, response.text
    cited = [document["id"] for document in response.json()["content"]["documents"]]
    assert "lighthouse" in cited
    assert "lighthouse keeper" in llm.requests[-1].prompt.lower()
    assert health["checks"]["embeddings"]["by"] == "solr"  # operators see who embeds
    # on the session's VectorMain (no plugin), auto leaves it to the service
    service_mode = make_client().get("/health", headers=ADMIN).json()
    assert service_mode["checks"]["embeddings"]["by"] == "service"


def test_the_local_launcher_turns_the_plugin_on_for_every_node(
    tmp_path: Path, model_server_url: str
) -> None:
    refused = subprocess.run(
        [
            "bash",
            str(SOLR_SCRIPT),
            "start",
            "--text-to-vector",
            "models:8090",
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "http(s) URL" in refused.stderr
    endpoint = f"{model_server_url}/v1/"
    with local_solr(tmp_path / "solr", nodes=2, text_to_vector=endpoint) as solr:
        settings = mode_settings(solr.url, endpoint, "FileShare", "VectorMain", "auto")

        async def modes() -> list[str | None]:
            async with httpx.AsyncClient() as http:
                return [
                    await plugin_gap(SolrClient(http, url), settings.solr, "all-MiniLM-L6-v2")
                    for url in solr.urls
                ]

        assert asyncio.run(modes()) == [None, None]
        # VectorMain routes a passage by its parent_id (docs/operations.md "Scaling out")
        keeper = {"id": "keeper_0", "parent_id": "keeper", "content": PASSAGES["keeper"]}
        post(f"{solr.node_url(2)}/VectorMain", [keeper]).raise_for_status()
        stored = httpx.get(
            f"{solr.url}/VectorMain/select",
            params={"q": "id:keeper_0", "defType": "lucene", "fl": "vector_384"},
        ).json()
        assert len(stored["response"]["docs"][0]["vector_384"]) == 384


# -- VectorMain follows FileShare: the passages processor (issue 32, 4a) ---------------------


def passages_in(url: str) -> dict[str, list[dict[str, Any]]]:
    found = httpx.get(
        f"{url}/select",
        params={"q": "*:*", "defType": "lucene", "rows": 10_000, "sort": "chunk_index asc",
                "fl": "id,parent_id,chunk_index,content,title,url,allowed_groups,vector_384"},
    ).json()["response"]["docs"]  # fmt: skip
    held: dict[str, list[dict[str, Any]]] = {}
    for passage in found:
        held.setdefault(passage["parent_id"], []).append(passage)
    return held


def test_a_document_posted_to_fileshare_gets_its_passages_in_vectormain(
    solr_url: str, model_server_url: str, make_client: ClientFactory, llm: LLMScript
) -> None:
    """Posted with plain Solr updates (a crawler), never the service: cut as the service cuts
    (Chunker on the same size and overlap), embedded by VectorMain's own plugin, found by kNN
    through /ai/rag; replaced and deleted documents take their old passages with them."""
    documents = load_corpus()
    size, overlap = 300, 50
    with (
        embedding_collection(solr_url, f"{model_server_url}/v1/") as vectors,
        collection(
            solr_url,
            "FileShare",
            **{"passages.enabled": "true", "passages.collection": vectors.rsplit("/", 1)[1],
               "passages.size": str(size), "passages.overlap": str(overlap)},
        ) as fileshare,
    ):  # fmt: skip
        posted = [
            {"id": d.id, "title": d.title, "url": d.url, "content": d.content,
             "language": d.language}
            for d in documents
        ]  # fmt: skip
        posted[0]["allowed_groups"] = ["team-x"]
        response = post(f"{solr_url}/{fileshare}", posted)
        assert response.status_code == 200, response.text
        held = passages_in(vectors)
        assert set(held) == {d.id for d in documents if d.content.strip()}
        for document in documents:
            pieces = held.get(document.id, [])
            assert [p["content"] for p in pieces] == Chunker(size, overlap).run(document.content)
            assert [p["id"] for p in pieces] == [f"{document.id}_{i}" for i in range(len(pieces))]
            assert all(p["title"] == document.title and p["url"] == document.url for p in pieces)
            assert all(len(p["vector_384"]) == 384 for p in pieces)
        assert all(p["allowed_groups"] == ["team-x"] for p in held[documents[0].id])

        client = make_client(
            {
                "solr.collection.documents": fileshare,
                "solr.collection.passages": vectors.rsplit("/", 1)[1],
                "retrieval.method": "vector",
                "solr.embeddings.mode": "solr",
            }
        )
        answer = client.post("/ai/rag", json={"query": "When was the lighthouse lamp electrified?"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["content"]["documents"][0]["id"] == "lighthouse"

        # replaced: only the new text's passages; deleted by id: none left
        shorter = {**posted[1], "content": "A single short sentence now."}
        assert post(f"{solr_url}/{fileshare}", [shorter]).status_code == 200
        assert [p["content"] for p in passages_in(vectors)[shorter["id"]]] == [shorter["content"]]
        gone = httpx.post(
            f"{solr_url}/{fileshare}/update",
            params={"commit": "true"},
            json={"delete": {"id": shorter["id"]}},
            timeout=60,
        )
        assert gone.status_code == 200, gone.text
        assert shorter["id"] not in passages_in(vectors)

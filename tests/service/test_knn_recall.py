"""kNN's recall against exact search, with and without an ACL filter (issue 82).

Solr's HNSW graph is approximate: asked for the 10 nearest it misses some (recall@10 0.86 at
10,000 passages, bench/scale.py), more under a filter that keeps half the documents. The
service asks it to look for `knn.depth` neighbours and keeps the nearest `solr.topK`. Here a
few thousand passages whose vectors are real text's (the normalised mean of four Cranfield
sentences' vectors, as bench/scale.py builds its million) are searched through the service's
VectorRetriever, and its top 10 compared with numpy's exact top 10 under the same filter.
A scope of at most knn.exact.max passages is not searched by the graph but scored whole: its
hits are then numpy's, scored by the float vectors even where the graph holds 4-bit integers.
"""

from __future__ import annotations

import asyncio
import random
import re

import httpx
import numpy as np
import pytest

from bench.cranfield import load_documents, load_queries
from service.llm import EmbeddingsClient, LLMOptions
from service.metrics import REGISTRY
from service.models.encoder import SentenceEncoder
from service.retrieval import SolrClient, VectorRetriever
from service.retrieval.scope import EVERYTHING, Scope
from testing.servers import serve_in_thread
from testing.solr import create_collection, delete_collection
from testing.solr_proxy import ProxyLog, create_solr_proxy
from testing.solr_reads import SolrReads

COLLECTION = "KnnRecall"
FOUR_BITS = {"vectors.bits": "4", "vectors.compress": "true"}
PASSAGES = 4000
QUESTIONS = 40


def index(
    solr_url: str,
    name: str,
    configset: str,
    vectors: np.ndarray,
    half: np.ndarray,
    **properties: str,
) -> None:
    """The passages (each allowing g50 where `half` says) in a collection of their own."""
    delete_collection(solr_url, name)
    create_collection(solr_url, name, configset, properties=properties)
    documents = [
        {
            "id": f"p{i}",
            "parent_id": f"d{i}",
            "content": f"passage {i}",
            "language": "en",
            "allowed_groups": ["everyone", "g50"] if half[i] else ["everyone"],
            "vector_384": [float(x) for x in vectors[i]],
        }
        for i in range(PASSAGES)
    ]
    for start in range(0, PASSAGES, 1000):
        httpx.post(
            f"{solr_url}/{name}/update", json=documents[start : start + 1000], timeout=300
        ).raise_for_status()
    httpx.get(f"{solr_url}/{name}/update", params={"commit": "true"}, timeout=300)


@pytest.fixture(scope="module")
def passages(solr_url: str) -> tuple[np.ndarray, np.ndarray]:
    """(each passage's vector, whether it allows g50): indexed in a VectorMain of its own."""
    sentences = [s for d in load_documents()[:300] for s in re.split(r"(?<=\.)\s+", d.content)]
    sentences = [s for s in sentences if len(s) > 30][:1200]
    pool = SentenceEncoder().encode(sentences)
    rng = random.Random(82)
    vectors = np.stack(
        [pool[rng.sample(range(len(pool)), 4)].mean(axis=0) for _ in range(PASSAGES)]
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    half = np.array([rng.random() < 0.5 for _ in range(PASSAGES)])
    index(solr_url, COLLECTION, "VectorMain", vectors, half)
    yield vectors, half
    delete_collection(solr_url, COLLECTION)


def searched(
    solr_url: str,
    embeddings_url: str,
    scope: Scope,
    depth: int,
    *,
    questions: int = QUESTIONS,
    collection: str = COLLECTION,
    rescore: bool = False,
    exact_max: int = 0,
    reads: SolrReads | None = None,
) -> list[list[tuple[str, float]]]:
    """Each question's hits: (id, score); `reads` counts Solr's answers."""
    asked = [q.text for q in load_queries()[:questions]]

    async def search() -> list[list[tuple[str, float]]]:
        hooks = reads.hooks if reads else {}
        async with httpx.AsyncClient(timeout=120, event_hooks=hooks) as http:
            retriever = VectorRetriever(
                SolrClient(http, solr_url),
                collection,
                EmbeddingsClient(
                    http, LLMOptions(endpoint=embeddings_url, model="all-MiniLM-L6-v2")
                ),
                field="vector_384",
                top_k=10,
                scope=scope,
                depth=depth,
                rescore=rescore,
                exact_max=exact_max,
            )
            return [[(hit.id, hit.score) for hit in await retriever.run(q)] for q in asked]

    return asyncio.run(search())


def recall(
    solr_url: str, embeddings_url: str, scope: Scope, depth: int, exact: list[set[str]]
) -> float:
    found = [{id_ for id_, _ in hits} for hits in searched(solr_url, embeddings_url, scope, depth)]
    assert all(len(hits) == 10 for hits in found)
    return float(np.mean([len(got & want) / 10 for got, want in zip(found, exact, strict=True)]))


@pytest.mark.parametrize("filtered", [False, True], ids=["no filter", "half the documents"])
def test_knn_finds_the_exact_nearest_under_a_filter(
    solr_url: str, model_server_url: str, passages: tuple[np.ndarray, np.ndarray], filtered: bool
) -> None:
    vectors, half = passages
    queries = SentenceEncoder().encode([q.text for q in load_queries()[:QUESTIONS]])
    seen = half if filtered else np.ones(PASSAGES, dtype=bool)
    rows = np.flatnonzero(seen)
    exact = [{f"p{i}" for i in rows[np.argsort(-(vectors[rows] @ q))[:10]]} for q in queries]
    scope = Scope(groups=("g50",), security="groups") if filtered else EVERYTHING
    assert recall(solr_url, f"{model_server_url}/v1/", scope, 100, exact) >= 0.95


@pytest.fixture(scope="module")
def quantized(solr_url: str, passages: tuple[np.ndarray, np.ndarray]) -> str:
    """The same passages as 4-bit vectors (VectorMainQuantized, compressed)."""
    vectors, half = passages
    name = f"{COLLECTION}Quantized"
    index(solr_url, name, "VectorMainQuantized", vectors, half, **FOUR_BITS)
    yield name
    delete_collection(solr_url, name)


def exact_top(vectors: np.ndarray, seen: np.ndarray, queries: np.ndarray) -> list[set[str]]:
    rows = np.flatnonzero(seen)
    return [{f"p{i}" for i in rows[np.argsort(-(vectors[rows] @ q))[:10]]} for q in queries]


def searches(how: str) -> float:
    """The vector searches made so far, of this kind (solr_rag_vector_searches)."""
    return REGISTRY.get_sample_value("solr_rag_vector_searches_total", {"how": how}) or 0.0


def score_errors(
    found: list[list[tuple[str, float]]], vectors: np.ndarray, queries: np.ndarray
) -> list[float]:
    """How far each hit's score is from its float vector's (1 + cosine) / 2."""
    return [
        abs(score - (1 + float(vectors[int(id_[1:])] @ query)) / 2)
        for hits, query in zip(found, queries, strict=True)
        for id_, score in hits
    ]


@pytest.mark.parametrize("filtered", [False, True], ids=["no filter", "half the documents"])
def test_quantized_neighbours_rescored_rank_and_score_as_the_floats(
    solr_url: str,
    model_server_url: str,
    passages: tuple[np.ndarray, np.ndarray],
    quantized: str,
    filtered: bool,
) -> None:
    """4-bit vectors searched with knn.rescore: the hits are the exact nearest, scored by
    their float vectors ((1 + cosine) / 2), not the integers'."""
    vectors, half = passages
    queries = SentenceEncoder().encode([q.text for q in load_queries()[:QUESTIONS]])
    seen = half if filtered else np.ones(PASSAGES, dtype=bool)
    exact = exact_top(vectors, seen, queries)
    scope = Scope(groups=("g50",), security="groups") if filtered else EVERYTHING
    url = f"{model_server_url}/v1/"
    found = searched(solr_url, url, scope, 100, collection=quantized, rescore=True)
    got = [{id_ for id_, _ in hits} for hits in found]
    assert np.mean([len(g & e) / 10 for g, e in zip(got, exact, strict=True)]) >= 0.95
    assert max(score_errors(found, vectors, queries)) < 1e-3


def test_a_scope_of_few_passages_is_scored_whole(
    solr_url: str,
    model_server_url: str,
    passages: tuple[np.ndarray, np.ndarray],
    quantized: str,
) -> None:
    """knn.exact.max between the half a filter keeps and the whole: the filtered search
    scores each of its passages by its float vector (numpy's exact top 10, to the float's
    precision), the unfiltered one searches the 4-bit graph (scores the integers'), as Solr's
    count of each scope says (asked once: the count is kept a minute)."""
    vectors, half = passages
    queries = SentenceEncoder().encode([q.text for q in load_queries()[:QUESTIONS]])
    url = f"{model_server_url}/v1/"
    kept = int(half.sum())
    assert kept < 3000 < PASSAGES
    exact_before, reads = searches("exact"), SolrReads()
    filtered = searched(
        solr_url,
        url,
        Scope(groups=("g50",), security="groups"),
        10,
        collection=quantized,
        exact_max=3000,
        reads=reads,
    )
    assert searches("exact") - exact_before == QUESTIONS
    assert reads.searches[quantized] == QUESTIONS + 1  # the questions' and one count
    got = [[id_ for id_, _ in hits] for hits in filtered]
    assert [set(hits) for hits in got] == exact_top(vectors, half, queries)
    assert max(score_errors(filtered, vectors, queries)) < 1e-5
    graph_before = searches("graph")
    whole = searched(solr_url, url, EVERYTHING, 10, collection=quantized, exact_max=3000)
    assert searches("graph") - graph_before == QUESTIONS
    assert max(score_errors(whole, vectors, queries)) > 1e-4  # the integers' scores


@pytest.mark.parametrize(
    "log",
    [ProxyLog(count_status=500), ProxyLog(count_delay=5.0)],
    ids=["the count fails", "the count is late"],
)
def test_a_count_that_fails_or_is_late_leaves_the_search_to_the_graph(
    solr_url: str, model_server_url: str, quantized: str, log: ProxyLog
) -> None:
    """The count only chooses how to search: without it in time, the graph answers (its
    search sent while the count is still held), never an error."""
    graph_before = searches("graph")
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        found = searched(
            f"{base}/solr",
            f"{model_server_url}/v1/",
            EVERYTHING,
            10,
            questions=1,
            collection=quantized,
            exact_max=PASSAGES,
        )
    assert len(found[0]) == 10 and searches("graph") - graph_before == 1
    counted, knn = log.searches
    assert counted.query == "*:*" and knn.query.startswith("{!knn ")
    if log.count_delay:
        assert knn.started < counted.finished or not counted.finished


def test_searches_of_one_scope_at_once_ask_one_count(
    solr_url: str, model_server_url: str, quantized: str
) -> None:
    """Eight questions of one scope at once: eight searches and one count, not eight."""
    reads = SolrReads()

    async def eight() -> None:
        async with httpx.AsyncClient(timeout=120, event_hooks=reads.hooks) as http:
            retriever = VectorRetriever(
                SolrClient(http, solr_url),
                quantized,
                EmbeddingsClient(
                    http,
                    LLMOptions(endpoint=f"{model_server_url}/v1/", model="all-MiniLM-L6-v2"),
                ),
                field="vector_384",
                top_k=10,
                exact_max=PASSAGES,
            )
            questions = [q.text for q in load_queries()[:8]]
            await asyncio.gather(*(retriever.run(q) for q in questions))

    asyncio.run(eight())
    assert reads.searches[quantized] == 8 + 1

"""Semantic retrieval: the embedding model, VectorMain passages, kNN, hybrid, /search/vector."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.cli import main as cli
from service.config import settings_from_mapping
from service.llm import EmbeddingsClient, LLMOptions
from service.models.encoder import SentenceEncoder
from service.retrieval import (
    Bm25Retriever,
    HybridRetriever,
    SolrClient,
    VectorRetriever,
)
from service.retrieval.factory import build_retriever
from testing.corpus import remove_documents
from testing.llm_server import LLMScript
from testing.service import ADMIN_TOKEN, ClientFactory, write_properties

REFERENCE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8")
)
# Shares no word with the lighthouse document (nor its stems): only meaning can find it.
NO_SHARED_WORDS = "Who switched on the beacon at nightfall?"
VECTOR = {"retrieval.method": "vector", "solr.topK": 3}
HYBRID = {"retrieval.method": "hybrid", "solr.topK": 5}
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) or 1.0))


def reference_cosines(encoder: SentenceEncoder) -> list[float]:
    """Each reference text's vector by `encoder`, against sentence-transformers' own."""
    vectors = encoder.encode([item["text"] for item in REFERENCE["items"]])
    return [
        cosine(np.array(item["embedding"]), vector)
        for item, vector in zip(REFERENCE["items"], vectors, strict=True)
    ]


def test_encoder_matches_sentence_transformers() -> None:
    assert min(reference_cosines(SentenceEncoder())) >= 0.9999


def test_the_encoders_idle_threads_sleep() -> None:
    """onnxruntime's threads spin while idle unless told not to: 40% of a short text's CPU
    (issue 70); the reranker's sleep too (tests/service/test_reranker.py)."""
    options = SentenceEncoder()._session.get_session_options()
    for entry in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning"):
        assert options.get_session_config_entry(entry) == "0"


def test_the_int8_export_is_close_to_the_reference_but_not_exact() -> None:
    """What docs/operations.md promises of all-MiniLM-L6-v2-q: 0.97 cosine or more to
    fp32's vectors."""
    cosines = reference_cosines(SentenceEncoder("all-MiniLM-L6-v2-q"))
    assert 0.97 <= min(cosines) < 0.9999  # quantized: near, never the same


def test_bge_small_pools_its_cls_token_and_ranks_by_meaning() -> None:
    encoder = SentenceEncoder("bge-small-en-v1.5")
    query, near, far = encoder.encode(
        [
            "Who switched on the beacon at nightfall?",
            "The lighthouse keeper lit the lamp every evening at dusk.",
            "The orchard's apple trees are pruned in late winter.",
        ]
    )
    assert abs(float(np.linalg.norm(query)) - 1) < 1e-5
    assert cosine(query, near) > cosine(query, far) + 0.1


def test_embeddings_endpoint_serves_the_same_vectors(model_server_url: str) -> None:
    items = REFERENCE["items"][:5]
    body = httpx.post(
        f"{model_server_url}/v1/embeddings",
        json={"model": "all-MiniLM-L6-v2", "input": [item["text"] for item in items]},
    ).json()
    assert [row["index"] for row in body["data"]] == list(range(5))
    for item, row in zip(items, body["data"], strict=True):
        assert len(row["embedding"]) == 384
        assert cosine(np.array(item["embedding"]), np.array(row["embedding"])) >= 0.999
    assert body["usage"]["prompt_tokens"] > 0


@pytest.mark.usefixtures("corpus")
def test_passages_inherit_their_parent(solr_url: str) -> None:
    found = httpx.get(
        f"{solr_url}/VectorMain/select",
        params={
            "q": "parent_id:turbine-manual",
            "defType": "lucene",
            "rows": 100,
            "fl": "*",
            "sort": "chunk_index asc",
        },
    ).json()["response"]
    assert found["numFound"] >= 9  # 9,667 characters in passages of at most 1,000
    first = found["docs"][0]
    assert first["id"] == "turbine-manual_0" and first["chunk_index"] == 0
    assert first["title"] == "Wind turbine maintenance manual"
    assert len(first["vector_384"]) == 384
    assert all(len(doc["content"]) <= 1000 for doc in found["docs"])


def test_knn_finds_what_bm25_cannot(make_client: ClientFactory, llm: LLMScript) -> None:
    bm25 = make_client({"retrieval.method": "bm25"}).post(
        "/ai/rag", json={"query": NO_SHARED_WORDS}
    )
    assert bm25.status_code == 428 or "lighthouse" not in [
        d["id"] for d in bm25.json()["content"]["documents"]
    ]
    vector = make_client(VECTOR).post("/ai/rag", json={"query": NO_SHARED_WORDS})
    assert vector.status_code == 200, vector.text
    documents = vector.json()["content"]["documents"]
    assert documents[0]["id"] == "lighthouse"  # sources are parents, not passages
    assert "lit the lamp every evening at dusk" in documents[0]["content"]


def test_vector_sources_are_deduplicated_per_document(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"retrieval.method": "vector", "solr.topK": 8})
    payload = client.post("/ai/rag", json={"query": "turbine gearbox oil and blade inspection"})
    ids = [d["id"] for d in payload.json()["content"]["documents"]]
    assert ids.count("turbine-manual") == 1
    assert len(llm.requests[0].prompt.split("######\n[1]")) > 2  # several of its passages sent


def test_top_k_is_respected(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"retrieval.method": "vector", "solr.topK": 2})
    client.post("/ai/rag", json={"query": "animals in a park"})
    assert llm.requests[0].prompt.count("\n######\n[") + 1 <= 3  # at most 2 sources + question
    passages = client.get("/search/vector", params={"queryrag": "animals", "topK": 4}).json()
    assert len(passages["content"]["documents"]) == 4


def test_vector_search_api_is_datafaris(make_client: ClientFactory) -> None:
    client = make_client()
    by_q = client.get("/search/vector", params={"q": NO_SHARED_WORDS, "topK": 3}).json()
    by_queryrag = client.get("/search/vector", params={"queryrag": NO_SHARED_WORDS}).json()
    passages = by_q["content"]["documents"]
    assert passages[0]["parent_id"] == "lighthouse"
    assert [p["score"] for p in passages] == sorted((p["score"] for p in passages), reverse=True)
    assert by_queryrag["content"]["documents"][0]["id"] == passages[0]["id"]
    missing = client.get("/search/vector")
    assert missing.status_code == 400
    assert missing.json()["content"]["label"] == "searchBadRequest"


def test_id_restricts_vector_retrieval_to_that_documents_passages(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(VECTOR)
    payload = client.post("/ai/rag", json={"query": "yaw bearing", "id": "turbine-manual"}).json()
    assert [d["id"] for d in payload["content"]["documents"]] == ["turbine-manual"]
    assert "yaw bearing" in llm.requests[0].prompt


def expected_fusion(fusion: str, lexical: list, semantic: list) -> dict[str, float]:
    """What each fusion gives, computed here from the two rankings' own hits."""
    expected: dict[str, float] = {}
    for hits in (lexical, semantic):
        scores = np.array([hit.score for hit in hits])
        spread = 3 * scores.std()
        for rank, hit in enumerate(hits, start=1):
            if fusion == "rrf":
                part = 1 / (60 + rank)
            else:
                part = (hit.score - scores.mean() + spread) / (2 * spread) / 2
            expected[hit.id] = expected.get(hit.id, 0.0) + part
    return expected


@pytest.mark.parametrize("fusion", ["score", "rrf"])
def test_hybrid_is_the_fused_union_of_bm25_and_knn(
    solr_url: str, model_server_url: str, fusion: str
) -> None:
    async def run() -> tuple[list, list, list]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            embeddings = EmbeddingsClient(
                http, LLMOptions(endpoint=f"{model_server_url}/v1/", model="all-MiniLM-L6-v2")
            )
            lexical = Bm25Retriever(
                solr, "VectorMain", fields="title content", operator="OR", rows=10
            )
            semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=10)
            query = "zebra herd grazing"
            lexical_hits, semantic_hits = await lexical.run(query), await semantic.run(query)
            hybrid = HybridRetriever(lexical, semantic, fusion=fusion, k=60, limit=20)  # type: ignore[arg-type]
            return lexical_hits, semantic_hits, await hybrid.run(query)

    lexical_hits, semantic_hits, fused = asyncio.run(run())
    expected = expected_fusion(fusion, lexical_hits, semantic_hits)
    assert {d.id for d in fused} == {h.id for h in lexical_hits} | {h.id for h in semantic_hits}
    assert [round(d.score, 9) for d in fused] == sorted(
        (round(s, 9) for s in expected.values()), reverse=True
    )
    assert all(d.score == pytest.approx(expected[d.id]) for d in fused)


def test_hybrid_fuses_its_candidates_before_cutting_to_top_k(
    solr_url: str, model_server_url: str
) -> None:
    """solr.topK=1: the one passage kept is the best of 10 candidates from each ranking, with
    the score those depths give (at depth 1 a passage only second in one ranking gets 0)."""
    query = "zebra herd grazing"
    settings = settings_from_mapping(
        {"retrieval.method": "hybrid", "solr.topK": "1", "hybrid.candidates": "10",
         "retrieval.similarity.min": "0", "solr.bm25.qf": "title content",
         "hybrid.weight.vector": "1"},  # expected_fusion's equal weights
        source="test",
        env={},
    )  # fmt: skip

    async def run() -> tuple[list, list, list]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url)
            embeddings = EmbeddingsClient(
                http, LLMOptions(endpoint=f"{model_server_url}/v1/", model="all-MiniLM-L6-v2")
            )
            hybrid = build_retriever(settings.retrieval, settings.solr, solr, embeddings)
            lexical = Bm25Retriever(
                solr, "VectorMain", fields="title content", operator="OR", rows=10, tie=1.0
            )
            semantic = VectorRetriever(solr, "VectorMain", embeddings, field="vector_384", top_k=10)
            return await lexical.run(query), await semantic.run(query), await hybrid.run(query)

    lexical_hits, semantic_hits, [kept] = asyncio.run(run())
    expected = expected_fusion("score", lexical_hits, semantic_hits)
    assert kept.score == pytest.approx(max(expected.values()))
    assert kept.score == pytest.approx(expected[kept.id])


def test_hybrid_rag_answers(make_client: ClientFactory, llm: LLMScript) -> None:
    response = make_client(HYBRID).post("/ai/rag", json={"query": NO_SHARED_WORDS})
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "lighthouse"


def _passages(solr_url: str, parent: str) -> list[dict]:
    return httpx.get(
        f"{solr_url}/VectorMain/select",
        params={
            "q": f"parent_id:{parent}",
            "defType": "lucene",
            "fl": "id,content",
            "rows": 100,
            "sort": "id asc",
        },
    ).json()["response"]["docs"]


def test_reingesting_replaces_passages_and_delete_removes_them(
    make_client: ClientFactory, solr_url: str
) -> None:
    client = make_client()
    long_text = "\n\n".join(f"Paragraph {n} about the ferry timetable. " * 12 for n in range(6))
    document = {"id": "ferry-notes", "title": "Ferry notes", "content": long_text}
    first = client.post("/documents", json={"documents": [document]}, headers=AUTH)
    assert first.status_code == 200, first.text
    assert first.json()["content"]["passages"] == len(_passages(solr_url, "ferry-notes")) >= 3

    document["content"] = "The ferry now sails hourly."
    client.post("/documents", json={"documents": [document]}, headers=AUTH).raise_for_status()
    assert [p["content"] for p in _passages(solr_url, "ferry-notes")] == [
        "The ferry now sails hourly."
    ]

    assert client.delete("/documents/ferry-notes", headers=AUTH).status_code == 200
    assert _passages(solr_url, "ferry-notes") == []
    gone = httpx.get(
        f"{solr_url}/FileShare/select", params={"q": "id:ferry-notes", "defType": "lucene"}
    ).json()
    assert gone["response"]["numFound"] == 0


def test_documents_api_needs_the_admin_token(make_client: ClientFactory) -> None:
    body = {"documents": [{"id": "x", "content": "y"}]}
    assert make_client().post("/documents", json=body).status_code == 401
    wrong = make_client().post("/documents", json=body, headers={"Authorization": "Bearer no"})
    assert wrong.status_code == 401
    assert wrong.json()["content"]["label"] == "ingestionUnauthorized"
    disabled = make_client({"admin.token": ""}).post("/documents", json=body, headers=AUTH)
    assert disabled.status_code == 403


@pytest.mark.parametrize("settings", [VECTOR, HYBRID])
def test_a_question_the_documents_do_not_answer_finds_nothing(
    make_client: ClientFactory, llm: LLMScript, settings: dict
) -> None:
    """retrieval.similarity.min (issue 17): no unrelated sources sent to the LLM."""
    client = make_client(settings)
    unrelated = client.post("/ai/rag", json={"query": "How do I bake sourdough bread at home?"})
    assert unrelated.status_code == 428, unrelated.text
    assert unrelated.json()["content"]["label"] == "ragNoFileFound"
    assert llm.requests == []
    floorless = make_client({**settings, "retrieval.similarity.min": 0})
    assert (
        floorless.post(
            "/ai/rag", json={"query": "How do I bake sourdough bread at home?"}
        ).status_code
        == 200
    )
    related = client.post("/ai/rag", json={"query": NO_SHARED_WORDS})
    assert related.json()["content"]["documents"][0]["id"] == "lighthouse"


OFF_TOPIC = "Who won the football world cup final that evening?"  # "evening": lighthouse's word


def test_hybrid_does_not_answer_an_off_topic_question_from_a_shared_word(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    """Issue 36, item 1: BM25 matched one word, and hybrid answered with that source although
    kNN found nothing at retrieval.similarity.min."""
    client = make_client(HYBRID)
    refused = client.post("/ai/rag", json={"query": OFF_TOPIC})
    assert refused.status_code == 428, refused.text
    assert llm.requests == []
    # as before, when asked: BM25's match alone answers
    lexical = make_client({**HYBRID, "hybrid.needs.meaning": False})
    answered = lexical.post("/ai/rag", json={"query": OFF_TOPIC})
    assert answered.status_code == 200, answered.text
    assert answered.json()["content"]["documents"][0]["id"] == "lighthouse"
    # an on-topic question still answers; /v1 with a threshold no passage meets: no source
    related = client.post("/ai/rag", json={"query": NO_SHARED_WORDS})
    assert related.json()["content"]["documents"][0]["id"] == "lighthouse"
    body = {
        "model": "rag",
        "messages": [{"role": "user", "content": "When was the lighthouse lamp electrified?"}],
        "index_name": "hybrid",
        "similarity_threshold": 1.0,
    }
    strict = client.post("/v1/chat/completions", json=body)
    assert strict.status_code == 200, strict.text
    assert strict.json()["sources"] == []


# -- nothing embedded twice ---------------------------------------------------------------------

DEAD_EMBEDDINGS = {"ai.embeddings.endpoint": "http://127.0.0.1:9/v1/", "llm.retries": 0}


def _ferry(paragraphs: list[str], id: str = "ferry-log") -> dict:
    """A document of 3 passages (two paragraphs a passage); ids differ per test, since Solr
    keeps what earlier tests wrote."""
    return {"id": id, "title": "Ferry log", "content": "\n\n".join(paragraphs)}


PARAGRAPHS = [f"Day {n}: the ferry crossed the strait at dawn. " * 10 for n in range(5)]


def _ingest(client: TestClient, *documents: dict) -> dict:
    response = client.post("/documents", json={"documents": list(documents)}, headers=AUTH)
    assert response.status_code == 200, response.text
    return response.json()["content"]


def test_an_unchanged_document_is_skipped_without_any_embedding_call(
    make_client: ClientFactory,
) -> None:
    first = _ingest(make_client(), _ferry(PARAGRAPHS, "ferry-1"))
    assert first["embedded"] == first["passages"] == 3 and first["unchanged"] == 0
    # an embeddings API nobody answers: a single embedding call would fail the request
    again = _ingest(make_client(DEAD_EMBEDDINGS), _ferry(PARAGRAPHS, "ferry-1"))
    assert (again["documents"], again["unchanged"], again["embedded"]) == (0, 1, 0)


def test_a_changed_document_embeds_only_its_changed_passages(
    make_client: ClientFactory, solr_url: str
) -> None:
    first = _ingest(make_client(), _ferry(PARAGRAPHS, "ferry-2"))
    changed = [*PARAGRAPHS[:-1], "Day 4: fog kept the ferry in port all day. " * 10]
    refused = make_client(DEAD_EMBEDDINGS).post(
        "/documents", json={"documents": [_ferry(changed, "ferry-2")]}, headers=AUTH
    )
    assert refused.status_code == 503  # the new paragraph needs the embeddings API
    second = _ingest(make_client(), _ferry(changed, "ferry-2"))
    assert (second["documents"], second["passages"], second["embedded"]) == (
        1,
        first["passages"],
        1,
    )
    stored = httpx.get(
        f"{solr_url}/VectorMain/select",
        params={
            "q": "{!term f=parent_id}ferry-2",
            "defType": "lucene",
            "fl": "content,vector_384",
            "sort": "id asc",
        },
    ).json()["response"]["docs"]
    assert [len(p["vector_384"]) for p in stored] == [384] * first["passages"]  # reused ones too
    assert "Day 4: fog" in stored[-1]["content"]
    # the new passage's vector is its own: it is found by meaning
    answer = make_client(VECTOR).post(
        "/ai/rag", json={"query": "Why did the boat stay in the harbour?"}
    )
    assert answer.json()["content"]["documents"][0]["id"] == "ferry-2"


def test_another_embeddings_model_or_force_embeds_everything_again(
    make_client: ClientFactory, tmp_path: Path, base_properties: dict[str, object], solr_url: str
) -> None:
    first = _ingest(make_client(), _ferry(PARAGRAPHS, "ferry-3"))
    # the same weights under another name: the index cannot know, so it re-embeds (the
    # service would not start on another model's vectors: the startup check is off here)
    renamed = {"ai.embeddings.model": "sentence-transformers/all-MiniLM-L6-v2"}
    try:
        again = _ingest(
            make_client({**renamed, "solr.startup.check": False}), _ferry(PARAGRAPHS, "ferry-3")
        )
    finally:
        remove_documents(solr_url, ["ferry-3"])  # the other tests' services check the model
    assert (again["documents"], again["embedded"]) == (1, first["passages"])
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "ferry.md").write_text("# Ferry\n\n" + "\n\n".join(PARAGRAPHS))
    config = write_properties(tmp_path / "cli.properties", base_properties)
    assert cli(["ingest", str(folder), "--config", str(config)]) == 0
    dead = write_properties(tmp_path / "dead.properties", {**base_properties, **DEAD_EMBEDDINGS})
    assert cli(["ingest", str(folder), "--config", str(dead)]) == 0  # unchanged: no call
    # --force: every passage is sent to the API, which is down: one line, no traceback
    assert cli(["ingest", str(folder), "--config", str(dead), "--force"]) == 1

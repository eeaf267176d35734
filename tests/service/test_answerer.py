"""The embedded answerer (issue 38): Qwen2.5-Coder-Instruct assembled from its PyPI parts and
checked against the pinned size and sha256, served by our llama.cpp build, answering through
/ai/rag on the shipped chain settings: SQuAD 2.0 questions answered from their paragraph and
cited, an honest "not in the documents", no prompt scaffolding after refine or map-reduce, a
streamed answer, `format` obeyed, and a caller's JSON schema checked against what the model
wrote (and the hostile ones stopped before it is asked).

The questions are from bench.answers' seeded sample (the ones the shipped configuration
answered there); their articles' paragraphs are indexed into collections of their own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from service.chains.result import says_nothing_relevant
from service.config.properties import parse_properties
from service.evaluation import normalized
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.llm.embeddings import embeddings_client
from service.models import packaged
from service.retrieval import SolrClient
from service.text.claims import claims_of
from testing.llama import LlamaServer, LlamaStartError, llama_server
from testing.llm_server import LLMScript
from testing.service import ROOT, ClientFactory, test_settings
from testing.solr import create_collection, delete_collection
from tests.service.test_streaming import read_events

SQUAD = ROOT / "bench" / "data" / "squad2"
DOCUMENTS, PASSAGES = "SquadDocuments", "SquadPassages"
ARTICLES = {"Pharmacy", "Prime number", "Geology"}
MODEL = packaged.MODELS[packaged.DEFAULT]
# the shipped chain and retrieval settings, as rag.properties has them
_SHIPPED_KEYS = (
    "prompt.chunking.strategy", "prompt.max.request.size", "llm.context.window", "llm.maxTokens",
    "retrieval.method", "solr.topK", "grounding.enabled", "grounding.action",
    "hybrid.weight.vector", "retrieval.similarity.min", "rerank.enabled", "rerank.top.n",
    "rerank.order", "rerank.min.score", "rerank.window.sentences", "grounding.verify",
    "grounding.abstain.unsupported", "grounding.abstain.not.found",
)  # fmt: skip
SHIPPED = {
    key: value
    for key, value in parse_properties((ROOT / "rag.properties").read_text()).items()
    if key in _SHIPPED_KEYS
}
SCAFFOLDING = ("######", "answer so far", "refined answer", "question:", "documents:",
               "answer written earlier", "answers to the same question")  # fmt: skip


def _questions() -> dict[str, dict]:
    by_text = {}
    for line in (SQUAD / "questions.jsonl").open(encoding="utf-8"):
        question = json.loads(line)
        by_text[question["question"]] = question
    return by_text


QUESTIONS = _questions()
ANSWERED = [
    "How many drugs approved by the FDA in 2013 were specialty drugs?",
    "In order to better understand the orientations of faults and folds, structural "
    "geologists do what with measurements of geological structures?",
    "As of January 2016 how many digits does the largest known prime consist of?",
]
# (issue 46: "How many prime numbers exist?" left the list. Reading only the passage the
# reranker scores best, the model answers it right, but from a paragraph on prime formulas
# that mentions "infinitely many primes" in passing, which the reranker scores above
# Euclid's: measured in bench.answers, citation precision 0.98.)
# the pharmacy articles are found, and say nothing of salaries
NOT_IN_THE_SOURCES = "What salary does a pharmacy technician earn in Canada?"
# ... nor of Japan: the 1.5B answers this one from what it knows (measured), and the
# grounding check (shipped on) says its sources do not support it
OUTSIDE_THE_SOURCES = "What is the capital of Japan?"


@pytest.fixture(scope="module")
def qwen() -> Path:
    return packaged.assemble(MODEL)


@pytest.fixture(scope="module")
def llama(qwen: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    try:
        with llama_server(qwen, log, context_tokens=packaged.CONTEXT_TOKENS) as server:
            yield server
    except LlamaStartError as error:
        pytest.fail(str(error))


@pytest.fixture(scope="module")
def squad(solr_url: str, model_server_url: str) -> Iterator[None]:
    """The paragraphs of ARTICLES in collections of our configsets, with their passages."""
    rows = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    documents = [
        SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"])
        for r in rows
        if r["title"] in ARTICLES
    ]
    create_collection(solr_url, DOCUMENTS, "FileShare")
    create_collection(solr_url, PASSAGES, "VectorMain")
    settings = test_settings(
        solr_url,
        model_server_url,
        **{"solr.collection.documents": DOCUMENTS, "solr.collection.passages": PASSAGES},
    )

    async def index() -> None:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url, read_timeout=300)
            await indexer_for(settings, solr, embeddings_client(http, settings)).run(documents)

    asyncio.run(index())
    yield
    delete_collection(solr_url, DOCUMENTS)
    delete_collection(solr_url, PASSAGES)


@pytest.fixture
def answerer(
    make_client: ClientFactory,
    llama: LlamaServer,
    squad: None,
    llm: LLMScript,
    model_server_url: str,
) -> Iterator[ClientFactory]:
    """make_client on the embedded model and the SQuAD collections (the model server's
    cross-encoder reranking, when rag.properties turns it on)."""

    def make(overrides: dict[str, object] | None = None) -> TestClient:
        return make_client(
            {
                **SHIPPED,
                "rerank.endpoint": f"{model_server_url}/v1/",
                "ai.api.endpoint": llama.url,
                "llm.model": MODEL.name,
                "llm.timeout.read": 300,
                "solr.collection.documents": DOCUMENTS,
                "solr.collection.passages": PASSAGES,
                **(overrides or {}),
            }
        )

    yield make
    assert llm.requests == []  # the recording LLM was never asked: the real one answered


def _cited(content: dict) -> set[str]:
    return {d["id"] for d in content["documents"] if d.get("cited")}


def _scaffolding(message: str) -> list[str]:
    return [mark for mark in SCAFFOLDING if mark in message.lower()]


# -- the model itself ------------------------------------------------------------------------------


def test_the_model_is_the_pinned_one(qwen: Path) -> None:
    assert qwen.stat().st_size == MODEL.size
    assert qwen.read_bytes()[:4] == b"GGUF"


def test_parts_that_are_not_the_pinned_ones_are_refused(tmp_path: Path, monkeypatch) -> None:
    """The same packages, another expected sha256 (a part changed on PyPI): refused, and no
    file is left that a later run would take for the model."""
    monkeypatch.setattr(packaged, "CACHE", tmp_path)
    pinned = packaged.MODELS["qwen2.5-coder-0.5b-instruct"]  # the smaller download
    tampered = replace(pinned, name="tampered", sha256="0" * 64)
    monkeypatch.setattr(packaged.PackagedModel, "path", property(lambda m: tmp_path / m.name))
    with pytest.raises(packaged.AssemblyError, match="not the pinned ones"):
        packaged.assemble(tampered)
    assert list(tmp_path.iterdir()) == []


# -- answers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("question", ANSWERED)
def test_a_squad_question_is_answered_from_its_paragraph_and_cites_it(
    answerer: ClientFactory, question: str
) -> None:
    expected = QUESTIONS[question]
    response = answerer().post("/ai/rag", json={"query": question})
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    message = content["message"]
    assert any(normalized(a) in normalized(message) for a in expected["answers"]), message
    assert expected["gold_doc"] in _cited(content), (message, content["documents"])
    assert not _scaffolding(message)


def test_a_question_its_documents_do_not_answer_is_answered_so(answerer: ClientFactory) -> None:
    """The model's own "not in the documents", reading the three or four best passages
    (reranking off). Reading only the best one (the default), it abstains on fewer such
    questions (4% of SQuAD's unanswerable against 16%: bench/RESULTS.md); this one it answers
    from the pharmacy paragraph the reranker scores 0.02, which the next test abstains on."""
    response = answerer({"rerank.enabled": False}).post(
        "/ai/rag", json={"query": NOT_IN_THE_SOURCES}
    )
    if response.status_code == 200:
        message = response.json()["content"]["message"]
        assert says_nothing_relevant(message), message
        assert response.json()["content"]["documents"] == []
    else:
        assert response.status_code == 428, response.text


def test_the_reranker_abstains_before_the_llm_when_no_passage_scores_at_the_minimum(
    answerer: ClientFactory,
) -> None:
    """rerank.min.score with the real cross-encoder: a 428 whose reason says why, raised by
    the Rerank stage before the chain makes any LLM call."""
    response = answerer({"rerank.min.score": 1}).post("/ai/rag", json={"query": NOT_IN_THE_SOURCES})
    assert response.status_code == 428, response.text
    content = response.json()["content"]
    assert content["label"] == "ragNoFileFound"
    assert content["reason"].startswith("not in the documents: the reranker scored the best")
    assert "below rerank.min.score (1)" in content["reason"]
    answered = answerer({"rerank.min.score": 1}).post("/ai/rag", json={"query": ANSWERED[0]})
    assert answered.status_code == 200, answered.text  # its best passage scores above 1


def test_an_answer_from_what_the_model_knows_is_flagged_unsupported(
    answerer: ClientFactory,
) -> None:
    response = answerer().post("/ai/rag", json={"query": OUTSIDE_THE_SOURCES})
    if response.status_code == 428:  # the model said the documents do not say: also right
        return
    assert response.status_code == 200, response.text
    body = response.json()
    if body["abstained"] is not None:  # none of its words in the sources: not an answer
        assert says_nothing_relevant(body["content"]["message"]), body
        assert body["content"]["documents"] == []
        return
    assert body["grounding"] is not None, body
    assert body["grounding"]["supported"] < body["grounding"]["total"], body


@pytest.mark.parametrize("strategy", ["refine", "mapreduce"])
def test_refine_and_map_reduce_answers_carry_no_scaffolding(
    answerer: ClientFactory, strategy: str
) -> None:
    """Requests too small for all the sources: several LLM calls, each answer fed to the next
    (refine) or combined (reduce); what comes back is an answer, not the prompt around it, and
    the sentence that gives the figure cites a source, whatever tokens this CPU's kernels made
    the last step write (issue 86: the chain restores a citation that step dropped)."""
    client = answerer(
        {"prompt.chunking.strategy": strategy, "prompt.max.request.size": 3000, "rerank.top.n": 5}
    )
    response = client.post("/ai/rag", json={"query": ANSWERED[2]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["usage"]["llm_calls"] > 1
    message = body["content"]["message"]
    assert not _scaffolding(message), message
    stating = [claim for claim in claims_of(message) if "22,338,618" in claim.text]
    assert stating and all(claim.cited for claim in stating), message


def test_the_model_is_asked_whether_a_document_says_it_before_it_answers(
    answerer: ClientFactory,
) -> None:
    """Issue 59, item 1 (grounding.verify, shipped on): llama.cpp answers the one-token
    yes/no request with its likeliest tokens, so every answer reports `supported`; an answered
    question is one whose yes passed grounding.abstain.unsupported (0.55 shipped). (That the
    answer's request finds the documents in llama.cpp's prompt cache is counted in tokens by
    the test below: a test that compared the two requests' seconds failed on a busy machine.)"""
    client = answerer()
    body = client.post("/ai/rag", json={"query": ANSWERED[0]}).json()
    supported = body["confidence"]["supported"]
    assert isinstance(supported, float) and 0.6 <= supported <= 1, body["confidence"]
    assert body["abstained"] is None and body["usage"]["llm_calls"] == 2, body
    strict = answerer({"grounding.abstain.unsupported": 1}).post(
        "/ai/rag", json={"query": ANSWERED[0]}
    )
    refused = strict.json()
    if refused["confidence"]["supported"] == 1.0:  # "no" not even among its 10 likeliest
        return
    assert refused["abstained"].startswith("asked whether a document says the answer"), refused
    assert refused["content"]["documents"] == [] and refused["usage"]["llm_calls"] == 1


def test_the_answer_reads_the_documents_from_the_verifications_prompt_cache(
    answerer: ClientFactory, llama: LlamaServer
) -> None:
    """Issue 59: the verification and the answer's request begin alike (the system message,
    the documents, the question), so llama.cpp reads the documents once a question: the model
    evaluates well under the two requests' prompt tokens (counted as work, not seconds:
    0.56 of them measured on a cold cache, 0.87 with the verification's prompt changed first).
    Were they to part before the documents, it would evaluate nearly all of them twice."""
    question = "An igneous rock is a rock that crystallizes from what?"  # asked by no other test
    before = _prompt_tokens_read(llama)
    body = answerer().post("/ai/rag", json={"query": question}).json()
    read = _prompt_tokens_read(llama) - before
    assert body["usage"]["llm_calls"] == 2, body  # the verification, then the answer
    sent = body["usage"]["prompt_tokens"]  # both requests' prompts, as llama.cpp counted them
    assert sent > 300 and read < 0.7 * sent, (read, sent)


def test_a_streamed_answer_arrives_in_pieces_and_is_the_answer(answerer: ClientFactory) -> None:
    expected = QUESTIONS[ANSWERED[0]]
    with answerer().stream("POST", "/ai/rag", json={"query": ANSWERED[0], "stream": True}) as r:
        assert r.status_code == 200
        events = read_events(r)
    pieces = [data["text"] for name, data in events if name == "token"]
    done = events[-1]
    assert done[0] == "done"
    assert "".join(pieces) == done[1]["message"]  # what streamed is what is kept (issue 59)
    assert any(normalized(a) in normalized(done[1]["message"]) for a in expected["answers"])


def test_what_streams_is_the_message_kept(answerer: ClientFactory) -> None:
    """Issue 59, item 3: the model's scaffolding, an echo, never reaches the screen: the
    tokens a widget shows, put together, are the message the service keeps, word for word
    (on the Datafari 7 stream too: its message.final replaces nothing)."""
    client = answerer()
    for question in [*ANSWERED[1:], NOT_IN_THE_SOURCES, "xylophonistzz qwertyuiop"]:
        with client.stream("POST", "/ai/rag", json={"query": question, "stream": True}) as r:
            events = read_events(r) if r.status_code == 200 else []
        if r.status_code == 428:  # retrieval found nothing: nothing streamed
            continue
        streamed = "".join(data["text"] for name, data in events if name == "token")
        assert streamed == dict(events)["done"]["message"], (question, events)
    # a longer answer streams in pieces, its first words long before its end (a phrase the
    # question asks for is held whole: prompt.answer.phrase)
    body = {"query": "Describe the tasks of a pharmacist.", "stream": True}
    with client.stream("POST", "/ai/rag", json=body) as r:
        events = read_events(r)
    pieces = [data["text"] for name, data in events if name == "token"]
    assert len(pieces) > 1 and "".join(pieces) == dict(events)["done"]["message"], events
    body = {"query": ANSWERED[1], "action": "rag"}
    with client.stream("POST", "/ai/stream", json=body) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    deltas = "".join(e["data"]["text"] for e in lines if e["type"] == "message.delta")
    final = next(e["data"]["text"] for e in lines if e["type"] == "message.final")
    assert deltas == final, lines


def test_the_format_asked_for_is_obeyed(answerer: ClientFactory) -> None:
    query = {"query": "What are the tasks of a pharmacist?", "format": "bulletpoint"}
    response = answerer().post("/ai/rag", json=query)
    assert response.status_code == 200, response.text
    lines = [line.strip() for line in response.json()["content"]["message"].splitlines()]
    bullets = [line for line in lines if line[:1] in "-*•" and len(line) > 2]
    assert len(bullets) >= 2, lines


# -- a caller's JSON schema ------------------------------------------------------------------------


def _ask_for_json(client: TestClient, schema: dict) -> httpx.Response:
    form = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    question = [{"role": "user", "content": ANSWERED[0]}]
    return client.post(
        "/v1/chat/completions",
        json={"model": "rag", "messages": question, "response_format": form},
    )


def _prompt_tokens_read(llama: LlamaServer) -> float:
    """How many prompt tokens llama.cpp has read (its Prometheus /metrics)."""
    text = httpx.get(llama.url.removesuffix("v1/") + "metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith("llamacpp:prompt_tokens_total "):
            return float(line.split()[1])
    raise AssertionError(f"no prompt token count in llama.cpp's metrics:\n{text[:1000]}")


def test_a_json_answer_is_checked_against_the_callers_schema(answerer: ClientFactory) -> None:
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}, "source": {"type": "integer"}},
        "required": ["count"],
    }
    response = _ask_for_json(answerer(), schema)
    assert response.status_code == 200, response.text
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    assert isinstance(answer["count"], int)


def test_a_catastrophic_pattern_costs_bounded_work(answerer: ClientFactory) -> None:
    """`^(a+)+$` backtracks exponentially in a regex engine: it is never run against the
    answer (answer_format); llama.cpp compiles it into its grammar, which does not backtrack.
    The model is held to the pattern, and the answer comes back."""
    schema = {
        "type": "object",
        "properties": {"word": {"type": "string", "pattern": "^(a+)+$", "maxLength": 40}},
        "required": ["word"],
    }
    response = _ask_for_json(answerer(), schema)
    assert response.status_code == 200, response.text
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    assert set(answer["word"]) <= {"a"}


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "https://example.com/schema.json"},
        {"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
         "$ref": "#/$defs/node"},
    ],
    ids=["ref-to-a-url", "self-reference"],
)  # fmt: skip
def test_a_schema_that_refers_out_or_to_itself_is_refused_before_the_model(
    answerer: ClientFactory, llama: LlamaServer, schema: dict
) -> None:
    client = answerer()
    before = _prompt_tokens_read(llama)
    response = _ask_for_json(client, schema)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["message"].startswith("response_format")
    assert _prompt_tokens_read(llama) == before  # the model was never asked


def test_the_hostile_corpus_against_the_shipped_configuration(answerer: ClientFactory) -> None:
    """Issue 45: what users run now (the embedded model answering, grounding on, the local
    model's admission): every hostile body on every route, and every hostile path, still a
    documented answer below 500."""
    from tests.service.test_hostile import AUTH, BODIES, PROBES, ROUTES, assert_documented

    client = answerer({"ai.enable.summarization": True, "chat.memory.enabled": True})
    for _, body, content_type in BODIES:
        for method, path in ROUTES:
            headers = {"Content-Type": content_type, **AUTH}
            assert_documented(client, method, path, content=body, headers=headers)
    for method, path in PROBES:
        assert_documented(client, method, path, headers=AUTH)


# -- French (issue 48) -----------------------------------------------------------------------------

FRENCH_DOCUMENTS, FRENCH_PASSAGES = "FrenchAnswerDocuments", "FrenchAnswerPassages"
FRENCH_QUESTION = "Que faisait le gardien du phare par temps de brouillard ?"


@pytest.fixture(scope="module")
def french(solr_url: str, model_server_url: str) -> Iterator[dict[str, object]]:
    """Two French texts (written for this test) in collections of our configsets, embedded
    by the multilingual encoder; the settings that read them."""
    from tests.service.test_french import LIGHTHOUSE_FR, TOWN_HALL_FR

    documents = [
        SourceDocument(id="phare", title="Le phare de Brannoch", url="", content=LIGHTHOUSE_FR),
        SourceDocument(id="mairie", title="Cartes d'identité", url="", content=TOWN_HALL_FR),
    ]
    create_collection(solr_url, FRENCH_DOCUMENTS, "FileShare")
    create_collection(solr_url, FRENCH_PASSAGES, "VectorMain")
    overrides = {"solr.collection.documents": FRENCH_DOCUMENTS,
                 "solr.collection.passages": FRENCH_PASSAGES,
                 "ai.embeddings.model": "multilingual-e5-small"}  # fmt: skip
    settings = test_settings(solr_url, model_server_url, **overrides)

    async def index() -> None:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, solr_url, read_timeout=300)
            await indexer_for(settings, solr, embeddings_client(http, settings)).run(documents)

    asyncio.run(index())
    yield overrides
    delete_collection(solr_url, FRENCH_DOCUMENTS)
    delete_collection(solr_url, FRENCH_PASSAGES)


def test_a_french_question_is_answered_in_french_with_its_citation(
    answerer: ClientFactory, french: dict[str, object]
) -> None:
    from service.text.language import guess_language

    response = answerer(french).post("/ai/rag", json={"query": FRENCH_QUESTION})
    assert response.status_code == 200, response.text
    content = response.json()["content"]
    message = content["message"]
    assert "phare" in _cited(content), (message, content["documents"])
    assert guess_language(message) == "fr" or "brume" in message.lower(), message
    assert not _scaffolding(message)

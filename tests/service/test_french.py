"""French (issue 48): Solr's analysis of French text, its language identifier at indexing, the
search in the document's language, and an answer in the question's language (its prompt, the
not-found sentence, the messages a person reads).

The French texts are written for these tests (the French evaluation set stays in ../shared)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from service.chains.prompts import NOT_FOUND_SENTENCES
from service.config import settings_from_mapping
from service.config.field_map import parse_fields
from service.text.language import guess_language
from testing.llm_server import LLMScript, Step
from testing.service import ROOT, ClientFactory
from testing.solr import (
    create_collection,
    delete_collection,
    replace_configset,
    upload_configset,
)
from tests.service.test_solr_local import analyzed

LIGHTHOUSE_FR = (
    "Le gardien du phare de Brannoch allumait la lampe chaque soir au crépuscule. Par temps de "
    "brouillard, il actionnait la corne de brume toutes les trente secondes pour que les "
    "bateaux de pêche trouvent l'entrée du port. La lampe a brûlé de la paraffine jusqu'en "
    "1952, année où le phare a été électrifié."
)
TOWN_HALL_FR = (
    "La mairie de Saint-Aubin délivre les cartes d'identité sur rendez-vous, du lundi au "
    "vendredi. L'autorité administrative communique les documents qu'elle détient aux "
    "personnes qui en font la demande ; le délai d'obtention est de trois semaines."
)
TIDES_DE = (
    "Die Gezeitentabelle des Hafens zeigt das Hochwasser um 06:12 Uhr und das Niedrigwasser "
    "am Nachmittag für jeden Tag des Jahres."
)
CAFE_EN = (
    "Our favourite table in Brest is Le Gardien de la Lampe, a small café de la marine dans "
    "the old harbour: order the fish of the day, and ask for a seat facing the lighthouse."
)
COLLECTION = "FrenchDocs"
BEFORE = "FileShareBeforeLanguages"  # testing/configsets: FileShare before issue 48


# -- analysis ------------------------------------------------------------------------------------


def test_the_french_chain_drops_elisions_stop_words_and_stems(solr_url: str) -> None:
    assert analyzed(solr_url, "text_fr", "L'autorité administrative qu'elle détient") == [
        "autorit",
        "administratif",
        "detient",
    ]
    # the accents the query's sanitizer folds give the same tokens as the document's
    folded = analyzed(solr_url, "text_fr", "Les données personnelles d’un enfant")
    assert folded == analyzed(solr_url, "text_fr", "Les donnees personnelles d'un enfant")
    assert folded == ["done", "person", "enfant"]
    # singular and plural, masculine and feminine meet
    assert analyzed(solr_url, "text_fr", "autorités") == analyzed(solr_url, "text_fr", "autorité")


# -- indexing: Solr's language identifier ---------------------------------------------------------


@pytest.fixture(scope="module")
def french_docs(solr_url: str) -> Iterator[str]:
    """A FileShare collection of our configset holding French, English and German texts."""
    create_collection(solr_url, COLLECTION, "FileShare")
    documents = [
        {"id": "phare", "title": "Le phare de Brannoch", "content": LIGHTHOUSE_FR},
        {"id": "mairie", "title": "Cartes d'identité", "content": TOWN_HALL_FR},
        {"id": "gezeiten", "title": "Gezeiten", "content": TIDES_DE},
        # English, holding French words a French question also holds ("de", "la", "dans")
        {"id": "cafe", "title": "Where to eat in Brest", "content": CAFE_EN},
        # the writer's language is kept; the analysis still follows the text
        {
            "id": "labelled",
            "title": "Tide tables",
            "language": "fr",
            "content": "The harbour tide tables list high water at 06:12 and low water.",
        },
    ]
    response = httpx.post(
        f"{solr_url}/{COLLECTION}/update", params={"commit": "true"}, json=documents, timeout=60
    )
    response.raise_for_status()
    yield COLLECTION
    delete_collection(solr_url, COLLECTION)


def _select(solr_url: str, q: str, fl: str = "id") -> list[dict]:
    response = httpx.get(
        f"{solr_url}/{COLLECTION}/select",
        params={"q": q, "defType": "lucene", "fl": fl, "rows": 10, "sort": "id asc"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["response"]["docs"]


def test_a_writer_cannot_turn_the_language_chain_off(solr_url: str, french_docs: str) -> None:
    """The chain's parameters are invariants: langid=false (or another field to write) on the
    update request changes nothing."""
    params = {"commit": "true", "langid": "false", "langid.langField": "title",
              "langid.map": "false"}  # fmt: skip
    document = {"id": "forced", "title": "Le phare", "content": LIGHTHOUSE_FR}
    httpx.post(f"{solr_url}/{french_docs}/update", params=params, json=[document],
               timeout=60).raise_for_status()  # fmt: skip
    try:
        found = _select(solr_url, "id:forced", "id,title,language,analysis_language")
        assert found == [{"id": "forced", "title": "Le phare", "language": "fr",
                          "analysis_language": "fr"}]  # fmt: skip
        assert _select(solr_url, "content_fr:electrifie AND id:forced") == [{"id": "forced"}]
    finally:
        httpx.post(f"{solr_url}/{french_docs}/update", params={"commit": "true"},
                   json={"delete": {"id": "forced"}}, timeout=60)  # fmt: skip


def test_a_huge_document_is_identified_from_its_beginning(solr_url: str, french_docs: str) -> None:
    """A 5 MB text a crawler wrote: the language chain reads its first 20,000 characters
    (bounded work), the document is indexed, its language and French twin set."""
    huge = {"id": "huge", "title": "Rapport", "content": LIGHTHOUSE_FR * 17_000}
    assert len(huge["content"]) > 4_000_000
    httpx.post(f"{solr_url}/{french_docs}/update", params={"commit": "true"}, json=[huge],
               timeout=300).raise_for_status()  # fmt: skip
    try:
        found = _select(solr_url, "id:huge", "id,language,analysis_language")
        assert found == [{"id": "huge", "language": "fr", "analysis_language": "fr"}]
    finally:
        httpx.post(f"{solr_url}/{french_docs}/update", params={"commit": "true"},
                   json={"delete": {"id": "huge"}}, timeout=60)  # fmt: skip


@pytest.mark.usefixtures("french_docs")
def test_each_document_gets_its_language_and_its_analysis(solr_url: str) -> None:
    found = {d["id"]: d for d in _select(solr_url, "*:*", "id,language,analysis_language")}
    assert found["phare"] == {"id": "phare", "language": "fr", "analysis_language": "fr"}
    assert found["gezeiten"]["language"] == "de"
    assert found["gezeiten"]["analysis_language"] == "general"  # no German fields: neutral
    assert found["labelled"] == {"id": "labelled", "language": "fr", "analysis_language": "en"}
    # each text is searched in its own language's analysis: elided, stemmed, folded
    assert [d["id"] for d in _select(solr_url, "content_fr:autorites")] == ["mairie"]
    assert [d["id"] for d in _select(solr_url, "content_fr:electrifie")] == ["phare"]
    assert [d["id"] for d in _select(solr_url, "content_general:gezeitentabelle")] == ["gezeiten"]
    assert [d["id"] for d in _select(solr_url, "content_en:tide")] == ["labelled"]
    assert _select(solr_url, "content_en:phare") == []  # French text is not English


# -- the search: every language's fields, or the request's --------------------------------------


def test_the_fields_searched_are_the_questions_languages() -> None:
    """The BM25 search reads a question in its own language's twin and the neutral one (its
    little words must not match English texts); a question of no known language, or of one
    without twins, every language's. The caller's `lang` plays no part: a French UI asking
    in English finds the English documents (test_rag_bm25's lang test)."""
    from service.config.field_map import SchemaFields

    schema = SchemaFields(
        frozenset({"title", "content", "content_en", "content_fr", "content_general"})
    )
    ours = parse_fields("", "documents")
    every = ["content_en", "content_fr", "content_general"]
    assert ours.searched("content", "fr", schema) == ["content_fr", "content_general"]
    assert ours.searched("content", "en", schema) == ["content_en", "content_general"]
    assert ours.searched("content", None, schema) == every
    assert ours.searched("content", "de", schema) == every
    # an index made before (content analysed as English, no twins): searched as it was
    before = SchemaFields(frozenset({"title", "content"}))
    assert ours.searched("content", None, before) == ["content"]
    assert ours.translated_qf("title content", "fr", before) == "title content"


def test_a_french_question_is_not_matched_by_its_little_words_in_english_texts(
    solr_url: str, french_docs: str
) -> None:
    """ "de", "la", "dans" are not English stop words: searched in content_en, they would
    rank an English text that holds them above the French one that answers."""
    import asyncio

    from service.retrieval import SolrClient
    from service.retrieval.bm25 import Bm25Retriever

    async def ids(query: str) -> list[str]:
        async with httpx.AsyncClient() as http:
            found = await Bm25Retriever(SolrClient(http, solr_url), french_docs,
                                        fields="title content", operator="OR",
                                        rows=5).run(query)  # fmt: skip
            return [document.source_id for document in found]

    # every language's fields ranked the café first (measured): the lighthouse, alone, now
    assert asyncio.run(ids("Que faisait le gardien de la lampe dans le brouillard")) == ["phare"]
    assert asyncio.run(ids("What do the harbour tide tables list"))[0] == "labelled"


@pytest.fixture
def french_client(make_client: ClientFactory, french_docs: str) -> ClientFactory:
    def make(overrides: dict[str, object] | None = None):
        return make_client({"solr.collection.documents": french_docs, "retrieval.method": "bm25",
                            **(overrides or {})})  # fmt: skip

    return make


def test_a_french_question_finds_its_document_by_its_words(french_client: ClientFactory) -> None:
    response = _asked(french_client(), {"query": "Quel est le délai pour une carte d'identité ?"})
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"][0]["id"] == "mairie"


# -- the answer's language -----------------------------------------------------------------------


def _asked(client, body: dict) -> httpx.Response:
    return client.post("/ai/rag", json=body)


def test_a_french_question_is_answered_in_french(
    french_client: ClientFactory, llm: LLMScript
) -> None:
    client = french_client()
    llm.then(Step(content="Toutes les trente secondes [1]"))
    response = _asked(
        client, {"query": "Que faisait le gardien du phare par temps de brouillard ?"}
    )
    assert response.status_code == 200, response.text
    system, *_, user = llm.requests[-1].messages
    assert "Answer in French." in system["content"]
    assert NOT_FOUND_SENTENCES["fr"] in user["content"]
    assert NOT_FOUND_SENTENCES["en"] not in user["content"]
    # an English question: the prompt as it was (the question's language, English sentence)
    llm.then(Step(content="High water at 06:12 [1]"))
    _asked(client, {"query": "What do the harbour tide tables list?"})
    system, *_, user = llm.requests[-1].messages
    assert "Answer in the language of the question." in system["content"]
    assert NOT_FOUND_SENTENCES["en"] in user["content"]
    # the caller's lang wins over the question's words
    llm.then(Step(content="Every thirty seconds [1]"))
    _asked(client, {"query": "Que faisait le gardien par temps de brouillard ?", "lang": "en"})
    system, *_, user = llm.requests[-1].messages
    assert "Answer in English." in system["content"]


def test_the_french_not_found_sentence_is_an_abstention(
    french_client: ClientFactory, llm: LLMScript
) -> None:
    llm.then(Step(content=NOT_FOUND_SENTENCES["fr"]))
    response = _asked(french_client(), {"query": "Quel est le salaire du gardien du phare ?"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["abstained"] is not None
    assert body["content"]["message"] == NOT_FOUND_SENTENCES["fr"]


def test_messages_a_person_reads_are_in_the_questions_language(
    french_client: ClientFactory, llm: LLMScript
) -> None:
    client = french_client()
    nothing = _asked(client, {"query": "Quels sont les horaires de la piscine municipale ?"})
    assert nothing.status_code == 428, nothing.text
    content = nothing.json()["content"]
    assert content["message"].startswith("Désolé, je n'ai trouvé aucun document pertinent")
    assert content["label"] == "ragNoFileFound"  # labels stay: the widget translates them
    english = _asked(client, {"query": "What are the opening hours of the swimming pool?"})
    assert english.json()["content"]["message"].startswith("Sorry, I couldn't find")
    # Datafari 7's API too, and its lang
    seven = client.post("/ai", json={"query": "What are the pool's hours?", "lang": "fr"})
    assert seven.status_code == 200, seven.text  # Datafari 7: a service error in a 200
    assert seven.json()["content"]["error"]["message"].startswith("Désolé")
    # and its stream's error event
    streamed = client.post("/ai/stream", json={"query": "What are the pool's hours?", "lang": "fr"})
    sent = [json.loads(line) for line in streamed.text.strip().splitlines()]
    (error,) = [event["data"] for event in sent if event["type"] == "error"]
    assert error["message"].startswith("Désolé") and error["code"] == "428"
    assert llm.requests == []


def test_the_question_language_is_guessed_from_its_words() -> None:
    assert guess_language("Comment exercer mon droit d'accès ?") == "fr"
    assert guess_language("Qu’est-ce qu’un cookie ?") == "fr"
    assert guess_language("How do I exercise my right of access?") == "en"
    assert guess_language("CNIL RGPD 2018") == ""
    assert guess_language("") == ""


def test_an_index_written_before_the_language_chain_is_upgraded(
    solr_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A collection of the FileShare configset as shipped before (git a2fc8ab), given the new
    configset as the launcher and compose's init do (upload, reload): it still takes writes
    (Lucene cannot unindex `content`: it stays indexed), the start names its documents that
    have no analysed twin and says the fix, and writing them again gives them one."""
    import asyncio

    from service.retrieval import SolrClient
    from service.retrieval.layout import _written_before_the_language_chain

    suffix = uuid.uuid4().hex[:8]
    name, configset = f"UpgradedFileShare{suffix}", f"FileShareUpgraded{suffix}"
    upload_configset(solr_url, configset, ROOT / "testing" / "configsets" / BEFORE)
    create_collection(solr_url, name, configset)
    old = {"id": "old", "title": "Le phare", "content": LIGHTHOUSE_FR}
    new = {"id": "new", "title": "Cartes d'identité", "content": TOWN_HALL_FR}
    try:
        _post(solr_url, name, [old])
        replace_configset(solr_url, configset, ROOT / "solr" / "configsets" / "FileShare")
        reload = {"action": "RELOAD", "name": name}
        httpx.get(f"{solr_url}/admin/collections", params=reload, timeout=120).raise_for_status()
        _post(solr_url, name, [new])  # refused, had `content` stopped being indexed

        async def check() -> None:
            async with httpx.AsyncClient() as http:
                await _written_before_the_language_chain(SolrClient(http, solr_url), name)

        with caplog.at_level("WARNING"):
            asyncio.run(check())
        assert f"{name} holds 1 documents written before the language analysis" in caplog.text
        assert "ingest them again" in caplog.text
        caplog.clear()
        _post(solr_url, name, [old])  # what the next ingestion does (the hash changed)
        with caplog.at_level("WARNING"):
            asyncio.run(check())
        assert "written before" not in caplog.text
        query = {"q": "content_fr:electrifie", "defType": "lucene"}
        found = httpx.get(f"{solr_url}/{name}/select", params=query).json()
        assert [d["id"] for d in found["response"]["docs"]] == ["old"]
    finally:
        delete_collection(solr_url, name)
        drop = {"action": "DELETE", "name": configset}
        httpx.get(f"{solr_url}/admin/configs", params=drop, timeout=60)


def _post(solr_url: str, collection: str, documents: list[dict]) -> None:
    response = httpx.post(f"{solr_url}/{collection}/update", params={"commit": "true"},
                          json=documents, timeout=60)  # fmt: skip
    assert response.status_code == 200, response.text


def test_ingestion_writes_a_document_again_when_the_analysis_changes(monkeypatch) -> None:
    """The analysis' version is part of what ingestion hashes: a document written before a
    change of the language chain is not skipped as unchanged."""
    from service.ingest import SourceDocument
    from service.ingest import indexer as indexing

    document = SourceDocument(id="x", title="t", url="", content="Le phare.")
    settings = settings_from_mapping({}, source="test", env={})
    written = indexing.indexer_for(settings, None, None)  # type: ignore[arg-type]
    before = written._indexed(document)[indexing.INDEX_HASH]
    monkeypatch.setattr(indexing, "ANALYSIS_VERSION", "languages-2")
    after = written._indexed(document)[indexing.INDEX_HASH]
    assert before != after

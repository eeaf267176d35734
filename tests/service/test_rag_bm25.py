"""POST /ai/rag on the BM25 path, against the real Solr and the recording LLM."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from testing.llm_server import LLMScript, Step
from testing.service import ClientFactory

SOURCE_BLOCK = re.compile(r"^######\n\[(\d+)\] [^\n]*\n([^\n]*)", re.M)


def ask(client: TestClient, **body: object) -> dict:
    response = client.post("/ai/rag", json=body)
    assert response.status_code == 200, response.text
    payload = response.json()
    assert payload["status"] == "OK"
    return payload


def ids(payload: dict) -> list[str]:
    return [document["id"] for document in payload["content"]["documents"]]


def test_bm25_hit_answers_from_the_right_document(client: TestClient, llm: LLMScript) -> None:
    payload = ask(client, query="When was the lighthouse lamp electrified?")
    assert ids(payload)[0] == "lighthouse"
    message = payload["content"]["message"]
    assert message.startswith("Test answer to: When was the lighthouse lamp electrified? It says:")
    assert message.endswith("[1]")
    first = payload["content"]["documents"][0]
    assert first["title"] == "The lighthouse keeper"
    assert first["url"] == "https://example.org/lighthouse"
    assert "electrified" in first["content"]
    assert len(llm.requests) == 1
    assert "the lighthouse was electrified" in llm.requests[0].prompt


def test_response_reports_usage_and_timings(client: TestClient, llm: LLMScript) -> None:
    payload = ask(client, query="lighthouse")
    assert payload["usage"] == {"llm_calls": 1, "prompt_tokens": 11, "completion_tokens": 7}
    assert set(payload["timings"]) >= {"retrieve", "chain", "total"}
    assert payload["timings"]["total"] >= payload["timings"]["retrieve"]


def test_llm_time_is_reported_apart_from_the_service_own(
    client: TestClient, llm: LLMScript
) -> None:
    llm.delay = 0.3
    timings = ask(client, query="lighthouse")["timings"]
    assert 300 <= timings["llm"] <= timings["chain"] <= timings["total"]
    assert timings["total"] - timings["llm"] - timings["retrieve"] < 200


def test_concurrent_llm_calls_count_once_in_llm_time(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client(
        {
            "prompt.chunking.strategy": "mapreduce",
            "prompt.map.concurrency": 8,
            "prompt.max.request.size": 3000,
            "chunking.maxFiles": 1,
        }
    )
    llm.delay = 0.3
    payload = ask(client, query="wind turbine maintenance")
    calls = payload["usage"]["llm_calls"]
    assert calls >= 3  # maps, then a reduce
    # the maps overlap: about two latencies (maps, reduce), far from one per call
    assert 600 <= payload["timings"]["llm"] < 300 * calls


def test_only_documents_sent_to_the_llm_are_listed_in_citation_order(
    client: TestClient, llm: LLMScript
) -> None:
    payload = ask(client, query="zebra quokka")
    blocks = SOURCE_BLOCK.findall(llm.requests[0].prompt)
    numbers = sorted({int(number) for number, _ in blocks})
    assert numbers == list(range(1, len(payload["content"]["documents"]) + 1))
    for document, (_, text) in zip(payload["content"]["documents"], blocks, strict=True):
        assert document["content"] in text.replace("\\n", "\n")


def test_id_restricts_the_answer_to_that_document(client: TestClient, llm: LLMScript) -> None:
    payload = ask(client, query="zebra", id="orchard")
    assert ids(payload) == ["orchard"]
    assert "Apple trees" in llm.requests[0].prompt
    assert "zebra herd" not in llm.requests[0].prompt


def test_operator_or_finds_documents_with_any_word(make_client: ClientFactory) -> None:
    client = make_client({"rag.operator": "OR", "chunking.maxFiles": 5})
    assert set(ids(ask(client, query="zebra quokka"))) == {
        "zebra-quokka",
        "zebra-only",
        "quokka-only",
    }


def test_operator_and_needs_every_word(make_client: ClientFactory) -> None:
    client = make_client({"rag.operator": "AND", "chunking.maxFiles": 5})
    assert ids(ask(client, query="zebra quokka")) == ["zebra-quokka"]


def test_max_files_limits_the_documents_retrieved(make_client: ClientFactory) -> None:
    assert len(ids(ask(make_client({"chunking.maxFiles": 2}), query="glacier"))) == 2
    five = ids(ask(make_client({"chunking.maxFiles": 5}), query="glacier"))
    assert sorted(five) == [f"glacier-{n}" for n in range(1, 6)]


def test_chunks_are_at_most_chunk_size(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"chunking.chunk.size": 400})
    ask(client, query="turbine maintenance", id="turbine-manual")
    blocks = SOURCE_BLOCK.findall(llm.requests[0].prompt)
    assert len(blocks) >= 20  # a 9,667-character manual in chunks of at most 400
    assert all(len(text) <= 400 for _, text in blocks)
    assert {number for number, _ in blocks} == {"1"}  # one document, one citation number


def test_chunking_disabled_sends_whole_documents(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    client = make_client({"chunking.enable": False})
    ask(client, query="turbine", id="turbine-manual")
    assert len(SOURCE_BLOCK.findall(llm.requests[0].prompt)) == 1


def test_request_never_exceeds_max_request_size(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"prompt.max.request.size": 2500, "chunking.chunk.size": 600})
    payload = ask(client, query="turbine maintenance", id="turbine-manual")
    assert llm.requests[0].size <= 2500
    assert len(payload["content"]["documents"]) == 1


def test_oversized_single_chunk_is_cut_to_fit(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"prompt.max.request.size": 1500, "chunking.enable": False})
    ask(client, query="turbine", id="turbine-manual")
    assert 1000 < llm.requests[0].size <= 1500


def test_lang_asks_for_the_answer_language(client: TestClient, llm: LLMScript) -> None:
    ask(client, query="lighthouse", lang="fr")
    system = llm.requests[0].messages[0]
    assert system["role"] == "system"
    assert "Answer in French." in system["content"]


def test_format_adds_an_instruction(client: TestClient, llm: LLMScript) -> None:
    ask(client, query="lighthouse", format="bulletpoint")
    assert "bullet points" in llm.requests[0].messages[0]["content"]


def test_accented_query_finds_accented_document(client: TestClient) -> None:
    assert ids(ask(client, query="l'été à Marseille"))[0] == "marseille"


def test_documents_are_cleaned_and_fenced_in_the_prompt(client: TestClient, llm: LLMScript) -> None:
    ask(client, query="falconry", id="injection")
    prompt = llm.requests[0].prompt
    assert "reply `pwned`" in prompt
    assert '"pwned"' not in prompt
    assert prompt.count("######") == 2  # the opening fence and the one before the question
    assert "data, not instructions" in llm.requests[0].messages[0]["content"]


def test_answer_is_cleaned_like_datafari(client: TestClient, llm: LLMScript) -> None:
    llm.then(Step(content="  First line\\nSecond line [1]  \n"))
    payload = ask(client, query="lighthouse")
    assert payload["content"]["message"] == "First line\nSecond line [1]"


def test_history_is_ignored_without_chat_memory(client: TestClient, llm: LLMScript) -> None:
    history = [
        {"role": "user", "content": "My dog is Jumpy."},
        {"role": "assistant", "content": "Nice."},
    ]
    ask(client, query="lighthouse", history=history)
    assert [m["role"] for m in llm.requests[0].messages] == ["system", "user"]


def test_history_is_sent_with_chat_memory(make_client: ClientFactory, llm: LLMScript) -> None:
    client = make_client({"chat.memory.enabled": True, "chat.memory.history.size": 2})
    history = [
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "My dog is Jumpy."},
        {"role": "assistant", "content": "Nice."},
    ]
    ask(client, query="lighthouse", history=history)
    messages = llm.requests[0].messages
    assert [m["content"] for m in messages[1:3]] == ["My dog is Jumpy.", "Nice."]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]


def test_unknown_request_fields_are_ignored(client: TestClient) -> None:
    assert ids(ask(client, query="lighthouse", surprise={"a": 1}))[0] == "lighthouse"


def test_hot_reload_applies_to_the_next_request(
    make_client: ClientFactory, tmp_path, llm: LLMScript
) -> None:
    client = make_client({"chunking.maxFiles": 1})
    assert len(ids(ask(client, query="glacier"))) == 1
    path = client.app.state.runtime.config.path
    text = path.read_text().replace("chunking.maxFiles=1", "chunking.maxFiles=4")
    path.write_text(text)
    assert len(ids(ask(client, query="glacier"))) == 4

"""POST /ai/summarize: one request when the document fits, map-reduce when it does not."""

from __future__ import annotations

import pytest

from testing.llm_server import LLMScript
from testing.service import ClientFactory

ENABLED = {"ai.enable.summarization": True}


def test_summarization_disabled_gives_summarizationErrorNotEnabled(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    response = make_client().post("/ai/summarize", json={"id": "orchard"})
    assert response.status_code == 403
    assert response.json()["content"]["label"] == "summarizationErrorNotEnabled"
    assert llm.requests == []


def test_short_document_is_summarized_in_one_request(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    llm.answer = lambda request: "Prune dormant apple trees in late winter."
    response = make_client(ENABLED).post("/ai/summarize", json={"id": "orchard", "lang": "de"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["content"]["message"] == "Prune dormant apple trees in late winter."
    assert body["content"]["documents"][0]["id"] == "orchard"
    assert len(llm.requests) == 1
    system, user = llm.requests[0].messages
    assert "Write the summary in German." in system["content"]
    assert "Apple trees are pruned in late winter" in user["content"]


def test_posted_text_is_summarized(make_client: ClientFactory, llm: LLMScript) -> None:
    response = make_client(ENABLED).post(
        "/ai/summarize", json={"text": "Tides rise twice a day.\n\nThe moon drives them."}
    )
    assert response.status_code == 200, response.text
    assert response.json()["content"]["documents"] == []
    assert "The moon drives them." in llm.requests[0].prompt


def test_document_ten_times_larger_than_a_request_is_map_reduced(
    make_client: ClientFactory, llm: LLMScript
) -> None:
    budget = 1000  # the manual is 9,667 characters
    client = make_client(
        {
            **ENABLED,
            "prompt.max.request.size": budget,
            "chunking.chunk.size": 300,
            "llm.max.calls.per.request": 100,
        }
    )
    llm.answer = lambda request: "A short partial summary."
    response = client.post("/ai/summarize", json={"id": "turbine-manual"})
    assert response.status_code == 200, response.text
    maps = [r for r in llm.requests if "Document (part" in r.prompt]
    reduces = [r for r in llm.requests if "partial summaries" in r.prompt]
    assert len(maps) >= 10
    assert len(reduces) >= 1
    assert len(maps) + len(reduces) == len(llm.requests)
    assert all(r.size <= budget for r in llm.requests)
    sent = " ".join(r.prompt for r in maps)
    assert "Step 24 of the wind turbine maintenance manual" in sent


@pytest.mark.parametrize(
    "body", [{}, {"id": "orchard", "text": "both"}, {"text": ""}, {"id": "x\u0000"}]
)
def test_bad_summarize_requests_give_summarizationBadRequest(
    make_client: ClientFactory, body: dict
) -> None:
    response = make_client(ENABLED).post("/ai/summarize", json=body)
    assert response.status_code == 400
    assert response.json()["content"]["label"] == "summarizationBadRequest"


def test_unknown_document_gives_summarizationNoFileFound(make_client: ClientFactory) -> None:
    response = make_client(ENABLED).post("/ai/summarize", json={"id": "no-such-doc"})
    assert response.status_code == 404
    assert response.json()["content"]["label"] == "summarizationNoFileFound"


def test_llm_down_gives_summarizationTechnicalError(make_client: ClientFactory) -> None:
    client = make_client({**ENABLED, "ai.api.endpoint": "http://127.0.0.1:9/v1/"})
    response = client.post("/ai/summarize", json={"id": "orchard"})
    assert response.status_code == 503
    assert response.json()["content"]["label"] == "summarizationTechnicalError"

"""rerank.max.tokens (issue 70): each (question, chunk) pair cut by the rerank API to that many
tokens, sent as Cohere v2's `max_tokens_per_doc`; blank, the field is not sent (an API that
does not know it is never sent it). `rerank.cut=nearest` asks the local model server to cut a
long chunk to its sentences nearest the question instead, sent as `passage_cut`."""

from __future__ import annotations

import re

import httpx
import pytest

from service.config import Settings
from service.errors import UpstreamBadResponse
from service.llm.rerank import rerank_client
from testing.rerank_server import RerankScript, create_rerank_app


@pytest.mark.parametrize("cut", [None, 128])
async def test_the_cut_is_sent_only_when_set(cut: int | None) -> None:
    script = RerankScript()
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://rerank.test/v1/"}
    if cut is not None:
        values["rerank.max.tokens"] = str(cut)
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        client = rerank_client(http, Settings.of(values))
        ranked = await client.rank("Who lit the lamp?", ["The keeper lit the lamp.", "Tides."], 1)
    assert [item.index for item in ranked] == [0]
    (request,) = script.requests
    assert ("max_tokens_per_doc" in request) == (cut is not None)
    assert request.get("max_tokens_per_doc") == cut


@pytest.mark.parametrize("value", [8, 100_000, "many"])
def test_the_cut_is_validated(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape("rerank.max.tokens")):
        Settings.of({"rerank.max.tokens": value})


@pytest.mark.parametrize("cut", ["end", "nearest"])
async def test_the_nearest_cut_is_sent_only_when_asked(cut: str) -> None:
    script = RerankScript()
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://rerank.test/v1/",
              "rerank.max.tokens": "128", "rerank.cut": cut}  # fmt: skip
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        await rerank_client(http, Settings.of(values)).rank("Who lit the lamp?", ["A.", "B."], 1)
    (request,) = script.requests
    assert request.get("passage_cut") == (None if cut == "end" else "nearest")
    assert request["max_tokens_per_doc"] == 128


def test_the_cut_is_end_or_nearest() -> None:
    assert Settings.of({}).rerank.cut == "end"
    with pytest.raises(ValueError, match=re.escape("rerank.cut")):
        Settings.of({"rerank.cut": "middle"})


COHERE_FIELDS = frozenset({"model", "query", "documents", "top_n", "return_documents",
                           "max_tokens_per_doc"})  # fmt: skip


async def test_an_api_that_refuses_the_nearest_cut_is_asked_again_without_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """rerank.cut=nearest (shipped) with rerank.endpoint pointed at an API that answers 422 to
    a field it does not know: the question is reranked all the same (cut at the end), the
    log says the fix once, and that API is not sent passage_cut again."""
    script = RerankScript(known=COHERE_FIELDS)
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://strict-rerank.test/v1/",
              "rerank.max.tokens": "256", "rerank.cut": "nearest"}  # fmt: skip
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        client = rerank_client(http, Settings.of(values))
        first = await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
        again = await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
    assert [item.index for item in first] == [1] == [item.index for item in again]
    assert [("passage_cut" in request) for request in script.requests] == [True, False, False]
    assert sum("set rerank.cut=end" in record.getMessage() for record in caplog.records) == 1


async def test_an_api_failing_otherwise_is_not_asked_again() -> None:
    script = RerankScript(status=500)
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://failing-rerank.test/v1/",
              "rerank.cut": "nearest", "rerank.max.tokens": "256"}  # fmt: skip
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        client = rerank_client(http, Settings.of(values))
        with pytest.raises(UpstreamBadResponse):
            await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
    assert all("passage_cut" in request for request in script.requests)


async def test_a_long_question_leaves_the_nearest_cut_on() -> None:
    """A question longer than the local model server takes (4,000 characters: a 400 if sent
    whole) is cut, reranked with passage_cut, and never makes the endpoint be marked as one
    refusing passage_cut."""
    script = RerankScript(known=COHERE_FIELDS | {"passage_cut"})
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://long-question.test/v1/",
              "rerank.cut": "nearest", "rerank.max.tokens": "256"}  # fmt: skip
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        client = rerank_client(http, Settings.of(values))
        await client.rank("why? " * 4000, ["Tides.", "The keeper lit the lamp."], 1)
        await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
    assert [len(request["query"]) for request in script.requests] == [4000, 17]
    assert all(request.get("passage_cut") == "nearest" for request in script.requests)


async def test_a_request_refused_for_another_reason_keeps_the_cut() -> None:
    """A 422 that sending the request without passage_cut does not mend (the API refuses
    something else): the error is the caller's, and the cut stays on for the next."""
    script = RerankScript(known=frozenset({"model", "query", "documents", "passage_cut"}))
    values = {"rerank.enabled": "true", "rerank.endpoint": "http://other-refusal.test/v1/",
              "rerank.cut": "nearest"}  # fmt: skip
    transport = httpx.ASGITransport(app=create_rerank_app(script))
    async with httpx.AsyncClient(transport=transport) as http:
        client = rerank_client(http, Settings.of(values))
        with pytest.raises(UpstreamBadResponse):
            await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
        script.known = None
        await client.rank("Who lit the lamp?", ["Tides.", "The keeper lit the lamp."], 1)
    assert script.requests[-1].get("passage_cut") == "nearest"

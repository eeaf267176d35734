"""Datafari 7's conversation panel (/users/conversations, /users/messages) over the
conversations kept in Solr: an authenticated caller lists, opens, creates, renames and deletes
its own, and never reads, lists, renames or deletes another's."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient

from testing.llm_server import LLMScript
from testing.service import ClientFactory

PREFIX = "/Datafari/rest/v2.0"
# keys of their own: the conversations stay in the suite's Solr, other tests' callers too
KEY_ONE, KEY_TWO = f"panel-one-{uuid.uuid4().hex}", f"panel-two-{uuid.uuid4().hex}"
ONE, TWO = {"X-API-Key": KEY_ONE}, {"X-API-Key": KEY_TWO}
QUESTION = "When was the lighthouse lamp electrified?"


@pytest.fixture
def kept(make_client: ClientFactory) -> TestClient:
    return make_client({"conversations.enabled": True, "api.keys": f"{KEY_ONE},{KEY_TWO}"})


def content(response: object) -> dict:
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["status"] == "OK"
    return body["content"]


def test_a_caller_s_panel_lists_opens_renames_and_deletes_its_conversations(
    kept: TestClient, llm: LLMScript
) -> None:
    empty = content(kept.get(f"{PREFIX}/users/conversations", headers=ONE))
    assert empty["conversations"] == [] and empty["conversationId"] is None
    asked = content(kept.post("/ai", json={"query": QUESTION}, headers=ONE))
    panel = content(kept.get("/users/conversations", headers=ONE))
    assert panel["conversationId"] == asked["conversationId"]  # the latest
    assert panel["title"] == QUESTION[:50]
    assert [m["role"] for m in panel["messages"]] == ["user", "assistant"]
    assert panel["messages"][0]["content"] == QUESTION
    made = content(kept.post(f"{PREFIX}/users/conversations", headers=ONE))
    assert made["title"] == "New conversation" and made["messages"] == []
    assert {c["id"] for c in made["conversations"]} == {asked["conversationId"],
                                                        made["conversationId"]}  # fmt: skip
    renamed = content(kept.put("/users/conversations", headers=ONE, json={
        "conversationId": made["conversationId"], "title": "Harbour questions"}))  # fmt: skip
    assert renamed == {"conversationId": made["conversationId"], "title": "Harbour questions"}
    note = {"role": "user", "content": "A note", "conversationId": made["conversationId"]}
    said = content(kept.post("/users/messages", headers=ONE, json=note))
    assert said["conversationId"] == made["conversationId"]
    opened = content(kept.get("/users/conversations", headers=ONE,
                              params={"conversationId": made["conversationId"]}))  # fmt: skip
    assert opened["title"] == "Harbour questions" and opened["messages"][0]["content"] == "A note"
    # a message without a conversation starts one, titled with it
    fresh = content(kept.post("/users/messages", headers=ONE, json={
        "role": "user", "content": "Where is the ferry?"}))  # fmt: skip
    titled = content(kept.get("/users/conversations", headers=ONE,
                              params={"conversationId": fresh["conversationId"]}))  # fmt: skip
    assert titled["title"] == "Where is the ferry?"
    left = content(kept.delete("/users/conversations", headers=ONE,
                               params={"conversationId": made["conversationId"]}))  # fmt: skip
    assert made["conversationId"] not in {c["id"] for c in left["conversations"]}


def test_another_caller_never_reads_lists_renames_or_deletes_them(
    kept: TestClient, llm: LLMScript
) -> None:
    mine = content(kept.post("/ai", json={"query": QUESTION}, headers=ONE))["conversationId"]
    theirs = content(kept.get("/users/conversations", headers=TWO,
                              params={"conversationId": mine}))  # fmt: skip
    assert theirs["conversations"] == [] and theirs["conversationId"] is None
    assert QUESTION not in str(theirs)
    rename = kept.put("/users/conversations", headers=TWO,
                      json={"conversationId": mine, "title": "stolen"})  # fmt: skip
    assert rename.status_code == 404
    assert kept.delete("/users/conversations", headers=TWO,
                       params={"conversationId": mine}).status_code == 404  # fmt: skip
    written = kept.post("/users/messages", headers=TWO,
                        json={"role": "user", "content": "x", "conversationId": mine})  # fmt: skip
    assert written.status_code == 404
    still = content(kept.get("/users/conversations", headers=ONE))
    assert still["conversationId"] == mine and still["title"] == QUESTION[:50]
    assert len(still["messages"]) == 2


def test_the_panel_is_an_authenticated_caller_s(make_client: ClientFactory) -> None:
    anonymous = make_client({"conversations.enabled": True})
    assert anonymous.get("/users/conversations").status_code == 401
    keyed = make_client({"conversations.enabled": True, "api.keys": KEY_ONE})
    assert keyed.get("/users/conversations").status_code == 401  # no key
    for body in ({"conversationId": "x"}, {"conversationId": "x", "title": "t" * 201}):
        assert keyed.put("/users/conversations", headers=ONE, json=body).status_code == 400
    refused = keyed.post("/users/messages", headers=ONE, json={"role": "system", "content": "x"})
    assert refused.status_code == 400


def test_the_conversation_keeps_its_title_turn_after_turn(kept: TestClient, llm: LLMScript) -> None:
    """The `conversation` event carries the title kept (the first question's, or the one PUT
    gave it), never the current question's: the chat's header matches the panel."""

    def titled(body: dict) -> dict:
        lines = kept.post("/ai/stream", headers=ONE, json=body).text.splitlines()
        return next(json.loads(line)["data"] for line in lines if '"conversation"' in line)

    first = titled({"query": QUESTION})
    assert first["title"] == QUESTION[:50]
    later = titled({"query": "Who kept the lighthouse?", "conversationId": first["conversationId"]})
    assert later == first
    renamed = {"conversationId": first["conversationId"], "title": "Lamp history"}
    content(kept.put("/users/conversations", headers=ONE, json=renamed))
    conversation = first["conversationId"]
    asked = {"query": "What did the lighthouse keeper do?", "conversationId": conversation}
    after = titled(asked)
    assert after["title"] == "Lamp history"
    panel = content(kept.get("/users/conversations", headers=ONE,
                             params={"conversationId": first["conversationId"]}))  # fmt: skip
    assert panel["title"] == "Lamp history"

"""Datafari 7's conversation panel: `/users/conversations` (GET, POST, PUT, DELETE) and
`/users/messages` (POST), as its Assistant endpoints answer them, over the conversations the
service keeps in Solr (service.conversations) for /ai's conversationId.

For a caller that owns conversations only (the person: a verified JWT's `sub`, the trusted
proxy's `security.user.header`; else its API key; never an address), and only ever its own:
another owner's conversation id is not found (GET falls back to the caller's latest, as
Datafari does; PUT, DELETE and POST a message say it is not theirs). Every answer is
Datafari's envelope `{"status": "OK", "content": {...}}`.

    GET    /users/conversations[?conversationId=]  {conversationId, title, conversations,
                                                    messages, docsBasket}
    POST   /users/conversations                    a new empty conversation, then as GET
    PUT    /users/conversations {conversationId, title}          {conversationId, title}
    DELETE /users/conversations?conversationId=    then as GET
    POST   /users/messages {role, content, conversationId?}      {conversationId}
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from service.api.auth import require_api_key
from service.api.dependencies import CurrentSnapshot
from service.api.door import owner_of
from service.api.errors import documented_errors
from service.api.payload import json_route
from service.conversations import Conversation
from service.errors import ConversationNotFound
from service.llm import ChatMessage
from service.snapshot import Snapshot

router = APIRouter(tags=["ai"], dependencies=[Depends(require_api_key)], route_class=json_route())
ConversationId = Query(None, max_length=128, description="One of the caller's conversations.")


class Rename(BaseModel):
    model_config = ConfigDict(extra="ignore")

    conversationId: str = Field(min_length=1, max_length=128)
    title: str = Field(min_length=1, max_length=200)


class NewMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=20_000)
    conversationId: str | None = Field(None, max_length=128)


def _listed(conversation: Conversation) -> dict[str, str]:
    return {"id": conversation.id, "title": conversation.title, "updated": conversation.updated}


async def _panel(owner: str, snapshot: Snapshot, conversation_id: str | None) -> JSONResponse:
    """What Datafari's panel reads: the caller's conversations, and the named one (else the
    latest) with its messages."""
    store = snapshot.conversations
    conversations = await store.listed(owner)
    shown: Conversation | None = None
    if conversation_id is not None:
        try:
            shown = await store.get(owner, conversation_id)
        except ConversationNotFound:
            shown = None  # not the caller's: the latest instead, as Datafari does
    if shown is None and conversations:
        shown = await store.get(owner, conversations[0].id)
    messages = [
        {"role": m.role, "content": m.content, "message": m.content}
        for m in (shown.messages if shown else ())
    ]
    content = {
        "conversationId": shown.id if shown else None,
        "title": shown.title if shown else None,
        "conversations": [_listed(c) for c in conversations],
        "messages": messages,
        "docsBasket": [],
    }
    return JSONResponse({"status": "OK", "content": content})


@router.get("/users/conversations", responses=documented_errors(401, 403))
async def conversations(
    request: Request, snapshot: CurrentSnapshot, conversationId: str | None = ConversationId
) -> JSONResponse:
    """The caller's conversations, and one of them (the named one, else the latest) with its
    messages."""
    return await _panel(owner_of(request), snapshot, conversationId)


@router.post("/users/conversations", responses=documented_errors(401, 403))
async def new_conversation(request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """A new, empty conversation ("New conversation"), then the panel showing it."""
    owner = owner_of(request)
    store = snapshot.conversations
    made = await store.add(await store.open(owner, None))
    return await _panel(owner, snapshot, made.id)


@router.put("/users/conversations", responses=documented_errors(401, 403, 404))
async def rename(body: Rename, request: Request, snapshot: CurrentSnapshot) -> JSONResponse:
    """One of the caller's conversations, titled anew."""
    owner = owner_of(request)
    renamed = await snapshot.conversations.rename(owner, body.conversationId, body.title)
    return JSONResponse(
        {"status": "OK", "content": {"conversationId": renamed.id, "title": renamed.title}}
    )


@router.delete("/users/conversations", responses=documented_errors(401, 403, 404))
async def delete(
    request: Request, snapshot: CurrentSnapshot, conversationId: str | None = ConversationId
) -> JSONResponse:
    """One of the caller's conversations deleted, then the panel without it."""
    owner = owner_of(request)
    if conversationId is not None:
        await snapshot.conversations.delete(owner, conversationId)
    return await _panel(owner, snapshot, None)


@router.post("/users/messages", responses=documented_errors(401, 403, 404))
async def add_message(
    body: NewMessage, request: Request, snapshot: CurrentSnapshot
) -> JSONResponse:
    """A message kept in one of the caller's conversations (none named: a new one, titled
    with the message)."""
    owner = owner_of(request)
    store = snapshot.conversations
    conversation = await store.open(owner, body.conversationId)
    kept = await store.add(conversation, ChatMessage(body.role, body.content))
    return JSONResponse({"status": "OK", "content": {"conversationId": kept.id}})

"""The conversations the service keeps for Datafari 7's `conversationId`: a client sends only
its new message, and the conversation's earlier messages become the request's history.

One Solr document a conversation (conversations.collection). Its Solr id is a hash of the
owner and the conversation's id, so a caller who sends another caller's id finds nothing (a
404, the same as for an id never made); ids are made here (128 random bits), never taken from
a client. Bounded: conversations.max.messages messages of conversations.max.message.chars
characters each, conversations.max.per.caller conversations a caller (a new one beyond deletes
the oldest), gone conversations.ttl.hours after the last message (filtered on read, deleted
on write).

    >>> store = ConversationStore(solr, settings.conversations)
    >>> conversation = await store.open(owner, None)        # a new one
    >>> await store.append(conversation, question, answer)

A conversation has a title (its first question's first TITLE_CHARS characters, or what its
owner renamed it to) and is listed by its owner (Datafari 7's /users/conversations,
service.api.users). The record's messages_json holds `{"id", "title", "messages"}`; a record
written before titles (a bare list of messages) is read as untitled and is not listed.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from service.config.settings import ConversationSettings
from service.conversations.records import ConversationRecords
from service.errors import ConversationNotFound, FeatureDisabled
from service.llm import ChatMessage
from service.retrieval.solr import SolrClient

CONVERSATION_ID = 32  # hex characters of a conversation's id
PURGE_SECONDS = 60.0  # expired conversations are deleted at most this often


TITLE_CHARS = 50  # Datafari titles a conversation with its first message's first 50
NEW_TITLE = "New conversation"  # Datafari's title of a conversation made empty


@dataclass(frozen=True)
class Conversation:
    """One caller's conversation: its id, its title and its messages, oldest first."""

    id: str
    owner: str
    messages: tuple[ChatMessage, ...] = ()
    title: str = ""
    updated: str = ""  # when it was last kept (ISO 8601); "" for a new one, not yet kept


class ConversationStore:
    """Conversations kept in Solr, each readable by its owner only."""

    def __init__(self, solr: SolrClient, settings: ConversationSettings) -> None:
        self._records = ConversationRecords(solr, settings.collection)
        self._settings = settings
        self._purged = 0.0

    async def open(self, owner: str, conversation_id: str | None) -> Conversation:
        """The owner's conversation of that id (ConversationNotFound when there is none), or
        a new one (None); FeatureDisabled when conversations are off."""
        if not self._settings.enabled:
            raise FeatureDisabled(
                "conversationId: the service keeps no conversations here (conversations."
                "enabled=false); send the history with each request instead"
            )
        if conversation_id is None:
            return Conversation(secrets.token_hex(CONVERSATION_ID // 2), owner)
        found = await self._read(owner, conversation_id)
        if found is None:
            raise ConversationNotFound(_not_found(conversation_id))
        return found

    async def get(self, owner: str, conversation_id: str) -> Conversation:
        """The owner's conversation; ConversationNotFound otherwise."""
        return await self.open(owner, conversation_id)

    async def append(self, conversation: Conversation, question: str, answer: str) -> Conversation:
        """Keeps the question and its answer, the oldest messages dropped past the bound; the
        conversation as kept (its title the stored one: the first question's, or its
        owner's)."""
        return await self.add(
            conversation, ChatMessage("user", question), ChatMessage("assistant", answer)
        )

    async def add(self, conversation: Conversation, *said: ChatMessage) -> Conversation:
        """Keeps these messages (none: the conversation as it is, e.g. a new empty one),
        the oldest dropped past the bound; the conversation as kept."""
        settings = self._settings
        cut = settings.max_message_chars
        messages = [
            *conversation.messages,
            *(ChatMessage(m.role, m.content[:cut]) for m in said),
        ][-settings.max_messages :]
        title = conversation.title or (said[0].content[:TITLE_CHARS] if said else NEW_TITLE)
        if not conversation.updated:  # not yet kept
            await self._make_room(conversation.owner)
        kept = await self._write(
            Conversation(conversation.id, conversation.owner, tuple(messages), title)
        )
        await self._purge()
        return kept

    async def rename(self, owner: str, conversation_id: str, title: str) -> Conversation:
        """The owner's conversation, titled anew; ConversationNotFound otherwise."""
        found = await self.get(owner, conversation_id)
        return await self._write(Conversation(found.id, owner, found.messages, title[:200]))

    async def listed(self, owner: str) -> list[Conversation]:
        """The owner's conversations (their messages left out), the latest first."""
        listed = []
        for kept, updated in await self._records.owned(
            _owner_key(owner), self._settings.max_per_caller
        ):
            record = json.loads(kept)
            if isinstance(record, dict) and isinstance(record.get("id"), str):
                listed.append(Conversation(record["id"], owner, (), str(record.get("title", "")),
                                           updated))  # fmt: skip
        return listed

    async def _write(self, conversation: Conversation) -> Conversation:
        """The conversation written in its record; as kept (`updated`: when)."""
        now = datetime.now(UTC)
        written = _solr_date(now)
        record = {
            "id": conversation.id,
            "title": conversation.title,
            "messages": [[m.role, m.content] for m in conversation.messages],
        }
        await self._records.write(
            {
                "id": _solr_id(conversation.owner, conversation.id),
                "owner_s": _owner_key(conversation.owner),
                "updated_dt": written,
                "expires_dt": _solr_date(now + timedelta(hours=self._settings.ttl_hours)),
                "turns_i": len(conversation.messages),
                "messages_json": json.dumps(record),
            }
        )
        return replace(conversation, updated=written)

    async def delete(self, owner: str, conversation_id: str) -> None:
        """Deletes the owner's conversation; ConversationNotFound when there is none."""
        await self.get(owner, conversation_id)
        await self._records.delete([_solr_id(owner, conversation_id)])

    async def _read(self, owner: str, conversation_id: str) -> Conversation | None:
        if len(conversation_id) != CONVERSATION_ID or not _is_hex(conversation_id):
            return None
        found = await self._records.messages_of(_solr_id(owner, conversation_id))
        if found is None:
            return None
        kept, updated = found
        record = json.loads(kept)
        pairs = record.get("messages", []) if isinstance(record, dict) else record  # or older
        title = str(record.get("title", "")) if isinstance(record, dict) else ""
        messages = tuple(ChatMessage(str(role), str(text)) for role, text in pairs)
        return Conversation(conversation_id, owner, messages, title, updated)

    async def _make_room(self, owner: str) -> None:
        """Deletes the owner's oldest conversations past conversations.max.per.caller - 1."""
        keep = self._settings.max_per_caller - 1
        old = await self._records.older_than_newest(_owner_key(owner), keep)
        if old:
            await self._records.delete(old)

    async def _purge(self) -> None:
        now = time.monotonic()
        if now - self._purged < PURGE_SECONDS:
            return
        self._purged = now
        await self._records.delete_expired()


def _not_found(conversation_id: str) -> str:
    return (
        f"conversationId {conversation_id[:64]!r}: no such conversation of yours (it may have "
        "expired or been deleted); send no conversationId to begin a new one"
    )


def _owner_key(owner: str) -> str:
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def _solr_id(owner: str, conversation_id: str) -> str:
    return hashlib.sha256(f"{owner}\0{conversation_id}".encode()).hexdigest()


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _solr_date(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"

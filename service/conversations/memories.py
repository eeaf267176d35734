"""Datafari 7's `memoryId`: a short chat memory the service keeps in its process for a caller,
so that a client which sends no history and keeps no conversation still gets its last turns
read (Datafari keeps an agent's last 20 messages the same way).

A request without a memoryId gets a new one (streamed as the `memory` event, returned as
`content.memoryId`); a memoryId is the caller's own: the same id sent by another caller is
another memory. Bounded everywhere: MAX_MESSAGES a memory, MAX_PER_OWNER memories a caller
(its least recently used forgotten first), MAX_MEMORIES in all, each forgotten TTL_SECONDS
after its last use. Not kept across restarts, nor shared by workers: with conversations on
(`conversations.enabled`), `KeptMemories` keeps them where conversations are kept (Solr, per
owner, bounded and expiring as they are), so a follow-up that lands on another worker, or
another replica, reads its memory.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from service.conversations.store import Conversation, ConversationStore
from service.errors import ConversationNotFound
from service.llm import ChatMessage

MAX_MESSAGES = 20
MAX_PER_OWNER = 32
MAX_MEMORIES = 10_000
TTL_SECONDS = 3600.0
MEMORY_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
MEMORY_OWNER = "memory:"  # a kept memory's owner: its owner's, apart from its conversations


@dataclass
class Memory:
    id: str
    messages: list[ChatMessage] = field(default_factory=list)
    used: float = 0.0
    kept: Conversation | None = None  # where KeptMemories keeps it


class KeptMemories:
    """Memories kept as conversations of their own (an owner's memories apart from its
    conversations: never listed in its panel), read by any worker."""

    def __init__(self, store: ConversationStore) -> None:
        self._store = store

    async def open(self, owner: str, memory_id: str | None) -> Memory:
        """The owner's memory of that id, or a new one (none, unknown, expired, another's)."""
        named = memory_id if memory_id is not None and MEMORY_ID.match(memory_id) else None
        try:
            kept = await self._store.open(MEMORY_OWNER + owner, named)
        except ConversationNotFound:
            kept = await self._store.open(MEMORY_OWNER + owner, None)
        return Memory(kept.id, list(kept.messages)[-MAX_MESSAGES:], kept=kept)

    async def remember(self, memory: Memory, question: str, answer: str) -> None:
        if memory.kept is not None:
            memory.kept = await self._store.append(memory.kept, question, answer)


class Memories:
    """Every caller's memories, least recently used first (thread-safe: workers' threads)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: OrderedDict[tuple[str, str], Memory] = OrderedDict()
        self._per_owner: Counter[str] = Counter()  # memories held of each owner
        self._lock = threading.Lock()

    def open(self, owner: str, memory_id: str | None) -> Memory:
        """The owner's memory of that id (a new, empty one when there is none, or it expired,
        or the id is not one we could have made), used now."""
        now = self._clock()
        with self._lock:
            self._forget_expired(now)
            if memory_id is None or not MEMORY_ID.match(memory_id):
                memory_id = secrets.token_hex(16)
            key = (owner, memory_id)
            memory = self._held.pop(key, None)
            if memory is None:
                memory = Memory(memory_id)
                self._per_owner[owner] += 1
            memory.used = now
            self._held[key] = memory
            self._bound(owner)
            return memory

    def remember(self, memory: Memory, question: str, answer: str) -> None:
        with self._lock:
            memory.messages += [ChatMessage("user", question), ChatMessage("assistant", answer)]
            del memory.messages[:-MAX_MESSAGES]

    def __len__(self) -> int:
        return len(self._held)

    def _forget_expired(self, now: float) -> None:
        while self._held:
            key, oldest = next(iter(self._held.items()))
            if now - oldest.used < TTL_SECONDS:
                break
            self._forget(key)

    def _bound(self, owner: str) -> None:
        """At most MAX_PER_OWNER of the owner's (its least recently used go first: the held
        are looked through only then) and MAX_MEMORIES in all."""
        if self._per_owner[owner] > MAX_PER_OWNER:
            oldest = next(key for key in self._held if key[0] == owner)
            self._forget(oldest)
        while len(self._held) > MAX_MEMORIES:
            self._forget(next(iter(self._held)))

    def _forget(self, key: tuple[str, str]) -> None:
        del self._held[key]
        self._per_owner[key[0]] -= 1
        if not self._per_owner[key[0]]:
            del self._per_owner[key[0]]

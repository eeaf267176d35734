"""Datafari 7's memoryId kept in the process: a caller's own, bounded in messages, in memories
per caller and in all, forgotten after an hour unused."""

from __future__ import annotations

from service.conversations import memories
from service.conversations.memories import MAX_MESSAGES, MAX_PER_OWNER, TTL_SECONDS, Memories


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_memory_is_its_owner_s_and_keeps_its_last_messages() -> None:
    kept = Memories()
    mine = kept.open("alice", None)
    assert len(mine.id) == 32
    for n in range(MAX_MESSAGES):
        kept.remember(mine, f"question {n}", f"answer {n}")
    assert len(mine.messages) == MAX_MESSAGES
    assert mine.messages[-1].content == f"answer {MAX_MESSAGES - 1}"
    assert kept.open("alice", mine.id).messages == mine.messages
    assert kept.open("mallory", mine.id).messages == []  # the same id, another caller's
    for absurd in ("", "a" * 129, "../x", "a b", "\u00e9"):
        assert kept.open("alice", absurd).id != absurd  # made here instead


def test_memories_are_bounded_per_caller_in_all_and_in_time(monkeypatch) -> None:
    clock = Clock()
    kept = Memories(clock)
    first = kept.open("alice", "first")
    kept.remember(first, "q", "a")
    for n in range(MAX_PER_OWNER):
        clock.now += 1
        kept.open("alice", f"m{n}")
    assert len(kept) == MAX_PER_OWNER  # the least recently used went
    assert kept.open("alice", "first").messages == []
    monkeypatch.setattr(memories, "MAX_MEMORIES", 50)
    for n in range(60):
        kept.open(f"caller-{n}", None)
    assert len(kept) == 50
    clock.now += TTL_SECONDS + 1
    kept.open("bob", None)
    assert len(kept) == 1  # the rest expired

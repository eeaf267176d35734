"""What a turn reports as it goes, for whoever shows it (service.api.protocols): a stage's
name, an agent's tool or a part of its answer, the turn opened, the turn kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from service.agents.tools import AgentEvent


@dataclass(frozen=True)
class Opened:
    """The turn's memory (and conversation) are open: its memory's id ("" when none), why
    nothing of it is kept (an anonymous caller), whether it reads earlier messages."""

    memory_id: str
    not_kept: str | None
    history: bool


@dataclass(frozen=True)
class Kept:
    """The conversation the turn was kept in."""

    conversation_id: str
    title: str


Step = str | AgentEvent | Opened | Kept
Progress = Callable[[Step], None]

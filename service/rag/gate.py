"""Gate: what of an answer being written may be shown yet, so that what a reader is streamed is
the answer the service keeps.

Text is held while it is still to judge: the prompt's scaffolding the model may be copying
(service.chains.scaffolding), an answer whose first step doubts it (its holds: the not-found
doubt, service.rag.stages.confidence; the early refusal of an echo, service.rag.stages.echo),
and a short answer's citation, made true once the answer is whole; a short answer cut to its
phrase is held whole (`WHOLE`). Once the answer is known,
what was held, or what the answer stages made of it (an abstention), is what follows.

    >>> gate = Gate(prepared.scaffolding, holds=(doubt, echo))
    >>> async for piece in pieces: shown = gate.feed(piece, result.tokens)
    >>> rest = gate.flush(result.tokens) + gate.rest(answer.message)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from service.chains.scaffolding import Scaffolding
from service.chains.scaffolding_stream import Unscaffolded
from service.llm.types import TokenChoice


class Hold(Protocol):
    """A reason to hold an answer back, judged on the text kept so far and the answer's
    tokens seen so far; once the text is shown, it is shown (later words cannot hold it)."""

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool: ...


REREAD = 8  # characters a held text grows by, at the least, before a Reread reads it again


class Reread:
    """A hold that reads the text again only once it has grown by an eighth since it last
    did (and REREAD characters), so that an answer held long costs a few readings, not one a
    piece; holding a little longer is all a reading skipped costs (what is held is shown at
    the end, or once a reading lets it go). `reads_held` says what one reading finds."""

    _asked_at = -1  # the length of the text last read; -1: none yet

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        if self._asked_at >= 0 and len(kept) < self._asked_at + max(REREAD, self._asked_at // 8):
            return True
        self._asked_at = len(kept)
        return self.reads_held(kept)

    def reads_held(self, kept: str) -> bool:
        raise NotImplementedError


class Whole:
    """Holds an answer until it is whole: a short answer cut to its phrase once written
    (service.chains.short_answer.phrase) is known only at its end."""

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        return True


WHOLE = Whole()


class Gate:
    """What of the answer written so far may be shown (the module's docstring): `feed` each
    piece the LLM writes, with the tokens seen so far, and show what it returns; `flush` at
    the end of the text, then `rest` with the finished answer's message."""

    def __init__(
        self,
        scaffolding: Scaffolding | None = None,
        *,
        holds: Sequence[Hold] = (),
        citation_last: bool = False,
    ) -> None:
        self._kept = Unscaffolded(scaffolding)
        self._holds = tuple(holds)
        self._held = bool(self._holds)  # once shown, always shown
        self._citation_last = citation_last  # a short answer's citation waits for the end
        self._shown = ""

    @property
    def shown(self) -> str:
        """What was shown so far."""
        return self._shown

    def feed(self, piece: str, tokens: Sequence[TokenChoice] = ()) -> str:
        """What of the answer may be shown now that `piece` is written ("" while held)."""
        self._kept.feed(piece)
        return self._show(tokens)

    def flush(self, tokens: Sequence[TokenChoice] = ()) -> str:
        """What may be shown once the text is whole (the holds still hold)."""
        self._kept.flush()
        return self._show(tokens)

    def rest(self, message: str) -> str:
        """The end of the finished answer's `message` not shown yet: what was held, or the
        answer the answer stages made (nothing when the message is not what was shown so
        far followed by more)."""
        if not message.startswith(self._shown) or message == self._shown:
            return ""
        fresh = message[len(self._shown) :]
        self._shown = message
        return fresh

    def _show(self, tokens: Sequence[TokenChoice]) -> str:
        kept = self._kept.given
        if self._held:
            if any(hold.holds(kept, tokens) for hold in self._holds):
                return ""
            self._held = False
        ready = self._ready(kept)
        if len(ready) <= len(self._shown):
            return ""
        fresh = ready[len(self._shown) :]
        self._shown = ready
        return fresh

    def _ready(self, kept: str) -> str:
        """A short answer's citation (" [2]", which `true_citation` may renumber once the
        answer is whole) waits for the end."""
        if not self._citation_last or (cut := kept.rfind(" [")) < 0:
            return kept
        return kept[:cut]

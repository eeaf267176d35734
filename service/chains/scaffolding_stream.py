"""The streamed reader: an answer's scaffolding (service.chains.scaffolding) taken out as the
answer is written, so that what a client is streamed is the answer the service keeps.

`Unscaffolded` reads the answer piece by piece: it gives out what is decided and holds back
only what is still to judge: a line's first characters while they could begin a template
line or a label, a sentence's first `SENTENCE_HOLD` words (the instruction's forms come
early in a sentence: the whole sentence then goes), the words that could begin a citation's
scaffolding, an earlier answer's lines until it is known whether the model's own answer
follows them, and trailing whitespace. Its decisions never depend on what comes later, so
the pieces it gives out, put together, are exactly `without_scaffolding` of the whole text
(service.chains.scaffolding_reading, whose `Reading` it runs over the lines still open).
"""

from __future__ import annotations

import re

from service.chains.scaffolding import CITATION_HEAD, Scaffolding
from service.chains.scaffolding_reading import (
    CITATION_REACH,
    Reading,
    sentence_scans,
    tidied,
    without_citation_words,
)

_CITATIONS_IN_A_ROW = 4  # citation words before citation words, held together (bounded)
# Up to this many characters an answer is read again at every piece; past it, once a
# sixteenth more has come (a reading costs the answer's length, so a hostile stream costs
# O(n log n), not O(n^2); what is given out, put together, is the same)
_READ_AT_EVERY_PIECE = 1_000
_READ_AGAIN_AFTER = 16
# a character no citation words hold (they are ASCII letters, blanks and a colon), a blank next
_NO_CITATION_THEN_BLANK = re.compile(r"[^A-Za-z:\s](?=[ \t])")


class Unscaffolded:
    """`without_scaffolding`, a piece at a time: `feed` each piece of the answer as the LLM
    writes it and show what it returns, then `flush` at the end."""

    def __init__(self, scaffolding: Scaffolding | None = None) -> None:
        self._scaffolding = scaffolding or Scaffolding.shipped()
        self._written = ""
        self._read = 0  # how much of it was read when something was last given out
        self._given = ""
        # the whole lines read for good (`Reading.settled`): where the next reading starts,
        # and what they kept, so that each piece costs the lines still open, not the whole
        # answer: up to its last line break with a citation's words taken out (`_clean`;
        # they never run past a line break), the rest as written (`_tail`)
        self._start = 0
        self._in_line = False  # the next reading begins inside an answer's line
        self._clean = ""
        self._tail = ""
        self._uncited = _Uncited()  # the open line's citation words out, read once
        # the open sentence searched for forms, again only where its new end could complete one
        self._scans = sentence_scans(self._scaffolding)

    def feed(self, piece: str) -> str:
        self._written += piece
        written = len(self._written)
        if written > _READ_AT_EVERY_PIECE and written - self._read < written // _READ_AGAIN_AFTER:
            return ""
        self._read = written
        return self._give(self._decided(final=False))

    def flush(self) -> str:
        return self._give(self._decided(final=True))

    def _decided(self, *, final: bool) -> str:
        """What is decided so far, finished as `without_scaffolding` finishes it (the
        citation's words out, tidied), the lines settled before read once."""
        reading = Reading(
            self._scaffolding,
            self._written[self._start :],
            in_line=self._in_line,
            scans=self._scans,
        )
        rest = reading.scan(final=final)
        decided = self._clean + self._uncited.of(self._tail + rest)
        position, length, in_line = reading.settled
        if position:
            self._in_line = in_line
        self._start += position
        self._tail += rest[:length]
        cut = self._tail.rfind("\n") + 1
        if cut:
            self._clean += without_citation_words(self._tail[:cut])
            self._tail = self._tail[cut:]
        return tidied(decided) if final else _held_citation(tidied(decided))

    @property
    def given(self) -> str:
        """What was given out so far."""
        return self._given

    def _give(self, decided: str) -> str:
        if not decided.startswith(self._given):  # never: decisions do not look ahead
            return ""
        fresh = decided[len(self._given) :]
        self._given = decided
        return fresh


def _held_citation(decided: str) -> str:
    """`decided` without the citation's words it ends with, held: a `[n]` may follow them
    once what comes between is cut (a form), and then they go ("This can be found in <the
    instruction's forms> [1]"). Looked for in the end of the text only: each piece costs
    the same however long the answer."""
    for _ in range(_CITATIONS_IN_A_ROW):
        cited = CITATION_HEAD.search(decided, max(0, len(decided) - CITATION_REACH))
        if cited is None:
            break
        decided = decided[: cited.start()].rstrip()
    return decided


class _Uncited:
    """`without_citation_words` of a text that grows at its end (the open line, at every
    piece), its beginning read once: the text is cut, and each part read alone, after a
    character no citation words hold (".", "]", a digit) with a blank next. That is the
    outcome of reading it whole: no words run across such a place; the "[n]" they need after
    them is no blank; and a blank begins them alike after that character or at a start."""

    def __init__(self) -> None:
        self._cut = 0  # where the text was last cut
        self._read = ""  # the text up to it, and the blank after it (the text may change)
        self._kept = ""  # what reading it up to the cut left

    def of(self, text: str) -> str:
        if not text.startswith(self._read):  # another line, or the line read again otherwise
            self._cut, self._read, self._kept = 0, "", ""
        cut = None
        for place in _NO_CITATION_THEN_BLANK.finditer(text, max(0, self._cut - 1)):
            cut = place.end()
        if cut is not None and cut > self._cut:
            self._kept += without_citation_words(text[self._cut : cut])
            self._cut, self._read = cut, text[: cut + 1]
        return self._kept + without_citation_words(text[self._cut :])

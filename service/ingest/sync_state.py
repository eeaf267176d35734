"""Where `solr-rag sync` is, kept between its runs (a JSON file: --checkpoint).

A run reads only the documents written since the run before: Solr gives every write a
`_version_` that grows with time (the milliseconds of the write, shifted left 20 bits), so the
documents changed since are those whose `_version_` is above a mark. Each run ends by keeping
its mark (`settled`): a `_version_` below which every write was visible to it, read by it or
by an earlier run. A write can become visible after later ones (autoSoftCommit, commitWithin,
several shards, the clocks of several nodes), so the mark stays `settle` seconds behind the
run's start: what changed in those seconds is read again by the next run, never missed.

While a run goes, the file also holds its place (the cursorMark after the last committed
page): a run that stops (a crash, Ctrl-C) resumes after it. And it holds the ids of the
documents that have no passages (no text): with them, counting is enough to know that no
document is gone (service.ingest.orphans).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

VERSION_SHIFT = 20  # Solr's _version_: milliseconds since 1970, shifted left this many bits
FORMAT = 2  # the file's; one of an older sync (its cursorMark in id order) starts again
SETTLE_SECONDS = 300.0  # how late a write may become visible: read again by the next run


@dataclass(frozen=True)
class SyncState:
    """What the last run knew, and how far the running one is.

    `since`: the run reads the documents whose `_version_` is above it (None: every document,
    a first run or one after --restart). `settled`: the mark the running run keeps for the
    next. `cursor`: the cursorMark after its last committed page ("" when no run goes)."""

    since: int | None = None
    settled: int | None = None
    cursor: str = ""
    read: int = 0
    changed: int = 0
    passages: int = 0
    embedded: int = 0
    textless: frozenset[str] = field(default_factory=frozenset)

    @property
    def running(self) -> bool:
        return bool(self.cursor)

    def begun(self, newest: int | None, settle: float, now: float | None = None) -> SyncState:
        """A new run's state: it reads past the last run's mark, and will keep `settle`
        seconds before now (never past `newest`, the newest `_version_` Solr holds: a clock
        ahead of Solr's would skip writes to come)."""
        start = int(((time.time() if now is None else now) - settle) * 1000) << VERSION_SHIFT
        settled = 0 if newest is None else min(start, newest)  # none yet: all, next time
        if self.since is not None:
            settled = max(settled, self.since)
        return SyncState(since=self.since, settled=settled, cursor="*", textless=self.textless)

    def ended(self, textless: frozenset[str]) -> SyncState:
        """The state the next run starts from."""
        return SyncState(since=self.settled, textless=textless)

    def advanced(self, cursor: str, read: int, changed: int, passages: int,
                 embedded: int) -> SyncState:  # fmt: skip
        """After a committed page: its cursorMark and what it did, added."""
        return replace(self, cursor=cursor, read=self.read + read, changed=self.changed + changed,
                       passages=self.passages + passages,
                       embedded=self.embedded + embedded)  # fmt: skip


@dataclass(frozen=True)
class Checkpoint:
    """The state's file, bound to what the passages are made of (`fingerprint`: the
    collections, the field maps, the model, the passage size): another one starts again."""

    path: Path
    fingerprint: str

    def load(self) -> SyncState | None:
        try:
            kept = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or kept.get("fingerprint") != self.fingerprint:
            return None  # another configuration's: started again
        if kept.get("format") != FORMAT:
            return None  # an older sync's
        try:
            return _state_of(kept)
        except (KeyError, TypeError, ValueError):
            return None

    def save(self, state: SyncState) -> None:
        """Written whole or not at all (a temporary file renamed over the old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept: dict[str, Any] = {**asdict(state), "textless": sorted(state.textless)}
        temporary = self.path.with_suffix(".tmp")
        kept |= {"fingerprint": self.fingerprint, "format": FORMAT}
        temporary.write_text(json.dumps(kept), "utf-8")
        os.replace(temporary, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _state_of(kept: dict[str, Any]) -> SyncState:
    def mark(name: str) -> int | None:
        value = kept.get(name)
        return None if value is None else int(value)

    return SyncState(
        since=mark("since"),
        settled=mark("settled"),
        cursor=str(kept.get("cursor", "")),
        **{name: int(kept.get(name, 0)) for name in ("read", "changed", "passages", "embedded")},
        textless=frozenset(str(i) for i in kept.get("textless", [])),
    )

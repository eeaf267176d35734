"""Where `solr-rag sync` is, kept between its runs (a JSON file: --checkpoint).

A run reads only the documents written since the run before: Solr gives every write a
`_version_` that grows with time (the milliseconds of the write, shifted left 20 bits), so the
documents changed since are those whose `_version_` is above a mark. Each run ends by keeping
its mark (`settled`): a `_version_` below which every write was visible to it, read by it or
by an earlier run. A write can become visible after later ones (autoSoftCommit, commitWithin,
several shards, the clocks of several nodes), so the mark stays `settle` seconds behind the
run's start: what changed in those seconds is read again by the next run, never missed. Nor
does it pass any shard's newest `_version_` (lowest_newest): a shard leader whose clock is
behind stamps its next writes above that, not above the others'.

While a run goes, the file also holds its place (the cursorMark after the last committed
page): a run that stops (a crash, Ctrl-C) resumes after it. And it holds how many first
passages the passages collection held when the last run ended: fewer at the next start means
it was emptied, recreated or lost passages (docs/operations.md has VectorMain deleted and made
again), and every document is read again. The ids of the documents that have no passages (no
text), with which counting is enough to know that no document is gone
(service.ingest.orphans), are in a file of their own, written once a run (`<checkpoint>.textless`).

One run at a time: a run holds `<checkpoint>.lock` (flock) from start to end; another is
refused (SyncRunning), rather than resume the first one's place.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from service.errors import SetupError

VERSION_SHIFT = 20  # Solr's _version_: milliseconds since 1970, shifted left this many bits
FORMAT = 3  # the file's; an older sync's (its cursorMark in id order, its textless ids within)
# starts again
SETTLE_SECONDS = 300.0  # how late a write may become visible: read again by the next run


class SyncRunning(SetupError):
    """Another sync runs on the same checkpoint (it holds its lock)."""


@dataclass(frozen=True)
class SyncState:
    """What the last run knew, and how far the running one is.

    `since`: the run reads the documents whose `_version_` is above it (None: every document,
    a first run or one after --restart). `settled`: the mark the running run keeps for the
    next. `cursor`: the cursorMark after its last committed page ("" when no run goes).
    `firsts`: the first passages the passages collection held when the last run ended (None:
    not known)."""

    since: int | None = None
    settled: int | None = None
    cursor: str = ""
    read: int = 0
    changed: int = 0
    passages: int = 0
    embedded: int = 0
    firsts: int | None = None

    @property
    def running(self) -> bool:
        return bool(self.cursor)

    def begun(self, newest: int | None, settle: float, now: float | None = None) -> SyncState:
        """A new run's state: it reads past the last run's mark, and will keep `settle`
        seconds before now (never past `newest`, the lowest of the shards' newest `_version_`:
        a clock ahead of Solr's, or of one shard leader's, would skip writes to come)."""
        start = int(((time.time() if now is None else now) - settle) * 1000) << VERSION_SHIFT
        settled = 0 if newest is None else min(start, newest)  # none yet: all, next time
        if self.since is not None:
            settled = max(settled, self.since)
        return SyncState(since=self.since, settled=settled, cursor="*", firsts=self.firsts)

    def ended(self, firsts: int) -> SyncState:
        """The state the next run starts from; `firsts`: the first passages held now."""
        return SyncState(since=self.settled, firsts=firsts)

    def advanced(self, cursor: str, read: int, changed: int, passages: int,
                 embedded: int) -> SyncState:  # fmt: skip
        """After a committed page: its cursorMark and what it did, added."""
        return replace(self, cursor=cursor, read=self.read + read, changed=self.changed + changed,
                       passages=self.passages + passages,
                       embedded=self.embedded + embedded)  # fmt: skip


def lowest_newest(shards: Iterable[int | None]) -> int | None:
    """The mark's bound from each shard's newest `_version_` (None: an empty shard): the
    lowest, so the mark passes no shard's newest write, whatever its leader's clock (None:
    every shard is empty)."""
    held = [newest for newest in shards if newest is not None]
    return min(held) if held else None


@dataclass(frozen=True)
class Checkpoint:
    """The state's file, bound to what the passages are made of (`fingerprint`: the Solr,
    the collections, the field maps, the model, the passage size): another one starts again."""

    path: Path
    fingerprint: str

    @property
    def textless_path(self) -> Path:
        return self.path.with_name(self.path.name + ".textless")

    @contextmanager
    def held(self) -> Iterator[None]:
        """The checkpoint's lock, for a run (or a clear): SyncRunning if another holds it.
        Released when the file closes, even by a process killed."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        with lock.open("a") as opened:
            try:
                fcntl.flock(opened, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SyncRunning(
                    f"another sync runs on the checkpoint {self.path} (it holds {lock.name}); "
                    "run this one once it has ended"
                ) from None
            yield

    def load(self) -> SyncState | None:
        kept = self._read(self.path)
        if kept is None or kept.get("format") != FORMAT:
            return None  # another configuration's, or an older sync's: started again
        try:
            return _state_of(kept)
        except (KeyError, TypeError, ValueError):
            return None

    def save(self, state: SyncState) -> None:
        """Written whole or not at all (a file of its own renamed over the old one)."""
        _write_whole(self.path, {**asdict(state), "fingerprint": self.fingerprint,
                                 "format": FORMAT})  # fmt: skip

    def load_textless(self, state: SyncState) -> frozenset[str]:
        """The ids without passages as the run that left `state` knew them (none: unknown)."""
        kept = self._read(self.textless_path)
        if kept is None or kept.get("since") != state.since or state.since is None:
            return frozenset()
        return frozenset(str(i) for i in kept.get("ids", []))

    def save_textless(self, state: SyncState, ids: Iterable[str]) -> None:
        """Once a run, before `state` (the next run's) is saved: bound to its mark."""
        kept = {"fingerprint": self.fingerprint, "since": state.since, "ids": sorted(ids)}
        _write_whole(self.textless_path, kept)

    def clear(self) -> None:
        with self.held():
            self.path.unlink(missing_ok=True)
            self.textless_path.unlink(missing_ok=True)

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or kept.get("fingerprint") != self.fingerprint:
            return None
        return kept


def _write_whole(path: Path, kept: dict[str, Any]) -> None:
    """`kept` in `path` whole or not at all: written to a file of this writer's own in the
    same folder, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(kept, out)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _state_of(kept: dict[str, Any]) -> SyncState:
    def mark(name: str) -> int | None:
        value = kept.get(name)
        return None if value is None else int(value)

    return SyncState(
        since=mark("since"),
        settled=mark("settled"),
        cursor=str(kept.get("cursor", "")),
        **{name: int(kept.get(name, 0)) for name in ("read", "changed", "passages", "embedded")},
        firsts=mark("firsts"),
    )

"""`solr-rag sync`'s mark between runs (service.ingest.sync_state): what the next run reads
past, and the file that keeps it."""

from __future__ import annotations

import json
from pathlib import Path

from service.ingest.sync_state import VERSION_SHIFT, Checkpoint, SyncState, lowest_newest

NOW = 1_800_000_000.0  # seconds


def version(seconds: float) -> int:
    """Solr's _version_ of a write at that time."""
    return int(seconds * 1000) << VERSION_SHIFT


def test_the_mark_stays_the_settle_interval_behind_the_run() -> None:
    begun = SyncState().begun(newest=version(NOW - 1), settle=300, now=NOW)
    assert begun.since is None and begun.running  # a first run: every document
    assert begun.settled == version(NOW - 300)  # written since: read again next time
    assert begun.ended(firsts=4) == SyncState(since=version(NOW - 300), firsts=4)


def test_the_mark_never_passes_what_solr_holds_nor_goes_back() -> None:
    # a clock ahead of Solr's: the mark is Solr's newest write, not a time to come
    quiet = SyncState().begun(newest=version(NOW - 3600), settle=300, now=NOW)
    assert quiet.settled == version(NOW - 3600)
    # a clock behind the last run's mark: the mark stays
    later = SyncState(since=version(NOW)).begun(newest=version(NOW), settle=300, now=NOW)
    assert later.settled == version(NOW)
    # an empty collection: next time, everything there is then
    assert SyncState().begun(newest=None, settle=0, now=NOW).settled == 0


def test_the_file_keeps_the_mark_the_place_and_the_first_passages(tmp_path: Path) -> None:
    checkpoint = Checkpoint(tmp_path / "sync.json", "made-of")
    state = SyncState(since=5, settled=9, cursor="AoE", read=3, firsts=7)
    checkpoint.save(state)
    assert checkpoint.load() == state
    assert Checkpoint(tmp_path / "sync.json", "made-of-another").load() is None


def test_the_textless_ids_are_kept_apart_once_a_run(tmp_path: Path) -> None:
    """Issue 82: 100,000 ids without text were written again with every page (6 MB each)."""
    checkpoint = Checkpoint(tmp_path / "sync.json", "made-of")
    ended = SyncState(since=9, firsts=7)
    checkpoint.save_textless(ended, ["scan-2", "scan-1"])
    checkpoint.save(SyncState(since=9, settled=12, cursor="AoE", firsts=7))  # a page
    assert "scan" not in (tmp_path / "sync.json").read_text()
    assert checkpoint.load_textless(ended) == {"scan-1", "scan-2"}
    assert checkpoint.load_textless(SyncState(since=5)) == frozenset()  # another run's
    assert Checkpoint(tmp_path / "sync.json", "made-of-another").load_textless(ended) == set()
    checkpoint.clear()
    assert list(tmp_path.glob("sync.json*")) == [tmp_path / "sync.json.lock"]


def test_the_mark_is_bound_by_the_shard_whose_newest_write_is_oldest() -> None:
    """Issue 82: each shard's leader stamps writes by its own clock; one behind the others
    would write below a mark taken from the newest of all."""
    behind, ahead = version(NOW - 600), version(NOW - 1)
    assert lowest_newest([ahead, behind, None]) == behind  # None: an empty shard
    assert lowest_newest([None, None]) is None
    begun = SyncState().begun(newest=lowest_newest([ahead, behind]), settle=300, now=NOW)
    assert begun.settled == behind


def test_an_older_syncs_checkpoint_starts_again(tmp_path: Path) -> None:
    """Its cursorMark was of another order (by id): resuming from it would fail."""
    path = tmp_path / "sync.json"
    old = {"cursor": "AoEpd2lraS0wNQ==", "read": 5, "changed": 5, "passages": 15, "embedded": 15}
    path.write_text(json.dumps({**old, "fingerprint": "made-of"}))
    assert Checkpoint(path, "made-of").load() is None

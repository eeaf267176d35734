"""`solr-rag sync`'s checkpoint against what happens to Solr between runs (issue 82, item 3,
the attacker's review): a passages collection recreated or emptied is filled again, a document
that lost its passages cannot hide a deleted one nor be taken for one without text, two runs
never share a checkpoint, and the mark never passes a shard's newest write."""

from __future__ import annotations

import asyncio
import fcntl
import json
import threading
from pathlib import Path

import httpx
import pytest

from service import cli
from service.errors import SetupError
from service.ingest.indexer import IngestProgress
from service.ingest.sync import PassageSync
from service.ingest.sync_state import Checkpoint, SyncState
from testing.service import write_properties
from testing.solr import create_collection, delete_collection
from tests.service.test_own_solr import (
    DATAFARI_DOCUMENT_FIELDS,
    DATAFARI_PASSAGE_FIELDS,
    datafari_collections,
    passages_of,
    post,
    running,
    sync_run,
    synced_settings,
    wiki,
)


def delete(solr_url: str, collection: str, query: str) -> None:
    httpx.post(f"{solr_url}/{collection}/update", params={"commit": "true"},
               json={"delete": {"query": query}}).raise_for_status()  # fmt: skip


def wikis(solr_url: str, documents: str, passages: str) -> None:
    datafari_collections(solr_url, documents, passages)
    post(solr_url, documents, [wiki(i) for i in range(12)])


async def synced_wikis(
    solr_url: str, model_server_url: str, documents: str, passages: str, tmp_path: Path
):
    """12 pages synced once: the settings and the checkpoint."""
    settings = synced_settings(solr_url, model_server_url, documents, passages)
    checkpoint = tmp_path / "sync.json"
    assert (await sync_run(settings, checkpoint, settle=0)).changed == 12
    return settings, checkpoint


def dropped(solr_url: str, *collections: str) -> None:
    for name in collections:
        delete_collection(solr_url, name)


async def test_a_recreated_passages_collection_is_filled_again(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """docs/operations.md has VectorMain deleted and made again (quantized vectors): the next
    sync writes every passage again, though no document changed since its mark."""
    documents, passages = "RecreatedDocs", "RecreatedPassages"
    where = (solr_url, model_server_url, documents, passages)
    wikis(solr_url, documents, passages)
    try:
        settings, checkpoint = await synced_wikis(*where, tmp_path)
        delete_collection(solr_url, passages)
        create_collection(solr_url, passages, "DatafariVectorMain")
        again = await sync_run(settings, checkpoint, settle=0)
        assert (again.documents, again.changed) == (12, 12)
        assert len(passages_of(solr_url, passages)) == 12
        emptied = delete(solr_url, passages, "*:*")  # emptied, not recreated: the same
        assert emptied is None and (await sync_run(settings, checkpoint, settle=0)).changed == 12
        assert len(passages_of(solr_url, passages)) == 12
        quiet = await sync_run(settings, checkpoint, settle=0)  # and then only what changed
        assert (quiet.documents, quiet.changed, quiet.compared) == (0, 0, 0)
    finally:
        dropped(solr_url, documents, passages)


def test_the_checkpoint_is_bound_to_the_solr_it_was_made_on(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """Another Solr's collections of the same names hold other passages: it starts again."""
    one = synced_settings(solr_url, model_server_url, "D", "P")
    other = synced_settings("http://solr.example:8983/solr", model_server_url, "D", "P")
    checkpoint = tmp_path / "sync.json"
    marks = [PassageSync(None, s, None, checkpoint=checkpoint).checkpoint  # type: ignore[arg-type]
             for s in (one, other)]  # fmt: skip
    assert marks[0].fingerprint != marks[1].fingerprint


async def test_a_deleted_document_is_found_though_another_lost_its_passages(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """One document's passages lost (a restore, a hand's delete) and another document deleted:
    the counts of one cancel the other's, yet the deleted one's passages go and the other's
    come back."""
    documents, passages = "MaskedDocs", "MaskedPassages"
    where = (solr_url, model_server_url, documents, passages)
    wikis(solr_url, documents, passages)
    try:
        settings, checkpoint = await synced_wikis(*where, tmp_path)
        delete(solr_url, passages, "parent_doc:wiki-05")
        delete(solr_url, documents, "id:wiki-03")
        await sync_run(settings, checkpoint, settle=0)
        held = passages_of(solr_url, passages)
        assert "wiki-03" not in held and len(held["wiki-05"]) >= 3
        assert len(held) == 11
    finally:
        dropped(solr_url, documents, passages)


async def test_a_document_without_passages_but_with_text_is_read_again(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """A run that resumes compares the ids: a document it did not read whose passages are
    lost has text, and is made again, not kept as one without text."""
    documents, passages = "UnpassagedDocs", "UnpassagedPassages"
    where = (solr_url, model_server_url, documents, passages)
    wikis(solr_url, documents, passages)
    try:
        settings, checkpoint = await synced_wikis(*where, tmp_path)
        post(solr_url, documents, [{**wiki(i), "title": [f"Glacier {i}, revised"]}
                                   for i in range(10)])  # fmt: skip

        def crash(state: IngestProgress) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            await sync_run(settings, checkpoint, crash, page=5, settle=0)
        assert running(checkpoint)
        delete(solr_url, passages, "parent_doc:wiki-11")  # not among those written since
        resumed = await sync_run(settings, checkpoint, page=5, settle=0)
        assert resumed.resumed and resumed.compared > 0
        assert len(passages_of(solr_url, passages)["wiki-11"]) >= 3
        assert (await sync_run(settings, checkpoint, settle=0)).compared == 0
    finally:
        dropped(solr_url, documents, passages)


def test_two_writers_of_one_checkpoint_never_meet(tmp_path: Path) -> None:
    """Each writes through a file of its own, renamed over the checkpoint."""
    path, errors = tmp_path / "sync.json", []
    state = SyncState(since=1, settled=2, cursor="AoE", read=5)

    def save() -> None:
        checkpoint = Checkpoint(path, "made-of")
        try:
            for _ in range(300):
                checkpoint.save(state)
        except OSError as error:
            errors.append(error)

    writers = [threading.Thread(target=save) for _ in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert errors == [] and Checkpoint(path, "made-of").load() == state
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


async def test_a_second_run_on_one_checkpoint_is_refused(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """A sync started while another runs on its checkpoint (cron and --every, two hosts on
    one share) stops at once with a reason: it would resume the other's place."""
    documents, passages = "LockedDocs", "LockedPassages"
    wikis(solr_url, documents, passages)
    try:
        settings = synced_settings(solr_url, model_server_url, documents, passages)
        checkpoint = tmp_path / "sync.json"
        refused: list[BaseException] = []

        def second() -> None:
            try:
                asyncio.run(sync_run(settings, checkpoint, settle=0))
            except BaseException as error:  # what it raised is the test
                refused.append(error)
            else:
                refused.append(AssertionError("the second run ran"))

        def midway(state: IngestProgress) -> None:
            if state.documents and not refused:  # after the first page
                thread = threading.Thread(target=second)
                thread.start()
                thread.join()

        first = await sync_run(settings, checkpoint, midway, page=5, settle=0)
        assert first.documents == 12 and not running(checkpoint)
        assert len(refused) == 1 and isinstance(refused[0], SetupError), refused
        assert "another sync" in str(refused[0])
        assert len(passages_of(solr_url, passages)) == 12
    finally:
        dropped(solr_url, documents, passages)


def test_the_cli_refuses_a_second_run_in_one_line(
    base_properties: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    properties = {**base_properties, "solr.collection.documents": "LockedDocs",
                  "solr.collection.passages": "LockedPassages",
                  "solr.documents.fields": DATAFARI_DOCUMENT_FIELDS,
                  "solr.passages.fields": DATAFARI_PASSAGE_FIELDS}  # fmt: skip
    config = write_properties(tmp_path / "sync.properties", properties)
    checkpoint = tmp_path / "sync.json"
    for restart in ([], ["--restart"]):  # nor is its checkpoint cleared under it
        with (tmp_path / "sync.json.lock").open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process's run
            command = ["sync", "--config", str(config), "--checkpoint", str(checkpoint)]
            code = cli.main([*command, *restart])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and "another sync" in err, err


async def test_the_mark_never_passes_a_shards_newest_write(
    solr_url: str, model_server_url: str, tmp_path: Path
) -> None:
    """Each shard's leader stamps its writes by its own clock: the mark is the lowest of the
    shards' newest `_version_`, so a shard whose clock is behind is not skipped."""
    documents, passages = "ShardedDocs", "ShardedPassages"
    datafari_collections(solr_url, "ShardedUnused", passages)
    create_collection(solr_url, documents, "DatafariFileShare", numShards=2)
    try:
        post(solr_url, documents, [wiki(i) for i in range(8)])
        newest = []
        for shard in ("shard1", "shard2"):
            found = httpx.get(f"{solr_url}/{documents}/select", params={
                "q": "*:*", "rows": 0, "shards": shard,
                "json.facet": json.dumps({"newest": "max(_version_)"})}).json()  # fmt: skip
            newest.append(int(found["facets"]["newest"]))
        assert newest[0] != newest[1]  # both shards hold some
        settings = synced_settings(solr_url, model_server_url, documents, passages)
        checkpoint = tmp_path / "sync.json"
        assert (await sync_run(settings, checkpoint, settle=0)).changed == 8
        assert json.loads(checkpoint.read_text())["since"] == min(newest)
    finally:
        dropped(solr_url, documents, passages, "ShardedUnused")

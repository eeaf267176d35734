"""What an idle service spends polling for ingestion jobs (issue 70): each process polls the
jobs collection every second while it runs, questions or not, so a poll that finds nothing
asks Solr once, and the poll loop builds no new Solr client while the settings stand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.config import settings_from_mapping
from service.ingest.jobs import JobStore
from service.job_runner import JobRunner
from service.runtime import Runtime


class CountingSolr:
    """A jobs collection with nothing in it, counting what it is asked."""

    def __init__(self) -> None:
        self.selects: list[dict[str, Any]] = []

    async def select(self, collection: str, params: dict[str, Any]) -> dict[str, Any]:
        self.selects.append(params)
        return {"response": {"numFound": 0, "docs": []}}


async def test_a_poll_that_finds_no_job_asks_solr_once() -> None:
    solr = CountingSolr()
    settings = settings_from_mapping({"jobs.enabled": "true"}, source="test", env={})
    store = JobStore(solr, settings.jobs)  # type: ignore[arg-type]
    assert await store.claim("worker") is None
    assert len(solr.selects) == 1, solr.selects


async def test_the_poll_loop_keeps_its_store_until_the_settings_change(tmp_path: Path) -> None:
    config = tmp_path / "rag.properties"
    config.write_text("solr.startup.check=false\njobs.enabled=true\n", encoding="utf-8")
    runtime = Runtime(config)
    await runtime.start()
    try:
        runner = JobRunner(runtime)
        first = runner.store()
        assert runner.store() is first  # a second poll: the same store and Solr client
        config.write_text(  # another size: read again
            "solr.startup.check=false\njobs.enabled=true\nsolr.timeout.read=31\n",
            encoding="utf-8",
        )
        changed = runner.store()
        assert changed is not first and changed.settings.enabled
    finally:
        await runtime.stop()

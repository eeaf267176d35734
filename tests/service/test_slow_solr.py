"""Ingestion survives a Solr that stalls: a write that timed out is sent again (every write
the service sends is idempotent) and the run finishes; a Solr that is down ends a command
with one line saying what failed and how to resume, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.cli import main as cli
from service.errors import UpstreamTimeout
from service.retrieval.solr import SolrClient
from testing.servers import free_port, serve_in_thread
from testing.service import write_properties
from testing.solr_proxy import ProxyLog, create_solr_proxy

SOURCE = "stalled-solr-test"


@pytest.fixture
def folder(tmp_path: Path, solr_url: str) -> Iterator[Path]:
    """Two files of a source of their own, removed from Solr afterwards."""
    files = tmp_path / "files"
    files.mkdir()
    (files / "kelp.txt").write_text("Kelp drying\nKelp dries on the racks for nine days.\n")
    (files / "nets.txt").write_text("Net mending\nNets are mended with a wooden needle.\n")
    yield files
    for collection in ("FileShare", "VectorMain"):
        httpx.post(
            f"{solr_url}/{collection}/update",
            params={"commit": "true"},
            json={"delete": {"query": f'id:"{SOURCE}/kelp.txt*" OR id:"{SOURCE}/nets.txt*"'}},
            timeout=60,
        )


def config(tmp_path: Path, solr_url: str, model_server_url: str, **keys: object) -> Path:
    return write_properties(
        tmp_path / "rag.properties",
        {"solr.url": solr_url, "ai.embeddings.endpoint": f"{model_server_url}/v1/", **keys},
    )


@pytest.mark.parametrize(
    "log",
    [
        # one write held longer than solr.timeout.read: sent again
        ProxyLog(stall_updates=1, stall_seconds=4),
        # every write slower than solr.timeout.read (a Solr embedding its passages on a busy
        # box): the same wait would time out on every try; a doubled one holds
        ProxyLog(update_seconds=1.5),
    ],
    ids=["stalls once", "slow on every write"],
)
def test_an_ingestion_finishes_when_solr_is_slow(
    log: ProxyLog,
    folder: Path,
    tmp_path: Path,
    solr_url: str,
    model_server_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        keys = {"solr.timeout.read": 1, "solr.write.retries": 3}
        path = config(tmp_path, f"{base}/solr", model_server_url, **keys)
        done = cli(["ingest", str(folder), "--source", SOURCE, "--config", str(path)])
    err = capsys.readouterr().err
    assert done == 0, err
    assert log.stall_updates == 0 and log.updates >= 2  # the slow write was sent again
    assert "the write is sent again" in err
    found = httpx.get(
        f"{solr_url}/FileShare/select",
        params={"q": f'id:"{SOURCE}/kelp.txt"', "defType": "lucene", "wt": "json"},
        timeout=30,
    ).json()
    assert found["response"]["numFound"] == 1


async def test_the_services_own_writes_keep_their_timeout(solr_url: str) -> None:
    """Only a command waits longer on a slow write: the service's client (a conversation kept
    after its answer, no deadline over it) gives up after solr.timeout.read each try."""
    log = ProxyLog(update_seconds=1.5)
    with serve_in_thread(create_solr_proxy(solr_url, log), health_path="/proxy-health") as base:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, f"{base}/solr", read_timeout=1, write_retries=1)
            with pytest.raises(UpstreamTimeout):
                await solr.add("FileShare", [{"id": f"{SOURCE}/never.txt"}])
    httpx.post(  # the proxy sent the writes on once held: taken out again
        f"{solr_url}/FileShare/update",
        params={"commit": "true"},
        json={"delete": {"id": f"{SOURCE}/never.txt"}},
        timeout=60,
    )
    assert log.updates == 2  # each try timed out at 1 s


def test_a_solr_that_is_down_ends_a_command_with_one_line(
    folder: Path,
    tmp_path: Path,
    model_server_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = config(tmp_path, f"http://127.0.0.1:{free_port()}/solr", model_server_url)
    assert cli(["ingest", str(folder), "--source", SOURCE, "--config", str(path)]) == 1
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("solr-rag ingest: Solr is unreachable")
    assert "run the same command again" in last
    assert cli(["sync", "--config", str(path), "--checkpoint", str(tmp_path / "cp")]) == 1
    err += capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("solr-rag sync: Solr is unreachable")
    assert "Traceback" not in err


def test_a_folder_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert cli(["samples", str(blocker / "samples")]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [err.strip()]  # one line
    assert err.startswith("solr-rag: ") and "a-file" in err

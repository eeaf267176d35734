"""The local Solr and our configsets: analysis chains, collections, restart with data kept, the
version a data folder was written by, VectorMain made of its quantized variant."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from testing.processes import alive, wait_until
from testing.solr import LocalSolr, SolrStartError, free_ports, solr_version

SCRIPT = Path(__file__).resolve().parents[2] / "solr" / "local" / "solr.sh"


def analyzed(solr_url: str, field_type: str, text: str) -> list[str]:
    body = httpx.get(
        f"{solr_url}/FileShare/analysis/field",
        params={"analysis.fieldtype": field_type, "analysis.fieldvalue": text, "wt": "json"},
    ).json()
    stages = body["analysis"]["field_types"][field_type]["index"]
    return [token["text"] for token in stages[-1]]


def test_english_chain_stems_folds_and_drops_stop_words(solr_url: str) -> None:
    assert analyzed(solr_url, "text_en", "The Runners' cafés are running") == [
        "runner",
        "cafe",
        "run",
    ]


def test_general_chain_folds_accents_without_stemming(solr_url: str) -> None:
    assert analyzed(solr_url, "text_general", "L'été Défilés") == ["l'ete", "defiles"]


def test_both_collections_exist_with_their_fields(solr_url: str) -> None:
    for collection, field in (("FileShare", "allowed_groups"), ("VectorMain", "vector_384")):
        fields = httpx.get(f"{solr_url}/{collection}/schema/fields").json()["fields"]
        assert field in {f["name"] for f in fields}, collection
    vector = httpx.get(f"{solr_url}/VectorMain/schema/fieldtypes/knn_vector_384").json()
    assert int(vector["fieldType"]["vectorDimension"]) == 384
    assert vector["fieldType"]["similarityFunction"] == "cosine"


@pytest.mark.usefixtures("solr_jars")  # needs no shared Solr: testing.suite runs it apart
def test_restart_keeps_the_index_and_what_vectormain_was_made_of(tmp_path: Path) -> None:
    """Started again on its folder, Solr has the documents it had; VectorMain, made of the
    VectorMainQuantized configset when asked (--vectors quantized; no collection of that name),
    stays so when nothing is asked, and asking for float vectors then is refused, with why."""
    solr = LocalSolr(free_ports(1), tmp_path, vectors="quantized")
    try:
        assert "VectorMain (VectorMainQuantized)" in solr.start()
        httpx.post(
            f"{solr.url}/FileShare/update?commit=true",
            json=[{"id": "kept", "title": "Kept", "content": "survives a restart"}],
        ).raise_for_status()
        axes = [[1.0 if i == axis else 0.0 for i in range(384)] for axis in range(3)]
        httpx.post(
            f"{solr.url}/VectorMain/update?commit=true",
            json=[
                {"id": f"axis_{n}", "parent_id": "axes", "vector_384": v}
                for n, v in enumerate(axes)
            ],
        ).raise_for_status()
        solr.stop()
        assert solr.status() == "stopped"
        again = LocalSolr(solr.port, tmp_path)  # nothing asked of VectorMain
        assert "VectorMain (VectorMainQuantized)" in again.start()
        found = httpx.get(f"{solr.url}/FileShare/select", params={"q": "survives"}).json()
        assert [doc["id"] for doc in found["response"]["docs"]] == ["kept"]
        # killed (a crash, the OOM killer): ZooKeeper's snapshot still holds the dead node's
        # live node, whose session has not expired; started again, it is not refused for it
        killed = int((tmp_path / "solr.pid").read_text())
        os.kill(killed, signal.SIGKILL)
        # a crash is over when it is restarted (a kill is not at once on a loaded box)
        assert wait_until(lambda: not alive(killed), 120), f"pid {killed} runs after SIGKILL"
        LocalSolr(solr.port, tmp_path).start()
        found = httpx.get(f"{solr.url}/FileShare/select", params={"q": "survives"}).json()
        assert [doc["id"] for doc in found["response"]["docs"]] == ["kept"]
        # the quantized segment read back by Lucene's own codec: the nearest is still found
        near = [0.1, 0.9, 0.2] + [0.0] * 381
        knn = {"q": f"{{!knn f=vector_384 topK=1}}{near}", "defType": "lucene", "fl": "id"}
        found = httpx.get(f"{solr.url}/VectorMain/select", params=knn).json()
        assert [doc["id"] for doc in found["response"]["docs"]] == ["axis_1"]
        state = httpx.get(
            f"{solr.url}/admin/collections", params={"action": "CLUSTERSTATUS", "wt": "json"}
        ).json()["cluster"]["collections"]
        assert state["VectorMain"]["configName"] == "VectorMainQuantized"
        assert "VectorMainQuantized" not in state
        vector = httpx.get(f"{solr.url}/VectorMain/schema/fieldtypes/knn_vector_384").json()
        assert vector["fieldType"]["class"] == "org.solrrag.vectors.ScalarQuantizedDenseVectorField"
        solr.stop()
        with pytest.raises(SolrStartError) as refused:
            LocalSolr(solr.port, tmp_path, vectors="float").start()
        assert (
            "solr.sh: java.lang.IllegalStateException: collection VectorMain exists with configset"
            " VectorMainQuantized, not VectorMain: a configset is chosen when its collection is"
            " made" in str(refused.value)
        )
    finally:
        solr.stop()


@pytest.mark.parametrize(
    ("nodes", "shards", "replicas", "message"),
    [
        (1, 0, 1, "take 1 to 99"),
        (100, 1, 1, "take 1 to 99"),
        (2, 1, 3, "needs at least as many nodes"),
    ],
)
@pytest.mark.usefixtures("solr_url")  # the jars are fetched by then
def test_an_impossible_cluster_shape_is_refused_with_a_reason(
    tmp_path: Path, nodes: int, shards: int, replicas: int, message: str
) -> None:
    solr = LocalSolr(free_ports(1), tmp_path, nodes)
    try:
        with pytest.raises(SolrStartError, match=message):
            solr.start(shards=shards, replicas=replicas)
    finally:
        solr.stop()


@pytest.mark.usefixtures("solr_url")  # the jars are fetched by then
def test_a_solr_running_on_another_port_is_not_taken_for_the_one_asked(tmp_path: Path) -> None:
    """`solr-rag solr start --port 8983` said "already running at :8983" when the folder's Solr
    ran on 8990: then nothing answered on 8983. Now it says which port it runs on."""
    import os
    import subprocess

    (tmp_path / "solr.pid").write_text(str(os.getpid()))  # a live process holds the folder
    (tmp_path / "solr.port").write_text("8990")
    script = Path(__file__).resolve().parents[2] / "solr" / "local" / "solr.sh"
    asked = subprocess.run(
        ["bash", str(script), "start", "--port", "8983", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert asked.returncode == 1, asked.stdout + asked.stderr
    assert "already runs on port 8990" in asked.stderr and "already running" not in asked.stdout


@pytest.mark.usefixtures("solr_url")  # the jars are fetched by then
def test_a_folder_a_newer_solr_wrote_is_refused_to_an_older_one(tmp_path: Path) -> None:
    """Lucene cannot read an index a newer Lucene wrote (9.10's 9.12 segments on 9.8's 9.11):
    solr.sh says so before Solr fails on it, and names both versions."""
    import subprocess

    (tmp_path / "solr.version").write_text("99.0.0\n")
    asked = subprocess.run(
        ["bash", str(SCRIPT), "start", "--port", str(free_ports(1)), "--dir", str(tmp_path),
         "--version", solr_version()],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert asked.returncode == 1, asked.stdout + asked.stderr
    assert f"written by Solr 99.0.0; Solr {solr_version()} cannot read its index" in asked.stderr
    bad = subprocess.run(
        ["bash", str(SCRIPT), "start", "--version", "9.10", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "a full Solr version such as 9.8.1" in bad.stderr

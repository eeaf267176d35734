"""A local Solr for tests and benchmarks, through solr/local/solr.sh: one node or a cluster.

Its version is SOLR_VERSION's (9.8.1 unless set; 9.10.1 is tested too), so that a whole test run
is pointed at another Solr: `SOLR_VERSION=9.10.1 pytest -m solr_versions` (README, "Development").
Node K of a cluster is a process of its own on port + K - 1, so a test can kill it (SIGKILL, as
a crashed machine) and start it again, while the other nodes and ZooKeeper (node 1) go on.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from testing.servers import free_ports

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "solr" / "local" / "solr.sh"
DEFAULT_VERSION = "9.8.1"  # solr.sh's and solr/local/pom.xml's default: what users asked for


def solr_version() -> str:
    """The Solr version to start: SOLR_VERSION, else the default (9.8.1)."""
    return os.environ.get("SOLR_VERSION", "").strip() or DEFAULT_VERSION


class SolrStartError(RuntimeError):
    """solr.sh could not start Solr; the message carries its output."""


@dataclass(frozen=True)
class LocalSolr:
    port: int
    folder: Path
    nodes: int = 1
    text_to_vector: str = ""  # the embeddings API VectorMain's plugin calls; "": plugin off
    security: Path | None = None  # Solr's security.json (solr.sh --security)
    tls: Path | None = None  # https: solr.sh --tls's folder (testing.secured_solr)
    java_opts: str = ""  # SOLR_JAVA_OPTS (ZooKeeper ACLs' system properties); "": solr.sh's
    version: str = field(default_factory=solr_version)  # solr.sh --version
    vectors: str = ""  # solr.sh --vectors: "quantized" (VectorMainQuantized), "float"; "": as is

    @property
    def url(self) -> str:
        """Node 1's base URL: the one-node deployment's solr.url."""
        return self.node_url(1)

    @property
    def urls(self) -> list[str]:
        return [self.node_url(k) for k in range(1, self.nodes + 1)]

    @property
    def zk_host(self) -> str:
        """The embedded ZooKeeper's address (node 1 runs it), as solr.sh read it."""
        lines = (self.folder / "solr.out").read_text().splitlines()
        return [line.split()[2] for line in lines if line.startswith("ZK READY ")][-1]

    def node_url(self, k: int) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port + k - 1}/solr"

    def start(self, *, shards: int = 1, replicas: int = 1) -> str:
        """Starts every node (data in the folder is kept); returns solr.sh's output."""
        embeds: tuple[str, ...] = ()
        if self.text_to_vector:
            embeds += ("--text-to-vector", self.text_to_vector)
        if self.security:
            embeds += ("--security", str(self.security))
        if self.tls:
            embeds += ("--tls", str(self.tls))
        if self.vectors:
            embeds += ("--vectors", self.vectors)
        return self._run(
            "start",
            "--nodes",
            str(self.nodes),
            "--shards",
            str(shards),
            "--replicas",
            str(replicas),
            *embeds,
        )

    def stop(self) -> None:
        self._run("stop", check=False)

    def status(self) -> str:
        return self._run("status", check=False).strip()

    def kill_node(self, k: int) -> None:
        """Node K dies at once, without leaving the cluster (SIGKILL); K >= 2."""
        pid = int((self.folder / f"node{k}.pid").read_text())
        os.kill(pid, signal.SIGKILL)

    def start_node(self, k: int) -> None:
        self._run("start-node", str(k))

    def _run(self, *command: str, check: bool = True) -> str:
        where = ("--port", str(self.port), "--dir", str(self.folder), "--version", self.version)
        done = subprocess.run(
            ["bash", str(SCRIPT), *command, *where],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "SOLR_JAVA_OPTS": self.java_opts} if self.java_opts else None,
        )
        if check and done.returncode != 0:
            raise SolrStartError(
                f"solr.sh {' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout


@contextmanager
def local_solr(
    folder: Path,
    *,
    nodes: int = 1,
    shards: int = 1,
    replicas: int = 1,
    text_to_vector: str = "",
    security: Path | None = None,
    tls: Path | None = None,
    java_opts: str = "",
    version: str = "",
    vectors: str = "",
) -> Iterator[LocalSolr]:
    """Solr started in `folder` on free ports, stopped (all its nodes) on exit;
    `text_to_vector`: VectorMain embeds through that embeddings API (solr.sh --text-to-vector);
    `security`, `tls`, `java_opts`: a secured Solr (testing.secured_solr makes them);
    `version`: which Solr ("": SOLR_VERSION's, else 9.8.1); `vectors`: "quantized" makes
    VectorMain of the VectorMainQuantized configset."""
    solr = LocalSolr(
        free_ports(nodes),
        folder,
        nodes,
        text_to_vector,
        security,
        tls,
        java_opts,
        version or solr_version(),
        vectors,
    )
    try:
        solr.start(shards=shards, replicas=replicas)
        yield solr
    finally:
        solr.stop()


def create_collection(
    solr_url: str,
    name: str,
    configset: str,
    *,
    properties: Mapping[str, str] | None = None,
    **params: str | int,
) -> None:
    """A collection of one of our configsets (uploaded at Solr's start), one shard and one
    replica unless `params` say otherwise; `properties` become its cores' properties
    (`text.to.vector.enabled`...). SolrStartError with Solr's answer if it is refused."""
    response = httpx.get(
        f"{solr_url}/admin/collections",
        params={
            "action": "CREATE",
            "name": name,
            "collection.configName": configset,
            "numShards": 1,
            "replicationFactor": 1,
            "wt": "json",
            **params,
            **{f"property.{key}": value for key, value in (properties or {}).items()},
        },
        timeout=120,
    )
    if response.status_code != 200:
        raise SolrStartError(f"collection {name} not created: {response.text[:2000]}")


def delete_collection(solr_url: str, name: str) -> None:
    """The collection gone, if it was there."""
    httpx.get(
        f"{solr_url}/admin/collections", params={"action": "DELETE", "name": name}, timeout=120
    )


def upload_configset(solr_url: str, name: str, folder: Path) -> None:
    """A new configset made of `folder`'s conf/ files (a schema someone else wrote), uploaded
    through Solr's Configsets API as one zip. Over a configset a collection uses, the zip
    leaves its files as they were: replace_configset replaces them."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted((folder / "conf").rglob("*")):
            if path.is_file():
                zipped.write(path, path.relative_to(folder / "conf").as_posix())
    response = httpx.post(
        f"{solr_url}/admin/configs",
        params={"action": "UPLOAD", "name": name, "overwrite": "true", "cleanup": "true"},
        content=archive.getvalue(),
        headers={"Content-Type": "application/octet-stream"},
        timeout=60,
    )
    if response.status_code != 200:
        raise SolrStartError(f"configset {name} not uploaded: {response.text[:2000]}")


def replace_configset(solr_url: str, name: str, folder: Path) -> None:
    """The files of configset `name` replaced by `folder`'s conf/ files, one by one, as the
    local launcher's upload and compose's `solr zk upconfig` do (then RELOAD its collections)."""
    for path in sorted((folder / "conf").rglob("*")):
        if path.is_file():
            where = path.relative_to(folder / "conf").as_posix()
            params = {"action": "UPLOAD", "name": name, "filePath": where, "overwrite": "true"}
            response = httpx.post(
                f"{solr_url}/admin/configs",
                params=params,
                content=path.read_bytes(),
                headers={"Content-Type": "application/octet-stream"},
                timeout=60,
            )
            if response.status_code != 200:
                raise SolrStartError(f"configset {name}: {where} not replaced: {response.text}")

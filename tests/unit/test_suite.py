"""testing/suite.py: the tests run apart exist, and the main run leaves each of them out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testing.servers import PORTS_ENV, ZOOKEEPER_OFFSET, free_ports, port_slice
from testing.suite import (
    APART,
    EXISTING_SOLR_ENV,
    LLAMA_HEAVY,
    OWN_SERVERS,
    apart_environment,
    main_arguments,
)

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_run_apart_exists() -> None:
    # the compose stack's llama.cpp is down before the llama.cpp-heavy files start
    assert APART.index(OWN_SERVERS[0]) < min(APART.index(entry) for entry in LLAMA_HEAVY)
    for entry in APART:
        path, _, name = entry.partition("::")
        assert (ROOT / path).exists(), entry
        if name:
            tree = ast.parse((ROOT / path).read_text())
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            assert name in defined, entry


def test_the_main_run_leaves_out_what_runs_apart_and_keeps_its_options() -> None:
    arguments = main_arguments(["-x", "-n", "2"])
    assert arguments[:4] == ["-q", "-x", "-n", "2"]
    assert "--ignore=tests/cluster" in arguments
    assert "--ignore=tests/service/test_compose_stack.py" in arguments
    restart = "tests/service/test_solr_local.py::test_restart_keeps_the_index_and_what_vectormain_"
    assert f"--deselect={restart}was_made_of" in arguments
    assert len(arguments) == 4 + len(APART)


def test_the_runs_side_by_side_hand_out_ports_from_slices_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this run's own, if any
    slices = []
    for share in ("0/3", "1/3", "2/3"):
        monkeypatch.setenv(PORTS_ENV, share)
        first, last = port_slice()
        slices.append(range(first, last + 1))
        for count in (1, 3):  # a Solr node, a three-node cluster: each ZooKeeper port too
            port = free_ports(count)
            assert all(p in slices[-1] and p + ZOOKEEPER_OFFSET in slices[-1]
                       for p in range(port, port + count)), (share, port)  # fmt: skip
    assert not set(slices[0]) & set(slices[1]) and not set(slices[1]) & set(slices[2])
    monkeypatch.delenv(PORTS_ENV)
    assert port_slice() == (slices[0][0], port_slice()[1]) and port_slice()[1] >= slices[2][-1]
    # an xdist worker takes its share of its process's slice
    monkeypatch.setenv(PORTS_ENV, "1/3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    worker = port_slice()
    assert worker[0] > slices[1][0] and worker[1] <= slices[1][-1]
    monkeypatch.setenv(PORTS_ENV, "0/9")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "9")
    with pytest.raises(RuntimeError, match="too few"):
        free_ports(3)
    for wrong in ("3/3", "1", "a/b", "-1/2"):
        monkeypatch.setenv(PORTS_ENV, wrong)
        with pytest.raises(RuntimeError, match="write K/N"):
            port_slice()


def test_each_run_is_given_its_slice_and_its_own_solr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXISTING_SOLR_ENV, "http://127.0.0.1:8983/solr")
    environment = apart_environment()
    # the run apart starts a Solr of its own: both runs would fill the developer's collections
    assert environment[PORTS_ENV] == "1/3" and EXISTING_SOLR_ENV not in environment
    assert 'PORTS_ENV: "0/3"' in (ROOT / "testing" / "suite.py").read_text()
    assert "SOLR_RAG_TEST_PORTS=2/3 " in (ROOT / "Makefile").read_text()

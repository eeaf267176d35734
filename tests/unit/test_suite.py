"""testing/suite.py: the tests run apart exist, and the main run leaves each of them out."""

from __future__ import annotations

import ast
from pathlib import Path

from testing.suite import APART, LLAMA_LAST, main_arguments

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_run_apart_or_last_exists() -> None:
    for entry in (*APART, *LLAMA_LAST):
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

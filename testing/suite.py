"""The whole suite as `make test` runs it: two pytest processes side by side.

Measured on a quiet 2-core box (2026-12-07, one process, `vmstat` every 10 s): the two cores
were 44% idle on average over the run's 29 minutes. Much of the suite waits: on a container's
health, on a Solr node's start or its ZooKeeper session, on an answer held a minute. The tests
that bring their own servers (the compose stack, the three-node cluster, a Solr restarted on
its own folder), then the files that keep llama.cpp busy (APART), run in a second pytest
process beside the rest, so that one's waits are the other's work. Nothing is left out: each
test runs once, in one of the two. Each hands out ports from its own third of the range
(testing.servers.PORTS_ENV; the last third is `make test-solr-versions`', which CI runs
beside): a port one run holds free for a server about to start, or as a dead address, is
never the other's.

    python -m testing.suite [pytest options for the main run, e.g. -x, -n 2]

The second run's output is kept in test-artifacts/suite-apart.log and printed after the main
run's. The exit status is the main run's when it failed, else the second's. SIGTERM (a CI
timeout) is passed to both runs, which then stop their servers (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from testing.servers import PORTS_ENV

ROOT = Path(__file__).resolve().parents[1]
# the run apart, in this order: the tests that start servers of their own and use none of the
# run's (no shared Solr, LLM stand-in or answerer; the slowest waits of the suite), then the
# files that keep llama.cpp busy. Those run after the compose stack, which runs its own
# llama.cpp: two of them on two cores spin on each other's threads (measured: a run beside
# them at a fifth of its pace). The run apart starts its own shared Solr for them.
OWN_SERVERS = (
    "tests/service/test_compose_stack.py",
    "tests/cluster",
    "tests/service/test_solr_local.py::test_restart_keeps_the_index_and_what_vectormain_was_made_of",
)
LLAMA_HEAVY = (
    "tests/service/test_answerer.py",
    "tests/service/test_llama_cpp.py",
    "tests/service/test_grounding_llm.py",
    "tests/service/test_first_minutes.py",
    "tests/service/test_deployment.py",
    "tests/service/test_trust.py",
)
APART = (*OWN_SERVERS, *LLAMA_HEAVY)
LOG = ROOT / "test-artifacts" / "suite-apart.log"
# a Solr of the developer's own (tests/conftest.py): the main run's alone, the run apart starts
# its own (both would fill its collections)
EXISTING_SOLR_ENV = "SOLR_RAG_TEST_SOLR_URL"
NO_TESTS = 5  # pytest's exit status when nothing was selected


def main_arguments(extra: list[str]) -> list[str]:
    """The main run's pytest arguments: everything but APART."""
    left_out = [f"--deselect={entry}" if "::" in entry else f"--ignore={entry}" for entry in APART]
    return ["-q", *extra, *left_out]


def apart_environment() -> dict[str, str]:
    environment = {**os.environ, PORTS_ENV: "1/3"}
    environment.pop(EXISTING_SOLR_ENV, None)
    return environment


def run(extra: list[str]) -> int:
    LOG.parent.mkdir(exist_ok=True)
    pytest = [sys.executable, "-m", "pytest"]
    children: list[subprocess.Popen[bytes]] = []
    stopping: list[int] = []

    def stop(signum: int, frame: object) -> None:
        """SIGTERM passed on once to each run (a second one would cut its teardown short)."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def started(child: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        children.append(child)
        if stopping:  # SIGTERM came while it was starting
            child.send_signal(signal.SIGTERM)
        return child

    signal.signal(signal.SIGTERM, stop)  # before the runs start: none is left behind
    with LOG.open("w") as log:
        # each run keeps its own pytest cache: the last to end would write its failures over
        # the other's (`pytest --lf` would miss them)
        apart = started(subprocess.Popen(
            [*pytest, "-q", "-o", "cache_dir=.pytest_cache/apart", *APART],
            cwd=ROOT, stdout=log, stderr=log, env=apart_environment(),
        ))  # fmt: skip
        print(f"testing.suite: {', '.join(APART)} run apart (pid {apart.pid}), output in {LOG}")
        sys.stdout.flush()
        main = started(
            subprocess.Popen(
                [*pytest, *main_arguments(extra)],
                cwd=ROOT,
                env={**os.environ, PORTS_ENV: "0/3"},
            )
        )
        try:
            main_status = main.wait()
            ended = time.monotonic()
            if apart.poll() is None:
                print("testing.suite: the main run ended; waiting for the run apart", flush=True)
            apart_status = apart.wait()
        except KeyboardInterrupt:  # Ctrl-C reached both runs too (one process group)
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one: their teardown goes on
            main_status = main.wait()
            apart_status = apart.wait()
            ended = time.monotonic()
    waited = time.monotonic() - ended
    print(f"\n---- the run apart ({', '.join(APART)}): waited {waited:.0f} s after the main run")
    print(LOG.read_text(errors="replace"), end="", flush=True)
    if main_status != 0:
        return main_status
    return 0 if apart_status == NO_TESTS else apart_status


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()

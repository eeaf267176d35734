"""Child processes that never outlive what started them.

A server we start (the local model server, a test's llama.cpp or LLM server) runs in a process
group of its own, so stopping it stops whatever it started in turn (llama.cpp's launcher is a
Python script that runs the real binary as its child); and on Linux it is told to end when its
parent dies, even by SIGKILL or by a re-raised SIGTERM that skips every `finally`.

    >>> process = start_group(["python", "-m", "service.models", "--port", "8001"])
    >>> stop_group(process)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

_PR_SET_PDEATHSIG = 1
REPO_ROOT = Path(__file__).resolve().parent.parent


def _own_group_ending_with_parent() -> None:  # runs in the child, between fork and exec
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_group(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(command, **options)`, leader of a new process group that is sent
    SIGTERM when this process dies."""
    return subprocess.Popen(command, preexec_fn=_own_group_ending_with_parent, **options)


def stop_group(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM to the process's whole group; SIGKILL to what is left after `timeout`."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sent)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; its children may linger a moment: the group goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return


def start_server(
    command: list[str],
    health_url: str,
    *,
    what: str,
    seconds: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A server process (a process group of its own, ending with this process: stop it with
    `stop_group`), returned once `health_url` answers 200; SystemExit naming `what` if it
    exits or does not answer within `seconds`."""
    process = start_group(command, cwd=REPO_ROOT, env=env)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(health_url, timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    stop_group(process)
    raise SystemExit(f"{what} did not start ({' '.join(command)})")

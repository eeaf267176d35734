"""Watching a test's processes: whether one still runs, and waiting for a condition."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` still runs: a zombie has ended (only its exit status waits to be read)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):  # gone, or gone between the two looks
        return False
    return state != "Z"


def wait_until(condition: Callable[[], bool], seconds: float = 20) -> bool:
    """Whether `condition` came true within `seconds` (asked every 0.1 s, and once at the end)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()

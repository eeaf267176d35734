"""Fails, naming them, when processes that point into the checkout (or into a test's temporary
folder) are still alive: what a test run started must end with it.

    python3 .ci/leftovers.py CHECKOUT [SECONDS]   (waits up to SECONDS, 15 by default)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 1:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def leftovers(markers: list[str]) -> list[str]:
    mine = ancestors()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if command and any(marker in command for marker in markers):
            found.append(f"  pid {entry.name}: {command.strip()[:300]}")
    return found


def main() -> int:
    checkout = str(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
    markers = [checkout, "/pytest-of-"]
    deadline = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 15)
    while (found := leftovers(markers)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if found:
        print("processes left behind by the test run:", *found, sep="\n", file=sys.stderr)
        return 1
    print("no process left behind by the test run")
    return 0


if __name__ == "__main__":
    sys.exit(main())

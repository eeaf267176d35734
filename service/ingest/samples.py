"""The demo corpus: the Python language reference topics shipped with CPython.

`pydoc_data.topics` is part of the standard library (the text `help("assert")` shows), so
the corpus is real, written by others, and needs no download.
"""

from __future__ import annotations

import re
from pathlib import Path
from pydoc_data.topics import topics

_UNDERLINE = re.compile(r"^[*=\-~^]{3,}\s*$")


def export_samples(folder: Path) -> int:
    """Write one `<topic>.txt` per topic (title on the first line); returns the count."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in sorted(topics.items()):
        lines = text.strip("\n").splitlines()
        if len(lines) > 1 and _UNDERLINE.match(lines[1]):
            lines = [lines[0], *lines[2:]]
        (folder / f"{name}.txt").write_text("\n".join(lines).strip() + "\n", encoding="utf-8")
    return len(topics)

"""Jobs for the extraction worker's tests: importable by name, as a worker process needs."""

from __future__ import annotations

import time


def echo(name: str, text: str) -> str:
    return text


def busy(name: str, seconds: float) -> str:
    time.sleep(seconds)
    return name


def hog(name: str, size: int) -> int:
    return len(bytearray(size))

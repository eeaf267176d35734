"""An upstream's JSON (service.llm.client.parsed): what orjson refuses and json reads too
(NaN, another encoding) is read; what neither reads (too deep, a number of thousands of digits,
bytes that are no text) is invalid JSON, the upstream's fault (a 502), never a 500."""

from __future__ import annotations

import json

import httpx
import pytest

from service.llm.client import _error_message, parsed


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (b'{"a": NaN}', "nan"),
        ('{"a": 1}'.encode("utf-16"), 1),
        (b'{"a": 1e999}', float("inf")),
    ],
)
def test_what_json_reads_is_read(body: bytes, value: object) -> None:
    assert str(parsed(body)["a"]) == str(value)


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 5000 + b"]" * 5000,
        b'{"a": ' + b"1" * 5000 + b"}",
        b'{"a": "\xff"}',
        "[" * 5000 + "]" * 5000,
    ],
    ids=["deep", "long number", "not UTF-8", "deep text"],
)
def test_what_neither_reads_is_invalid_json(body: bytes | str) -> None:
    with pytest.raises(json.JSONDecodeError):
        parsed(body)


def test_an_error_too_deep_to_read_is_said_by_its_status() -> None:
    response = httpx.Response(500, content=b"[" * 5000 + b"]" * 5000)
    assert _error_message(response) == "Internal Server Error"

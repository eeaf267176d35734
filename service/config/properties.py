"""Reading Java `.properties` text, the format of Datafari's rag.properties.

Follows java.util.Properties.load: `#`/`!` comments, `key=value`, `key: value` or `key value`,
backslash line continuations and escapes (`\\t`, `\\n`, `\\uXXXX`...). Later keys win.
"""

from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE_ESCAPE = re.compile(r"u([0-9a-fA-F]{4})")


def parse_properties(text: str) -> dict[str, str]:
    """Keys and values in file order, with escapes resolved."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        result[_unescape(key)] = _unescape(value)
    return result


def _logical_lines(text: str) -> list[str]:
    """Join continued lines and drop blanks and comments."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":") and (i == len(line) or line[i] in " \t\f=:"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        following = text[i + 1]
        unicode_escape = _UNICODE_ESCAPE.match(text, i + 1)
        if unicode_escape:
            out.append(chr(int(unicode_escape.group(1), 16)))
            i = unicode_escape.end()
            continue
        out.append(_ESCAPES.get(following, following))
        i += 2
    return "".join(out)

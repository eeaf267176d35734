"""Reading and editing Java `.properties` text, the format of Datafari's rag.properties.

Reading follows java.util.Properties.load: lines end at `\\n`, `\\r` or `\\r\\n` (Java's
terminators, not Python's splitlines, which also breaks at U+2028, `\\v`, `\\x1c`...), `#`/`!`
comments, `key=value`, `key: value` or `key value`, backslash line continuations and escapes
(`\\t`, `\\n`, `\\uXXXX`...). Later keys win. Editing (`with_values`) rewrites only the lines of
the keys it changes, so comments, blank lines, key order and keys the service does not know
are kept as the admin wrote them; a value is written with every control character, line or
paragraph separator and surrogate escaped, so that whatever reader opens the file (ours, Java's,
an editor's) sees one line and reads the value back unchanged: no value can add a key.
"""

from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE_ESCAPE = re.compile(r"u([0-9a-fA-F]{4})")
_LINE_END = re.compile(r"\r\n|\r|\n")
# what any reader may take for a line break, or cannot encode: written as \uXXXX
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


def _lines(text: str) -> list[str]:
    lines = _LINE_END.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


def parse_properties(text: str) -> dict[str, str]:
    """Keys and values in file order, with escapes resolved."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        result[_unescape(key)] = _unescape(value)
    return result


def with_values(text: str, values: dict[str, str | None]) -> str:
    """`text` with each key of `values` set: its first definition rewritten in place (where
    its comment is), later duplicates dropped, keys not yet in the file appended at the end;
    a None value removes the key (its default then applies)."""
    lines = _lines(text)
    spans = _key_spans(lines)
    drop: set[int] = set()
    replace: dict[int, str] = {}
    for key, value in values.items():
        found = spans.get(key, [])
        if not found:
            continue
        (first, last), *later = found
        if value is None:
            drop.update(range(first, last + 1))
        else:
            replace[first] = f"{escape_key(key)}={escape_value(value)}"
            drop.update(range(first + 1, last + 1))
        for start, end in later:
            drop.update(range(start, end + 1))
    edited = [replace.get(i, line) for i, line in enumerate(lines) if i not in drop or i in replace]
    added = [key for key, value in values.items() if key not in spans and value is not None]
    if added:
        if edited and edited[-1].strip():
            edited.append("")
        edited += [f"{escape_key(key)}={escape_value(values[key] or '')}" for key in added]
    return "\n".join(edited) + "\n"


def _escape_unsafe(text: str) -> str:
    return _UNSAFE.sub(
        lambda match: _SHORT_ESCAPES.get(match.group(), f"\\u{ord(match.group()):04x}"), text
    )


def escape_key(key: str) -> str:
    return _escape_unsafe("".join("\\" + c if c in "=: \t\f#!\\" else c for c in key))


def escape_value(value: str) -> str:
    """So that parse_properties gives `value` back, on one line (see the module's docstring)."""
    out = _escape_unsafe(value.replace("\\", "\\\\"))
    return "\\" + out if out.startswith(" ") else out


def _key_spans(lines: list[str]) -> dict[str, list[tuple[int, int]]]:
    """key -> the (first line, last line) of each of its definitions, in file order."""
    spans: dict[str, list[tuple[int, int]]] = {}
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        if not line or line[0] in "#!":
            i += 1
            continue
        start, logical = i, ""
        while True:
            part = lines[i].lstrip() if i > start else line
            trailing = len(part) - len(part.rstrip("\\"))
            if trailing % 2 == 1 and i + 1 < len(lines):
                logical += part[:-1]
                i += 1
                continue
            logical += part
            break
        key, _ = _split_key_value(logical)
        spans.setdefault(_unescape(key), []).append((start, i))
        i += 1
    return spans


def _logical_lines(text: str) -> list[str]:
    """Join continued lines and drop blanks and comments."""
    lines: list[str] = []
    pending = ""
    for raw in _lines(text):
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

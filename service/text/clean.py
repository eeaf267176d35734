"""cleanContext: document text made safe to place inside a prompt (Datafari's rules)."""

from __future__ import annotations

# Order matters: backslashes go first so the `\n` written next is not touched again.
_REPLACEMENTS = (
    ("\\", "/"),
    ("\n", "\\n"),
    ("\r", " "),
    ("\t", " "),
    ("\b", ""),
    ("'''", ""),
    ("######", ""),  # the prompts' own separator: no document may forge it
    ('"', "`"),
)


def clean_context(text: str) -> str:
    for old, new in _REPLACEMENTS:
        text = text.replace(old, new)
    return text

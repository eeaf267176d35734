"""A text folded for comparing words in any language: accents off, lower case."""

from __future__ import annotations

import unicodedata


def folded(text: str) -> str:
    """`text` without its accents (each letter's combining marks, after NFKD), in lower
    case: "Réglementé" -> "reglemente", "№" -> "no"."""
    if text.isascii():  # NFKD leaves ASCII as it is, and it holds no combining mark
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()

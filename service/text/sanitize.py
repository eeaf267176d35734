"""sanitizeInput: the user's query made safe for Solr's edismax parser and for the prompt."""

from __future__ import annotations

import re
import unicodedata

MAX_QUERY_LENGTH = 500

# Datafari's list: Lucene/Solr syntax that would change the parse, removed rather than escaped.
# `{` and `}` going means no local params (`{!...}`) can ever reach Solr.
_SOLR_SPECIALS = re.compile(r"\+|&&|\|\||[{}\[\]^~*\\<>=#]")
_WHITESPACE = re.compile(r"\s+")


def sanitize_query(query: str | None) -> str:
    """Fold accents, blank out control characters and Solr syntax, collapse spaces, cut at 500.

    Like Datafari's sanitizeInput, except that text is recomposed (NFC) after the accents go,
    so scripts that NFD splits without accents (Korean Hangul) come back whole.
    """
    if not query:
        return ""
    decomposed = unicodedata.normalize("NFD", query)
    text = "".join(
        " " if unicodedata.category(char) == "Cc" else char
        for char in decomposed
        if unicodedata.category(char) != "Mn"
    )
    text = unicodedata.normalize("NFC", text)
    text = _SOLR_SPECIALS.sub(" ", text)
    text = _WHITESPACE.sub(" ", text)
    return text[:MAX_QUERY_LENGTH].strip()


def normalize_question(question: str | None) -> str:
    """The question as the LLM reads it: accents and punctuation kept (they carry meaning for
    the answer), control characters blanked, spaces collapsed, cut at 500 characters."""
    if not question:
        return ""
    text = "".join(" " if unicodedata.category(char) == "Cc" else char for char in question)
    return _WHITESPACE.sub(" ", text)[:MAX_QUERY_LENGTH].strip()

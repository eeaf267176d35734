"""sanitizeInput: the user's query made safe for Solr's edismax parser and for the prompt."""

from __future__ import annotations

import re
import unicodedata

MAX_QUERY_LENGTH = 500

# Datafari's list: Lucene/Solr syntax that would change the parse, removed rather than escaped.
# `{` and `}` going means no local params (`{!...}`) can ever reach Solr. Ours adds `?`, a
# wildcard to edismax: "electrified?" would match "electrifiedX" only, so a question's last
# word was never found, and a lone "?" matched any one-character term.
_SOLR_SPECIALS = re.compile(r"\+|&&|\|\||[{}\[\]^~*?\\<>=#]")
_WHITESPACE = re.compile(r"\s+")
# Java's \p{InCombiningDiacriticalMarks}, what Datafari removes: Latin, Greek and Vietnamese
# accents. Not every combining mark (category Mn): Indic viramas and vowel signs, Arabic
# harakat and Thai marks are letters' parts, and removing them makes other words.
_ACCENTS = re.compile("[\u0300-\u036f]+")


def sanitize_query(query: str | None) -> str:
    """Fold accents, blank out control characters and Solr syntax, collapse spaces, cut at 500.

    Like Datafari's sanitizeInput (NFD, then U+0300-U+036F removed), except that text is
    recomposed (NFC) after the accents go, so what NFD splits without accents (Korean Hangul,
    Devanagari nukta letters) comes back whole.
    """
    if not query:
        return ""
    folded = _ACCENTS.sub("", unicodedata.normalize("NFD", query))
    text = "".join(
        " " if unicodedata.category(char) == "Cc" else char
        for char in unicodedata.normalize("NFC", folded)
    )
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

"""An answer as claims to check: its sentences, the sources each cites, and what must match.

A sentence's content words (no stop words, crudely stemmed) are what a source must contain to
support it; its numbers and whether it negates must match the source's exactly, since a
changed figure or an added "not" keeps nearly every word and says the opposite.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

_CITATION = re.compile(r"\[(\d{1,3})\]")
# a sentence ends at . ! ? (and the citations right after), before a space and the next one
_END = re.compile(r"(?<=[.!?])((?:\s*\[\d{1,3}\])*)\s+(?=[\"'(\[]?[A-Z0-9])")
_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?])")  # where a citation was cut out
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_NUMBER = re.compile(r"^[0-9]+(?:[.,][0-9]+)*$")
_NEGATION = frozenset({"not", "no", "never", "none", "nor", "neither", "nothing", "without"})
# English function words (stopwords.txt): what a sentence shares with any text
STOP_WORDS = frozenset(
    word
    for line in (Path(__file__).parent / "stopwords.txt").read_text().splitlines()
    if not line.startswith("#")
    for word in line.split()
)
MAX_SENTENCES = 200  # an answer longer than this is checked in its first sentences only


@dataclass(frozen=True)
class Claim:
    """One sentence of the answer and the source numbers it cites ([1], [2]...)."""

    text: str
    cited: tuple[int, ...]

    @cached_property
    def words(self) -> frozenset[str]:
        return content_words(self.text)

    @property
    def checkable(self) -> bool:
        """A sentence with nothing a source could state ("Here is what I found:") is not
        counted either way."""
        return bool(self.words)


def claims_of(answer: str) -> list[Claim]:
    """The answer's sentences, each with the citations written in or right after it."""
    text = " ".join(answer.split())
    pieces, start = [], 0
    for end in _END.finditer(text):
        pieces.append(text[start : end.end(1)])
        start = end.end()
    pieces.append(text[start:])
    claims = []
    for piece in pieces[:MAX_SENTENCES]:
        cited = tuple(dict.fromkeys(int(n) for n in _CITATION.findall(piece)))
        sentence = _BEFORE_PUNCTUATION.sub(r"\1", _CITATION.sub("", piece)).strip()
        if sentence:
            claims.append(Claim(sentence, cited))
    return claims


def sentences_of(text: str) -> list[str]:
    """A source's sentences (the same cut as an answer's)."""
    return [claim.text for claim in claims_of(text)]


def tokens(text: str) -> list[str]:
    decomposed = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    return _WORD.findall(folded.replace("n't", " not").replace("\u2019t", " not"))


def content_words(text: str) -> frozenset[str]:
    return frozenset(
        _stem(token) for token in tokens(text) if token not in STOP_WORDS and token not in _NEGATION
    )


def numbers(text: str) -> frozenset[str]:
    return frozenset(token.replace(",", "") for token in tokens(text) if _NUMBER.match(token))


def negated(text: str) -> bool:
    return any(token in _NEGATION for token in tokens(text))


def _stem(word: str) -> str:
    """Enough stemming to match a paraphrase's inflections (flows/flow, measured/measure)."""
    if _NUMBER.match(word) or len(word) <= 4:
        return word
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word

"""A passage cut to its sentences nearest the question, to fit a cross-encoder's token budget.

A cross-encoder reads a (question, passage) pair up to a number of tokens; a longer passage is
cut. Cut at its end, a passage loses whatever its second half says; cut here, it keeps the
sentences that share most words with the question, in their order, then the others from its
start, as many as fit. The words are compared the same way in any language: accents off,
lower-cased, stop words (English and French) out, each cut to its first STEM characters (a
crude stem: "cairn" and "cairns", "réglementation" and "réglementaire"), and each
weighted by how rare it is among the passage's sentences (a word every sentence has does not
tell them apart). A passage's cut depends on it and the question alone.

    >>> kept = nearest_sentences("How tall is the cairn?", passages, budget=96, count=count)

`count` is the encoder's own token count of a text; a passage that fits is kept whole.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from service.text.fold import folded

STEM = 5  # characters of a word compared
# a sentence ends at . ! ? ; before a space (any case follows: abstracts are often lower-cased),
# and at a line break
# linear on long runs of white space (a "\s*\n\s*" branch was quadratic on them); pieces are
# stripped after, so the leading spaces it no longer takes change nothing
_END = re.compile(r"(?<=[.!?;])\s+|\n\s*")
_WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(
    word
    for line in (Path(__file__).parent / "stopwords.txt").read_text().splitlines()
    if not line.startswith("#")
    for word in line.split()
)


def sentences_of(passage: str) -> list[str]:
    """The passage's sentences, in order (its text cut at sentence ends and line breaks)."""
    return [piece for piece in _END.split(passage) if piece.strip()]


def words_of(text: str) -> set[str]:
    """The text's content words: accents off, lower-cased, stop words out, stemmed."""
    return {w[:STEM] for w in _WORD.findall(folded(text)) if w not in STOP_WORDS and len(w) > 1}


def nearest_sentences(
    question: str,
    passages: Sequence[str],
    budget: int,
    count: Callable[[list[str]], list[int]],
) -> list[str]:
    """Each passage whose tokens (`count`: a token count for each text given) are more than
    `budget`, cut to the sentences nearest `question` that fit in it, in their order; the
    others as they are."""
    lengths = count(list(passages))
    long = [i for i, length in enumerate(lengths) if length > budget]
    if not long:
        return list(passages)
    cut = {i: sentences_of(passages[i]) for i in long}
    wanted = words_of(question)
    tokens = count([s for i in long for s in cut[i]])
    kept = list(passages)
    at = 0
    for i in long:
        sizes = tokens[at : at + len(cut[i])]
        at += len(cut[i])
        shared = [words_of(sentence) & wanted for sentence in cut[i]]
        df = Counter(w for words in shared for w in words)
        scores = [sum(math.log(1 + len(shared) / df[w]) for w in words) for words in shared]
        # the nearest first, then (no word shared) the first ones: a passage's start says
        # what it is about
        order = sorted(range(len(cut[i])), key=lambda j: (-scores[j], j))
        chosen, left = [], budget
        for j in order:
            if sizes[j] <= left:
                chosen.append(j)
                left -= sizes[j]
        if chosen:
            kept[i] = " ".join(cut[i][j] for j in sorted(chosen))
    return kept

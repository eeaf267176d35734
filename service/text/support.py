"""Which source supports a sentence, by its words: the grounding check's rules, without a model
(service.grounding.check adds meaning; the chains restore citations by these rules alone).

A claim is supported by a source sentence (or two consecutive ones) that contains its numbers,
negates when it negates, and holds at least `min_overlap` of its content words. A cited claim
is checked against the sources it cites; an uncited one against every source sent. A source's
code is read as the prose that restates it (service.text.code).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from service.text.claims import Claim, claims_of, facts, negated, numbers, sentences_of
from service.text.code import code_readings

MIN_OVERLAP = 0.6  # grounding.min.overlap's default
MAX_EVIDENCE = 2000  # source sentences (and pairs) one answer is checked against
# clauses of one answer that are checked: the sentences of the rest count as unsupported (an
# answer too long to check is not vouched for), so a 1,000-clause answer costs no more
MAX_CLAUSES = 300
CLOSEST = 3  # source sentences per doubtful claim whose meaning is compared
# a claim of at most this many content words is a mention (a name, a figure, a short answer's
# phrase), not a statement: a negation in the sentence that holds it does not deny it
MENTION_WORDS = 2
# what a claim says to restate code that tests a condition's negation ("if not x: raise")
FALSE_WORDS = frozenset({"false", "faux", "fausse"})


@dataclass(frozen=True)
class Evidence:
    """A source sentence (or two consecutive ones), and what a claim must match in it."""

    source: int
    text: str
    words: frozenset[str]
    numbers: frozenset[str]
    negated: bool
    false: bool = False  # code stating a condition false: a claim restates it saying "false"

    @classmethod
    def of(cls, source: int, text: str) -> tuple[Evidence, ...]:
        """A source sentence's evidence: its words, or its code read as prose, each reading
        with the text as written (service.text.code: `if not x: raise E` says "x false:
        raises E")."""
        readings = code_readings(text)
        if not readings:
            return (cls(source, text, *facts(text)),)
        return tuple(cls(source, text, *facts(r.text), r.false) for r in readings)


def checkable_claims(answer: str) -> list[Claim]:
    """The answer's sentences a source could support (the others are not counted)."""
    return [claim for claim in claims_of(answer) if claim.checkable]


def within_checked(claims: Sequence[Claim], before: int = 0) -> list[Claim]:
    """The first of `claims` whose clauses are all among the answer's first MAX_CLAUSES
    (`before`: the clauses of the answer's checkable claims before them): those the grounding
    check reads; it counts the rest unsupported, so nothing else may vouch for them."""
    checked = []
    for claim in claims:
        before += len(claim.clauses)
        if before > MAX_CLAUSES:
            break
        checked.append(claim)
    return checked


def evidence_of(sources: Sequence[tuple[int, str]]) -> list[Evidence]:
    """Each source sentence, and each two consecutive ones (a sentence may join two)."""
    evidence: list[Evidence] = []
    for number, text in sources:
        evidence += _source_evidence(number, text)
        if len(evidence) >= MAX_EVIDENCE:
            return evidence[:MAX_EVIDENCE]
    return evidence


@lru_cache(maxsize=1024)
def _source_evidence(number: int, text: str) -> tuple[Evidence, ...]:
    """One source's evidence, remembered: the same passages are sent with many questions."""
    sentences = sentences_of(text)
    # on two lines: what ends the first (a denial's "no.") never reads as joined to the next
    pairs = [f"{first}\n{second}" for first, second in itertools.pairwise(sentences)]
    return tuple(e for text in [*sentences, *pairs] for e in Evidence.of(number, text))


def scored(claim: Claim, evidence: list[Evidence]) -> list[tuple[float, Evidence]]:
    """The evidence that may support the claim, each with the share of the claim's words it
    holds: cited, with its numbers and its negation; code stating a condition false
    (service.text.code), when the claim says "false". A mention (a claim of at most
    MENTION_WORDS content words: a short answer's phrase, "Thomas Sowell [1]") states nothing
    a negation could deny: a negating sentence that holds it may support it ("Thomas Sowell
    ... claims that this is due to women not taking ..."), and so may code ("It raises an
    AssertionError [1]" of `if not x: raise AssertionError`)."""
    wanted, negative = numbers(claim.text), negated(claim.text)
    mention = not negative and len(claim.words) <= MENTION_WORDS
    says_false = bool(claim.words & FALSE_WORDS)
    return [
        (overlap(claim, e), e)
        for e in _cited(claim, evidence)
        if wanted <= e.numbers
        and (mention or (e.negated == negative and (says_false or not e.false)))
    ]


def best_source(
    claim: Claim, evidence: list[Evidence], min_overlap: float = MIN_OVERLAP
) -> int | None:
    """The number of the source that supports `claim` best by its words: every clause of it
    supported (by this source or another), the source supporting most clauses, then sharing
    most of their words, then the first; None when its words leave a clause unsupported."""
    best: dict[int, tuple[int, float]] = {}  # source -> (clauses it supports, their overlaps)
    for clause in claim.clauses:
        by_source: dict[int, float] = {}
        for share, e in scored(clause, evidence):
            if share >= min_overlap:
                by_source[e.source] = max(share, by_source.get(e.source, 0.0))
        if not by_source:
            return None
        for source, share in by_source.items():
            count, total = best.get(source, (0, 0.0))
            best[source] = (count + 1, total + share)
    return min(best, key=lambda source: (-best[source][0], -best[source][1], source))


def _cited(claim: Claim, evidence: list[Evidence]) -> list[Evidence]:
    """The evidence from the sources the claim cites (all, when it cites none it was given)."""
    return [e for e in evidence if e.source in claim.cited] or evidence


def closest(claim: Claim, evidence: list[Evidence], count: int = CLOSEST) -> list[Evidence]:
    """The cited evidence sharing most of the claim's words, whatever its numbers say (for a
    judge that reads them)."""
    return sorted(_cited(claim, evidence), key=lambda e: -overlap(claim, e))[:count]


def overlap(claim: Claim, evidence: Evidence) -> float:
    """The share of the claim's content words the evidence holds."""
    words = claim.words
    return len(words & evidence.words) / len(words) if words else 0.0


def source_numbers(evidence: list[Evidence]) -> tuple[int, ...]:
    """The numbers of the sources the evidence comes from, in order."""
    return tuple(sorted({e.source for e in evidence}))

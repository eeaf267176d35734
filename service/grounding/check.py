"""Is each sentence of an answer supported by the sources it was given? Checked after the
answer, without a generative model.

A sentence is supported by a source sentence (or two consecutive ones) that contains its
numbers, negates when it negates, and either shares most of its content words (lexical
coverage >= `min_overlap`) or means nearly the same (embedding cosine >= `min_similarity`, asked
of the embeddings API only for sentences the words did not settle, against their closest
source sentences: one call per answer at most). A cited sentence is checked against the
sources it cites; an uncited one against every source sent.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from service.errors import ServiceError
from service.llm.embeddings import EmbeddingsClient
from service.llm.types import Usage
from service.text.claims import Claim, without_spans
from service.text.support import (
    CLOSEST,
    MAX_CLAUSES,
    MIN_OVERLAP,
    Evidence,
    checkable_claims,
    evidence_of,
    scored,
    source_numbers,
)

log = logging.getLogger(__name__)

# clauses that words leave open and the embeddings API then judges: in one deduplicated
# request of at most MAX_BY_MEANING * (1 + CLOSEST) texts; the rest stay unsupported
MAX_BY_MEANING = 64


@dataclass(frozen=True)
class SentenceCheck:
    text: str
    supported: bool
    sources: tuple[int, ...]  # the numbers of the sources that support it (none: unsupported)
    start: int = 0  # where it stands in the answer: answer[start:end]
    end: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "text": self.text,
            "supported": self.supported,
            "sources": list(self.sources),
            "start": self.start,
            "end": self.end,
        }


@dataclass(frozen=True)
class Grounding:
    sentences: tuple[SentenceCheck, ...]
    method: str = "words"  # how they were checked (embeddings failing: words)

    @property
    def supported(self) -> int:
        return sum(1 for sentence in self.sentences if sentence.supported)

    @property
    def total(self) -> int:
        return len(self.sentences)

    @property
    def ratio(self) -> float:
        """Supported sentences over all; 1.0 for an answer with nothing to check."""
        return self.supported / self.total if self.total else 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "supported": self.supported,
            "total": self.total,
            "method": self.method,
            "sentences": [sentence.to_json() for sentence in self.sentences],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Grounding:
        """The report `to_json` wrote (an answer cache entry's)."""
        return cls(
            tuple(
                SentenceCheck(
                    str(s["text"]),
                    bool(s["supported"]),
                    tuple(int(n) for n in s["sources"]),
                    int(s["start"]),
                    int(s["end"]),
                )
                for s in data["sentences"]
            ),
            str(data["method"]),
        )

    def unsupported_removed(self, answer: str) -> str:
        """`answer` without its unsupported sentences (their citations too)."""
        spans = [(s.start, s.end) for s in self.sentences if not s.supported]
        return without_spans(answer, spans)


class GroundingCheck:
    """The default check: words first, then meaning (embeddings) for what words leave open."""

    usages: tuple[Usage, ...] = ()  # it asks no LLM

    def __init__(
        self,
        embeddings: EmbeddingsClient | None,
        *,
        min_overlap: float = MIN_OVERLAP,
        min_similarity: float = 0.8,
    ) -> None:
        self._embeddings = embeddings
        self._min_overlap = min_overlap
        self._min_similarity = min_similarity

    async def run(self, answer: str, sources: Sequence[tuple[int, str]]) -> Grounding:
        """`sources`: (citation number, text sent to the LLM), one or more per source."""
        claims = checkable_claims(answer)
        report = await self.check(claims, evidence_of(sources))
        return with_verbatim_quotes(report, claims, sources)

    async def check(self, claims: Sequence[Claim], evidence: list[Evidence]) -> Grounding:
        """`run` on an answer already cut into claims, its sources into evidence."""
        clauses = [
            (index, clause) for index, claim in enumerate(claims) for clause in claim.clauses
        ]
        verdicts: dict[int, tuple[int, ...]] = {}  # clause -> the sources that support it
        doubtful: list[tuple[int, Claim, list[Evidence]]] = []
        hopeless: set[int] = set()  # claims with a clause nothing may support
        for position, (index, clause) in enumerate(clauses[:MAX_CLAUSES]):
            candidates = scored(clause, evidence)
            by_words = [e for overlap, e in candidates if overlap >= self._min_overlap]
            if by_words:
                verdicts[position] = source_numbers(by_words)
            elif candidates:
                closest = sorted(candidates, key=lambda pair: -pair[0])[:CLOSEST]
                doubtful.append((position, clause, [e for _, e in closest]))
            else:
                hopeless.add(index)
        doubtful = [item for item in doubtful if clauses[item[0]][0] not in hopeless]
        doubtful = doubtful[:MAX_BY_MEANING]
        method = "words" if self._embeddings is None else "embeddings"
        try:
            verdicts.update(await self._by_meaning(doubtful))
        except ServiceError as error:  # the check may narrow what is reported, never fail it
            log.warning("grounding by meaning failed, words alone decide: %s", error)
            method = "words"
        found_by_claim: dict[int, list[tuple[int, ...] | None]] = {}
        for position, (index, _) in enumerate(clauses):
            found_by_claim.setdefault(index, []).append(verdicts.get(position))
        checks = []
        for index, claim in enumerate(claims):
            found = found_by_claim[index]
            supported = all(found)
            numbers_ = tuple(sorted({n for f in found for n in f or ()})) if supported else ()
            checks.append(SentenceCheck(claim.text, supported, numbers_, claim.start, claim.end))
        return Grounding(tuple(checks), method)

    async def _by_meaning(
        self, doubtful: list[tuple[int, Claim, list[Evidence]]]
    ) -> dict[int, tuple[int, ...]]:
        if not doubtful or self._embeddings is None:
            return {}
        texts: list[str] = []
        for _, claim, closest in doubtful:
            texts += [claim.text, *(e.text for e in closest)]
        unique = list(dict.fromkeys(texts))  # a source sentence near several claims, once
        # sentence against sentence: e5 asks "query: " on both sides of a symmetric task
        vectors = await self._embeddings.embed(unique, kind="query")
        vector_of = dict(zip(unique, vectors, strict=True))
        verdicts = {}
        for index, claim, closest in doubtful:
            claim_vector = vector_of[claim.text]
            near = [
                e
                for e in closest
                if _cosine(claim_vector, vector_of[e.text]) >= self._min_similarity
            ]
            if near:
                verdicts[index] = source_numbers(near)
        return verdicts


# a quote shorter than this may be a commonplace ("It is.") rather than a quote
MIN_QUOTE_CHARS = 20


def with_verbatim_quotes(
    report: Grounding, claims: Sequence[Claim], sources: Sequence[tuple[int, str]]
) -> Grounding:
    """`report`, with every sentence that a source it cites (any, when it cites none) holds
    word for word marked supported by it: a quote is supported by definition, however the
    source's lines were wrapped and its sentences cut (a source's hard line breaks made a
    quoted sentence's clauses straddle several evidence pieces, and fail)."""
    texts: dict[int, str] = {}
    for number, text in sources:
        texts[number] = f"{texts.get(number, '')} {_flat(text)}"
    checks = list(report.sentences)
    for index, (check, claim) in enumerate(zip(checks, claims, strict=True)):
        quote = _flat(claim.text)
        if check.supported or len(quote) < MIN_QUOTE_CHARS:
            continue
        quoting = tuple(n for n in (claim.cited or tuple(texts)) if quote in texts.get(n, ""))
        if quoting:
            checks[index] = replace(check, supported=True, sources=quoting)
    return replace(report, sentences=tuple(checks))


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    # map(mul): the same products summed in the same order as a generator's, a third faster
    dot = sum(map(operator.mul, a, b))
    norm = math.sqrt(sum(map(operator.mul, a, a))) * math.sqrt(sum(map(operator.mul, b, b)))
    return dot / norm if norm else 0.0

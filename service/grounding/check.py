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

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from service.grounding.claims import Claim, claims_of, content_words, negated, numbers, sentences_of
from service.llm.embeddings import EmbeddingsClient

MAX_EVIDENCE = 2000  # source sentences (and pairs) one answer is checked against
CLOSEST = 3  # source sentences per doubtful claim whose meaning is compared


@dataclass(frozen=True)
class SentenceCheck:
    text: str
    supported: bool
    sources: tuple[int, ...]  # the numbers of the sources that support it (none: unsupported)

    def to_json(self) -> dict[str, object]:
        return {"text": self.text, "supported": self.supported, "sources": list(self.sources)}


@dataclass(frozen=True)
class Grounding:
    sentences: tuple[SentenceCheck, ...]

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
            "sentences": [sentence.to_json() for sentence in self.sentences],
        }


@dataclass(frozen=True)
class _Evidence:
    source: int
    text: str
    words: frozenset[str]
    numbers: frozenset[str]
    negated: bool

    @classmethod
    def of(cls, source: int, text: str) -> _Evidence:
        return cls(source, text, content_words(text), numbers(text), negated(text))


class GroundingCheck:
    """The default check: words first, then meaning (embeddings) for what words leave open."""

    def __init__(
        self,
        embeddings: EmbeddingsClient | None,
        *,
        min_overlap: float = 0.6,
        min_similarity: float = 0.8,
    ) -> None:
        self._embeddings = embeddings
        self._min_overlap = min_overlap
        self._min_similarity = min_similarity

    async def run(self, answer: str, sources: Sequence[tuple[int, str]]) -> Grounding:
        """`sources`: (citation number, text sent to the LLM), one or more per source."""
        claims = [claim for claim in claims_of(answer) if claim.checkable]
        evidence = _evidence(sources)
        verdicts: dict[int, tuple[int, ...]] = {}
        doubtful: list[tuple[int, Claim, list[_Evidence]]] = []
        for index, claim in enumerate(claims):
            scored = [(_overlap(claim, e), e) for e in _candidates(claim, evidence)]
            by_words = [e for overlap, e in scored if overlap >= self._min_overlap]
            if by_words:
                verdicts[index] = _numbers_of(by_words)
            elif scored:
                closest = sorted(scored, key=lambda pair: -pair[0])[:CLOSEST]
                doubtful.append((index, claim, [e for _, e in closest]))
        verdicts.update(await self._by_meaning(doubtful))
        return Grounding(
            tuple(
                SentenceCheck(claim.text, bool(verdicts.get(i)), verdicts.get(i, ()))
                for i, claim in enumerate(claims)
            )
        )

    async def _by_meaning(
        self, doubtful: list[tuple[int, Claim, list[_Evidence]]]
    ) -> dict[int, tuple[int, ...]]:
        if not doubtful or self._embeddings is None:
            return {}
        texts: list[str] = []
        for _, claim, closest in doubtful:
            texts += [claim.text, *(e.text for e in closest)]
        vectors = iter(await self._embeddings.embed(texts))
        verdicts = {}
        for index, _claim, closest in doubtful:
            claim_vector = next(vectors)
            near = [
                e for e in closest if _cosine(claim_vector, next(vectors)) >= self._min_similarity
            ]
            if near:
                verdicts[index] = _numbers_of(near)
        return verdicts


def _evidence(sources: Sequence[tuple[int, str]]) -> list[_Evidence]:
    """Each source sentence, and each two consecutive ones (a sentence may join two)."""
    evidence: list[_Evidence] = []
    for number, text in sources:
        sentences = sentences_of(text)
        evidence += [_Evidence.of(number, sentence) for sentence in sentences]
        pairs = itertools.pairwise(sentences)
        evidence += [_Evidence.of(number, f"{first} {second}") for first, second in pairs]
        if len(evidence) >= MAX_EVIDENCE:
            return evidence[:MAX_EVIDENCE]
    return evidence


def _candidates(claim: Claim, evidence: list[_Evidence]) -> list[_Evidence]:
    """The evidence that may support the claim: from the sources it cites (all, when it cites
    none it was given), with its numbers and its negation."""
    cited = [e for e in evidence if e.source in claim.cited] or evidence
    wanted, negative = numbers(claim.text), negated(claim.text)
    return [e for e in cited if wanted <= e.numbers and e.negated == negative]


def _overlap(claim: Claim, evidence: _Evidence) -> float:
    words = claim.words
    return len(words & evidence.words) / len(words) if words else 0.0


def _numbers_of(evidence: list[_Evidence]) -> tuple[int, ...]:
    return tuple(sorted({e.source for e in evidence}))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0

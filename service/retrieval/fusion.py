"""Fusing rankings: hybrid retrieval (BM25 and kNN of one query, by normalized scores or by
reciprocal rank) and multi-query retrieval (several queries at once, by reciprocal rank),
with duplicates removed."""

from __future__ import annotations

import asyncio
import hashlib
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from service.retrieval.base import RetrievedDocument, Retriever
from service.retrieval.texts import TextReader
from service.text.language import guess_language

# -- hybrid: BM25 and kNN of one query -------------------------------------------------------------

Fusion = Literal["score", "rrf"]
SPREAD = 3.0  # standard deviations either side of the mean: score fusion's 0 and 1


@dataclass(frozen=True)
class Ranking:
    """One retriever's documents, best first, with its weight in the fusion."""

    documents: Sequence[RetrievedDocument]
    weight: float = 1.0


def reciprocal_rank_fusion(
    rankings: Sequence[Ranking], *, k: int, limit: int
) -> list[RetrievedDocument]:
    """Each ranking gives a document weight / (k + rank), rank counted from 1; documents are
    sorted by the sum, ties kept in order of first appearance. The fused score replaces each
    document's own."""
    return _fused(
        rankings,
        lambda ranking: {
            document.id: ranking.weight / (k + rank)
            for rank, document in reversed(list(enumerate(ranking.documents, start=1)))
        },
        limit,
    )


def score_fusion(rankings: Sequence[Ranking], *, limit: int) -> list[RetrievedDocument]:
    """The weighted mean of each ranking's normalized scores. A score becomes its place on
    the line from the ranking's mean minus 3 standard deviations (0) to plus 3 (1); a hit
    far ahead of the rest may pass 1, and keeps its lead. A ranking without the document
    gives it 0; one whose scores are all equal gives each 1.

    Unlike ranks, normalized scores keep how far ahead a hit is. Unlike a fixed scale, this
    one adapts to each ranking's spread: BM25's unbounded scores and each model's cosine range
    (bge-small-en-v1.5's sit much closer together than all-MiniLM-L6-v2's) become comparable,
    and shifting or stretching one ranking's scores changes nothing (Qdrant's
    distribution-based score fusion; measured against the others in bench/RESULTS.md)."""
    total = sum(ranking.weight for ranking in rankings) or 1.0

    def normalized(ranking: Ranking) -> dict[str, float]:
        scores = [document.score for document in ranking.documents]
        if not scores:
            return {}
        mean = statistics.fmean(scores)
        spread = SPREAD * statistics.pstdev(scores, mean)
        share = ranking.weight / total

        def place(score: float) -> float:
            return (score - mean + spread) / (2 * spread) if spread else 1.0

        return {
            document.id: share * place(document.score)
            for document in reversed(ranking.documents)  # a repeated id keeps its best rank
        }

    return _fused(rankings, normalized, limit)


def z_scores(values: Sequence[float]) -> list[float]:
    """Each value's distance from their mean in standard deviations (all 0 when they do not
    spread)."""
    if len(values) < 2:
        return [0.0] * len(values)
    mean = statistics.fmean(values)
    spread = statistics.pstdev(values, mean) or 1.0
    return [(value - mean) / spread for value in values]


def blended(*scores: Sequence[float]) -> list[int]:
    """Indexes of the items several scorers scored (each list in the items' order), best
    first by the sum of each scorer's z-scores; ties keep the items' order. The reranker's
    `blend`: its scores and retrieval's weigh alike, whatever their scales."""
    totals = [sum(column) for column in zip(*(z_scores(s) for s in scores), strict=True)]
    return sorted(range(len(totals)), key=lambda i: -totals[i])


def _fused(
    rankings: Sequence[Ranking],
    contribution: Callable[[Ranking], dict[str, float]],
    limit: int,
) -> list[RetrievedDocument]:
    """Documents by the sum of their rankings' contributions, ties in order of first
    appearance; the sum replaces each document's score."""
    scores: dict[str, float] = {}
    first_seen: dict[str, RetrievedDocument] = {}
    for ranking in rankings:
        for doc_id, value in contribution(ranking).items():
            scores[doc_id] = scores.get(doc_id, 0.0) + value
        for document in ranking.documents:
            first_seen.setdefault(document.id, document)
    order = sorted(first_seen, key=lambda doc_id: -scores.get(doc_id, 0.0))  # stable
    return [replace(first_seen[doc_id], score=scores.get(doc_id, 0.0)) for doc_id in order[:limit]]


class HybridRetriever:
    """Runs the BM25 and the kNN retrievers at the same time and fuses their rankings, by
    normalized scores (`score`) or by reciprocal rank (`rrf`, with `k`).

    Both retrievers should fetch more candidates than `limit`: a passage just under one
    ranking's cut-off gets nothing from it.

    `needs_meaning`: when the kNN side finds nothing (none of its passages is as similar as
    retrieval.similarity.min), the question is about something the passages do not hold, and
    nothing is returned, whatever words BM25 matched ("Who won the world cup?" matching
    "world" in a "Hello world" example).

    `reads`: the languages the embedding model reads (None: any). A question in another
    (`foreign`) gets the kNN ranking at `foreign_weight`, and no similarity floor: an English
    encoder's vectors of a French question pull wrong passages up and say nothing of its
    meaning; at 0 the question is ranked by BM25 alone (issue 60). So does a question whose
    kNN ranking is `flat` (its best and last similarities within `flat_spread`).

    `texts`: the rankings read ids and scores alone, and this reads the texts of the hits
    kept (one request for `limit` texts rather than two for every candidate's)."""

    def __init__(
        self,
        lexical: Retriever,
        semantic: Retriever,
        *,
        fusion: Fusion = "score",
        k: int = 60,
        lexical_weight: float = 1.0,
        semantic_weight: float = 1.0,
        limit: int = 10,
        needs_meaning: bool = False,
        reads: frozenset[str] | None = None,
        foreign_weight: float = 0.25,
        flat_spread: float | None = None,
        texts: TextReader | None = None,
    ) -> None:
        self._texts = texts
        self._flat_spread = flat_spread
        self._needs_meaning = needs_meaning
        self._reads = reads
        self._foreign_weight = foreign_weight
        self._lexical = lexical
        self._semantic = semantic
        self._fusion = fusion
        self._k = k
        self._weights = (lexical_weight, semantic_weight)
        self._limit = limit

    def foreign(self, query: str) -> bool:
        """Whether the question is in a language the embedding model does not read: told
        from its words (French, English), or from its letters (mostly not Latin: Arabic,
        Cyrillic, CJK...); a Latin-script question whose words do not tell is not."""
        if self._reads is None:
            return False
        language = guess_language(query)
        if language:
            return language not in self._reads
        letters = [c for c in query[:2000] if c.isalpha()]
        latin = sum(1 for c in letters if c < "\u0250")  # Latin letters, accented ones too
        return bool(letters) and latin * 2 < len(letters)  # Arabic, Cyrillic, CJK...

    def flat(self, semantic: Sequence[RetrievedDocument]) -> bool:
        """Whether the kNN ranking's best and last cosine similarities are within
        hybrid.flat.spread (Solr scores a cosine hit (1 + cosine) / 2)."""
        if self._flat_spread is None or len(semantic) < 2:
            return False
        scores = [document.score for document in semantic]
        return 2 * (max(scores) - min(scores)) < self._flat_spread

    async def run(self, query: str) -> list[RetrievedDocument]:
        fused = await self._fused(query)
        return await self._texts.run(fused) if self._texts else fused

    async def _fused(self, query: str) -> list[RetrievedDocument]:
        foreign = self.foreign(query)
        semantic_weight = self._foreign_weight if foreign else self._weights[1]
        if foreign and semantic_weight == 0:  # BM25 alone: the kNN side is not asked
            return (await self._lexical.run(query))[: self._limit]
        lexical, semantic = await asyncio.gather(
            self._lexical.run(query), self._semantic.run(query)
        )
        if self._needs_meaning and not semantic and not foreign:
            return []
        if not foreign and self.flat(semantic):
            semantic_weight = self._foreign_weight
        rankings = [
            Ranking(lexical, self._weights[0]),
            Ranking(semantic, semantic_weight),
        ]
        if self._fusion == "rrf":
            return reciprocal_rank_fusion(rankings, k=self._k, limit=self._limit)
        return score_fusion(rankings, limit=self._limit)


# -- multi-query: several queries at once ----------------------------------------------------------

_SPACE = re.compile(r"\s+")


def content_key(document: RetrievedDocument) -> str:
    """The same text, whatever its spacing or case, gives the same key."""
    normalized = _SPACE.sub(" ", document.content).strip().casefold()
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


def without_duplicate_content(documents: Sequence[RetrievedDocument]) -> list[RetrievedDocument]:
    seen: set[str] = set()
    kept = []
    for document in documents:
        key = content_key(document)
        if key not in seen:
            seen.add(key)
            kept.append(document)
    return kept


class MultiQueryRetriever:
    """>>> documents = await MultiQueryRetriever(retriever, k=60, limit=10).run(queries)"""

    def __init__(self, retriever: Retriever, *, k: int, limit: int) -> None:
        self._retriever = retriever
        self._k = k
        self._limit = limit

    async def run(self, queries: Sequence[str]) -> list[RetrievedDocument]:
        rankings = await asyncio.gather(*(self._retriever.run(query) for query in queries))
        fused = reciprocal_rank_fusion(
            [Ranking(ranking) for ranking in rankings], k=self._k, limit=len(queries) * self._limit
        )
        return without_duplicate_content(fused)[: self._limit]

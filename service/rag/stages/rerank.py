"""Rerank: the chunks ordered (and cut) by a reranker (rerank.*)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    Chunk,
    number_chunks,
)
from service.config.settings import (
    RerankOrder,
)
from service.errors import (
    NoDocumentFound,
    ServiceError,
)
from service.llm.rerank import RerankClient
from service.rag.stages.state import Chunks, EveryRequest, RagState, log
from service.retrieval.fusion import blended
from service.text.claims import windows_of
from service.text.parts import has_parts

MAX_WINDOWS = 100  # sentence windows scored a request (the local reranker's limit)


@dataclass
class Rerank(EveryRequest):
    """A rerank API scores the chunks against the question; the `top_n` best go on, best
    first (and numbered so), by its scores alone or (`order="blend"`) by its scores and
    retrieval's together. The retrieval order is kept when the API fails.

    With `min_score`, chunks the API scored below it are left out; none left is an abstention
    before any LLM call (NoDocumentFound, its reason the best score): the documents do not
    say it."""

    client: RerankClient
    top_n: int
    max_chunks: int
    min_score: float | None = None
    order: RerankOrder = "reranker"
    window: int = 0  # sentences: each chunk kept is cut to its best run of them (0: whole)
    # as much evidence as the question needs: this many for a question with parts, or when
    # the next scores are within `close_margin` of the best (None: top_n always)
    top_n_parts: int | None = None
    close_margin: float | None = None
    name: ClassVar[str] = "rerank"

    def wanted(self, state: RagState) -> bool:
        one_is_enough = self.min_score is not None or self.window > 0
        return len(state.chunks) > 1 or (one_is_enough and bool(state.chunks))

    async def run(self, state: RagState) -> Chunks:
        sent = state.chunks[: self.max_chunks]
        try:  # every chunk's score: a blend, and the minimum, need them all
            ranked = await self.client.rank(
                state.question.text, [item.chunk.text for item in sent], len(sent)
            )
        except ServiceError as error:
            log.warning("reranking skipped, the retrieval order kept: %s", error.reason)
            return Chunks(state.chunks)
        order = [item.index for item in ranked]
        if self.order == "blend" and ranked:
            retrieval = [sent[i].chunk.document.score for i in order]
            order = [order[i] for i in blended(retrieval, [item.score for item in ranked])]
        scores = {item.index: item.score for item in ranked}
        kept = [i for i in order if self.min_score is None or scores[i] >= self.min_score]
        if ranked and not kept and not state.query.options.answer_without_sources:
            raise NoDocumentFound(
                f"not in the documents: the reranker scored the best of {len(sent)} passages "
                f"{ranked[0].score:.2f}, below rerank.min.score ({self.min_score:g})"
            )
        chosen = [sent[i].chunk for i in kept[: self.needed(state.question.text, kept, scores)]]
        if self.window:
            chosen = await self._windows(state.question.text, chosen)
        return Chunks(number_chunks(chosen))

    def needed(self, question: str, kept: list[int], scores: dict[int, float]) -> int:
        """How many chunks the question needs: `top_n`, or `top_n_parts` when it has parts;
        more than `top_n` (up to `top_n_parts`) when their scores are within `close_margin`
        of the best."""
        if self.top_n_parts is None or self.top_n_parts <= self.top_n:
            return self.top_n
        if has_parts(question):
            return self.top_n_parts
        if self.close_margin is None or not kept:
            return self.top_n
        best = scores[kept[0]]
        close = sum(1 for i in kept[: self.top_n_parts] if scores[i] >= best - self.close_margin)
        return max(self.top_n, close)

    async def _windows(self, question: str, chunks: list[Chunk]) -> list[Chunk]:
        """Each chunk cut to its window of `window` sentences the API scores best: what the
        LLM reads is the evidence, not the passage around it. One request for every window
        (at most MAX_WINDOWS: the chunks past them stay whole); the chunks whole when it
        fails."""
        cuts: list[list[str]] = []
        counted = 0
        for chunk in chunks:
            found = windows_of(chunk.text, self.window)
            fits = counted + len(found) <= MAX_WINDOWS
            cuts.append(found if fits else [chunk.text])
            counted += len(cuts[-1])
        texts = [text for cut in cuts for text in cut]
        if len(texts) == len(chunks):
            return chunks  # none has more sentences than a window
        try:
            ranked = await self.client.rank(question, texts, len(texts))
        except ServiceError as error:
            log.warning("sentence windows skipped, the chunks kept whole: %s", error.reason)
            return chunks
        scores = {item.index: item.score for item in ranked}
        cut_chunks, first = [], 0
        for chunk, cut in zip(chunks, cuts, strict=True):
            best = max(range(len(cut)), key=lambda i: scores.get(first + i, -math.inf))
            cut_chunks.append(Chunk(chunk.document, cut[best]))
            first += len(cut)
        return cut_chunks

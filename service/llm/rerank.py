"""A client for any `/rerank` API: the request and response shape Cohere, Jina, vLLM and
Infinity share (TEI's answer too).

    POST {rerank.endpoint}/rerank
    {"model": "...", "query": "...", "documents": ["...", ...], "top_n": 5}
    -> {"results": [{"index": 2, "relevance_score": 0.93}, ...]}     (Cohere, Jina, vLLM)
    -> [{"index": 2, "score": 0.93}, ...]                            (TEI)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from service.config import Settings
from service.config.settings import RerankCut
from service.errors import UpstreamBadResponse
from service.llm.breaker import CircuitBreaker
from service.llm.client import LLMOptions, OpenAICompatibleClient

log = logging.getLogger(__name__)

# the rerank URLs that refused passage_cut (an API other than the local model server's): never
# sent it again by this process
_CUT_REFUSED: set[str] = set()
MAX_REFUSING_ENDPOINTS = 64
# a question's characters sent (the local model server takes 4,000, and its cross-encoder
# reads 512 tokens of question and passage together): a longer one is reranked all the same
MAX_QUERY_CHARS = 4_000


def _refused_request(error: UpstreamBadResponse) -> bool:
    """Whether the API refused the request as malformed (400, 422), not failed on it."""
    return error.upstream_status in (400, 422)


@dataclass(frozen=True)
class Ranked:
    """One text's place in the rerank API's answer: its index in the request, its score."""

    index: int
    score: float


class RerankClient(OpenAICompatibleClient):
    """`rank(query, texts, top_n)` -> the `top_n` most relevant texts' indexes, best first;
    with `max_tokens`, each (query, text) pair cut to that many tokens by the API: at the
    text's end, or (`cut="nearest"`, the local model server's) to its sentences nearest the
    query."""

    what = "the rerank API"
    upstream = "rerank"

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: LLMOptions,
        breaker: CircuitBreaker | None = None,
        *,
        max_tokens: int | None = None,
        cut: RerankCut = "end",
    ) -> None:
        super().__init__(http, options, breaker)
        self.max_tokens = max_tokens
        self.cut = cut

    async def rank(self, query: str, texts: Sequence[str], top_n: int) -> list[Ranked]:
        payload: dict[str, object] = {
            "model": self.options.model,
            "query": query[:MAX_QUERY_CHARS],
            "documents": list(texts),
            "top_n": min(top_n, len(texts)),
            "return_documents": False,
        }
        if self.max_tokens is not None:  # Cohere v2's name, and the local model server's
            payload["max_tokens_per_doc"] = self.max_tokens
        url = self._url("rerank")
        if self.cut != "end" and url not in _CUT_REFUSED:  # ours (the local model server's)
            payload["passage_cut"] = self.cut
        try:
            body = await self._post("rerank", payload)
        except UpstreamBadResponse as error:
            if "passage_cut" not in payload or not _refused_request(error):
                raise
            del payload["passage_cut"]
            body = await self._post("rerank", payload)  # fails alike: not the cut's fault
            # another rerank API, refusing what it does not know: cut at the end from now on,
            # said once (the fix is rerank.cut=end)
            if len(_CUT_REFUSED) < MAX_REFUSING_ENDPOINTS:
                _CUT_REFUSED.add(url)
            log.warning(
                "the rerank API refused passage_cut (%s): chunks are cut at their end instead; "
                "set rerank.cut=end for an API other than the local model server",
                error.reason[:200],
            )
        return self._ranked(body, len(texts))[:top_n]

    def _ranked(self, body: object, count: int) -> list[Ranked]:
        items = body.get("results") if isinstance(body, dict) else body
        ranked: dict[int, Ranked] = {}
        try:
            for item in items:  # type: ignore[union-attr]
                index = item["index"]
                score = item["relevance_score"] if "relevance_score" in item else item["score"]
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                    raise ValueError(index)
                if not math.isfinite(score := float(score)):
                    raise ValueError(score)
                ranked.setdefault(index, Ranked(index, score))
        except (KeyError, TypeError, ValueError):
            raise UpstreamBadResponse(
                f"{self._where} answered without results[].index and relevance_score for "
                f"{count} documents"
            ) from None
        return sorted(ranked.values(), key=lambda item: -item.score)


def rerank_client(
    http: httpx.AsyncClient, settings: Settings, *, breaker: CircuitBreaker | None = None
) -> RerankClient:
    """The rerank API the settings name (`rerank.*`)."""
    rerank = settings.rerank
    return RerankClient(
        http,
        LLMOptions(
            endpoint=rerank.endpoint,
            model=rerank.model,
            token=rerank.token.get_secret_value(),
            connect_timeout=settings.llm.timeout_connect,
            read_timeout=rerank.timeout,
            retries=settings.llm.retries,
        ),
        breaker,
        max_tokens=rerank.max_tokens,
        cut=rerank.cut,
    )

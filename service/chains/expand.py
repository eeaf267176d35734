"""Multi-query: one LLM call turns the question (and the history) into several search queries.

The answer must be JSON, `{"queries": [...]}`, validated with pydantic; anything else falls
back to the original query alone (logged), so a model that cannot follow the format costs one
call and changes nothing. The original query is always searched, first.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from service.chains.prompts import PromptLibrary
from service.chains.structured import parse_json_answer
from service.errors import ServiceError
from service.llm.client import ChatClient
from service.llm.types import ChatMessage, Usage

log = logging.getLogger(__name__)

MAX_QUERIES = 5
_PLACEHOLDER = re.compile(r"^<[^<>]*>$")


class GeneratedQueries(BaseModel):
    """The JSON the LLM must answer with: the search queries it wrote."""

    queries: list[str] = Field(min_length=1, max_length=20)


@dataclass(frozen=True)
class Expansion:
    """The queries to search (the original first) and what generating them cost."""

    queries: tuple[str, ...]
    usage: Usage | None = None
    fell_back: bool = False


def parse_queries(answer: str) -> list[str]:
    """The queries of a JSON answer (code fences and text around the object tolerated);
    raises ValueError when there are none."""
    parsed = parse_json_answer(answer, GeneratedQueries)
    queries = [query.strip() for query in parsed.queries if query.strip()]
    # a model that echoes its prompt returns the example's placeholders: not queries
    queries = [query for query in queries if not _PLACEHOLDER.match(query)]
    if not queries:
        raise ValueError("only the example's placeholders, no query")
    return queries


class QueryExpander:
    """>>> expansion = await QueryExpander(llm, prompts).run(question, history, count=3)"""

    def __init__(self, llm: ChatClient, prompts: PromptLibrary) -> None:
        self._llm = llm
        self._prompts = prompts

    async def run(
        self, original: str, question: str, history: tuple[ChatMessage, ...], *, count: int
    ) -> Expansion:
        """`original`: the search query as sanitized; `question`: what the user asked."""
        prompt = self._prompts.render(
            "multiquery",
            question=question,
            history=[message.as_dict() for message in history],
            count=count,
        )
        try:
            completion = await self._llm.complete([ChatMessage("user", prompt)])
        except ServiceError as error:
            log.warning("multi-query generation failed, searching the question: %s", error.reason)
            return Expansion((original,), fell_back=True)
        try:
            generated = parse_queries(completion.text)
        except ValueError as error:
            log.warning(
                "multi-query answer unusable (%s), searching the question alone: %r",
                error,
                completion.text[:200],
            )
            return Expansion((original,), completion.usage, fell_back=True)
        queries = [original]
        seen = {original.casefold()}
        for query in generated:
            if query.casefold() not in seen and len(queries) < count:
                seen.add(query.casefold())
                queries.append(query)
        log.info("searching %d queries: %s", len(queries), queries)
        return Expansion(tuple(queries), completion.usage)

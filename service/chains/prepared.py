"""What a chain leaves for last: the request whose answer is the answer.

Every chain first does its intermediate work (map requests, earlier refine steps) and then
has one final request left, or already knows its answer. Sending that last request whole
(`complete`) or streamed (`stream`) is the same for every chain, so only the final request of
map-reduce or refine streams, and the rest of the chain never waits on a client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from service.chains.answer import clean_answer
from service.chains.context import ChainResult
from service.llm.client import ChatClient
from service.llm.types import ChatMessage


@dataclass
class Prepared:
    """A chain's state before its last request: `final` to send, or `answer` already known."""

    result: ChainResult
    final: list[ChatMessage] | None = None
    answer: str | None = None


async def complete(llm: ChatClient, prepared: Prepared) -> ChainResult:
    result = prepared.result
    if prepared.final is None:
        result.answer = clean_answer(prepared.answer or "")
        return result
    completion = await llm.complete(prepared.final)
    result.add_usage(completion.usage)
    result.answer = clean_answer(completion.text)
    return result


async def stream(llm: ChatClient, prepared: Prepared) -> AsyncIterator[str]:
    """Yields the answer's text as it comes (Datafari's literal `\\n` already turned into
    newlines); when done, `prepared.result.answer` holds the cleaned whole."""
    result = prepared.result
    if prepared.final is None:
        result.answer = clean_answer(prepared.answer or "")
        yield result.answer
        return
    upstream = llm.stream(prepared.final)
    pending = ""  # a trailing backslash waits for the next piece: it may start a `\\n`
    async for delta in upstream:
        text = (pending + delta).replace("\\n", "\n")
        pending = "\\" if text.endswith("\\") else ""
        text = text[:-1] if pending else text
        if text:
            yield text
    if pending:
        yield pending
    result.add_usage(upstream.usage)
    result.answer = clean_answer(upstream.text)

"""The one stream driver: runs a question's work and hands what happens to a renderer, the
seam between the pipeline and a wire format.

    started -> progress* (stages, an agent's tools, the turn opened) -> delta* -> final
            -> progress (the turn kept) -> ended
    or, from the first failure on: failed

A renderer turns each of these into the lines of its format (Datafari 6.2's SSE, Datafari 7's
NDJSON, OpenAI's chunks); the driver owns the order, the catching and the mapping of any
exception to a ServiceError, so no format writes them again. A format that has a line that says
nothing (`idle`: an SSE comment) is sent it after every IDLE_SECONDS without a line, so that a
proxy in front does not take an answer held for its check for a dead connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Protocol

from service.actions.progress import Kept, Progress, Step
from service.api.errors import as_service_error
from service.errors import ServiceError
from service.rag.reply import Answer, Reply

IDLE_SECONDS = 15.0  # nginx's proxy_read_timeout is 60 s, many load balancers' idle timeout 60


class Work(Protocol):
    """What a question asks of the service, in three steps the driver runs in order."""

    async def begin(self, progress: Progress) -> None:
        """Open what the question continues (a conversation, a memory)."""

    async def run(self, progress: Progress) -> Reply | Answer:
        """Everything up to the answer: a Reply streaming it, or an Answer written whole."""

    async def keep(self, answer: Answer) -> Kept | None:
        """Keep the answer (a conversation, a memory); the conversation it is kept in."""


class Renderer(Protocol):
    """One wire format's lines for what the driver hands it."""

    def started(self) -> Iterable[str]: ...
    def progress(self, step: Step) -> Iterable[str]: ...
    def delta(self, text: str) -> Iterable[str]: ...
    def final(self, answer: Answer) -> Iterable[str]: ...
    def ended(self) -> Iterable[str]: ...
    def failed(self, error: ServiceError) -> Iterable[str]: ...
    def idle(self) -> Iterable[str]: ...  # a line that says nothing, or none


@dataclass
class Ready:
    """Work whose reply was made before the stream began (its failures then were plain HTTP
    errors): nothing to open, nothing to keep."""

    reply: Reply | Answer

    async def begin(self, progress: Progress) -> None:
        return None

    async def run(self, progress: Progress) -> Reply | Answer:
        return self.reply

    async def keep(self, answer: Answer) -> Kept | None:
        return None


async def drive(work: Work, renderer: Renderer, request_id: str) -> AsyncIterator[str]:
    """The lines of one streamed answer: the work run, its steps, text and end rendered; a
    failure once the stream has begun is the renderer's last lines (never a broken stream).
    What one event renders is yielded as one piece (one write to the client, not one a
    line), and the answer's end (final, kept, ended) as one."""
    if lines := "".join(renderer.started()):
        yield lines
    idle = "".join(renderer.idle())
    quiet = IDLE_SECONDS if idle else None
    try:
        steps: asyncio.Queue[Step] = asyncio.Queue()
        await work.begin(steps.put_nowait)
        if lines := "".join(line for step in _drained(steps) for line in renderer.progress(step)):
            yield lines
        running = asyncio.ensure_future(work.run(steps.put_nowait))
        try:
            while not running.done() or not steps.empty():
                waiting = asyncio.ensure_future(steps.get())
                await asyncio.wait(
                    {running, waiting}, timeout=quiet, return_when=asyncio.FIRST_COMPLETED
                )
                if not running.done() and not waiting.done():
                    waiting.cancel()
                    yield idle
                elif waiting.done():
                    if lines := "".join(renderer.progress(waiting.result())):
                        yield lines
                else:
                    waiting.cancel()
            reply = running.result()
        finally:
            running.cancel()
        if isinstance(reply, Answer):
            answer = reply
        else:
            async for text in reply if quiet is None else _paced(reply, quiet):
                if text is None:
                    yield idle
                elif lines := "".join(renderer.delta(text)):
                    yield lines
            answer = await reply.answer()
        kept = await work.keep(answer)
        # the end's events in one piece: one write to the socket, not one each
        ending = [*renderer.final(answer), *(renderer.progress(kept) if kept is not None else ())]
        if lines := "".join([*ending, *renderer.ended()]):
            yield lines
    except Exception as error:  # the stream has begun: the failure is its end
        if lines := "".join(renderer.failed(as_service_error(error, request_id))):
            yield lines


async def _paced(pieces: AsyncIterator[str], seconds: float) -> AsyncIterator[str | None]:
    """`pieces`, with a None after every `seconds` none came (the piece awaited goes on)."""
    iterator = aiter(pieces)
    coming = asyncio.ensure_future(anext(iterator))
    try:
        while True:
            done, _ = await asyncio.wait({coming}, timeout=seconds)
            if not done:
                yield None
                continue
            try:
                piece = coming.result()
            except StopAsyncIteration:
                return
            yield piece
            coming = asyncio.ensure_future(anext(iterator))
    finally:
        coming.cancel()


def _drained(steps: asyncio.Queue[Step]) -> list[Step]:
    drained = []
    while not steps.empty():
        drained.append(steps.get_nowait())
    return drained

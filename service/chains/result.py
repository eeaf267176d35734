"""What a chain works on and what it produces: chunks numbered as sources, the result
(answer, sources, cost), the reading of what the LLM wrote, and the last request a chain
leaves to send (whole or streamed)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio.to_thread

from service.chains.scaffolding import Scaffolding
from service.chains.scaffolding_reading import without_scaffolding
from service.errors import NoValidAnswer
from service.llm.answer_format import PLAIN, AnswerFormat, StopCut
from service.llm.client import ChatClient
from service.llm.types import ChatMessage, TokenChoice, Usage
from service.retrieval.base import RetrievedDocument
from service.text.citations import cited_numbers
from service.text.claims import Claim
from service.text.support import best_source, checkable_claims, evidence_of, within_checked

# -- chunks, numbered as sources, and the result ---------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """A piece of a retrieved document, small enough to go in a prompt."""

    document: RetrievedDocument
    text: str


@dataclass(frozen=True)
class NumberedChunk:
    """A chunk with the number its document is cited by ([1], [2]...)."""

    number: int
    chunk: Chunk


def number_chunks(chunks: list[Chunk]) -> list[NumberedChunk]:
    """Documents are numbered 1, 2... in the order their first chunk appears."""
    numbers: dict[str, int] = {}
    numbered = []
    for chunk in chunks:
        key = chunk.document.source_id
        numbers.setdefault(key, len(numbers) + 1)
        numbered.append(NumberedChunk(numbers[key], chunk))
    return numbered


@dataclass(frozen=True)
class Source:
    """A document whose content was sent to the LLM, under its citation number."""

    number: int
    document: RetrievedDocument
    snippets: tuple[str, ...]


def sources_of(sent: list[NumberedChunk]) -> list[Source]:
    """The documents behind the chunks that were sent, in citation order."""
    by_number: dict[int, list[NumberedChunk]] = {}
    for item in sent:
        by_number.setdefault(item.number, []).append(item)
    return [
        Source(number, items[0].chunk.document, tuple(item.chunk.text for item in items))
        for number, items in sorted(by_number.items())
    ]


def source_texts(sources: Sequence[Source]) -> list[tuple[int, str]]:
    """What each source sent to the LLM said, under its number: what grounding checks."""
    return [(source.number, text) for source in sources for text in source.snippets]


@dataclass
class ChainResult:
    """What a chain produced: the answer, the sources it was given, and what it cost."""

    answer: str
    sources: list[Source]
    llm_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    # why the last request ended: "stop", or "length" when max_tokens cut the answer
    finish_reason: str = "stop"
    # the answer was written in several steps that cite their sources (a question's refine or
    # map-reduce, not a summary's): the last may drop the citations the earlier ones carried,
    # which the answer then gets back from its sources (with_citations_restored)
    citing_steps: bool = False
    # the last request's tokens and their probabilities (when asked for and reported), filled
    # as they arrive when streamed
    tokens: list[TokenChoice] = field(default_factory=list)

    def add_usage(self, usage: Usage) -> None:
        self.llm_calls += 1
        self.usage += usage


# -- reading what the LLM wrote --------------------------------------------------------------------

# What map requests are told to answer when their documents hold nothing relevant.
NO_ANSWER = "NO_RELEVANT_CONTENT"

# Short answers that say the same in words, as models (and the extractive answerer) often do;
# in French too, which the embedded model writes when asked in French ("Je ne peux pas
# trouver la réponse dans les documents.")
_NOTHING_FOUND = re.compile(
    r"(could not|couldn't|cannot|can't|unable to) find|no relevant|"
    r"(do|does) not (contain|mention|say)|not (mentioned|covered) in the (documents|context)|"
    r"ne (peux|peut|pouvons|puis) pas (la |le |les )?trouver|n['’]ai pas (pu )?trouv|"
    r"ne (contiennent|contient|mentionnent|mentionne|disent|dit) pas|aucun(e)? (document|"
    r"information|réponse) pertinent",
    re.I,
)
_SHORT = 200


def clean_answer(text: str, scaffolding: Scaffolding | None = None) -> str:
    """Datafari's clean-up (literal `\\n` back to newlines, trimmed), and the prompt's
    scaffolding a model copied taken out (service.chains.scaffolding: the templates', our own
    unless given). Empty is no answer."""
    answer = without_scaffolding(text.replace("\\n", "\n"), scaffolding)
    if not answer and text.strip():
        raise NoValidAnswer(
            "the LLM wrote only the prompt's own words (its instructions or template), no answer"
        )
    if not answer:
        raise NoValidAnswer("the LLM returned an empty answer")
    return answer


# an answer made of citation marks alone ("[1]", "[1] [2]."): a source, no answer
_ONLY_CITATIONS = re.compile(r"^[\s.,;:]*(\[\d{1,3}\][\s.,;:]*)+$")


def says_nothing_relevant(text: str) -> bool:
    """True for an answer (a map's, or the last) that only says its documents did not help,
    or that names a source and says nothing (`[1]`, as small models answer when lost)."""
    stripped = text.strip()
    if not stripped or NO_ANSWER in stripped.upper().replace(" ", "_"):
        return True
    if _ONLY_CITATIONS.match(stripped):
        return True
    return len(stripped) <= _SHORT and bool(_NOTHING_FOUND.search(stripped))


def with_citations_restored(answer: str, sources: Sequence[Source], *, shown: bool) -> str:
    """`answer` with each of its sentences that cites no source given the number of the source
    that supports it best, by the grounding check's words (service.text.support.best_source,
    as far as the check reads): at the sentence's end, before its full stop ("... digits
    [2]."); after the answer, when it was already shown as it was written (`shown`: streamed)
    or the sentence is code (a fenced block is never written into), unless the answer cites
    that source already. Marks after the answer are its last sentence's citations: written
    after it only when they hold its own source, else on a line of their own. A sentence no
    source supports stays uncited, a number no source given bears cites none, and an answer
    that says its documents hold nothing stays as it is: no citation is invented."""
    if says_nothing_relevant(answer):
        return answer
    given = {source.number for source in sources}
    evidence = evidence_of(source_texts(sources))
    claims = within_checked(checkable_claims(answer))
    found = {
        claim.start: number
        for claim in claims
        if not given.intersection(claim.cited)
        and (number := best_source(claim, evidence)) is not None
    }
    blocks = _code_blocks(answer)
    text = answer.rstrip()
    # what is written after the answer's text is its last sentence's citation
    last = claims[-1] if claims and claims[-1].end >= len(text) else None
    own = found.get(last.start) if shown and last is not None and not _in(last, blocks) else None
    inline = [] if shown else [c for c in claims if c.start in found and not _in(c, blocks)]
    for claim in reversed(inline):
        at = len(answer[: claim.end].rstrip().rstrip(".!?"))
        answer = f"{answer[:at]} [{found.pop(claim.start)}]{answer[at:]}"
    if not found or (blocks and blocks[-1][1] is None):  # an open code block: marks are code
        return answer
    cited = cited_numbers(answer)
    marks = [n for n in dict.fromkeys(found.values()) if n not in cited or n == own]
    if not marks:
        return answer
    text = answer.rstrip()
    between = " " if own in marks else "\n"
    return f"{text}{between}{' '.join(f'[{n}]' for n in marks)}{answer[len(text) :]}"


# a fenced code block's fence: three backticks or tildes or more, at a line's start
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$", re.M)


def _code_blocks(text: str) -> list[tuple[int, int | None]]:
    """Where `text`'s fenced code blocks are: from their opening fence to the end of their
    closing one (None: still open at the text's end)."""
    blocks: list[tuple[int, int | None]] = []
    opening: re.Match[str] | None = None
    for fence in _FENCE.finditer(text):
        if opening is None:
            opening = fence
            continue
        sign, opened = fence.group(1), opening.group(1)
        if sign[0] == opened[0] and len(sign) >= len(opened) and not fence.group(2).strip():
            blocks.append((opening.start(), fence.end()))
            opening = None
    return blocks if opening is None else [*blocks, (opening.start(), None)]


def _in(claim: Claim, blocks: list[tuple[int, int | None]]) -> bool:
    """Whether the claim is in one of the code blocks (its fences included)."""
    return any(start <= claim.start and (end is None or claim.start < end) for start, end in blocks)


# -- the last request: sent whole or streamed ------------------------------------------------------


@dataclass
class Prepared:
    """A chain's state before its last request: `final` to send, or `answer` already known.

    `finish` is the one way to that answer, consumed whole (`complete`) or streamed: only a
    chain's last request ever streams, so the rest of the chain never waits on a client.
    """

    result: ChainResult
    final: list[ChatMessage] | None = None
    answer: str | None = None
    # the yes/no request "does a source answer the question?" (grounding.verify), whose
    # beginning is `final`'s: only a stuff request has one
    verification: list[ChatMessage] | None = None
    # what the templates the requests were written from say (cleaned out of the answer);
    # None: our own templates'
    scaffolding: Scaffolding | None = None

    async def complete(self, llm: ChatClient, form: AnswerFormat = PLAIN) -> ChainResult:
        async for _ in self.finish(llm, stream=False, form=form):
            pass
        return self.result

    async def finish(
        self,
        llm: ChatClient,
        *,
        stream: bool,
        form: AnswerFormat = PLAIN,
        probabilities: bool = False,
    ) -> AsyncIterator[str]:
        """The answer's text as the LLM wrote it (Datafari's literal `\\n` already turned into
        newlines, cut at the first of `form`'s stop sequences): piece by piece when `stream`,
        else in one piece once it is checked; then `result.answer` holds it, cleaned of the
        scaffolding (what a reader is shown of the pieces: service.rag.gate) and, for a JSON
        form, checked."""
        result = self.result
        cut = StopCut(form.stop)
        payload = form.payload() | (PROBABILITIES if probabilities else {})
        if self.final is None:
            text = cut.feed(self.answer or "") + cut.flush()
        elif not stream:
            completion = await llm.complete(self.final, payload)
            result.add_usage(completion.usage)
            result.finish_reason = completion.finish_reason
            result.tokens = list(completion.tokens)
            text = cut.feed(completion.text.replace("\\n", "\n")) + cut.flush()
        else:
            text = ""
            upstream = llm.stream(self.final, payload)
            result.tokens = upstream.tokens  # read as they come (service.rag.stages.confidence)
            async with aclosing(_newlines(upstream)) as pieces:
                async for piece in pieces:
                    kept = cut.feed(piece)
                    text += kept
                    if kept:
                        yield kept
                    if cut.stopped:
                        break
            text += (rest := cut.flush())
            if rest:
                yield rest
            result.add_usage(upstream.usage)
            result.finish_reason = upstream.finish_reason
        if cut.stopped:
            result.finish_reason = "stop"
        result.answer = clean_answer(text, self.scaffolding)
        if result.citing_steps and not form.json:  # the last step's citations, whatever it wrote
            result.answer = with_citations_restored(result.answer, result.sources, shown=stream)
        if form.json:  # a caller's schema: bounded (answer_format), still checked off the loop
            await anyio.to_thread.run_sync(form.check, result.answer)
        if not stream or self.final is None:
            yield text.replace("\\n", "\n")


# the token probabilities of the answer, and the 5 likeliest tokens at each step
PROBABILITIES = {"logprobs": True, "top_logprobs": 5}


async def _newlines(pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """Datafari's literal `\\n` as newlines, also when a piece ends between its two
    characters (a trailing backslash waits for the next piece)."""
    pending = ""
    async for delta in pieces:
        text = (pending + delta).replace("\\n", "\n")
        pending = "\\" if text.endswith("\\") else ""
        text = text[:-1] if pending else text
        if text:
            yield text
    if pending:
        yield pending

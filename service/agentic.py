"""Datafari 7's action=agentic: the LLM calls our tools (OpenAI's tools API), step by step,
then answers from what they returned.

The tools are MCP's (search, ask, summarize, get_document) and Datafari 7's generic agent's
(bm25Search, hybridSearch, ragByDocument, searchChunksFromADocument, readNextChunks,
entityExtraction, with summarize), run with the caller's scope, so an agent reads nothing its
caller may not.
Bounded: at most agentic.max.steps tool-calling turns of at most MAX_CALLS_PER_STEP calls,
each result cut to MAX_RESULT_CHARS, every LLM call (the tools' own included) spent from the
request's budget, within its deadline. Out of steps (or of calls), the LLM answers with what
it has, without tools.

Every document a tool returns is numbered once, in the order met; the tools show the numbers
and the answer cites them, so the answer's sources are numbered as /ai/rag's are.

    >>> agent = Agent(snapshot, scope, tools=("search", "ask"), max_steps=4)
    >>> answer = await agent.run("Who built the lighthouse, and when did its lamp change?")
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from service.chains.prompts import language_name
from service.chains.result import says_nothing_relevant
from service.config import Settings
from service.custom_tools import CustomTool
from service.errors import DocumentNotFound, ServiceError
from service.llm import ChatMessage, Usage
from service.llm.types import ToolCall
from service.models import packaged
from service.rag import assemble
from service.rag.reply import Answer, AnswerDocument
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.stages.fetch import fetch
from service.retrieval import RetrievedDocument, Scope
from service.retrieval.facet_filter import documents_matching
from service.snapshot import Snapshot
from service.text.citations import CITATION, cited_numbers

log = logging.getLogger(__name__)

Protocol = Literal["tools", "json"]
MAX_CALLS_PER_STEP = 3
MAX_RESULT_CHARS = 3_000
SEARCH_RESULTS = 5
SNIPPET_CHARS = 500
MAX_WRITTEN_OBJECTS = 20  # JSON objects tried in a text that may hold a written tool call

TOOLS: dict[str, dict[str, Any]] = {
    "search": {
        "description": "Search the documents. Returns the best passages, each with its "
        "number, title and text.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    },
    "ask": {
        "description": "Ask one precise question; it is answered from the documents, with "
        "the numbers of the documents it used.",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string", "description": "The question."}},
            "required": ["question"],
        },
    },
    "summarize": {
        "description": "Summarize one document, named by its number or its id.",
        "parameters": {
            "type": "object",
            "properties": {"document": {"type": "string", "description": "Number or id."}},
            "required": ["document"],
        },
    },
    "get_document": {
        "description": "Read one document's text (its start), named by its number or its id.",
        "parameters": {
            "type": "object",
            "properties": {"document": {"type": "string", "description": "Number or id."}},
            "required": ["document"],
        },
    },
}


def _tool(description: str, **arguments: str) -> dict[str, Any]:
    """A tool's OpenAI definition: its description and its string arguments, all required."""
    return {
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                name: {"type": "string", "description": what} for name, what in arguments.items()
            },
            "required": list(arguments),
        },
    }


# Datafari 7's generic agent's tools (its GenericTools), by its names, doing what they do with
# what we have: the agent `generic` (agentic.agents) offers them
TOOLS.update(
    {
        "bm25Search": _tool(
            "Keyword (BM25) search of the documents. Returns the best matches, each with its "
            "number, title and text.",
            query="The keywords to look for.",
        ),
        "hybridSearch": _tool(
            "Search of the documents by keywords and meaning together. Returns the best "
            "passages, each with its number, title and text.",
            query="What to look for.",
        ),
        "ragByDocument": _tool(
            "Ask a question of one document only; it is answered from that document.",
            documentId="The document's number or id.",
            question="The question.",
        ),
        "searchChunksFromADocument": _tool(
            "Search the passages of one document. Returns the best passages of it.",
            documentId="The document's number or id.",
            query="What to look for in it.",
        ),
        "entityExtraction": _tool(
            "List the entities of some kinds (people, places, dates...) that one document names.",
            documentId="The document's number or id.",
            entities="The kinds of entities to list, e.g. people, places, dates.",
        ),
        "readNextChunks": _tool(
            "Read one document's text, part by part: part 0 is its start; each result says "
            "which part comes next.",
            documentId="The document's number or id.",
            part="The part to read (0, 1, 2...).",
        ),
    }
)
READ_PART_CHARS = 2_500  # readNextChunks: a part of a document's text


def tool_specs(
    names: tuple[str, ...], catalog: Mapping[str, dict[str, Any]] = TOOLS
) -> list[dict[str, Any]]:
    """The OpenAI `tools` of these tools (as `catalog` describes them)."""
    return [{"type": "function", "function": {"name": name, **catalog[name]}} for name in names]


@dataclass
class Sources:
    """The documents the tools met, numbered in the order met."""

    by_id: dict[str, AnswerDocument] = field(default_factory=dict)

    def number(self, document_id: str, title: str, url: str, content: str) -> int:
        known = self.by_id.get(document_id)
        if known is None:
            known = AnswerDocument(document_id, title, url, content[:SNIPPET_CHARS],
                                   len(self.by_id) + 1, cited=False)  # fmt: skip
            self.by_id[document_id] = known
        return known.number

    def id_of(self, named: str) -> str:
        """A document named by its number ("3", "[3]") or its id."""
        digits = named.strip().strip("[]")
        if digits.isdigit():
            for document in self.by_id.values():
                if document.number == int(digits):
                    return document.id
        return named.strip()

    def cited_in(self, text: str) -> list[AnswerDocument]:
        cited = cited_numbers(text)
        return [
            AnswerDocument(d.id, d.title, d.url, d.content, d.number, cited=d.number in cited)
            for d in self.by_id.values()
        ]


@dataclass(frozen=True)
class ToolEvent:
    """One tool call as a stream shows it (Datafari 7's tool.call, tool.result, tool.error):
    `what` call when it starts, then result or error with its duration."""

    what: Literal["call", "result", "error"]
    id: str
    tool: str
    duration_ms: int = 0
    error: str = ""


class Agent:
    """The tool loop of one request (the module's docstring)."""

    def __init__(
        self,
        snapshot: Snapshot,
        scope: Scope,
        *,
        tools: tuple[str, ...],
        max_steps: int,
        lang: str | None = None,
        protocol: Protocol = "tools",
        progress: Callable[[str], None] | None = None,
        on_tool: Callable[[ToolEvent], None] | None = None,
        custom: Mapping[str, CustomTool] | None = None,
    ) -> None:
        self.protocol = protocol
        self.on_tool = on_tool or (lambda _: None)
        # Datafari's custom agent's tools (service.custom_tools), beside ours
        self.custom = dict(custom or {})
        self.catalog: dict[str, dict[str, Any]] = {
            **{name: TOOLS[name] for name in tools if name in TOOLS},
            **{name: tool.spec for name, tool in self.custom.items()},
        }
        self.snapshot = snapshot
        self.scope = scope
        self.tools = tools
        self.max_steps = max_steps
        self.lang = lang
        self.progress = progress or (lambda _: None)
        self.sources = Sources()
        self.usage = Usage()

    async def run(self, question: str, history: tuple[ChatMessage, ...] = ()) -> Answer:
        started = time.perf_counter()
        llm = self.snapshot.llm
        system = self.snapshot.prompts.render(
            "agent",
            tools=", ".join(self.tools),
            language=language_name(self.lang),
            history=history,
            format_instruction="",
        )
        steps = (
            system + "\n" + step_instructions(self.tools, self.catalog)
            if self.protocol == "json"
            else system
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": steps},
            *(message.as_dict() for message in history),
            {"role": "user", "content": question},
        ]
        results: list[str] = []
        text = None
        for _ in range(self.max_steps):
            if llm.calls.left <= 1:  # one call is kept for the answer
                break
            self.progress("agent")
            written, calls = await self._turn(messages)
            if not calls:
                text = written
                break
            calls = calls[:MAX_CALLS_PER_STEP]
            answered = []
            for call in calls:
                self.progress(call.name)
                result = await self._reported(call)
                results.append(f"{call.name}({call.arguments[:200]}):\n{result}")
                answered.append(result)
            self._record(messages, written, calls, answered)
        if text is None:  # out of steps: the answer from what the tools returned
            self.progress("answer")
            found = "\n\n".join(results)[-4 * MAX_RESULT_CHARS :] or "(nothing)"
            completion = await llm.complete(
                [
                    ChatMessage("system", system),
                    *history,
                    ChatMessage(
                        "user",
                        f"{question}\n\nWhat your tools returned:\n{found}\n\nAnswer now, "
                        "from this only, citing the documents' numbers.",
                    ),
                ]
            )
            self.usage += completion.usage
            text = completion.text
        text = without_repeats(text.strip())
        answer = Answer(
            message=text,
            documents=self.sources.cited_in(text),
            timings={"agent": round((time.perf_counter() - started) * 1000, 1)},
            llm_calls=llm.calls.used,
            usage=self.usage,
        )
        if says_nothing_relevant(text):
            answer.documents = []
            answer.abstained = (
                f"the agent read what its tools found ({len(self.sources.by_id)} documents) "
                "and said it does not hold the answer"
            )
        return answer

    async def _turn(self, messages: list[dict[str, Any]]) -> tuple[str, tuple[ToolCall, ...]]:
        """One turn of the LLM: its text, and the tools it calls (none: the text answers)."""
        llm = self.snapshot.llm
        if self.protocol == "tools":
            turn = await llm.with_tools(messages, tool_specs(self.tools, self.catalog))
            self.usage += turn.usage
            if turn.calls:
                return turn.text, turn.calls
            written = written_call(turn.text, self.tools)  # the rest of the text: a guess
            return ("", written) if written else (turn.text, ())
        plain = [ChatMessage(m["role"], m["content"]) for m in messages]
        completion = await llm.complete(plain, {"response_format": step_format(self.tools)})
        self.usage += completion.usage
        step = json_step(completion.text)
        if step is None:
            return completion.text, ()
        tool, value = step
        if tool not in self.tools:  # "answer"
            return value, ()
        return completion.text, (ToolCall("step", tool, json.dumps({"input": value})),)

    def _record(
        self,
        messages: list[dict[str, Any]],
        written: str,
        calls: tuple[ToolCall, ...],
        results: list[str],
    ) -> None:
        """The calls and their results, as the protocol gives them back to the LLM."""
        if self.protocol == "tools":
            messages.append(_assistant(written, calls))
            messages.extend(
                {"role": "tool", "tool_call_id": call.id, "content": result}
                for call, result in zip(calls, results, strict=True)
            )
            return
        messages.append({"role": "assistant", "content": written})
        messages.append({"role": "user", "content": NEXT_STEP.format(result=results[0])})

    async def _reported(self, call: ToolCall) -> str:
        """The tool's result, its start and end told to `on_tool` (a failure as an error)."""
        ran = ToolEvent("call", uuid.uuid4().hex, call.name)
        self.on_tool(ran)
        started = time.perf_counter()
        result = await self._call(call)
        took = round((time.perf_counter() - started) * 1000)
        if result.startswith("error: "):
            failed = result.removeprefix("error: ")[:300]
            self.on_tool(replace(ran, what="error", duration_ms=took, error=failed))
        else:
            self.on_tool(replace(ran, what="result", duration_ms=took))
        return result

    async def _call(self, call: ToolCall) -> str:
        """The tool's result as text (a failure too, so the LLM can go on), cut to size."""
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            return "error: the arguments are not JSON"
        if call.name not in self.tools or not isinstance(arguments, dict):
            return f"error: no tool {call.name[:64]!r}; the tools are {', '.join(self.tools)}"
        values = _arguments(call.name, arguments, self.catalog)
        if values is None:
            named = ", ".join(self.catalog[call.name]["parameters"]["required"])
            return f"error: the tool needs its arguments ({named})"
        try:
            if call.name in self.custom:
                given = {str(k): str(v).strip()[:2_000] for k, v in arguments.items()}
                named_values = dict(zip(self.catalog[call.name]["parameters"]["required"],
                                        values, strict=True))  # fmt: skip
                result = await self._custom(self.custom[call.name], {**given, **named_values})
            else:
                result = await getattr(self, f"_{call.name}")(*values)
        except DocumentNotFound as error:  # a guessed id: say how to find a real one
            result = (
                f"error: {error.reason[:200]}. Search first (bm25Search or hybridSearch; "
                "search, with our tools) and give one of the numbers or ids it returns"
            )
        except ServiceError as error:
            result = f"error: {error.message} ({error.reason[:200]})"
        return result[:MAX_RESULT_CHARS]

    async def _search(self, query: str) -> str:
        return await self._search_by(query, "")  # the configured retrieval

    async def _ask(self, question: str) -> str:
        return await self._answered(RagQuery(query=question, lang=self.lang, scope=self.scope))

    async def _answered(self, query: RagQuery) -> str:
        """The question's answer, its citations renumbered as the agent numbers sources."""
        answer = await (await assemble.ask(self.snapshot, query)).complete()
        self.usage += answer.usage
        numbers = {
            d.number: self.sources.number(d.id, d.title, d.url, d.content) for d in answer.documents
        }
        return CITATION.sub(
            lambda m: f"[{numbers.get(int(m.group(1)), m.group(1))}]", answer.message
        )

    async def _summarize(self, named: str) -> str:
        document_id = self.sources.id_of(named)
        query = SummarizeQuery(document_id=document_id, lang=self.lang, scope=self.scope)
        answer = await (await assemble.summarize(self.snapshot, query)).complete()
        self.usage += answer.usage
        if answer.documents:
            d = answer.documents[0]
            number = self.sources.number(d.id, d.title, d.url, d.content)
            return f"[{number}] {answer.message}"
        return answer.message

    async def _get_document(self, named: str) -> str:
        settings = self.snapshot.settings.solr
        document = await fetch(self.snapshot.solr, settings, self.sources.id_of(named), self.scope)
        if document is None:
            raise DocumentNotFound(f"no document {named[:100]!r} you may read")
        return self._shown(document, MAX_RESULT_CHARS - 200)

    async def _bm25Search(self, query: str) -> str:
        return await self._search_by(query, "bm25")

    async def _hybridSearch(self, query: str) -> str:
        return await self._search_by(query, "hybrid")

    async def _search_by(
        self, query: str, method: str, scope: Scope | None = None, *, nothing: str = ""
    ) -> str:
        """What `method` (bm25, vector, hybrid; "": the configured one) finds in `scope` (the
        caller's, unless narrowed), shown numbered; `nothing` when it finds nothing."""
        within = self.scope if scope is None else scope
        retriever = self.snapshot.index_retriever(within, SEARCH_RESULTS, method=method)
        found = (await retriever.run(query))[:SEARCH_RESULTS]
        if not found:
            return nothing or "nothing found"
        return "\n\n".join(self._shown(document) for document in found)

    async def _ragByDocument(self, named: str, question: str) -> str:
        """The question asked of one document; of every document when none has that id (a
        small model guesses ids: the answer is what it was after)."""
        document_id = self.sources.id_of(named)
        try:
            return await self._answered(
                RagQuery(query=question, document_id=document_id, lang=self.lang, scope=self.scope)
            )
        except DocumentNotFound:  # the answer alone: a small model copies what it reads
            log.info("ragByDocument: no document %r, the question asked of all", named[:100])
            return await self._ask(question)

    async def _entityExtraction(self, named: str, entities: str) -> str:
        document_id = self.sources.id_of(named)
        question = (
            f"List the {entities} this document names, one per line, as it writes them; none: "
            "say so."
        )
        return await self._answered(
            RagQuery(query=question, document_id=document_id, lang=self.lang, scope=self.scope)
        )

    async def _searchChunksFromADocument(self, named: str, query: str) -> str:
        within = self.scope.within((self.sources.id_of(named),))
        return await self._search_by(query, "", within, nothing=f"nothing found in {named[:100]!r}")

    async def _readNextChunks(self, named: str, part: str) -> str:
        settings = self.snapshot.settings.solr
        document = await fetch(self.snapshot.solr, settings, self.sources.id_of(named), self.scope)
        if document is None:
            raise DocumentNotFound(f"no document {named[:100]!r} you may read")
        index = int(part) if part.isdigit() else 0
        start = index * READ_PART_CHARS
        text = document.content[start : start + READ_PART_CHARS]
        if not text:
            return f"{named[:100]!r} has no part {index}: it ends before"
        shown = self._shown(replace(document, content=text), READ_PART_CHARS)
        more = start + READ_PART_CHARS < len(document.content)
        return shown + (f"\n(next: part {index + 1})" if more else "\n(the end)")

    async def _custom(self, tool: CustomTool, arguments: dict[str, str]) -> str:
        """A tool of agentic-custom-tools.json: a search narrowed by its filters (each read
        by the facet grammar: an argument is a value, never syntax), or its template asked
        of one document."""
        if tool.kind == "rag-by-document":
            question = tool.rendered(tool.template, arguments)
            document_id = self.sources.id_of(arguments["id"])
            return await self._answered(
                RagQuery(query=question, document_id=document_id, lang=self.lang, scope=self.scope)
            )
        scope = self.scope
        filters = [tool.rendered(text, arguments) for text in tool.filters]
        if filters:
            layout = self.snapshot.settings.solr
            matching = await documents_matching(self.snapshot.solr, layout.documents_collection,
                                                layout.documents_map, scope, filters)  # fmt: skip
            scope = scope.within(matching)
        return await self._search_by(arguments["q"], tool.method, scope)

    def _shown(self, document: RetrievedDocument, chars: int = SNIPPET_CHARS) -> str:
        number = self.sources.number(document.source_id, document.title, document.url,
                                     document.content)  # fmt: skip
        return f"[{number}] {document.title} (id {document.source_id}):\n{document.content[:chars]}"


def _arguments(
    tool: str, given: dict[str, Any], catalog: Mapping[str, dict[str, Any]] = TOOLS
) -> tuple[str, ...] | None:
    """The tool's arguments, in its order, each text of at most 2,000 characters; None when
    one is missing. A JSON step gives one `input`: for a tool of two arguments, written
    `first | second`; a tool of one takes the first value it is given."""
    required: list[str] = catalog[tool]["parameters"]["required"]
    if len(required) == 1:
        first = next((v for v in given.values() if isinstance(v, str | int)), "")
        value = str(first).strip()[:2_000]
        return (value,) if value else None
    if set(given) == {"input"} and isinstance(given["input"], str):
        parts = [part.strip() for part in given["input"].split("|", len(required) - 1)]
        given = dict(zip(required, parts, strict=False))
    values = tuple(str(given.get(name, "")).strip()[:2_000] for name in required)
    return values if all(values) else None


NEXT_STEP = (
    "Tool result:\n{result}\n\nDoes this answer the question? If it does, reply "
    '{{"tool": "answer", "input": "<the answer, with the document numbers in brackets>"}}; if '
    "not, call another tool."
)


def protocol_for(settings: Settings) -> Protocol:
    """agentic.protocol; auto: JSON steps for the GGUF models llama.cpp serves us (small
    models that write their tool calls as text the server does not parse, but follow a
    grammar), the OpenAI tools API for any other LLM."""
    chosen = settings.agentic.protocol
    if chosen != "auto":
        return chosen
    return "json" if settings.llm.model in packaged.MODELS else "tools"


def step_format(tools: tuple[str, ...]) -> dict[str, Any]:
    """The response format of a JSON step: one tool (or the answer) and its input."""
    schema = {
        "type": "object",
        "properties": {"tool": {"enum": [*tools, "answer"]}, "input": {"type": "string"}},
        "required": ["tool", "input"],
    }
    return {"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}


def _input_form(tool: str, catalog: Mapping[str, dict[str, Any]]) -> str:
    required = catalog[tool]["parameters"]["required"]
    return "..." if len(required) == 1 else " | ".join(f"<{name}>" for name in required)


def step_instructions(tools: tuple[str, ...], catalog: Mapping[str, dict[str, Any]] = TOOLS) -> str:
    """How a JSON step is written (added to the agent's instructions in the json protocol)."""
    lines = [
        f'- {{"tool": "{name}", "input": "{_input_form(name, catalog)}"}}: '
        f"{catalog[name]['description']}"
        for name in tools
    ]
    return (
        "Each turn, reply with one JSON object, a tool and its input:\n"
        + "\n".join(lines)
        + '\n- {"tool": "answer", "input": "..."}: your answer, citing the documents\' numbers '
        "in brackets, once the tool results hold it (or saying you could not find it).\n"
        "Use the tools before you answer: never answer from memory."
    )


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def without_repeats(text: str) -> str:
    """The text without a sentence said again word for word (a small model's loop)."""
    seen: set[str] = set()
    kept = []
    for sentence in _SENTENCE_END.split(text):
        key = " ".join(sentence.lower().split())
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(sentence)
    return " ".join(kept)


def json_step(text: str) -> tuple[str, str] | None:
    """(tool, input) of a JSON step; one cut short by max_tokens (its string and object left
    open) is closed first, so that an answer cut mid-sentence is still an answer, never the
    JSON shown to the user."""
    for ending in ("", '"}', "}"):
        try:
            step = json.loads(text.strip().rstrip("\\") + ending)
        except json.JSONDecodeError:
            continue
        if isinstance(step, dict) and isinstance(step.get("tool"), str):
            return step["tool"], str(step.get("input", ""))
    return None


def written_call(text: str, tools: tuple[str, ...]) -> tuple[ToolCall, ...]:
    """The first tool call a model wrote as text instead of in the API's field (small models
    do: a JSON object {"name": ..., "arguments": {...}}, fenced or not, even in double braces),
    when it names one of `tools`; the rest of such a text is the model's guess at the result,
    and is dropped."""
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char == "{"][:MAX_WRITTEN_OBJECTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if (
            isinstance(value, dict)
            and value.get("name") in tools
            and isinstance(value.get("arguments", {}), dict)
        ):
            arguments = json.dumps(value.get("arguments", {}))
            return (ToolCall("call-written", str(value["name"]), arguments[:4_000]),)
    return ()


def _assistant(text: str, calls: tuple[ToolCall, ...]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }

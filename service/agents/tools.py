"""The agents' tools: ONE registry, each tool one entry with its name, what the LLM is told of
it (its description and arguments: the JSON schema of OpenAI's tools API), what a person
watching it work is shown (label, icon, i18n key: Datafari 7's StreamToolExecutor sends them
in tool.call), and its handler.

    >>> TOOLS["bm25Search"].spec["parameters"]["required"]
    ['query']
    >>> result = await TOOLS["bm25Search"].handler(toolbox, {"query": "lighthouse lamp"})

The tools are MCP's (search, ask, summarize, get_document) and Datafari 7's generic agent's
(bm25Search, hybridSearch, ragByDocument, searchChunksFromADocument, readNextChunks,
entityExtraction, with summarize). A handler works through a `Toolbox`: the agent's request
(the caller's scope, its language, the sources numbered so far), so a tool reads nothing its
caller may not. Datafari's custom tools are Tools too (service.agents.custom), made from the
file the config holds (service.config.custom_tools).

Every tool is named in service.config.tool_names, where rag.properties' check of
agentic.agents (service.config.settings) reads the names without importing the agents; this
module imports nothing else of the service but its errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from service.config.tool_names import TOOL_NAMES
from service.errors import DocumentNotFound

NOTHING_FOUND = "nothing found"  # a search's result when it found nothing

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 3_000  # a tool's result, at most
READ_PART_CHARS = 2_500  # readNextChunks: a part of a document's text
MAX_ARGUMENT_CHARS = 2_000


class Toolbox(Protocol):
    """What a tool's handler works with: one agent's request, its caller's scope and language;
    every document it shows is numbered (the answer cites the numbers). A document is named by
    its number ("3", "[3]") or its id; DocumentNotFound when the caller may read none such."""

    async def search(
        self, query: str, method: str = "", *, within: str = "", filters: tuple[str, ...] = ()
    ) -> str:
        """The best passages for `query` by `method` (bm25, vector, hybrid; "" the configured
        retrieval), in one document (`within`) or those passing facet `filters`, numbered;
        "nothing found" when none."""
        ...

    async def ask(self, question: str, document: str = "") -> str:
        """The question answered from the documents (from one only, when named)."""
        ...

    async def summary(self, document: str) -> str:
        """One document summarized."""
        ...

    async def read(self, document: str, start: int, chars: int) -> tuple[str, bool]:
        """One document's text from `start`, at most `chars`, shown numbered ("" when it ends
        before a `start` past 0), and whether more follows."""
        ...


Handler = Callable[[Toolbox, Mapping[str, str]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """One tool: what the LLM is told of it, what a person watching sees, and what it runs."""

    name: str
    description: str
    parameters: Mapping[str, str]  # name -> description; each a string
    required: tuple[str, ...]
    handler: Handler
    label: str = ""  # tool.call's label ("" the name)
    icon: str = ""  # Datafari's generic tools only, with i18n_key
    i18n_key: str = ""

    @property
    def spec(self) -> dict[str, Any]:
        """The tool as OpenAI's tools API and our JSON steps describe it."""
        return {
            "description": self.description,
            "parameters": {
                "type": "object",
                "properties": {
                    name: {"type": "string", "description": what}
                    for name, what in self.parameters.items()
                },
                "required": list(self.required),
            },
        }

    def arguments(self, given: Mapping[str, Any]) -> dict[str, str] | None:
        """The call's arguments as text (each at most MAX_ARGUMENT_CHARS), None when a
        required one is missing. A JSON step gives one `input`: for a tool of two required
        arguments, written `first | second`; a tool of one takes the first value given."""
        texts = {str(k): str(v).strip()[:MAX_ARGUMENT_CHARS] for k, v in given.items()}
        required = self.required
        if len(required) == 1:
            first = next((v for v in given.values() if isinstance(v, str | int)), "")
            value = str(first).strip()[:MAX_ARGUMENT_CHARS]
            return {**texts, required[0]: value} if value else None
        if set(given) == {"input"} and isinstance(given["input"], str):
            parts = [part.strip() for part in given["input"].split("|", len(required) - 1)]
            texts = dict(zip(required, parts, strict=False))
        values = {name: texts.get(name, "") for name in required}
        return {**texts, **values} if all(values.values()) else None


@dataclass(frozen=True)
class ToolEvent:
    """One tool call as a stream shows it (Datafari 7's tool.call, tool.result, tool.error):
    `what` call when it starts, then result or error with its duration."""

    what: Literal["call", "result", "error"]
    id: str
    tool: str
    duration_ms: int = 0
    error: str = ""


@dataclass(frozen=True)
class AnswerText:
    """A part of the agent's final answer, as a stream shows it (message.delta); the parts
    joined are the answer kept."""

    text: str


AgentEvent = ToolEvent | AnswerText


# -- the handlers -----------------------------------------------------------------------------


async def _search(box: Toolbox, given: Mapping[str, str]) -> str:
    return await box.search(given["query"])  # the configured retrieval


async def _bm25(box: Toolbox, given: Mapping[str, str]) -> str:
    return await box.search(given["query"], "bm25")


async def _hybrid(box: Toolbox, given: Mapping[str, str]) -> str:
    return await box.search(given["query"], "hybrid")


async def _ask(box: Toolbox, given: Mapping[str, str]) -> str:
    return await box.ask(given["question"])


async def _summarize(box: Toolbox, given: Mapping[str, str]) -> str:
    return await box.summary(given["document"])


async def _get_document(box: Toolbox, given: Mapping[str, str]) -> str:
    shown, _ = await box.read(given["document"], 0, MAX_RESULT_CHARS - 200)
    return shown


async def _rag_by_document(box: Toolbox, given: Mapping[str, str]) -> str:
    """The question asked of one document; of every document when none has that id (a small
    model guesses ids: the answer is what it was after)."""
    named, question = given["documentId"], given["question"]
    try:
        return await box.ask(question, named)
    except DocumentNotFound:  # the answer alone: a small model copies what it reads
        log.info("ragByDocument: no document %r, the question asked of all", named[:100])
        return await box.ask(question)


async def _entities(box: Toolbox, given: Mapping[str, str]) -> str:
    question = (
        f"List the {given['entities']} this document names, one per line, as it writes them; "
        "none: say so."
    )
    return await box.ask(question, given["documentId"])


async def _search_in_document(box: Toolbox, given: Mapping[str, str]) -> str:
    named = given["documentId"]
    found = await box.search(given["query"], within=named)
    return f"{NOTHING_FOUND} in '{named[:100]}'" if found == NOTHING_FOUND else found


async def _read_next(box: Toolbox, given: Mapping[str, str]) -> str:
    named, part = given["documentId"], given["part"]
    if not (part.isascii() and part.isdigit() and len(part) <= 9):  # never '²': int() refuses
        return f"error: part is a number written 0, 1, 2... (not {part[:20]!r})"
    index = int(part)
    shown, more = await box.read(named, index * READ_PART_CHARS, READ_PART_CHARS)
    if not shown:
        return f"{named[:100]!r} has no part {index}: it ends before"
    return shown + (f"\n(next: part {index + 1})" if more else "\n(the end)")


# -- the registry -----------------------------------------------------------------------------

TOOLS: dict[str, Tool] = {}


def register(
    name: str,
    description: str,
    handler: Handler,
    *,
    label: str = "",
    icon: str = "",
    i18n_key: str = "",
    **arguments: str,
) -> Tool:
    """A tool added to the registry, its arguments (name=description) all required strings;
    its name one of TOOL_NAMES (what agentic.agents may list)."""
    if name not in TOOL_NAMES:
        raise ValueError(f"{name!r} is no tool name: add it to service.config.tool_names")
    tool = Tool(name, description, dict(arguments), tuple(arguments), handler,
                label, icon, i18n_key)  # fmt: skip
    TOOLS[name] = tool
    return tool


_NUMBER_OR_ID = "The document's number or id."

# ours (MCP's names)
register("search", "Search the documents. Returns the best passages, each with its number, "
         "title and text.", _search, label="Searching the documents",
         query="What to look for.")  # fmt: skip
register("ask", "Ask one precise question; it is answered from the documents, with the numbers "
         "of the documents it used.", _ask, label="Answering from the documents",
         question="The question.")  # fmt: skip
# Datafari 7's generic agent's tools (its GenericTools), by its names, doing what they do with
# what we have; the label, icon and i18n key its chat bot shows (GenericTools' ToolMeta)
register("summarize", "Summarize one document, named by its number or its id.", _summarize,
         label="Generating a document summary...", icon="search", i18n_key="tool.summarize",
         document="Number or id.")  # fmt: skip
register("get_document", "Read one document's text (its start), named by its number or its id.",
         _get_document, label="Reading a document", document="Number or id.")  # fmt: skip
register("bm25Search", "Keyword (BM25) search of the documents. Returns the best matches, each "
         "with its number, title and text.", _bm25, label="Searching documents...",
         icon="search", i18n_key="tool.bm25Search",
         query="The keywords to look for.")  # fmt: skip
register("hybridSearch", "Search of the documents by keywords and meaning together. Returns the "
         "best passages, each with its number, title and text.", _hybrid,
         label="Searching documents...", icon="search", i18n_key="tool.hybridSearch",
         query="What to look for.")  # fmt: skip
register("ragByDocument", "Ask a question of one document only; it is answered from that "
         "document.", _rag_by_document, label="Exploring document...", icon="search",
         i18n_key="tool.ragByDocument", documentId=_NUMBER_OR_ID,
         question="The question.")  # fmt: skip
register("searchChunksFromADocument", "Search the passages of one document. Returns the best "
         "passages of it.", _search_in_document, label="Searching content from a document...",
         icon="search", i18n_key="tool.searchChunksFromADocument", documentId=_NUMBER_OR_ID,
         query="What to look for in it.")  # fmt: skip
register("readNextChunks", "Read one document's text, part by part: part 0 is its start; each "
         "result says which part comes next.", _read_next, label="Reading a document...",
         icon="document", i18n_key="tool.readNextChunks", documentId=_NUMBER_OR_ID,
         part="The part to read (0, 1, 2...).")  # fmt: skip
register("entityExtraction", "List the entities of some kinds (people, places, dates...) that "
         "one document names.", _entities, label="Extracting entities...", icon="document",
         i18n_key="tool.entityExtraction", documentId=_NUMBER_OR_ID,
         entities="The kinds of entities to list, e.g. people, places, dates.")  # fmt: skip


def tool_specs(tools: Mapping[str, Tool]) -> list[dict[str, Any]]:
    """The OpenAI `tools` of these tools."""
    return [{"type": "function", "function": {"name": name, **t.spec}} for name, t in tools.items()]


def found_nothing(result: str) -> bool:
    """Whether a tool's result says it found nothing: a search's NOTHING_FOUND, or one
    within a document (`searchChunksFromADocument`: "nothing found in 'x'")."""
    return result == NOTHING_FOUND or result.startswith(f"{NOTHING_FOUND} in ")

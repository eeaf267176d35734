"""Datafari 7's `custom` agent's tools as configured: `agentic-custom-tools.json`, beside
rag.properties (Datafari reads the same file from its conf folder, same shape: a list of
`{type, name, label, icon, i18nKey, description, parameters: {name: {type, description,
required}}, properties: {...}}`), read into one CustomTool each. How an agent runs one is
service.agents.custom's.

Two types, as Datafari's:
- `solr-search` (or `datafari-search`): the `q` argument searched (`properties.handler`
  /select: BM25, /vector, /rrf: hybrid), narrowed by `properties.fq`, filters whose
  `{{parameter}}` marks take the call's arguments (each as ONE value, never syntax: see
  service.agents.custom).
- `rag-by-document-template`: the `id` document asked `properties.template`, its
  `{{parameter}}` marks replaced by the call's arguments (text only).

Everything is checked when the file is read (the reason names the tool and the field), and
bounded: MAX_TOOLS tools, MAX_PARAMETERS parameters each, MAX_FILE_BYTES in all. The file is
read with rag.properties (service.config.store: at start, and again when either changes), so
a broken one stops the service at start and, later, keeps the last good tools serving, as a
broken rag.properties does; the tools are on each request's Snapshot.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from service.errors import ConfigError, TechnicalError

FILE_NAME = "agentic-custom-tools.json"
MAX_FILE_BYTES = 256 * 1024
MAX_TOOLS = 20
MAX_PARAMETERS = 10
MAX_FILTERS = 10
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
SEARCHES = {"solr-search": "", "datafari-search": ""}  # the configured retrieval
HANDLERS = {"/select": "bm25", "/vector": "vector", "/rrf": "hybrid"}


class CustomToolsError(TechnicalError):
    """agentic-custom-tools.json cannot be used; the reason says which tool and field."""


@dataclass(frozen=True)
class CustomTool:
    """One tool of the file: what the LLM is told of it, and what it runs (an agent runs it:
    service.agents.custom)."""

    name: str
    kind: str  # "search" or "rag-by-document"
    description: str
    label: str
    parameters: dict[str, str]  # name -> description, every one a string
    required: tuple[str, ...]
    filters: tuple[str, ...] = ()  # search: facet filters with {{parameter}} marks
    method: str = ""  # search: bm25, vector, hybrid ("" the configured one)
    template: str = ""  # rag-by-document: the question, with {{parameter}} marks


def custom_tools(folder: Path) -> dict[str, CustomTool]:
    """The tools of `folder`'s agentic-custom-tools.json (none when there is no such file);
    CustomToolsError naming what is wrong."""
    path = folder / FILE_NAME
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as file:  # one read of at most the limit: no stat-then-read race
            raw = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise CustomToolsError(f"{FILE_NAME} is not readable ({type(error).__name__})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise CustomToolsError(f"{FILE_NAME} is over {MAX_FILE_BYTES // 1024} KiB")
    try:
        listed = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # bad UTF-8, bad JSON, a 5,000-digit number
        raise CustomToolsError(
            f"{FILE_NAME} is not readable JSON ({type(error).__name__})"
        ) from None
    if not isinstance(listed, list) or len(listed) > MAX_TOOLS:
        raise CustomToolsError(f"{FILE_NAME}: a list of at most {MAX_TOOLS} tools")
    tools: dict[str, CustomTool] = {}
    for position, item in enumerate(listed, start=1):
        tool = _tool(item, position)
        if tool.name in tools:
            raise CustomToolsError(f"{FILE_NAME}: tool {tool.name!r} is named twice")
        tools[tool.name] = tool
    return tools


def checked_custom_tools(folder: Path) -> dict[str, CustomTool]:
    """custom_tools(folder), a broken file a ConfigError naming the file and the fix."""
    try:
        return custom_tools(folder)
    except CustomToolsError as error:
        raise ConfigError(
            f"{folder / FILE_NAME} cannot be used: {error.reason}. Correct the file (Datafari's "
            "format: a list of {type, name, description, parameters, properties}), or remove it "
            "(agent custom then falls back to generic)"
        ) from None


def _tool(item: object, position: int) -> CustomTool:
    where = f"{FILE_NAME}, tool {position}"
    if not isinstance(item, dict):
        raise CustomToolsError(f"{where}: an object")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise CustomToolsError(f"{where}: name must be letters, digits, _ or - (64 at most)")
    where = f"{FILE_NAME}, tool {name}"
    kind = item.get("type")
    description = _text(item.get("description"), f"{where}: description", 1000)
    label = _text(item.get("label") or name, f"{where}: label", 200)
    parameters, required = _parameters(item.get("parameters") or {}, where)
    properties = item.get("properties") or {}
    if not isinstance(properties, dict):
        raise CustomToolsError(f"{where}: properties must be an object")
    if kind in SEARCHES:
        if "q" not in parameters:
            parameters, required = {"q": "What to search for.", **parameters}, ("q", *required)
        handler = properties.get("handler") or "/select"
        if handler not in HANDLERS:
            raise CustomToolsError(f"{where}: handler is one of {', '.join(HANDLERS)}")
        filters = properties.get("fq") or []
        if not isinstance(filters, list) or len(filters) > MAX_FILTERS:
            raise CustomToolsError(f"{where}: fq is a list of at most {MAX_FILTERS} filters")
        texts = tuple(_text(f, f"{where}: fq", 1000) for f in filters)
        return CustomTool(name, "search", description, label, parameters, required,
                          filters=texts, method=HANDLERS[handler])  # fmt: skip
    if kind == "rag-by-document-template":
        if "id" not in parameters:
            parameters, required = {"id": "The document's id.", **parameters}, ("id", *required)
        template = _text(properties.get("template"), f"{where}: template", 2000)
        return CustomTool(name, "rag-by-document", description, label, parameters, required,
                          template=template)  # fmt: skip
    raise CustomToolsError(f"{where}: type is solr-search or rag-by-document-template")


def _parameters(given: object, where: str) -> tuple[dict[str, str], tuple[str, ...]]:
    if not isinstance(given, dict) or len(given) > MAX_PARAMETERS:
        raise CustomToolsError(f"{where}: parameters, an object of at most {MAX_PARAMETERS}")
    parameters: dict[str, str] = {}
    required: list[str] = []
    for name, definition in given.items():
        if not _NAME.fullmatch(str(name)) or not isinstance(definition, dict):
            raise CustomToolsError(f"{where}: parameter {str(name)[:64]!r} is not name: {{...}}")
        parameters[name] = _text(definition.get("description") or name, f"{where}: {name}", 500)
        if definition.get("required") is True:
            required.append(name)
    return parameters, tuple(required)


def _text(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise CustomToolsError(f"{where}: a text of 1 to {limit} characters")
    return value.strip()

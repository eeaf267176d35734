"""Datafari 7's `custom` agent's tools at work: each tool of `agentic-custom-tools.json` (read
and checked with the config: service.config.custom_tools.CustomTool) offered and run as a
registry Tool.

- a search: the `q` argument searched with the tool's retrieval, narrowed by its filters,
  whose `{{parameter}}` marks take the call's arguments. Unlike Datafari, which sends them to
  Solr as they are, each argument goes in as ONE value: a quoted term, its quotes and
  backslashes escaped (within a phrase of the template, the phrase's text), so that whatever it
  holds (OR, AND, NOT, ranges, parentheses, *, field:) is words to find, never syntax; the
  filter is then read by the facet grammar (service.retrieval.facet_filter), which refuses a
  filter on a security field and anything a facet does not send. `title:{{word}}` with the word
  `Lighthouse OR title:[* TO *]` is the filter `title:"Lighthouse OR title:[* TO *]"`.
- a rag-by-document: the `id` document asked the tool's template, its `{{parameter}}` marks
  replaced by the call's arguments: text only (control characters and line breaks blanked,
  spaces collapsed), each cut so that the question keeps the template's own words within the
  MAX_QUERY_LENGTH a question is cut at.

    >>> tool = custom_tool(snapshot.custom_tools["cfpSearch"])    # a Tool, as the registry's
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from service.agents.tools import Tool, Toolbox
from service.config.custom_tools import CustomTool
from service.text import MAX_QUERY_LENGTH

_MARK = re.compile(r"\{\{([A-Za-z][A-Za-z0-9_-]{0,63})\}\}")
# an argument written as it is in a filter: a word the facet grammar reads as one value (and
# writes quoted), when what follows the mark ends a value (never `:`, nor more of a word)
_PLAIN = re.compile(r"[\w.@+-]{1,256}")
_ENDS_A_VALUE = re.compile(r"|\s|[)\]}]")
MAX_ARGUMENT_CHARS = 200  # a template's argument, at most (less when the template is long)
_BLANKS = re.compile(r"\s+")


def custom_tool(custom: CustomTool) -> Tool:
    """The tool as an agent offers and runs it (the registry's shape)."""

    async def handler(box: Toolbox, arguments: Mapping[str, str]) -> str:
        return await run(custom, box, arguments)

    return Tool(custom.name, custom.description, custom.parameters, custom.required, handler,
                label=custom.label)  # fmt: skip


async def run(custom: CustomTool, box: Toolbox, arguments: Mapping[str, str]) -> str:
    """A search narrowed by the filters (each read by the facet grammar: an argument is a
    value, never syntax), or the template asked of the `id` document."""
    given = dict(arguments)
    if custom.kind == "rag-by-document":
        return await box.ask(rendered(custom, custom.template, given), given["id"])
    filters = tuple(rendered(custom, text, given) for text in custom.filters)
    return await box.search(given["q"], custom.method, filters=filters)


def rendered(custom: CustomTool, text: str, arguments: dict[str, str]) -> str:
    """`text` (one of the filters of a search, the template of a rag-by-document) with each
    {{parameter}} mark replaced by the call's argument ("" if none): in a filter, one value
    (filter_rendered); in the template, text (question_rendered)."""
    if custom.kind == "search":
        return filter_rendered(text, arguments)
    return question_rendered(text, arguments)


def filter_rendered(text: str, arguments: dict[str, str]) -> str:
    """The filter `text` with each mark replaced by its argument as one value of the filter's
    own parse: a quoted term, escaped (a plain word as it is, what the facet grammar reads as
    one value too); within a phrase of the template, escaped text of that phrase. A missing
    argument is nothing (the facet grammar then refuses the filter's empty value)."""
    written: list[str] = []
    at, phrase = 0, False
    while at < len(text):
        mark = _MARK.match(text, at)
        if mark is not None:
            value = arguments.get(mark.group(1), "")
            after = text[mark.end() : mark.end() + 1]
            if phrase:
                written.append(_escaped(value))
            elif not value or (_PLAIN.fullmatch(value) and _ENDS_A_VALUE.fullmatch(after)):
                written.append(value)
            else:
                written.append(f'"{_escaped(value)}"')
            at = mark.end()
            continue
        char = text[at]
        step = 2 if phrase and char == "\\" else 1  # the facet grammar's escape in a phrase
        phrase = phrase != (char == '"')
        written.append(text[at : at + step])
        at += step
    return "".join(written)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def question_rendered(template: str, arguments: dict[str, str]) -> str:
    """The question `template` with each mark replaced by its argument as text: control
    characters and line breaks blanked, spaces collapsed, cut so that the template's own words
    stay within the MAX_QUERY_LENGTH a question is cut at (MAX_ARGUMENT_CHARS at most)."""
    marks = len(_MARK.findall(template))
    if not marks:
        return template
    room = MAX_QUERY_LENGTH - len(_MARK.sub("", template))
    limit = min(MAX_ARGUMENT_CHARS, max(room // marks, 0))

    def text_of(mark: re.Match[str]) -> str:
        value = "".join(
            " " if unicodedata.category(char)[0] in "CZ" else char
            for char in arguments.get(mark.group(1), "")
        )
        return _BLANKS.sub(" ", value).strip()[:limit].strip()

    return _MARK.sub(text_of, template)

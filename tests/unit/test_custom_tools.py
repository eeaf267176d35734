"""agentic-custom-tools.json (Datafari 7's custom agent): read as Datafari writes it, every
field checked with the tool named, bounded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.agents.custom import FILE_NAME, MAX_FILE_BYTES, CustomToolsError, custom_tools

SEARCH = {
    "type": "solr-search",
    "name": "cfpSearch",
    "label": "Searching calls for papers",
    "description": "Search the calls for papers of one source.",
    "parameters": {"cfp": {"type": "string", "description": "The source", "required": True}},
    "properties": {"handler": "/rrf", "fq": ["repo_source:{{cfp}}"]},
}


def write(folder: Path, tools: object) -> Path:
    (folder / FILE_NAME).write_text(json.dumps(tools))
    return folder


def test_no_file_is_no_tools_and_a_tool_reads_as_datafari_writes_it(tmp_path: Path) -> None:
    assert custom_tools(tmp_path) == {}
    (tool,) = custom_tools(write(tmp_path, [SEARCH])).values()
    assert (tool.kind, tool.method, tool.required) == ("search", "hybrid", ("q", "cfp"))
    assert tool.spec["parameters"]["required"] == ["q", "cfp"]
    assert tool.rendered(tool.filters[0], {"cfp": "arxiv"}) == "repo_source:arxiv"
    assert tool.rendered(tool.filters[0], {}) == "repo_source:"


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ({"not": "a list"}, "a list"),
        ([SEARCH] * 21, "at most 20"),
        ([SEARCH, SEARCH], "named twice"),
        ([{**SEARCH, "name": "bad name"}], "name must be"),
        ([{**SEARCH, "type": "shell"}], "type is"),
        ([{**SEARCH, "properties": {"handler": "/update"}}], "handler"),
        ([{**SEARCH, "properties": {"fq": ["x:y"] * 11}}], "fq"),
        ([{**SEARCH, "description": ""}], "description"),
        ([{**SEARCH, "parameters": {f"p{n}": {} for n in range(11)}}], "parameters"),
        ([{"type": "rag-by-document-template", "name": "t", "description": "d"}], "template"),
    ],
)
def test_a_broken_file_names_the_tool_and_the_field(
    tmp_path: Path, tools: object, says: str
) -> None:
    with pytest.raises(CustomToolsError, match=says):
        custom_tools(write(tmp_path, tools))


def test_a_file_that_is_not_json_or_too_large_is_refused(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("[" * 100_000)
    with pytest.raises(CustomToolsError, match="not readable JSON"):
        custom_tools(tmp_path)
    (tmp_path / FILE_NAME).write_text(" " * (MAX_FILE_BYTES + 1))
    with pytest.raises(CustomToolsError, match="KiB"):
        custom_tools(tmp_path)

"""agentic-custom-tools.json (Datafari 7's custom agent): read as Datafari writes it, every
field checked with the tool named, bounded."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from service.agents.custom import custom_tool, rendered
from service.config import ConfigStore
from service.config import store as config_store
from service.config.custom_tools import FILE_NAME, MAX_FILE_BYTES, CustomToolsError, custom_tools
from service.errors import ConfigError

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
    assert custom_tool(tool).spec["parameters"]["required"] == ["q", "cfp"]
    assert rendered(tool, tool.filters[0], {"cfp": "arxiv"}) == "repo_source:arxiv"
    assert rendered(tool, tool.filters[0], {}) == "repo_source:"


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


# -- read with the config (service.config.store), not per request ----------------------------


def config_beside(folder: Path) -> Path:
    path = folder / "rag.properties"
    path.write_text("agentic.enabled=true\n")
    return path


def test_a_broken_file_stops_the_start_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    write(tmp_path, [{**SEARCH, "type": "shell"}])
    with pytest.raises(ConfigError) as refused:
        ConfigStore(config_beside(tmp_path), env={})
    message = str(refused.value)
    assert str(tmp_path / FILE_NAME) in message and "tool cfpSearch: type is" in message
    assert "Correct the file" in message and "or remove it" in message


def test_the_tools_are_read_with_the_config_once_not_at_each_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, [SEARCH])
    store = ConfigStore(config_beside(tmp_path), env={})
    kept = store.custom_tools()
    assert kept["cfpSearch"].description == SEARCH["description"]
    reads: list[Path] = []
    read = config_store.checked_custom_tools
    monkeypatch.setattr(
        config_store, "checked_custom_tools", lambda folder: reads.append(folder) or read(folder)
    )
    for _ in range(3):  # the file untouched: what was read with the config, not read again
        assert store.custom_tools() is kept
    assert reads == []
    # a change of the same size within the same mtime is seen (another ctime): read again
    path = tmp_path / FILE_NAME
    before = path.stat()
    write(tmp_path, [{**SEARCH, "description": SEARCH["description"].upper()}])
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert store.custom_tools()["cfpSearch"].description == SEARCH["description"].upper()
    assert reads == [tmp_path]


def test_a_file_broken_while_serving_keeps_the_last_good_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, [SEARCH])
    store = ConfigStore(config_beside(tmp_path), env={})
    kept = store.custom_tools()
    write(tmp_path, [SEARCH, SEARCH])
    with caplog.at_level(logging.ERROR, logger="service.config.store"):
        assert store.custom_tools() is kept
        assert store.current().agentic.enabled
    assert "configuration not reloaded" in caplog.text and "named twice" in caplog.text
    (tmp_path / FILE_NAME).unlink()  # no file: no custom tools
    assert store.custom_tools() == {}


# a file json.loads refuses with a plain ValueError (an integer of more digits than Python
# converts: 4,300): the ConfigError naming the file at start, the last good tools while serving
HUGE_NUMBER = "[" + "9" * 5000 + "]"  # 5 KB, well within MAX_FILE_BYTES


def test_a_file_with_a_huge_number_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text(HUGE_NUMBER)
    with pytest.raises(ConfigError):
        ConfigStore(config_beside(tmp_path), env={})


def test_a_file_with_a_huge_number_while_serving_keeps_the_last_good_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, [SEARCH])
    store = ConfigStore(config_beside(tmp_path), env={})
    kept = store.custom_tools()
    (tmp_path / FILE_NAME).write_text(HUGE_NUMBER)
    with caplog.at_level(logging.ERROR, logger="service.config.store"):
        assert store.custom_tools() is kept  # raises ValueError today
    assert "configuration not reloaded" in caplog.text

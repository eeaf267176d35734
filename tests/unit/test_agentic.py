"""What a small model writes in a tool loop, read (issue 47, item 4): a tool call written as
text, a JSON step cut short by max_tokens, an answer that loops."""

from __future__ import annotations

import json

import pytest

from service.agents.steps import AnswerParts, json_step, without_repeats, written_call
from service.agents.toolbox import RequestToolbox
from service.agents.tools import TOOLS as REGISTRY
from service.agents.tools import ToolEvent
from service.api.protocols.ndjson import EventStream
from service.config.settings import AGENT_TOOLS, agents_of
from service.llm import Usage

TOOLS = ("search", "ask")


@pytest.mark.parametrize(
    ("text", "called"),
    [
        ('I will search.\n```json\n{"name": "search", "arguments": {"query": "lamp"}}\n```\n'
         'The search found: 1952.', ("search", '{"query": "lamp"}')),
        ('<tools></tools>\n{{"name": "ask", "arguments": {"question": "when?"}}}}',
         ("ask", '{"question": "when?"}')),
        ('{"name": "delete_everything", "arguments": {}} then {"name": "search", '
         '"arguments": {"query": "x"}}', ("search", '{"query": "x"}')),
        ("The lamp was electrified in 1952 [1].", None),
        ('{"answer": 42}', None),
    ],
)  # fmt: skip
def test_a_tool_call_written_as_text_is_read_once(text: str, called: tuple | None) -> None:
    calls = written_call(text, TOOLS)
    if called is None:
        assert calls == ()
    else:
        assert [(c.name, c.arguments) for c in calls] == [called]


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ('{"tool": "search", "input": "lamp"}', ("search", "lamp")),
        (
            '{"tool": "answer", "input": "In 1952, when the lamp',
            ("answer", "In 1952, when the lamp"),
        ),
        ('{"tool": "answer", "input": "a quote \\', ("answer", "a quote ")),
        ("not JSON at all", None),
        ('["tool", "answer"]', None),
    ],
)
def test_a_json_step_cut_short_is_still_read(text: str, step: tuple | None) -> None:
    assert json_step(text) == step


def test_an_answer_that_loops_says_each_sentence_once() -> None:
    looping = "Assert checks a condition. It raises an error. " * 4 + "Done [1]."
    assert without_repeats(looping) == "Assert checks a condition. It raises an error. Done [1]."


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "at least one agent"),
        ("default", "name=tool"),
        ("default=", "name=tool"),
        ("bad name=search", "name=tool"),
        ("default=search,rm_rf", "unknown tools"),
        ("x" * 65 + "=search", "name=tool"),
    ],
)
def test_agentic_agents_that_name_no_real_tool_are_refused(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        agents_of(text)
    assert agents_of("default=search,ask;doc-42=get_document,search") == {
        "default": ("search", "ask"), "doc-42": ("get_document", "search")}  # fmt: skip


# -- the one tool registry (service.agents.tools) ---------------------------------------------


def test_every_tool_agentic_agents_may_name_is_one_registry_entry() -> None:
    assert tuple(REGISTRY) == AGENT_TOOLS
    for name, tool in REGISTRY.items():
        spec = tool.spec
        assert tool.name == name and tool.label and spec["description"]
        assert spec["parameters"]["required"] == list(spec["parameters"]["properties"])
    with pytest.raises(ValueError, match="entityExtraction"):  # the error lists the registry's
        agents_of("default=search,shell")


def shown_as(label: str, icon: str, i18n_key: str) -> dict[str, str]:
    return {"label": label, "icon": icon, "i18nKey": i18n_key}


@pytest.mark.parametrize(
    ("tool", "shown"),
    [
        # Datafari 7's generic tools: as its StreamToolExecutor sends them (GenericTools' meta)
        ("ragByDocument", shown_as("Exploring document...", "search", "tool.ragByDocument")),
        ("readNextChunks", shown_as("Reading a document...", "document", "tool.readNextChunks")),
        ("summarize", shown_as("Generating a document summary...", "search", "tool.summarize")),
        # ours: a label; a custom tool's: its name
        ("ask", {"label": "Answering from the documents"}),
        ("searchByLanguage", {"label": "searchByLanguage"}),
    ],
)
def test_a_tool_call_shows_the_registrys_label(tool: str, shown: dict[str, str]) -> None:
    line = json.loads(EventStream().tool(ToolEvent("call", "c1", tool)))
    assert line["type"] == "tool.call"
    assert line["data"] == {"id": "c1", "toolName": tool, **shown}


@pytest.mark.parametrize(
    ("pieces", "shown"),
    [
        (["The keeper kept it lit [1]. He lived by the ", "lamp! Did he? Yes"],
         ["The keeper kept it lit [1].", " He lived by the lamp!", " Did he?", " Yes"]),
        (["  It burned paraffin.", "\n\nIt burned  paraffin.\n", "Then oil. "],
         ["It burned paraffin.", " Then oil."]),
        (["", " "], []),
    ],
)  # fmt: skip
def test_an_answer_streams_in_sentences_each_said_once(pieces: list[str], shown: list[str]) -> None:
    parts = AnswerParts()
    sent = [part for piece in pieces for part in parts.feed(piece)] + parts.close()
    assert sent == shown
    assert "".join(sent) == parts.text == without_repeats("".join(pieces).strip())


def test_a_tool_s_answer_that_made_no_llm_call_is_counted_as_none() -> None:
    """A tool's ask answered from the answer cache made no LLM call: it was counted as one
    (the agent's llm_calls said more calls than the request made)."""
    box = RequestToolbox(None, None)  # type: ignore[arg-type]
    box.spend(Usage(), 0)
    assert box.usages == []
    box.spend(Usage(prompt_tokens=7, completion_tokens=2), 2)
    assert len(box.usages) == 2 and box.usage.prompt_tokens == 7


@pytest.mark.parametrize(
    "named", ["report.pdf", "O'Brien report.pdf", 'the "quoted" one', "l'été 2024.txt"]
)
async def test_nothing_found_in_a_document_reads_as_nothing_found_whatever_its_name(
    named: str,
) -> None:
    """searchChunksFromADocument's "nothing found in '<id>'" is found nothing, an id with a
    quote of either kind too (repr quoted such an id with the other kind)."""
    from service.agents.tools import NOTHING_FOUND, TOOLS, found_nothing

    class Empty:
        async def search(self, query: str, method: str = "", **_: object) -> str:
            return NOTHING_FOUND

    result = await TOOLS["searchChunksFromADocument"].handler(
        Empty(), {"documentId": named, "query": "lamp"}
    )
    assert found_nothing(result)
    assert not found_nothing("The keeper lit the lamp: nothing found in the logs was wrong.")

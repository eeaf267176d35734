"""What a small model writes in a tool loop, read (issue 47, item 4): a tool call written as
text, a JSON step cut short by max_tokens, an answer that loops."""

from __future__ import annotations

import pytest

from service.agents.steps import json_step, without_repeats, written_call
from service.config.settings import agents_of

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

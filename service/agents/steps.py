"""How an agent's LLM calls tools, turn by turn: OpenAI's tools API, or JSON steps held to a
grammar (small local models); and how a turn's text is read (a tool call a small model wrote
as text, a JSON step cut short, an answer that loops).

    >>> json_step('{"tool": "search", "input": "lighthouse lamp"}')
    ('search', 'lighthouse lamp')
    >>> written_call('{"name": "search", "arguments": {"query": "lamp"}}', ("search",))
    (ToolCall(id='call-written', name='search', arguments='{"query": "lamp"}'),)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from service.agents.tools import Tool
from service.config import Settings
from service.llm.types import ToolCall
from service.models import packaged

Protocol = Literal["tools", "json"]
MAX_WRITTEN_OBJECTS = 20  # JSON objects tried in a text that may hold a written tool call

NEXT_STEP = (
    "Tool result:\n{result}\n\nDoes this answer the question? If it does, reply "
    '{{"tool": "answer", "input": ""}}; if not, call another tool.'
)


def protocol_for(settings: Settings) -> Protocol:
    """agentic.protocol; auto: JSON steps for the GGUF models llama.cpp serves us (small
    models that write their tool calls as text the server does not parse, but follow a
    grammar), the OpenAI tools API for any other LLM."""
    chosen = settings.agentic.protocol
    if chosen != "auto":
        return chosen
    return "json" if packaged.embedded(settings.llm.model) else "tools"


def step_format(tools: tuple[str, ...]) -> dict[str, Any]:
    """The response format of a JSON step: one tool and its input, or "answer" with an empty
    input: the answer is then written from what the tools found, by rag's stages (a small
    model's own answer, long and loosely cited, is never kept: writing it only costs time)."""

    def step(tool: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"tool": tool, "input": value},
            "required": ["tool", "input"],
        }

    answer = step({"const": "answer"}, {"type": "string", "maxLength": 0})
    schema = {"anyOf": [step({"enum": list(tools)}, {"type": "string"}), answer]}
    return {"type": "json_schema", "json_schema": {"name": "step", "schema": schema}}


def _input_form(tool: Tool) -> str:
    required = tool.required
    return "..." if len(required) == 1 else " | ".join(f"<{name}>" for name in required)


def step_instructions(tools: Mapping[str, Tool]) -> str:
    """How a JSON step is written (added to the agent's instructions in the json protocol)."""
    lines = [
        f'- {{"tool": "{name}", "input": "{_input_form(tool)}"}}: {tool.description}'
        for name, tool in tools.items()
    ]
    return (
        "Each turn, reply with one JSON object, a tool and its input:\n"
        + "\n".join(lines)
        + '\n- {"tool": "answer", "input": ""}: once the tool results hold the answer (or no '
        "tool finds it): the answer is then written from the documents your tools found.\n"
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


_BETWEEN_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=\S)")


class AnswerParts:
    """An answer in the parts a stream may show as it is written: whole sentences, each said
    once, the first without the text's leading blanks and each next one after one space.
    Joined, they are without_repeats(text.strip()) of the text fed.

        >>> parts = AnswerParts()
        >>> parts.feed("It burned paraffin. It burned ") + parts.feed("paraffin. Then oil.")
        ['It burned paraffin.']
        >>> parts.close()
        [' Then oil.']
    """

    def __init__(self, tools: tuple[str, ...] = ()) -> None:
        self.tools = tools  # a call to one of them written as text is no part of the answer
        self._pending = ""
        self._held = False  # a JSON object began: held to the end (a tool call written?)
        self._seen: set[str] = set()
        self.text = ""  # the parts so far, joined

    def feed(self, text: str) -> list[str]:
        """The sentences `text` completes (a sentence is complete once what follows its end's
        blanks begins); from a `{` on, nothing until the end (`close`)."""
        self._pending = (self._pending + text).lstrip()
        shown = []
        while not self._held:
            brace = self._pending.find("{")
            boundary = _BETWEEN_SENTENCES.search(self._pending)
            if brace >= 0 and (boundary is None or brace < boundary.start()):
                self._held = True  # a sentence with an object in it: decided at the end
                break
            if boundary is None:
                break
            sentence = self._pending[: boundary.start()]
            self._pending = self._pending[boundary.end() :]
            shown += self._said(sentence)
        return shown

    def close(self) -> list[str]:
        """The sentences left (the text has ended), up to a tool call written as text: it, and
        the model's guess at its result after it, are dropped."""
        rest, self._pending, self._held = self._pending.rstrip(), "", False
        if (call := _written(rest, self.tools)) is not None:
            rest = _without_opening(rest[: call[0]])  # a fence or a second brace before it
        shown = []
        while (boundary := _BETWEEN_SENTENCES.search(rest)) is not None:
            shown += self._said(rest[: boundary.start()])
            rest = rest[boundary.end() :]
        return shown + (self._said(rest) if rest else [])

    def _said(self, sentence: str) -> list[str]:
        key = " ".join(sentence.lower().split())
        if key in self._seen:
            return []
        self._seen.add(key)
        part = f" {sentence}" if self.text else sentence
        self.text += part
        return [part]


def _without_opening(text: str) -> str:
    """`text` without the blanks, code fences (```json) and braces that end it: what opens a
    tool call written after it (a loop from the end: no pattern backtracking over blanks)."""
    while True:
        trimmed = text.rstrip()
        for opening in ("```json", "```", "{"):
            trimmed = trimmed.removesuffix(opening)
        if trimmed == text:
            return text
        text = trimmed


def json_step(text: str) -> tuple[str, str] | None:
    """(tool, input) of a JSON step; one cut short by max_tokens (its string and object left
    open) is closed first, so that an answer cut mid-sentence is still an answer, never the
    JSON shown to the user."""
    for ending in ("", '"}', "}"):
        try:
            step = json.loads(text.strip().rstrip("\\") + ending)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
            continue
        if isinstance(step, dict) and isinstance(step.get("tool"), str):
            return step["tool"], str(step.get("input", ""))
    return None


def written_call(text: str, tools: tuple[str, ...]) -> tuple[ToolCall, ...]:
    """The first tool call a model wrote as text instead of in the API's field (small models
    do: a JSON object {"name": ..., "arguments": {...}}, fenced or not, even in double braces),
    when it names one of `tools`; the rest of such a text is the model's guess at the result,
    and is dropped."""
    found = _written(text, tools)
    return () if found is None else (found[1],)


def _written(text: str, tools: tuple[str, ...]) -> tuple[int, ToolCall] | None:
    """Where the first tool call written in `text` begins, and the call."""
    decoder = json.JSONDecoder()
    starts = [i for i, char in enumerate(text) if char == "{"][:MAX_WRITTEN_OBJECTS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
            continue
        if not isinstance(value, dict) or value.get("name") not in tools:
            continue
        given = value.get("arguments", {})
        if isinstance(given, str):  # OpenAI's own wire form: the arguments as a JSON text
            try:
                given = json.loads(given)
            except (json.JSONDecodeError, RecursionError):
                continue
        if isinstance(given, dict):
            arguments = json.dumps(given)[:4_000]
            return start, ToolCall("call-written", str(value["name"]), arguments)
    return None


def assistant_message(text: str, calls: tuple[ToolCall, ...]) -> dict[str, Any]:
    """The LLM's tool-calling turn, as the tools API takes it back."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }

"""Datafari 7's action=agentic: the LLM calls our tools (OpenAI's tools API, or JSON steps),
step by step, then answers from what they returned.

The tools are the registry's (service.agents.tools) and, for Datafari's custom agent, those of
agentic-custom-tools.json (read with the config, run by service.agents.custom), run with the
caller's scope (service.agents.toolbox), so an agent reads nothing its caller may not.
Bounded: at most agentic.max.steps tool-calling turns of at most MAX_CALLS_PER_STEP calls,
each result cut to MAX_RESULT_CHARS, every LLM call (the tools' own included) spent from the
request's budget, within its deadline; the calls the answer needs are kept for it. Out of steps
(or of calls), the answer is written from what the tools found.

The first step needs no LLM call: the question searched as rag searches it
(RequestToolbox.retrieve), shown as the agent's own search tool, and rag's answer from what it
found (read whole: the verification's and the answer's calls, as /ai/rag's). That answer stands
unless it abstains; then the tool loop runs, the first search already in its messages, and its
answer is written from everything found (the first one's abstention stands when the tools found
no document it had not). An agent without a search tool (a custom agent's) starts with the loop.

The answer is rag's: once the tools found documents, rag's stages from the chunking on write
it from them (service.rag.assemble.answer_from: reranked, cut to the span, cited, verified,
echo-checked, grounded, refused as /ai/rag's answer is, and streamed as it is, a Reply); when
they found nothing, rag answers the question itself (never the LLM from memory). Only what a
tool returns that is no document (a custom tool's figures) is answered by the agent's LLM: told
to `on_text` sentence by sentence (a stream's message.delta), never a tool call written as text.

    >>> agent = Agent(snapshot, scope, tools=("search", "ask"), max_steps=4)
    >>> answer = await agent.run("Who built the lighthouse, and when did its lamp change?")
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from service.agents.custom import custom_tool
from service.agents.steps import (
    NEXT_STEP,
    AnswerParts,
    Protocol,
    assistant_message,
    json_step,
    step_format,
    step_instructions,
    written_call,
)
from service.agents.toolbox import RequestToolbox
from service.agents.tools import (
    MAX_RESULT_CHARS,
    TOOLS,
    Tool,
    ToolEvent,
    found_nothing,
    tool_specs,
)
from service.chains.prompts import language_name
from service.chains.result import says_nothing_relevant
from service.config.custom_tools import CustomTool
from service.deadline import Deadline
from service.errors import DocumentNotFound, NoDocumentFound, NoValidAnswer, ServiceError
from service.llm import ChatMessage, Usage
from service.llm.types import ToolCall
from service.rag import assemble
from service.rag.reply import Answer, Reply
from service.rag.request import RagQuery
from service.retrieval import Scope
from service.snapshot import Snapshot
from service.snapshot.options import RequestOptions

MAX_CALLS_PER_STEP = 3
MAX_ANSWER_DOCUMENTS = 20  # of those the tools found, the answer is written from the first


@dataclass
class FirstStep:
    """The agent's first step: the ids its search found, and rag's answer from them (or its
    refusal); the answer stands unless it abstains."""

    ids: frozenset[str]
    answer: Answer | None = None
    refused: ServiceError | None = None

    @property
    def stands(self) -> bool:
        return self.answer is not None and self.answer.abstained is None

    def shown(self, on_text: Callable[[str], None], usages: Sequence[Usage] = ()) -> Answer:
        """The answer, with the calls made since (`usages`), told whole to `on_text` (a
        stream's message.delta: it was read whole, to know whether it abstains); its
        refusal raised, or (no document found) rag's NoDocumentFound."""
        if self.answer is None:
            raise self.refused or NoDocumentFound("the agent's search found nothing")
        for usage in usages:
            self.answer.add_usage(usage)
        if self.answer.message:
            on_text(self.answer.message)
        return self.answer


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
        on_text: Callable[[str], None] | None = None,
    ) -> None:
        self.protocol = protocol
        self.on_tool = on_tool or (lambda _: None)
        self.on_text = on_text or (lambda _: None)
        # the registry's tools; Datafari's custom agent's (service.agents.custom) win a name
        custom = custom or {}
        self.catalog: dict[str, Tool] = {
            name: custom_tool(custom[name]) if name in custom else TOOLS[name]
            for name in tools
            if name in custom or name in TOOLS
        }
        self.snapshot = snapshot
        self.tools = tools
        self.max_steps = max_steps
        self.lang = lang
        self.progress = progress or (lambda _: None)
        self.toolbox = RequestToolbox(snapshot, scope, lang)

    async def run(self, question: str, history: tuple[ChatMessage, ...] = ()) -> Reply | Answer:
        """The answer: rag's from the first search when it does not abstain (an Answer, read
        whole); else, once the tools found documents, rag's answer from them (a Reply: cut,
        cited, verified, echo-checked, grounded and refused as /ai/rag's); when they found
        nothing (no tool called, only errors or empty results), rag's own answer to the
        question; when they returned something else (a custom tool's figures), the LLM's
        answer from it, written sentence by sentence to `on_text`."""
        started = time.perf_counter()
        assemble.searched(question)  # what rag's answer would refuse, refused before any step
        deadline = Deadline(self.snapshot.settings.server.request_timeout)  # the whole turn's
        llm = self.snapshot.llm
        system = self.snapshot.prompts.render(
            "agent",
            tools=", ".join(self.tools),
            language=language_name(self.lang),
            history=history,
            format_instruction="",
        )
        steps = (
            system + "\n" + step_instructions(self.catalog) if self.protocol == "json" else system
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": steps},
            *(message.as_dict() for message in history),
            {"role": "user", "content": question},
        ]
        # the calls rag's answer needs are kept for it: the verification's and the answer's
        kept = assemble.answer_calls(self.snapshot.settings)
        query = RagQuery(query=question, history=history, lang=self.lang, scope=self.toolbox.scope,
                         options=RequestOptions(always_use_history=bool(history)))  # fmt: skip
        first = await self._first_step(question, query, messages, deadline, started)
        if first is not None and first.stands:
            return first.shown(self.on_text)
        spent = len(self.toolbox.usages)  # the first answer's, when it abstained
        results: list[str] = []
        text = None
        for _ in range(self.max_steps):
            if llm.calls.left <= kept:
                break
            self.progress("agent")
            written, calls = await deadline.run(self._turn(messages))
            if not calls:
                text = written
                break
            calls = calls[:MAX_CALLS_PER_STEP]
            answered = []
            for call in calls:
                self.progress(call.name)
                with llm.calls.reserving(kept):  # a tool's own calls (ask's rag) never them
                    result = await deadline.run(self._reported(call))
                if not result.startswith("error: ") and not found_nothing(result):
                    results.append(f"{call.name}({call.arguments[:200]}):\n{result}")
                answered.append(result)
            self._record(messages, written, calls, answered)
        if first is not None and first.ids and not self._found_since(first):
            # rag asked again of the same documents says the same: its abstention stands
            return first.shown(self.on_text, self.toolbox.usages[spent:])
        self.progress("answer")
        agent_ms = round((time.perf_counter() - started) * 1000, 1)
        # the first documents met (steps x calls x results, whole documents read: bounded
        # here as rag's retrieval is, before chunking and reranking)
        found = tuple(self.toolbox.found.values())[:MAX_ANSWER_DOCUMENTS]
        if found or not results:
            # the documents the tools found, or (none) the question searched as rag searches
            reply = await (
                assemble.answer_from(self.snapshot, query, found, deadline=deadline)
                if found
                else assemble.ask(self.snapshot, query, deadline=deadline)
            )
            reply.extra_usage = (*self.toolbox.usages, *reply.extra_usage)
            reply.started = started
            reply.timings["agent"] = agent_ms
            return reply
        return await deadline.run(
            self._own_answer(question, history, system, results, text, started)
        )

    def _searcher(self) -> str | None:
        """The agent's own search tool, the one its first step is shown as (the configured
        retrieval's kind first); None for an agent without one (a custom agent's tools)."""
        hybrid = self.snapshot.settings.retrieval.in_force != "bm25"
        kinds = ("hybridSearch", "bm25Search") if hybrid else ("bm25Search", "hybridSearch")
        return next((n for n in ("search", *kinds) if self.catalog.get(n) is TOOLS[n]), None)

    async def _first_step(
        self,
        question: str,
        query: RagQuery,
        messages: list[dict[str, Any]],
        deadline: Deadline,
        started: float,
    ) -> FirstStep | None:
        """The question searched as rag searches it, shown as the agent's search tool and
        written into `messages` as its call and result (the LLM never repeats it); when it
        found documents, rag's answer from them, read whole (whether it abstains decides
        whether the tool loop runs). None: the agent has no search tool."""
        name = self._searcher()
        if name is None:
            return None
        self.progress("agent")
        self.progress(name)
        ran = ToolEvent("call", uuid.uuid4().hex, name)
        self.on_tool(ran)
        searching = time.perf_counter()
        try:
            found = await deadline.run(self.toolbox.retrieve(question))
        except ServiceError as error:
            took = round((time.perf_counter() - searching) * 1000)
            failed = f"{error.message} ({error.reason[:200]})"
            self.on_tool(replace(ran, what="error", duration_ms=took, error=failed))
            raise
        took = round((time.perf_counter() - searching) * 1000)
        self.on_tool(replace(ran, what="result", duration_ms=took))
        call = ToolCall(f"call-{ran.id[:12]}", name, json.dumps({"query": question}))
        step = json.dumps({"tool": name, "input": question}) if self.protocol == "json" else ""
        self._record(messages, step, (call,), [self.toolbox.listed(found)[:MAX_RESULT_CHARS]])
        first = FirstStep(frozenset(d.id for d in found))
        if not found:
            return first
        self.progress("answer")
        reply = await assemble.answer_from(self.snapshot, query, found, deadline=deadline)
        reply.started = started
        reply.timings["agent"] = round((time.perf_counter() - started) * 1000, 1)
        try:
            first.answer = await reply.complete()
        except (NoValidAnswer, NoDocumentFound) as error:  # refused as rag refuses it
            first.refused = error
            return first
        if first.answer.abstained is not None:  # its calls counted with the turn's
            self.toolbox.spend(first.answer.usage, first.answer.llm_calls)
        return first

    def _found_since(self, first: FirstStep) -> bool:
        """Whether the tools found a document the first search had not."""
        return any(known not in first.ids for known in self.toolbox.found)

    async def _own_answer(
        self,
        question: str,
        history: tuple[ChatMessage, ...],
        system: str,
        results: list[str],
        text: str | None,
        started: float,
    ) -> Answer:
        """The LLM's answer from what tools returned that is no document (a custom tool's
        figures), each sentence once, told to on_text as written (never a call written)."""
        llm = self.snapshot.llm
        parts = AnswerParts(tuple(self.catalog))
        if not text:  # out of steps: the answer from what the tools returned
            found = "\n\n".join(results)[-4 * MAX_RESULT_CHARS :]
            stream = llm.stream(
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
            async for delta in stream:
                self._show(parts.feed(delta))
            self.toolbox.spend(stream.usage)
        else:  # a turn's text, whole: decided, never a tool call written as text
            self._show(parts.feed(text))
        self._show(parts.close())
        text = parts.text
        answer = Answer(
            message=text,
            documents=self.toolbox.sources.cited_in(text),
            timings={"agent": round((time.perf_counter() - started) * 1000, 1)},
            llm_calls=llm.calls.used,
            usage=self.toolbox.usage,
        )
        if says_nothing_relevant(text):
            answer.documents = []
            answer.abstained = (
                "the agent read what its tools returned and said it does not hold the answer"
            )
        return answer

    def _show(self, parts: list[str]) -> None:
        for part in parts:
            self.on_text(part)

    async def _turn(self, messages: list[dict[str, Any]]) -> tuple[str, tuple[ToolCall, ...]]:
        """One turn of the LLM: its text, and the tools it calls (none: the text answers)."""
        llm = self.snapshot.llm
        if self.protocol == "tools":
            turn = await llm.with_tools(messages, tool_specs(self.catalog))
            self.toolbox.spend(turn.usage)
            if turn.calls:
                return turn.text, turn.calls
            written = written_call(turn.text, self.tools)  # the rest of the text: a guess
            return ("", written) if written else (turn.text, ())
        plain = [ChatMessage(m["role"], m["content"]) for m in messages]
        completion = await llm.complete(plain, {"response_format": step_format(self.tools)})
        self.toolbox.spend(completion.usage)
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
            messages.append(assistant_message(written, calls))
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
        if call.name not in self.catalog or not isinstance(arguments, dict):
            return f"error: no tool {call.name[:64]!r}; the tools are {', '.join(self.tools)}"
        tool = self.catalog[call.name]
        values = tool.arguments(arguments)
        if values is None:
            return f"error: the tool needs its arguments ({', '.join(tool.required)})"
        try:
            result = await tool.handler(self.toolbox, values)
        except DocumentNotFound as error:  # a guessed id: say how to find a real one
            result = (
                f"error: {error.reason[:200]}. Search first (bm25Search or hybridSearch; "
                "search, with our tools) and give one of the numbers or ids it returns"
            )
        except ServiceError as error:
            result = f"error: {error.message} ({error.reason[:200]})"
        return result[:MAX_RESULT_CHARS]

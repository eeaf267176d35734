"""Which agent a request gets: the one it names among agentic.agents; `custom`, the tools of
agentic-custom-tools.json (read with the config: Snapshot.custom_tools), as Datafari's custom
agent; none named, the first; any other name (Datafari's `rag` among them), `generic`,
Datafari's fallback, when there is one, else the first.

    >>> agent = choose_agent(snapshot, "generic", scope, lang="en")
    >>> answer = await agent.run("When was the lamp electrified?")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from service.agents.agent import Agent
from service.agents.steps import protocol_for
from service.agents.tools import ToolEvent
from service.config.custom_tools import CustomTool
from service.config.settings import agents_of
from service.errors import FeatureDisabled
from service.retrieval import Scope
from service.snapshot import Snapshot

FALLBACK = "generic"  # Datafari's agent for a name it does not know


def choose_agent(
    snapshot: Snapshot,
    named: str | None,
    scope: Scope,
    lang: str | None = None,
    progress: Callable[[str], None] | None = None,
    on_tool: Callable[[ToolEvent], None] | None = None,
    on_text: Callable[[str], None] | None = None,
) -> Agent:
    """The agent `named` (the module's docstring), working within `scope`; FeatureDisabled
    when agentic.enabled is off, or ai.enable.rag (rag writes the agent's answer)."""
    settings = snapshot.settings.agentic
    if not settings.enabled:
        raise FeatureDisabled("agentic.enabled is false in rag.properties")
    if not snapshot.settings.server.enable_rag:  # the answer is rag's: refused before the steps
        raise FeatureDisabled("an agent's answer is rag's: ai.enable.rag is false")
    agents = agents_of(settings.agents)

    def agent(tools: tuple[str, ...], custom: Mapping[str, CustomTool] | None = None) -> Agent:
        return Agent(snapshot, scope, tools=tools, custom=custom, max_steps=settings.max_steps,
                     lang=lang, protocol=protocol_for(snapshot.settings), progress=progress,
                     on_tool=on_tool, on_text=on_text)  # fmt: skip

    custom = snapshot.custom_tools
    if named == "custom" and "custom" not in agents and custom:
        return agent(tuple(custom), custom)
    if named is None or named not in agents:
        # none named: the first; any other name (Datafari's rag...): its fallback, generic
        fallback = FALLBACK if named is not None and FALLBACK in agents else None
        named = fallback or next(iter(agents))
    return agent(agents[named])

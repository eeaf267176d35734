"""The agents' tools, by name: what rag.properties' agentic.agents may list (checked by
service.config.settings), in the order the registry offers them.

Each name is one entry of the registry (service.agents.tools), which refuses a tool not named
here; the names live on the ground floor so that the config reads them without importing the
agents.
"""

from __future__ import annotations

TOOL_NAMES: tuple[str, ...] = (
    # ours (MCP's names)
    "search",
    "ask",
    # Datafari 7's generic agent's (its GenericTools)
    "summarize",
    "get_document",
    "bm25Search",
    "hybridSearch",
    "ragByDocument",
    "searchChunksFromADocument",
    "readNextChunks",
    "entityExtraction",
)

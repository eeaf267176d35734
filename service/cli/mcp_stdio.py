"""`solr-rag mcp`: the MCP tools over stdio, for desktop agents."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from service.cli.common import CONFIG_HELP, DEFAULT_CONFIG, Commands
from service.errors import ServiceError


def add(commands: Commands) -> None:
    """mcp."""
    what = (
        "serve the MCP tools (search, ask, summarize, get_document, list_indexes) over stdio, "
        "for desktop agents (Claude Desktop, Cursor); the service's /mcp serves them over HTTP"
    )
    mcp = commands.add_parser("mcp", help=what, description=what[0].upper() + what[1:])
    mcp.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    mcp.add_argument(
        "--groups",
        default=os.environ.get("SOLR_RAG_MCP_GROUPS", ""),
        help="with security.enabled: the groups whose documents the tools may use, "
        "comma-separated (default: $SOLR_RAG_MCP_GROUPS; none: public documents only)",
    )
    mcp.set_defaults(run=_mcp)


def _mcp(args: argparse.Namespace) -> int:
    """The MCP server on stdin/stdout (the protocol's; logs go to stderr)."""
    from service.api.mcp import create_mcp, fixed_scope
    from service.runtime import Runtime

    runtime = Runtime(args.config)
    groups = args.groups.split(",")
    try:
        fixed_scope(groups, runtime.settings())  # bad group names stop here, before any client
    except ServiceError as error:
        print(f"solr-rag: {error.reason}", file=sys.stderr)
        return 2

    async def serve() -> None:
        await runtime.start()
        try:
            await create_mcp(
                runtime, lambda ctx, snapshot: fixed_scope(groups, snapshot.settings)
            ).run_stdio_async()
        finally:
            await runtime.stop()

    asyncio.run(serve())
    return 0

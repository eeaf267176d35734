"""The `solr-rag` command: serve | mcp | ingest | sync | eval | samples | model-server | solr
(start, stop, status, fetch) | solr-credentials. One module a command: each adds its
sub-command (`add`)."""

from __future__ import annotations

import argparse
import os
import sys

from service import __version__
from service.errors import ServiceError, SetupError
from service.observability import configure_logging
from service.tracing._config import propagators_refused


def main(argv: list[str] | None = None) -> int:
    # before the commands' modules are imported: importing FastAPI loads OpenTelemetry's
    # propagators from OTEL_PROPAGATORS, and an unknown one is a traceback there
    refused = propagators_refused(os.environ)
    if refused:
        print(f"solr-rag: {refused}", file=sys.stderr)
        return 2
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging()
    try:
        return int(args.run(args) or 0)
    except SetupError as error:  # a bad config, prompt template or Solr layout: one line
        print(f"solr-rag: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:  # a path given on the command line: one line too
        print(f"solr-rag: {error}", file=sys.stderr)
        return 2
    except ServiceError as error:  # Solr or a model API refused or failed: what and why
        print(f"solr-rag: {error.reason}", file=sys.stderr)
        return 1
    except OSError as error:  # a full disk, a folder that cannot be written
        where = f": {error.filename}" if error.filename else ""
        print(f"solr-rag: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solr-rag", description=__doc__)
    parser.add_argument("--version", action="version", version=f"solr-rag {__version__}")
    # the commands' modules (FastAPI among their imports) only after main's checks
    from service.cli import credentials, evaluate, ingest, local, mcp_stdio, serve, sync

    commands = parser.add_subparsers(dest="command", required=True)
    for command in (serve, ingest, sync, mcp_stdio, evaluate, local, credentials):
        command.add(commands)
    return parser

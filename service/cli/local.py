"""`solr-rag model-server` and `solr-rag solr`: the local model server and the local Solr 9.8."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from service.cli.common import REPO_ROOT, Commands

SOLR_SCRIPT = REPO_ROOT / "solr" / "local" / "solr.sh"
DEFAULT_MODEL_PORT = 8001


def add(commands: Commands) -> None:
    """model-server and solr."""
    model = commands.add_parser("model-server", help="run the local model server")
    model.add_argument("--host", default="127.0.0.1")
    model.add_argument("--port", type=int, default=DEFAULT_MODEL_PORT)
    model.set_defaults(run=_model_server)

    solr = commands.add_parser("solr", help="the local Solr 9.8 (from Maven Central jars)")
    solr.add_argument("action", choices=["start", "stop", "status", "fetch"])
    solr.add_argument("--port", type=int, default=int(os.environ.get("SOLR_PORT", "8983")))
    solr.add_argument("--dir", type=Path, default=REPO_ROOT / ".solr-data")
    for shape in ("nodes", "shards", "replicas"):  # solr.sh's defaults: 1, or $SOLR_NODES...
        solr.add_argument(f"--{shape}", type=int, help=f"SolrCloud {shape} (start only)")
    solr.add_argument(
        "--text-to-vector",
        metavar="URL",
        help="VectorMain embeds passages and queries itself, through the OpenAI-compatible "
        "embeddings API at URL (start only; solr.embeddings.mode)",
    )
    solr.set_defaults(run=_solr)


def _model_server(args: argparse.Namespace) -> int:
    from service.models.__main__ import main as model_main

    model_main(["--host", args.host, "--port", str(args.port)])
    return 0


def _solr(args: argparse.Namespace) -> int:
    command = [
        "bash",
        str(SOLR_SCRIPT),
        args.action,
        "--port",
        str(args.port),
        "--dir",
        str(args.dir),
    ]
    for shape in ("nodes", "shards", "replicas"):
        if getattr(args, shape) is not None:
            command += [f"--{shape}", str(getattr(args, shape))]
    if args.text_to_vector:
        command += ["--text-to-vector", args.text_to_vector]
    return subprocess.call(command)

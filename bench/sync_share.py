"""bench.sync's large share: a Datafari FileShare of synthetic documents a crawler wrote, kept
between runs (its Solr data in ~/.cache/solr-rag/sync-bench), and what it costs to make.

A document is four to seven sentences of the Cranfield abstracts (bench/data/cranfield),
drawn by a generator seeded with its number: document N is the same text on every machine
and every run, so the share is made again alike, and a deleted one posted back unchanged.

The first sync of the share embeds every passage: done by a stand-in encoder (`StandIn`) at
no cost, each passage's vector the normalised mean of its sentences' vectors (the shipped
encoder's, embedded once over the sentence pool and kept beside the data), so the first sync
measures Solr and the service, not the encoder. Later syncs embed with the shipped encoder.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI
from pydantic import BaseModel

from bench.cranfield import load_documents

POOL = 3000  # sentences drawn from
BATCH = 2000  # documents a Solr update
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


@dataclass(frozen=True)
class SentencePool:
    """Real sentences, and their vectors (the shipped encoder's, embedded once)."""

    sentences: list[str]
    vectors: np.ndarray  # one unit row a sentence

    @classmethod
    def load(cls, folder: Path, embeddings_url: str) -> SentencePool:
        """The pool kept in `folder`, or made there (~1 minute of embedding)."""
        sentences_file, vectors_file = folder / "sentences.json", folder / "sentences.npy"
        if sentences_file.exists() and vectors_file.exists():
            return cls(json.loads(sentences_file.read_text()), np.load(vectors_file))
        sentences = _cranfield_sentences()[:POOL]
        vectors = np.asarray(list(_embedded(embeddings_url, sentences)), dtype=np.float32)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(vectors_file, vectors)
        sentences_file.write_text(json.dumps(sentences))
        return cls(sentences, vectors)

    def vector_of(self, text: str) -> list[float]:
        """The normalised mean of the vectors of the pool's sentences `text` holds (a title
        line and cut sentences are passed over); a text of none: its hash's direction."""
        index = self._index()
        rows = [index[s] for s in _SENTENCE_END.split(text.split("\n")[-1]) if s in index]
        if rows:
            mean = self.vectors[rows].mean(axis=0)
        else:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
            mean = np.random.default_rng(seed).standard_normal(self.vectors.shape[1])
        return [float(x) for x in mean / np.linalg.norm(mean)]

    def _index(self) -> dict[str, int]:
        cached: dict[str, int] | None = getattr(self, "_cached", None)
        if cached is None:
            cached = {sentence: row for row, sentence in enumerate(self.sentences)}
            object.__setattr__(self, "_cached", cached)
        return cached


def document(number: int, pool: SentencePool, revision: str = "") -> dict[str, Any]:
    """Document `number` of the share, as a crawler posts it to Datafari's FileShare
    (`revision`: a sentence added, a changed file)."""
    draw = random.Random(number)
    text = " ".join(draw.choice(pool.sentences) for _ in range(draw.randint(4, 7)))
    text += f" {revision}" if revision else ""
    return {
        "id": document_id(number),
        "title": [f"Note {number}"],
        "content": [text],
        "content_en": text,
        "url": f"file://share/{number // 1000:03d}/note-{number:06d}.txt",
        "language": "en",
    }


def document_id(number: int) -> str:
    return f"file://share/{number // 1000:03d}/note-{number:06d}.txt"


class Share:
    """The share's FileShare, written as a crawler writes it (plain Solr updates)."""

    def __init__(self, solr_url: str, collection: str, pool: SentencePool) -> None:
        self._url = f"{solr_url}/{collection}/update"
        self._select = f"{solr_url}/{collection}/select"
        self._pool = pool

    def count(self) -> int:
        found = httpx.get(self._select, params={"q": "*:*", "rows": 0}, timeout=60).json()
        return int(found["response"]["numFound"])

    def fill(self, numbers: range | list[int], say: Any = None) -> None:
        """These documents posted (as they are first made), BATCH a request, then committed."""
        numbers = list(numbers)
        for start in range(0, len(numbers), BATCH):
            batch = [document(n, self._pool) for n in numbers[start : start + BATCH]]
            self._post(batch, commit=False)
            if say:
                say(start + len(batch), len(numbers))
        self._post([], commit=True)

    def revise(self, numbers: list[int], revision: str) -> None:
        """These files changed: a sentence added."""
        self._post([document(n, self._pool, revision) for n in numbers], commit=True)

    def rewrite(self, numbers: list[int]) -> None:
        """These files crawled again, unchanged: posted again as Solr holds them."""
        for start in range(0, len(numbers), BATCH):
            ids = [document_id(n) for n in numbers[start : start + BATCH]]
            found = httpx.post(self._select, data={
                "q": "{!terms f=id}" + ",".join(ids), "rows": len(ids),
                "fl": "id,title,content,url,language"}, timeout=300).json()  # fmt: skip
            docs = found["response"]["docs"]
            for doc in docs:
                doc["content_en"] = "\n".join(doc.get("content", []))
            self._post(docs, commit=False)
        self._post([], commit=True)

    def delete(self, numbers: list[int]) -> None:
        self._post({"delete": [document_id(n) for n in numbers]}, commit=True)

    def _post(self, body: object, *, commit: bool) -> None:
        params = {"commit": "true"} if commit else {}
        httpx.post(self._url, params=params, json=body, timeout=600).raise_for_status()


class _EmbeddingsRequest(BaseModel):
    input: list[str] | str
    model: str = ""


def stand_in(pool: SentencePool) -> FastAPI:
    """An OpenAI-compatible /v1/embeddings whose vectors cost nothing (SentencePool.vector_of):
    the first sync's encoder."""
    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "up"}

    @app.post("/v1/embeddings")
    def embeddings(request: _EmbeddingsRequest) -> dict[str, object]:
        texts = [request.input] if isinstance(request.input, str) else request.input
        data = [{"object": "embedding", "index": i, "embedding": pool.vector_of(t)}
                for i, t in enumerate(texts)]  # fmt: skip
        return {"object": "list", "data": data, "model": request.model,
                "usage": {"prompt_tokens": 0, "total_tokens": 0}}  # fmt: skip

    return app


def _cranfield_sentences() -> list[str]:
    """The abstracts' sentences of 40 to 300 characters, in order, each once."""
    seen: dict[str, None] = {}
    for abstract in load_documents():
        for sentence in _SENTENCE_END.split(" ".join(abstract.content.split())):
            if 40 <= len(sentence) <= 300 and sentence.endswith("."):
                seen.setdefault(sentence, None)
    return list(seen)


def _embedded(embeddings_url: str, texts: list[str]) -> Iterator[list[float]]:
    with httpx.Client(base_url=embeddings_url, timeout=600) as http:
        for start in range(0, len(texts), 256):
            body = {"input": texts[start : start + 256], "model": "all-MiniLM-L6-v2"}
            answer = http.post("embeddings", json=body)
            answer.raise_for_status()
            data = sorted(answer.json()["data"], key=lambda item: item["index"])
            yield from (item["embedding"] for item in data)

"""The text and vectors of bench.scale's distractors: real sentences, recombined.

Sentences come from what this machine holds: Debian's manual pages (English, and French under
/usr/share/man/fr), the CPython reference that ships with Python (pydoc_data's topics), the
Cranfield and CISI abstracts and Debian's French manuals (bench/data). None comes from the
SQuAD or French FAQ sets, which are the needles hidden among them. Each source is a *stream*
of sentences in their order; a pool of them is embedded once by the shipped encoder
(all-MiniLM-L6-v2).

A document is five passages from one stream, near each other; a passage is four sentences
drawn from a window of ten, so no two passages are alike though their words and topics are a
real text's. A passage's vector is the normalised mean of its sentences' vectors (what
embedding the passage gives, approximately, at 1/5,000th of the cost). Everything follows from
the document's number (a seeded generator): a document can be made again, alike, at any time.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import cranfield, french_pages

DATA = Path(__file__).resolve().parent / "data"
MAN = Path("/usr/share/man")
PASSAGES_PER_DOCUMENT = 5
SENTENCES_PER_PASSAGE = 4
WINDOW = 10  # a passage's sentences come from this many in a row
MIN_CHARS, MAX_CHARS = 40, 300
POOL_CAP = 50_000  # sentences of each language at most
# the groups a crawler's ACLs give: a caller in g1 sees about 1% of the documents...
GROUP_SHARES = {"g1": 0.01, "g10": 0.10, "g50": 0.50}
EVERYONE = "everyone"  # on every document (a domain's users), as crawled shares have
DENIED_SHARE = 0.02  # documents that deny g10, and others that deny g50

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÀ-Ý\"'(])")
_ROFF_ESCAPE = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\\(..|\\\[[^\]]*\]|\\[&|^%:]|\\s[-+]?\d")


@dataclass(frozen=True)
class Stream:
    title: str
    language: str  # en or fr
    first: int  # its first sentence's index in the pool
    count: int


def _sentences(text: str) -> list[str]:
    kept = []
    for sentence in _SENTENCE_END.split(" ".join(text.split())):
        letters = sum(c.isalpha() for c in sentence)
        if MIN_CHARS <= len(sentence) <= MAX_CHARS and letters >= 0.7 * len(
            sentence.replace(" ", "")
        ):
            kept.append(sentence)
    return kept


def _roff_text(source: str) -> str:
    """A manual page's prose: its macros' text kept, the formatting taken out."""
    lines = []
    for line in source.splitlines():
        if line.startswith((".", "'")):
            macro, _, rest = line.partition(" ")
            if macro in (".B", ".I", ".BR", ".IR", ".RB", ".BI", ".IB", ".RI", ".SM") and rest:
                lines.append(rest.replace('"', ""))
            elif macro in (".SH", ".SS", ".PP", ".P", ".LP", ".TP", ".IP", ".sp", ".br"):
                lines.append("\n")
            continue
        lines.append(line)
    text = _ROFF_ESCAPE.sub("", " ".join(lines)).replace("\\-", "-").replace("\\e", "\\")
    return text


def _man_pages(folder: Path) -> Iterator[tuple[str, str]]:
    """Every page but 1 in 50 of Google Cloud's (16,000 of the 18,000 commands' pages here)."""
    paths = sorted(folder.glob("man[1-8]/*.gz"))
    cloud = [path for path in paths if path.name.startswith("gcloud")]
    for path in [path for path in paths if not path.name.startswith("gcloud")] + cloud[::50]:
        try:
            source = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        except (OSError, EOFError):
            continue
        if source.lstrip().startswith(".so "):
            continue  # an alias of another page
        yield path.name.split(".")[0], _roff_text(source)


def _texts() -> Iterator[tuple[str, str, str]]:
    """(title, language, text) of every source."""
    import pydoc_data.topics

    for name, text in sorted(pydoc_data.topics.topics.items()):
        yield f"Python: {name}", "en", text
    for document in cranfield.load_documents():
        yield document.title[:80] or "Cranfield", "en", document.content
    cisi = (DATA / "cisi" / "CISI.ALL").read_text(encoding="utf-8", errors="replace")
    for block in re.split(r"^\.I\s+", cisi, flags=re.M)[1:]:
        body = re.split(r"^\.W\n", block, flags=re.M)
        if len(body) > 1:
            yield "CISI", "en", re.split(r"^\.X\n", body[1], flags=re.M)[0]
    for name, text in _man_pages(MAN):
        yield f"{name}(man)", "en", text
    for name, text in _man_pages(MAN / "fr"):
        yield f"{name}(man, fr)", "fr", text
    pages, _ = french_pages.load()
    for page in pages:
        yield page["title"], "fr", page["content"]


def build_sentences(path: Path) -> None:
    """sentences.jsonl: one stream a line ({title, language, sentences}), streams of at least
    WINDOW sentences, up to POOL_CAP sentences of each language (streams in a seeded order:
    the encoder embeds about 100 a second here, so the pool is kept to a quarter hour)."""
    seen: set[str] = set()
    count = 0
    counts = {"en": 0, "fr": 0}
    sources = list(_texts())
    random.Random(82).shuffle(sources)
    with path.with_suffix(".tmp").open("w", encoding="utf-8") as out:
        for title, language, text in sources:
            sentences = [s for s in _sentences(text) if s not in seen]
            if len(sentences) < WINDOW or counts[language] >= POOL_CAP:
                continue
            counts[language] += len(sentences)
            seen.update(sentences)
            count += len(sentences)
            row = {"title": title, "language": language, "sentences": sentences}
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    path.with_suffix(".tmp").rename(path)
    print(f"scale: {count} sentences in {path}", file=sys.stderr)


@dataclass
class Pool:
    """The sentences, their vectors, and their streams."""

    sentences: list[str]
    vectors: np.ndarray  # float32 (sentences, 384), unit length
    streams: list[Stream]

    @classmethod
    def load(cls, folder: Path) -> Pool:
        sentences: list[str] = []
        streams = []
        for line in (folder / "sentences.jsonl").open(encoding="utf-8"):
            row = json.loads(line)
            streams.append(
                Stream(row["title"], row["language"], len(sentences), len(row["sentences"]))
            )
            sentences += row["sentences"]
        vectors = np.load(folder / "pool.npy", mmap_mode="r")
        if len(vectors) != len(sentences):
            raise SystemExit(
                f"scale: {folder / 'pool.npy'} does not match sentences.jsonl: remove it"
            )
        return cls(sentences, np.asarray(vectors), streams)

    def document(self, number: int) -> Document:
        """Document `number`, alike each time."""
        rng = random.Random(number * 7919 + 13)
        stream = self.streams[rng.randrange(len(self.streams))]
        passages = []
        start = rng.randrange(stream.count)
        for _ in range(PASSAGES_PER_DOCUMENT):
            window = [stream.first + (start + k) % stream.count for k in range(WINDOW)]
            chosen = sorted(rng.sample(window, SENTENCES_PER_PASSAGE))
            passages.append(chosen)
            start = (start + WINDOW // 2) % stream.count
        allowed = [EVERYONE, *(g for g, share in GROUP_SHARES.items() if rng.random() < share)]
        denied = []
        if rng.random() < DENIED_SHARE:
            denied.append("g10")
        if rng.random() < DENIED_SHARE:
            denied.append("g50")
        return Document(number, stream, passages, tuple(allowed), tuple(denied))


@dataclass(frozen=True)
class Document:
    number: int
    stream: Stream
    passages: list[list[int]]  # each passage's sentences (pool indexes)
    allowed: tuple[str, ...]
    denied: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"scale-{self.number}"

    def texts(self, pool: Pool) -> list[str]:
        return [" ".join(pool.sentences[i] for i in passage) for passage in self.passages]

    def vectors(self, pool: Pool) -> np.ndarray:
        means = np.stack([pool.vectors[passage].mean(axis=0) for passage in self.passages])
        return (means / np.linalg.norm(means, axis=1, keepdims=True)).astype(np.float32)

    def solr(self, pool: Pool) -> tuple[dict[str, object], list[dict[str, object]]]:
        """(the FileShare document, its VectorMain passages), as Solr takes them."""
        texts = self.texts(pool)
        common = {
            "title": f"{self.stream.title} {self.number}",
            "url": f"file://share/{self.stream.language}/{self.number}.txt",
            "language": self.stream.language,
            "last_modified": "2026-01-01T00:00:00Z",
            "allowed_groups": list(self.allowed),
            **({"denied_groups": list(self.denied)} if self.denied else {}),
        }
        document = {"id": self.id, "content": "\n\n".join(texts), **common}
        passages = [
            {
                "id": f"{self.id}_{k}",
                "parent_id": self.id,
                "chunk_index": k,
                "content": text,
                "vector_384": [round(float(x), 6) for x in vector],
                **common,
            }
            for k, (text, vector) in enumerate(zip(texts, self.vectors(pool), strict=True))
        ]
        return document, passages


def embed_pool(folder: Path, chunk: int = 4096) -> None:
    """pool.npy: every sentence's vector by the shipped encoder, a chunk at a time (each kept
    in pool-parts/, so a stopped run goes on where it stopped)."""
    from service.models.encoder import load_encoder

    if (folder / "pool.npy").is_file():
        return
    sentences = [
        s
        for line in (folder / "sentences.jsonl").open(encoding="utf-8")
        for s in json.loads(line)["sentences"]
    ]
    parts = folder / "pool-parts"
    parts.mkdir(exist_ok=True)
    encoder = load_encoder()
    chunks = range(0, len(sentences), chunk)
    for n, start in enumerate(chunks):
        part = parts / f"{n:05d}.npy"
        if not part.is_file():
            vectors = encoder.encode(sentences[start : start + chunk]).astype(np.float32)
            np.save(part.with_suffix(".tmp.npy"), vectors)
            part.with_suffix(".tmp.npy").rename(part)
        print(
            f"scale: pool embedded {min(start + chunk, len(sentences))}/{len(sentences)}",
            file=sys.stderr,
            flush=True,
        )
    pool = np.concatenate([np.load(parts / f"{n:05d}.npy") for n in range(len(chunks))])
    np.save(folder / "pool.tmp.npy", pool)
    (folder / "pool.tmp.npy").rename(folder / "pool.npy")

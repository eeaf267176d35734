"""FileShare documents -> VectorMain passages ("children"), Datafari's VectorUpdateProcessor.

Passages are cut by paragraph, then recursively (lines, sentences, words), at most
`vector.chunk.size` characters with `vector.chunk.overlap` shared between neighbours. Each
inherits its parent's metadata; its id is `<parent id>_<n>`.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.ingest.extract import SourceDocument
from service.text.chunk import Chunker

PARENT_FIELDS = ("title", "url", "language", "last_modified")


@dataclass(frozen=True)
class Passage:
    """One VectorMain document."""

    parent: SourceDocument
    index: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.parent.id}_{self.index}"

    @property
    def embedding_text(self) -> str:
        """What is embedded: the title gives a passage the context its text may lack."""
        return f"{self.parent.title}\n{self.text}" if self.parent.title else self.text

    def to_solr(self, vector_field: str, vector: list[float] | None) -> dict[str, object]:
        parent = self.parent.to_solr()
        document: dict[str, object] = {
            "id": self.id,
            "parent_id": self.parent.id,
            "chunk_index": self.index,
            "content": self.text,
            # the parent's language, if it was given (else Solr detects it)
            **{key: parent[key] for key in PARENT_FIELDS if key in parent},
        }
        for key in ("allowed_groups", "denied_groups"):
            if key in parent:
                document[key] = parent[key]
        document.update(self.parent.fields)
        if vector is not None:
            document[vector_field] = vector
        return document


class PassageSplitter:
    """A document's text as VectorMain passages, never crossing a page or section."""

    def __init__(self, size: int, overlap: int) -> None:
        self._chunker = Chunker(size, overlap)
        self.settings = (size, overlap)  # what the passages depend on, besides the text

    def run(self, document: SourceDocument) -> list[Passage]:
        """Each section (page, heading section) is split on its own, so no passage spans two."""
        sections = document.sections or (document.content,)
        texts = [text for section in sections for text in self._chunker.run(section)]
        return [Passage(document, index, text) for index, text in enumerate(texts)]

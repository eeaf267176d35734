"""What every retriever returns, and the interface they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class RetrievedDocument:
    """A document (BM25 on FileShare) or a passage (VectorMain) that may answer the question."""

    id: str
    title: str
    url: str
    content: str
    score: float = 0.0
    parent_id: str | None = None

    @property
    def source_id(self) -> str:
        """The FileShare document this text belongs to."""
        return self.parent_id or self.id


class Retriever(Protocol):
    """Anything that finds documents for a query."""

    async def run(self, query: str) -> list[RetrievedDocument]:
        """Documents for `query`, most relevant first."""
        ...

"""Splitting document text into chunks of at most `chunking.chunk.size` characters."""

from __future__ import annotations

from langchain_text_splitters import RecursiveCharacterTextSplitter

# Paragraphs first, then lines, sentences, words; characters only as a last resort.
_SEPARATORS = ["\n\n", "\n", ". ", " ", ""]


class Chunker:
    """Recursive character splitter: every chunk is at most `size` characters.

    >>> Chunker(size=20).run("First paragraph.\\n\\nSecond one here.")
    ['First paragraph.', 'Second one here.']
    """

    def __init__(self, size: int, overlap: int = 0) -> None:
        if size < 1:
            raise ValueError("chunk size must be at least 1 character")
        self.size = size
        self._splitter = RecursiveCharacterTextSplitter(
            chunk_size=size,
            chunk_overlap=min(overlap, size // 2),
            separators=_SEPARATORS,
            keep_separator="end",
            strip_whitespace=True,
        )

    def run(self, text: str) -> list[str]:
        if not text.strip():
            return []
        return [chunk for chunk in self._splitter.split_text(text) if chunk.strip()]

"""ChunkDocuments: the retrieved texts cut into numbered chunks a prompt can hold."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    Chunk,
    number_chunks,
)
from service.config.settings import (
    PromptSettings,
)
from service.rag.stages.state import Chunks, EveryRequest, State
from service.text import Chunker

OFF_LOOP_CHARS = 50_000  # texts longer than this are cut into chunks in a worker thread


@dataclass
class ChunkDocuments(EveryRequest):
    """The documents cut into chunks of chunking.chunk.size (or whole, chunking off), each
    numbered by its document."""

    prompt: PromptSettings
    name: ClassVar[str] = "chunk"

    async def run(self, state: State) -> Chunks:
        documents = state.documents
        if not self.prompt.chunking_enable:
            chunks = [Chunk(doc, doc.content) for doc in documents if doc.content.strip()]
        else:
            chunker = Chunker(self.prompt.chunk_size)

            def cut() -> list[Chunk]:
                return [Chunk(doc, text) for doc in documents for text in chunker.run(doc.content)]

            large = sum(len(doc.content) for doc in documents) > OFF_LOOP_CHARS
            chunks = await asyncio.to_thread(cut) if large else cut()  # the loop keeps serving
        numbered = number_chunks(chunks)
        if (error := state.without_text(numbered)) is not None:
            raise error
        return Chunks(numbered)

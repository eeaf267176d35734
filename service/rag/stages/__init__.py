"""The stages of a request, one module each: what a stage needs is given when it is built (by
`service.rag.assemble`), what it reads is the request's state, what it returns one of the
typed results of `state.py` (search queries, documents, chunks, a cache miss, the Reply),
which the loop writes into the state.

    /ai/rag:       CacheLookup -> Rewrite -> Expand -> Retrieve -> Chunk -> Rerank -> Grade
                   -> Verify -> Chain, then once the answer's text is known (the Reply runs
                   them, AfterAnswer): Doubt -> RefuseEcho -> Ground -> KeepAnswer (or, for a
                   cached answer, Repeated)
    an agent:      Given (the documents its tools found) -> Chunk -> Rerank -> Grade -> Verify
                   -> Chain, and the same answer stages
    /ai/summarize: Fetch -> Chunk -> Summarize

A stage says whether it is `wanted` for this request (rewriting is not, for one document by id)
and whether it `calls_llm` (skipped when the request's LLM call budget has only the calls the
stages after it keep left: their `calls_kept`, Verify's and Chain's); `run` does its
work and returns its result. The last stage returns the Reply; a stage that answers early (a
cached answer) does the same, and the loop stops there.
"""

from service.rag.stages.after_answer import AfterAnswer, Judged
from service.rag.stages.cache_lookup import CacheLookup
from service.rag.stages.chain import Chain
from service.rag.stages.chunk import OFF_LOOP_CHARS, ChunkDocuments
from service.rag.stages.expand import Expand
from service.rag.stages.fetch import Fetch, fetch
from service.rag.stages.grade import Grade
from service.rag.stages.ground import Ground
from service.rag.stages.keep_answer import KeepAnswer, Repeated, repeated
from service.rag.stages.rerank import MAX_WINDOWS, Rerank
from service.rag.stages.retrieve import Given, Retrieve
from service.rag.stages.rewrite import Rewrite
from service.rag.stages.state import (
    CacheMiss,
    Chunks,
    Documents,
    EveryRequest,
    Queries,
    RagState,
    SearchQuery,
    Stage,
    StageResult,
    State,
    SummaryState,
    Verification,
)
from service.rag.stages.summarize import Summarize
from service.rag.stages.verify import Verify

__all__ = [
    "MAX_WINDOWS",
    "OFF_LOOP_CHARS",
    "AfterAnswer",
    "CacheLookup",
    "CacheMiss",
    "Chain",
    "ChunkDocuments",
    "Chunks",
    "Documents",
    "EveryRequest",
    "Expand",
    "Fetch",
    "Given",
    "Grade",
    "Ground",
    "Judged",
    "KeepAnswer",
    "Queries",
    "RagState",
    "Repeated",
    "Rerank",
    "Retrieve",
    "Rewrite",
    "SearchQuery",
    "Stage",
    "StageResult",
    "State",
    "Summarize",
    "SummaryState",
    "Verification",
    "Verify",
    "fetch",
    "repeated",
]

"""Prompt chains: how chunks become LLM requests and an answer.

stuff (one request), map-reduce (concurrent maps, tree reduce), refine (sequential), plus
query rewriting and summarization; templates come from prompts/.
"""

from service.chains.mapreduce import MapReduceChain
from service.chains.prompts import PromptBuilder, PromptLibrary, PromptStore, Question
from service.chains.refine import RefineChain
from service.chains.result import ChainResult, Chunk, NumberedChunk, Source, number_chunks
from service.chains.rewrite import QueryRewriter, Rewrite
from service.chains.stuff import StuffChain
from service.chains.summarize import Summarizer

__all__ = [
    "ChainResult",
    "Chunk",
    "MapReduceChain",
    "NumberedChunk",
    "PromptBuilder",
    "PromptLibrary",
    "PromptStore",
    "QueryRewriter",
    "Question",
    "RefineChain",
    "Rewrite",
    "Source",
    "StuffChain",
    "Summarizer",
    "number_chunks",
]

"""Prompt chains: how chunks become LLM requests and an answer."""

from service.chains.builder import PromptBuilder, Question
from service.chains.context import ChainResult, Chunk, Source
from service.chains.prompts import PromptLibrary, PromptStore, PromptTemplateError
from service.chains.stuff import StuffChain

__all__ = [
    "ChainResult",
    "Chunk",
    "PromptBuilder",
    "PromptLibrary",
    "PromptStore",
    "PromptTemplateError",
    "Question",
    "Source",
    "StuffChain",
]

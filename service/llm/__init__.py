"""The LLM: an OpenAI-compatible chat client and its value objects."""

from service.llm.breaker import CircuitBreaker
from service.llm.client import ChatClient, LLMOptions
from service.llm.embeddings import EmbeddingsClient
from service.llm.types import ChatMessage, Completion, Usage

__all__ = [
    "ChatClient",
    "ChatMessage",
    "CircuitBreaker",
    "Completion",
    "EmbeddingsClient",
    "LLMOptions",
    "Usage",
]

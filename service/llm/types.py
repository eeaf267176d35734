"""Value objects exchanged with an OpenAI-compatible chat API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat prompt."""

    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Usage:
    """Token usage information from a model response (zeros when the server sends none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class TokenChoice:
    """A token the model wrote, its log-probability, and the likeliest tokens it could have
    written there (`top`: token -> log-probability), when the server reports them (OpenAI's
    `logprobs`, llama.cpp's too)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """The text a model answered, with its usage."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    # why the model stopped: "stop" (it ended, or a stop sequence), "length" (max_tokens)...
    finish_reason: str = "stop"
    tokens: tuple[TokenChoice, ...] = ()  # when asked for (logprobs) and reported


@dataclass(frozen=True)
class ToolCall:
    """A tool the model asks to call: its call id, the tool's name, its arguments (JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolTurn:
    """What a model answered to a request with tools: text, or tool calls, or both."""

    text: str
    calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)

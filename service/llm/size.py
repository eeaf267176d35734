"""How big one LLM request may be, measured as the LLM measures it.

Two limits hold at once: `prompt.max.request.size` characters (Datafari's) and, when set,
a token budget (`prompt.max.request.tokens`, or what the model's context window leaves on
/v1) counted by the model's tokenizer (`service.text.tokens`). The chains pack with one
number: a text's size is its characters, or its tokens converted at the ratio of the two
limits when that is more. A pack whose sizes sum to the limit is within both, since the
larger of two sums is never above the sum of the larger terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.config import Settings
from service.llm.types import ChatMessage
from service.text.tokens import CHARS_PER_TOKEN, MESSAGE_TOKENS, CharacterEstimate, TokenCounter


@dataclass(frozen=True)
class RequestSize:
    """>>> size = RequestSize(40000, tokens=3000, counter=token_counter("auto", "gpt-4o"))
    >>> size.of(prompt) <= size.limit   # within 40,000 characters and 3,000 tokens"""

    limit: int  # characters
    tokens: int = 0  # 0: no token budget
    counter: TokenCounter = field(default_factory=CharacterEstimate)

    def of(self, text: str) -> int:
        """The size of `text` against `limit`: its characters, or its tokens when they
        weigh more."""
        if not self.tokens:
            return len(text)
        return max(len(text), math.ceil(self.counter.count(text) * self.limit / self.tokens))

    def of_messages(self, messages: Sequence[ChatMessage]) -> int:
        """The size of a chat request: its messages, each with the tokens its role and
        delimiters take in the chat format."""
        overhead = math.ceil(MESSAGE_TOKENS * self.limit / self.tokens) if self.tokens else 0
        return sum(self.of(message.content) + overhead for message in messages)

    def of_answer(self, tokens: int) -> int:
        """The room an answer of at most `tokens` tokens may take."""
        per_token = max(CHARS_PER_TOKEN, self.limit / self.tokens if self.tokens else 0)
        return math.ceil(tokens * per_token)

    def cut(self, text: str, room: int) -> str:
        """The longest start of `text` whose size is at most `room`."""
        if self.of(text) <= room:
            return text
        low, high = 0, min(len(text), room)  # a character is at least 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.of(text[:middle]) <= room:
                low = middle
            else:
                high = middle - 1
        return text[:low]

    def __str__(self) -> str:
        if not self.tokens:
            return f"{self.limit} characters (prompt.max.request.size)"
        return (
            f"{self.limit} characters and {self.tokens} tokens (prompt.max.request.size, and "
            f"prompt.max.request.tokens or the model's context window, counted by "
            f"{self.counter.name}; a token counts as {self.limit / self.tokens:.1f} characters)"
        )


def request_size(settings: Settings, model: str | None = None) -> RequestSize:
    """How big one LLM request to `model` (llm.model by default) may be: both budgets of
    `settings`, tokens counted by llm.tokenizer."""
    prompt = settings.prompt
    return RequestSize(
        prompt.max_request_size, prompt.max_request_tokens, settings.token_counter(model)
    )


def as_size(budget: int | RequestSize) -> RequestSize:
    """A bare number is a character budget."""
    return budget if isinstance(budget, RequestSize) else RequestSize(budget)

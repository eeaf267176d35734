"""Renders a request's messages and measures them against `prompt.max.request.size`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.context import NumberedChunk
from service.chains.prompts import PromptLibrary
from service.llm.types import ChatMessage
from service.text.clean import clean_context


@dataclass(frozen=True)
class Question:
    """What every request of a chain carries besides sources."""

    text: str
    history: tuple[ChatMessage, ...] = ()
    language: str = ""
    format_instruction: str = ""


class PromptBuilder:
    """Builds [system, *history, user] for a set of chunks; sizes are in characters.

    The size of a request is the sum of its message contents (Datafari's measure), and it is
    exact: a request's size is `overhead` plus the size of each source block it holds.
    """

    def __init__(self, prompts: PromptLibrary, question: Question) -> None:
        self._prompts = prompts
        self.question = question
        common = {
            "language": question.language,
            "history": [message.as_dict() for message in question.history],
        }
        self._common = common
        self._system = prompts.render(
            "system", format_instruction=question.format_instruction, **common
        )
        self.overhead = self.size_of(self.messages([]))

    def block(self, item: NumberedChunk) -> str:
        document = item.chunk.document
        return (
            self._prompts.render(
                "source",
                number=item.number,
                title=clean_context(document.title),
                url=document.url,
                content=clean_context(item.chunk.text),
            )
            + "\n"
        )

    def messages(self, blocks: Sequence[str]) -> list[ChatMessage]:
        user = self._prompts.render(
            "stuff",
            sources="".join(blocks),
            question=self.question.text,
            **self._common,
        )
        return [
            ChatMessage("system", self._system),
            *self.question.history,
            ChatMessage("user", user),
        ]

    @staticmethod
    def size_of(messages: Sequence[ChatMessage]) -> int:
        return sum(len(message.content) for message in messages)

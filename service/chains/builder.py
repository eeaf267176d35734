"""Renders a request's messages and measures them against `prompt.max.request.size`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.context import NumberedChunk
from service.chains.prompts import PromptLibrary
from service.llm.types import ChatMessage
from service.text.clean import clean_context

FENCE = "######"
# A title as the prompt shows it: long enough to name a document, short enough that a block's
# head never crowds out its text (a source block keeps at least MIN_ROOM / 2 for text)
MAX_PROMPT_TITLE = 200


@dataclass(frozen=True)
class Question:
    """What every request of a chain carries besides its sources."""

    text: str
    history: tuple[ChatMessage, ...] = ()
    language: str = ""
    format_instruction: str = ""


class PromptBuilder:
    """Builds [system, *history, user] for any user template; sizes are in characters.

    The size of a request is the sum of its message contents (Datafari's measure). Sources and
    partial answers reach templates already rendered, each as one block, so a request's size is
    exactly its size without them plus the size of each block it holds.

    >>> builder = PromptBuilder(prompts, Question("When are apple trees pruned?"))
    >>> builder.messages("stuff", sources=builder.block(chunk))
    """

    def __init__(
        self, prompts: PromptLibrary, question: Question, *, system_template: str = "system"
    ) -> None:
        self._prompts = prompts
        self.question = question
        self._common = {
            "language": question.language,
            "history": [message.as_dict() for message in question.history],
        }
        self._system = prompts.render(
            system_template, format_instruction=question.format_instruction, **self._common
        )

    def block(self, item: NumberedChunk) -> str:
        document = item.chunk.document
        rendered = self._prompts.render(
            "source",
            number=item.number,
            title=clean_context(document.title[:MAX_PROMPT_TITLE]),
            url=document.url,
            content=clean_context(item.chunk.text),
            **self._common,
        )
        return rendered + "\n"

    @staticmethod
    def answer_block(text: str) -> str:
        """A partial answer, fenced like a source (and unable to forge a fence)."""
        return f"{FENCE}\n{text.replace(FENCE, '').strip()}\n"

    def messages(self, template: str, **variables: object) -> list[ChatMessage]:
        user = self._prompts.render(
            template, question=self.question.text, **self._common, **variables
        )
        return [
            ChatMessage("system", self._system),
            *self.question.history,
            ChatMessage("user", user),
        ]

    def size(self, template: str, **variables: object) -> int:
        return size_of(self.messages(template, **variables))


def size_of(messages: Sequence[ChatMessage]) -> int:
    return sum(len(message.content) for message in messages)

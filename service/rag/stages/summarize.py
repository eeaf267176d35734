"""Summarize: the summary chain, leaving the Reply."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from service.chains import (
    PromptBuilder,
    PromptLibrary,
    Question,
    Summarizer,
)
from service.chains.prompts import language_name
from service.llm import ChatClient
from service.llm.size import RequestSize
from service.rag.reply import Reply
from service.rag.stages.state import EveryRequest, SummaryState


@dataclass
class Summarize(EveryRequest):
    """The summary chain (stuff, or map-reduce when the document does not fit one request)."""

    llm: ChatClient
    prompts: PromptLibrary
    size: RequestSize
    concurrency: int
    answer_reserve: int
    name: ClassVar[str] = "summarize"

    async def run(self, state: SummaryState) -> Reply:
        builder = PromptBuilder(
            self.prompts,
            Question(text="", language=language_name(state.query.lang)),
            system_template="summarize_system",
        )
        chain_started = time.perf_counter()
        summarizer = Summarizer(
            self.llm,
            builder,
            self.size,
            concurrency=self.concurrency,
            answer_reserve=self.answer_reserve,
        )
        prepared = await summarizer.prepare(state.chunks)
        return Reply(
            self.llm,
            prepared,
            state.timings,
            state.started,
            chain_started,
            sources_only_if_found=False,
            stage=self.name,
        )

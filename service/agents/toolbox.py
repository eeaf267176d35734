"""What an agent's tools work with (service.agents.tools' Toolbox): one request's search, its
questions, summaries and documents, within its caller's scope, every document they show
numbered once, in the order met, so the answer's sources are numbered as /ai/rag's are.

    >>> box = RequestToolbox(snapshot, scope, lang="en")
    >>> await box.search("lighthouse lamp", "bm25")
    '[1] Lighthouse of Brannoch (id lighthouse):\\n...'
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from service.agents.tools import NOTHING_FOUND
from service.errors import DocumentNotFound
from service.llm import Usage
from service.rag import assemble
from service.rag.reply import AnswerDocument
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.stages.fetch import fetch
from service.retrieval import RetrievedDocument, Scope
from service.snapshot import Snapshot
from service.text.citations import CITATION, cited_numbers

SEARCH_RESULTS = 5
SNIPPET_CHARS = 500


@dataclass
class Sources:
    """The documents the tools met, numbered in the order met."""

    by_id: dict[str, AnswerDocument] = field(default_factory=dict)

    def number(self, document_id: str, title: str, url: str, content: str) -> int:
        known = self.by_id.get(document_id)
        if known is None:
            known = AnswerDocument(document_id, title, url, content[:SNIPPET_CHARS],
                                   len(self.by_id) + 1, cited=False)  # fmt: skip
            self.by_id[document_id] = known
        return known.number

    def id_of(self, named: str) -> str:
        """A document named by its number ("3", "[3]": digits 0-9 only, never '²', which
        str.isdigit() takes and int() refuses) or its id."""
        digits = named.strip().strip("[]")
        if digits.isascii() and digits.isdigit():
            for document in self.by_id.values():
                if document.number == int(digits):
                    return document.id
        return named.strip()

    def cited_in(self, text: str) -> list[AnswerDocument]:
        cited = cited_numbers(text)
        return [
            AnswerDocument(d.id, d.title, d.url, d.content, d.number, cited=d.number in cited)
            for d in self.by_id.values()
        ]


class RequestToolbox:
    """The Toolbox of one agent's request: its snapshot, its caller's scope, its language; the
    LLM calls the tools make are counted in `usage`."""

    def __init__(self, snapshot: Snapshot, scope: Scope, lang: str | None = None) -> None:
        self.snapshot = snapshot
        self.scope = scope
        self.lang = lang
        self.sources = Sources()
        self.usages: list[Usage] = []  # one a call the agent and its tools made
        # what the tools found, by id, in the order met: what the answer is written from
        self.found: dict[str, RetrievedDocument] = {}

    async def search(
        self, query: str, method: str = "", *, within: str = "", filters: tuple[str, ...] = ()
    ) -> str:
        scope = self.scope.within((self.sources.id_of(within),)) if within else self.scope
        scope = await self.snapshot.narrowed(scope, None, filters)
        retriever = self.snapshot.index_retriever(scope, SEARCH_RESULTS, method=method)
        found = tuple(await retriever.run(query))[:SEARCH_RESULTS]
        for document in found:
            self._keep(document)
        return self.listed(found)

    async def retrieve(self, question: str) -> tuple[RetrievedDocument, ...]:
        """The question searched as rag searches it (its words as Solr is asked them, the
        configured retrieval in the request's language, as many as rag reads), each kept and
        numbered: an agent's first step, which no LLM call chooses."""
        scope = replace(self.scope, lang=self.lang)
        found = await self.snapshot.retriever(scope).run(assemble.searched(question))
        for document in found:
            self._keep(document)
        return tuple(found)

    def listed(self, documents: tuple[RetrievedDocument, ...]) -> str:
        """What a search's result shows the LLM of `documents`: the first, numbered."""
        if not documents:
            return NOTHING_FOUND
        return "\n\n".join(self._shown(document) for document in documents[:SEARCH_RESULTS])

    async def ask(self, question: str, document: str = "") -> str:
        """The question's answer, its citations renumbered as the agent numbers sources."""
        document_id = self.sources.id_of(document) if document else None
        query = RagQuery(query=question, document_id=document_id, lang=self.lang,
                         scope=self.scope)  # fmt: skip
        answer = await (await assemble.ask(self.snapshot, query)).complete()
        self.spend(answer.usage, answer.llm_calls)
        for d in answer.documents:
            self._keep(RetrievedDocument(d.id, d.title, d.url, d.content))
        numbers = {
            d.number: self.sources.number(d.id, d.title, d.url, d.content) for d in answer.documents
        }
        return CITATION.sub(
            lambda m: f"[{numbers.get(int(m.group(1)), m.group(1))}]", answer.message
        )

    async def summary(self, document: str) -> str:
        document_id = self.sources.id_of(document)
        query = SummarizeQuery(document_id=document_id, lang=self.lang, scope=self.scope)
        answer = await (await assemble.summarize(self.snapshot, query)).complete()
        self.spend(answer.usage, answer.llm_calls)
        if answer.documents:
            d = answer.documents[0]
            self._keep(RetrievedDocument(d.id, d.title, d.url, d.content))
            number = self.sources.number(d.id, d.title, d.url, d.content)
            return f"[{number}] {answer.message}"
        return answer.message

    async def read(self, document: str, start: int, chars: int) -> tuple[str, bool]:
        settings = self.snapshot.settings.solr
        found = await fetch(self.snapshot.solr, settings, self.sources.id_of(document), self.scope)
        if found is None:
            raise DocumentNotFound(f"no document {document[:100]!r} you may read")
        self._keep(found)
        text = found.content[start : start + chars]
        if not text and start > 0:
            return "", False
        more = start + chars < len(found.content)
        return self._shown(replace(found, content=text), chars), more

    @property
    def usage(self) -> Usage:
        """What the LLM calls of the agent and its tools cost, summed."""
        return sum(self.usages, Usage())

    def spend(self, usage: Usage, calls: int = 1) -> None:
        """An LLM call's usage (or `calls` calls', summed) counted; none for an answer that
        made no call (a cached one)."""
        if calls > 0:
            self.usages += [usage, *(Usage() for _ in range(calls - 1))]

    def _keep(self, document: RetrievedDocument) -> None:
        self.found.setdefault(document.id, document)

    def _shown(self, document: RetrievedDocument, chars: int = SNIPPET_CHARS) -> str:
        number = self.sources.number(document.source_id, document.title, document.url,
                                     document.content)  # fmt: skip
        return f"[{number}] {document.title} (id {document.source_id}):\n{document.content[:chars]}"

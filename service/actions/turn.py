"""One turn of Datafari 7's AI API: the caller's scope narrowed by the filters, the
conversation and memory it continues, the action's pipeline, and what is kept after.

A turn is work for the stream driver (service.api.protocols.driver): `begin` opens the
memory and the conversation (and says so: Opened), `run` does everything up to the answer (a
Reply streaming it, or an Answer written whole: an agent's, a search's), `keep` keeps the
question and its answer (and names the conversation: Kept). The owner is the person (a
verified JWT's `sub`, the trusted proxy's `security.user.header`), else the API key; an
anonymous caller owns none: nothing of its turn is kept (NOT_KEPT says so).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from service.actions.progress import Kept, Opened, Progress
from service.actions.search import search
from service.agents.agent import Agent
from service.agents.choice import choose_agent
from service.agents.tools import AnswerText
from service.conversations import TITLE_CHARS, Conversation
from service.conversations.memories import KeptMemories, Memories, Memory
from service.errors import ConversationNotFound
from service.llm import ChatMessage
from service.rag import assemble
from service.rag.reply import Answer, Reply
from service.rag.request import RagQuery, SummarizeQuery
from service.rag.synthesis import SynthesisQuery, synthesize
from service.retrieval import Scope
from service.snapshot import Snapshot
from service.snapshot.options import RequestOptions

log = logging.getLogger(__name__)

# what an anonymous caller is told of its conversation and memory (nothing is kept)
NOT_KEPT = (
    "an anonymous caller keeps no conversation or memory on the server: send the history with "
    "each question, or an API key or identity token"
)


@dataclass(frozen=True)
class TurnRequest:
    """What a turn asks (Datafari 7's AiRequest, validated at the edge)."""

    action: str  # rag, summarize, agentic, search, synthesize
    query: str | None = None
    document_id: str | None = None  # rag: answer from it only; summarize: the document
    agent: str | None = None
    lang: str | None = None
    history: tuple[ChatMessage, ...] | None = None  # posted by the client; None: none sent
    filter_ids: tuple[str, ...] | None = None  # None: no filter on ids
    filter_queries: tuple[str, ...] = ()  # a facet's filters
    conversation_id: str | None = None
    memory_id: str | None = None


class Turn:
    """One question of a conversation and what it opens and keeps (the module's docstring)."""

    def __init__(
        self,
        asked: TurnRequest,
        snapshot: Snapshot,
        *,
        scope: Scope,
        owner: str | None,
        memories: Memories,
    ) -> None:
        self.asked = asked
        self.snapshot = snapshot
        self.scope = scope  # the caller's (service.api.identity), before the filters
        self.owner = owner
        self.memories = memories  # the process's, when conversations are not kept in Solr
        self.conversation: Conversation | None = None
        self.memory: Memory | None = None

    @property
    def not_kept(self) -> str | None:
        """Why nothing of this turn is kept on the server, when nothing is."""
        return NOT_KEPT if self.owner is None else None

    @property
    def conversation_id(self) -> str | None:
        return self.conversation.id if self.conversation else None

    @property
    def memory_id(self) -> str | None:
        return self.memory.id if self.memory else None

    @property
    def question(self) -> str:
        """What the turn asked, as a conversation keeps it."""
        asked = self.asked
        if asked.query:
            return asked.query
        if asked.action == "synthesize":
            return "Write a synthesis of these documents"  # Datafari's words
        return f"Summarize the document {asked.document_id}"

    @property
    def title(self) -> str:
        """The conversation's title as it is kept (its first question's first 50 characters,
        or what its owner renamed it to), as Datafari sends it: never the current question's."""
        if self.conversation is not None and self.conversation.title:
            return self.conversation.title
        return self.question[:TITLE_CHARS]

    @property
    def history(self) -> tuple[ChatMessage, ...]:
        """What was said before: the posted history, else the conversation, else the memory."""
        if self.asked.history is not None:
            return self.asked.history
        if self.conversation and self.conversation.messages:
            return self.conversation.messages
        return tuple(self.memory.messages) if self.memory else ()

    async def begin(self, progress: Progress | None = None) -> None:
        """The memory, and the conversation: the one named, else a new one when conversations
        are kept; one that is not the caller's (unknown, expired, another's) is ignored. An
        anonymous caller owns none: its question is answered from the history it sends."""
        await self._open()
        if progress:
            progress(Opened(self.memory_id or "", self.not_kept, bool(self.history)))

    async def _open(self) -> None:
        owner = self.owner
        if owner is None:
            return
        settings = self.snapshot.settings
        if settings.conversations.enabled:  # kept in Solr: any worker reads it
            self.memory = await KeptMemories(self.snapshot.conversations).open(
                owner, self.asked.memory_id
            )
        else:
            self.memory = self.memories.open(owner, self.asked.memory_id)
        named = self.asked.conversation_id
        if not settings.conversations.enabled:
            return  # a conversationId is answered without one, as Datafari does
        store = self.snapshot.conversations
        try:
            self.conversation = await store.open(owner, named)
        except ConversationNotFound:
            log.info("conversationId %r is not the caller's: a new conversation", named[:32])
            self.conversation = await store.open(owner, None)

    async def run(self, progress: Progress | None = None) -> Reply | Answer:
        """Everything up to the last LLM request of the action (an agent's whole answer, a
        search's documents)."""
        asked, snapshot = self.asked, self.snapshot
        scope = await snapshot.narrowed(self.scope, asked.filter_ids, asked.filter_queries)
        if asked.action == "summarize":
            query = SummarizeQuery(document_id=asked.document_id, lang=asked.lang, scope=scope)
            return await assemble.summarize(snapshot, query, progress)
        if asked.action == "search":
            return await search(snapshot, scope, asked.query or "", progress)
        if asked.action == "synthesize":
            synthesis = SynthesisQuery(asked.filter_ids or (), asked.query or "", asked.lang, scope)
            return await synthesize(snapshot, synthesis, progress)
        history = self.history
        if asked.action == "agentic":
            return await self._agent(scope, progress).run(asked.query or "", history)
        query = RagQuery(
            query=asked.query or "",
            document_id=asked.document_id,
            lang=asked.lang,
            history=history,
            scope=scope,
            # what the service keeps (a conversation, a memory) is always read; a posted
            # history only with chat.memory.enabled, as on /ai/rag
            options=RequestOptions(always_use_history=asked.history is None and bool(history)),
        )
        return await assemble.ask(snapshot, query, progress)

    def _agent(self, scope: Scope, progress: Progress | None) -> Agent:
        """The agent the request names (service.agents.choice); its tools' events and its
        final answer's parts told to `progress` (a stream's tool events and message.delta)."""
        on_text = None if progress is None else (lambda text: progress(AnswerText(text)))
        return choose_agent(self.snapshot, self.asked.agent, scope, self.asked.lang,
                            progress, progress, on_text)  # fmt: skip

    async def keep(self, answer: Answer) -> Kept | None:
        """The question and its answer, kept in the memory and the conversation; the
        conversation it is kept in."""
        question = self.question
        if self.memory is not None and answer.message:
            if self.memory.kept is not None:
                await KeptMemories(self.snapshot.conversations).remember(
                    self.memory, question, answer.message
                )
            else:
                self.memories.remember(self.memory, question, answer.message)
        if self.conversation is None:
            return None
        self.conversation = await self.snapshot.conversations.append(
            self.conversation, question, answer.message
        )
        return Kept(self.conversation.id, self.title)

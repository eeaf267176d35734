"""Datafari 7's actions on one question (a turn of a conversation): rag, summarize, search,
synthesize, agentic; what a turn opens (a conversation, a memory) and keeps.

    turn.py     Turn: the caller's scope narrowed by the filters, the conversation and memory,
                the action's pipeline, what is kept after
    search.py   the search action: the documents that match, no answer written
"""

from service.actions.turn import NOT_KEPT, Turn, TurnRequest

__all__ = ["NOT_KEPT", "Turn", "TurnRequest"]

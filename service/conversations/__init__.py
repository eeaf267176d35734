"""What the service keeps of a caller's conversations for Datafari 7's AI API: the
conversations of `conversationId` (store.py, in Solr, titled and listed for their owner's
panel), their Solr records (records.py: the one module here that speaks to Solr, to
conversations.collection alone), and the short memories of `memoryId` (memories.py: in the
process, or kept beside the conversations when those are on).

    >>> store = ConversationStore(solr, settings.conversations)
    >>> conversation = await store.open(owner, None)        # a new one
    >>> memory = Memories().open(owner, None)               # in this process
"""

from service.conversations.memories import KeptMemories, Memories, Memory
from service.conversations.store import TITLE_CHARS, Conversation, ConversationStore

__all__ = [
    "TITLE_CHARS",
    "Conversation",
    "ConversationStore",
    "KeptMemories",
    "Memories",
    "Memory",
]

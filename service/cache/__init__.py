"""The semantic answer cache: answers kept in Solr, found again by the meaning of a question."""

from service.cache.answers import (
    AnswerCache,
    CachedAnswer,
    CachedDocument,
    CachedPayload,
    CacheKey,
    Lookup,
)

__all__ = ["AnswerCache", "CacheKey", "CachedAnswer", "CachedDocument", "CachedPayload", "Lookup"]

"""Text handling: the query (sanitize), document text (clean, chunk), request budgets (pack)."""

from service.text.chunk import Chunker
from service.text.clean import clean_context
from service.text.pack import pack_greedy
from service.text.sanitize import MAX_QUERY_LENGTH, normalize_question, sanitize_query

__all__ = [
    "MAX_QUERY_LENGTH",
    "Chunker",
    "clean_context",
    "normalize_question",
    "pack_greedy",
    "sanitize_query",
]

"""Text handling: the query (sanitize), document text (clean, chunk), an answer's sentences
as claims and what they hold (claims: content words, stems, figures, negation), read by the
chains, the grounding check, the echo stage and the answer cache alike."""

from service.text.chunk import Chunker
from service.text.clean import clean_context
from service.text.sanitize import MAX_QUERY_LENGTH, normalize_question, sanitize_query

__all__ = [
    "MAX_QUERY_LENGTH",
    "Chunker",
    "clean_context",
    "normalize_question",
    "sanitize_query",
]

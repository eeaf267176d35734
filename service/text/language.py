"""The language of a question, when the caller did not say it: French or English, by the small
words every sentence of them holds.

Documents are not guessed here: Solr's language identifier detects theirs at indexing (the
configsets' "language" chain). A question is a few words Solr never sees as a document; what
it needs from its language is the answer's language, the not-found sentence and the messages
in it. Two languages are told apart, the two we analyse: a question in neither is left to the
prompt's "the language of the question".

    >>> guess_language("Comment exercer mon droit d'accès ?")
    'fr'
"""

from __future__ import annotations

import re
from functools import lru_cache

# fmt: off
FRENCH = frozenset(
    {
        "le", "la", "les", "un", "une", "des", "du", "de", "et", "est", "sont", "pour", "dans",
        "que", "qui", "quoi", "quel", "quelle", "quels", "quelles", "comment", "pourquoi", "où",
        "ou", "avec", "sur", "pas", "ne", "se", "ce", "cette", "ces", "mon", "ma", "mes", "son",
        "sa", "ses", "leur", "leurs", "nous", "vous", "il", "elle", "ils", "elles", "je", "tu",
        "on", "au", "aux", "par", "peut", "doit", "faut", "être", "avoir", "été", "fait",
        "puis-je", "dois-je", "faut-il", "est-ce", "y", "a-t-il", "combien", "quand",
    }
)
ENGLISH = frozenset(
    {
        "the", "a", "an", "and", "is", "are", "was", "were", "for", "in", "on", "of", "to",
        "that", "which", "what", "who", "whom", "how", "why", "where", "when", "with", "by",
        "not", "do", "does", "did", "can", "could", "should", "would", "will", "be", "been",
        "have", "has", "had", "it", "its", "this", "these", "those", "my", "your", "his", "her",
        "their", "our", "you", "he", "she", "they", "we", "i", "much", "many", "there",
    }
)
# fmt: on
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
# l'accès, d'un, qu'il, n'est, j'ai, c'est, s'il, m'a, t'a, jusqu'à
_ELISION = re.compile(r"\b(?:l|d|j|qu|n|s|c|m|t|jusqu|lorsqu|puisqu)['’]\w", re.IGNORECASE)
_FRENCH_LETTERS = re.compile(r"[éèêàâùûçîôœ]", re.IGNORECASE)


def guess_language(text: str) -> str:
    """ "fr", "en", or "" when the words do not tell (too few, or another language).

    Remembered (a quarter of a millisecond for 2,000 characters): one request asks it of its
    question three times (the API's language, the answer's, Solr's fields), and the echo
    check of the same sources' text when they come again. Only the first 2,000 characters
    are read, and kept: a long document's text is never held by the memory."""
    return _guessed(text[:2000])


@lru_cache(maxsize=256)
def _guessed(sample: str) -> str:
    words = [word.lower() for word in _WORD.findall(sample)]
    french = sum(word in FRENCH for word in words) + len(_ELISION.findall(sample))
    french += min(2, len(_FRENCH_LETTERS.findall(sample)))
    english = sum(word in ENGLISH for word in words)
    if french > english:
        return "fr"
    if english > french:
        return "en"
    return ""


def answer_language(lang: str | None, question: str | None) -> str:
    """The language a request is answered in: the caller's `lang`, else its question's
    (guessed), else "" (none known)."""
    return lang or guess_language(question or "")

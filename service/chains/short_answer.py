"""The short answer a small local model is held to: at most MAX_WORDS words and the number of
a source that was sent, or the exact not-found sentence, and nothing else.

A 1.5B model asked for "a short answer and its document's number" writes a sentence, a
title, or a bare `[1]` often enough to lose a fifth of the answers retrieval found. llama.cpp
constrains its output to a grammar (GBNF), so the model can only write the form asked for:

    root     ::= answer | notfound
    answer   ::= word (" " word){0,59} (" [" ("1" | "2" | "3") "]")?
    notfound ::= "I could not find the answer in the documents."   (in the answer's language)

The citation is optional in the grammar: a model that has said its answer wants to stop, and
one made to go on until it writes " [" fills the words left with whatever it can (tried: a
sentence ended, then "how,何时,何时..."). The citation is then made true (`true_citation`):
the answer's words must be in the source it cites; else, or when it cites none, the source
that holds most of them is cited (the answer kept as written, only its number changes); an
answer that no source holds keeps what it cites, for grounding to judge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from service.chains.prompts import NOT_FOUND_SENTENCES
from service.chains.result import Source
from service.grounding.claims import content_words

NOT_FOUND = NOT_FOUND_SENTENCES["en"]
MAX_WORDS = 60  # a safety net: a cap that binds makes the model stretch its last word
MAX_WORD_CHARS = 40
_CITATION = re.compile(r"\s*\[(\d{1,3})\]\s*$")


def grammar(numbers: Sequence[int], max_words: int = MAX_WORDS, not_found: str = NOT_FOUND) -> str:
    """The GBNF grammar of an answer citing one of `numbers` (the sources sent), or the
    `not_found` sentence (the answer's language's)."""
    if not numbers:
        raise ValueError("a short answer needs at least one source to cite")
    cited = " | ".join(f'"{n}"' for n in sorted(set(numbers)))
    # a word: no space, newline or bracket; ends the answer's words before " [n]"
    return "\n".join(
        [
            "root ::= answer | notfound",
            f'answer ::= word (" " word){{0,{max_words - 1}}} (" [" number "]")?',
            f"word ::= [^ \\n\\t\\[\\]]{{1,{MAX_WORD_CHARS}}}",
            f"number ::= {cited}",
            f"notfound ::= {_literal(not_found)}",
        ]
    )


def true_citation(answer: str, sources: Sequence[Source]) -> str:
    """`answer` ("words [n]", or "words") citing a source that holds its words: as written
    when [n] does (or when no source holds more of them), else with the number of the one
    that holds most; the not-found sentence as it is."""
    if answer.strip() in NOT_FOUND_SENTENCES.values():
        return answer
    cited = _CITATION.search(answer)
    text = answer[: cited.start()] if cited else answer
    words = content_words(text)
    if not words:
        return answer
    held = {source.number: _held(words, source) for source in sources}
    number = int(cited.group(1)) if cited else 0
    best = max(held, key=lambda n: (held[n], n == number), default=number)
    if held.get(best, 0) == 0 or held.get(number, 0) >= held[best]:
        return answer  # none holds it (grounding judges), or the cited one holds it best
    return f"{text.rstrip()} [{best}]"


def _literal(text: str) -> str:
    """A GBNF string literal: quotes and backslashes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _held(words: frozenset[str], source: Source) -> int:
    """How many of `words` the source's sent text (and title) holds."""
    text = " ".join([source.document.title, *source.snippets])
    return len(words & content_words(text))

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

Asked "When had the Six Ministries existed?", the 1.5B writes the question back around its
answer ("The Six Ministries existed since the Sui and Tang dynasties. [1]") whatever the prompt
says (few-shot phrase answers in the prompt, measured: unchanged). For a question a phrase
answers (`phrase_answers`: who, what, when, where, which, how many..., not why, how or a yes/no
question), `phrase` keeps of a one-sentence answer the run of words the question does not say
("Sui and Tang dynasties [1]"): the answer the model wrote, cut, never a word added. Of
several runs, the one the question's form asks for (issue 69: the longest run was cut away
when the gold span was another one): a how many's a figure ("40", not "fortresses from the
Middle Ages"), a when's a date, a who's or a where's a name; else the longest. A name the run
begins or ends inside is kept whole ("Rhine Gorge", though the question says "Rhine"), and
the thing a "What (kind of) X" asks for when the answer names it right after the run
("Killer T cells" for "What type of immune cells ...?"); of several runs, the first one the
answer names X after is that X's ("Transform boundary, such as the San Andreas fault" for
"What type of fault boundary ...?"; for a "What X" that asks no kind, only when no run fits
the form). A degree word before the run ("most rigorous") and a Roman numeral after it ("MHC
class I") are kept with it, and an answer the model already wrote as a phrase (PHRASE_WORDS at
most, no sentence's end, not the question's words first: "Brick-and-mortar community
pharmacies") is kept whole (issue 83, chosen on the dev half's 200 answerable questions:
contained 0.62 -> 0.65, F1 0.551 -> 0.556, EM 0.395 -> 0.39).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from service.chains.prompts import NOT_FOUND_SENTENCES
from service.chains.result import Source
from service.text.claims import content_words, is_content, stem, tokens
from service.text.language import FRENCH

NOT_FOUND = NOT_FOUND_SENTENCES["en"]
MAX_WORDS = 60  # a safety net: a cap that binds makes the model stretch its last word
MAX_WORD_CHARS = 40
_CITATION = re.compile(r"\s*\[(\d{1,3})\]\s*$")
# a question a phrase answers: an English question word that asks for a thing, a time, a
# place, a count (French questions left out: on the French FAQ's dev half, "Qui peut
# consulter ...?", "Quelles informations ...?" ask for a list, its answers are paragraphs, and
# the cut lowered F1: bench/RESULTS.md "Issue 69, items 2-3")
_ASKS_PHRASE = re.compile(
    r"\b(what|which|who|whom|whose|when|where|how (many|much|long|old|far|big|large|often|"
    r"tall|high|deep|wide|fast))\b",
    re.I,
)
# ... unless it asks for an explanation, or whether (a yes or a no, and why)
_ASKS_EXPLANATION = re.compile(
    r"\b(why|explain|describe|pourquoi|comment|expliquez|d\u00e9crivez)\b"
    r"|\bhow\b(?! (many|much|long|old|far|big|large|often|tall|high|deep|wide|fast)\b)"
    # "What does the assert statement do?": what it does, a sentence ("for work?" is a noun)
    r"|\b(do|does|did)\b.*\b(do|mean|work)\W*$"
    # "What did the program do for students?": what it did, said in a sentence (the verb: not
    # "to-do", not "DO-178C"; "When did they do ...?" still asks for a date)
    r"|^\s*what\s+(do|does|did)\s.*(?<!-)(?-i:\bdo\b)(?!-)"
    # "... structural geologists do what with measurements?": an action, said in a sentence
    r"|\b(do|does|did)\s+what\b"
    r"|^\s*(is|are|was|were|do|does|did|can|could|should|would|will|has|have|had|may|must|"
    r"est-ce|puis-je|peut-on|peut-il|peut-elle|faut-il|dois-je|ai-je|suis-je)\b",
    re.I,
)
_ANOTHER_SENTENCE = re.compile(r"[.!?]\s+\S")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")  # punctuation around a phrase's words
# a verb that only links the question's words to the answer's ("The tasks ... include X")
_LINKING = re.compile(r"^(?:include[sd]?|including|consists? of|consisted of)\s+(?=\S)", re.I)
_ROOT = 5  # words compared by their stem's first letters (the echo check's measure)
# an answer the model wrote as a phrase (no sentence's end, a few words) is the phrase
PHRASE_WORDS = 4
_SENTENCE_END = re.compile(r"[.!?]\W*$")
# a comparative's or superlative's word just before the run is the answer's ("most rigorous")
_DEGREE = frozenset({"most", "least", "more", "less"})
# a Roman numeral just after the run names it ("MHC class I"; "I" is a function word), a bare
# "I" only after a lowercase word it numbers ("class I", not "In 1952 I" nor "Smith I")
_NUMERAL = re.compile(r"^(?:I|II|III|IV|V|VI|VII|VIII|IX|X)[,;:).]?$")
_NUMBERED = re.compile(r"^[a-z]+$")
# "What type of X ...?": X is the kind asked for, whichever run the answer's form fits
_ASKS_KIND = re.compile(r"\b(?:what|which)\s+(?:kinds?|types?|sorts?|forms?)\s+of\b", re.I)
_CAPITALIZED = re.compile(r"^[\"'(\u201c]?[A-Z\u00c0-\u00de]")  # a name's word (or a title's)
_EDGE_END = re.compile(r"[,;:)\u201d\"]$")  # a word that ends a name: "Bonn," or "Rhine)"
_DIGIT = re.compile(r"\d")
# a figure or a time said in words, as an answer says it ("forty", "the 19th century")
_FIGURE_WORDS = frozenset(
    {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
     "fifteen", "twenty", "thirty", "forty", "fifty", "hundred", "hundreds", "thousand",
     "thousands", "million", "millions", "billion", "billions", "dozen", "dozens", "half"}
)  # fmt: skip
_TIME_WORDS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december", "century", "centuries", "decade", "decades", "bc", "ad",
     "bce", "spring", "summer", "autumn", "winter"}
)  # fmt: skip


def _has_figure(said: list[str]) -> bool:
    return any(_DIGIT.search(word) or word.lower().strip(".,;:") in _FIGURE_WORDS for word in said)


def _has_time(said: list[str]) -> bool:
    return _has_figure(said) or any(word.lower().strip(".,;:") in _TIME_WORDS for word in said)


def _has_name(said: list[str]) -> bool:
    return any(_CAPITALIZED.match(word) for word in said)


# "What X ...?", "Which kind of X ...?": X is the thing asked for
_ASKS_THING = re.compile(r"\b(?:what|which)\s+(?:(?:kinds?|types?|sorts?|forms?)\s+of\s+)?", re.I)
# what a question's form asks for, the first that matches (a question matching none: the run
# with most new words)
_FORMS = (
    (re.compile(r"\bhow (many|much|long|old|far|big|large|often|tall|high|deep|wide|fast)\b", re.I),
     _has_figure),
    (re.compile(r"\bwhen\b|\b(what|which) (year|century|decade|date|day|month|time|period|era)s?\b",
                re.I), _has_time),
    (re.compile(r"\b(who|whom|whose)\b|\bwhere\b", re.I), _has_name),
    # "Which country ...?", "What stipend ...?": a thing named, a name when the answer has one
    (re.compile(r"\b(which|what)\s+(?!(is|are|was|were|of|does|did|do|has|had|can)\b)\w", re.I),
     _has_name),
)  # fmt: skip


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


def phrase_answers(question: str) -> bool:
    """Whether a phrase answers `question` (who, what, when, how many...; not why, how, a
    question answered yes or no, which want a sentence, nor one of two parts, "When ..., and
    what ...?", which wants both)."""
    asks = len(_ASKS_PHRASE.findall(question))
    return asks == 1 and not _ASKS_EXPLANATION.search(question)


def phrase(answer: str, question: str) -> str:
    """Of a one-sentence short answer ("words [n]"), the run of its words the question does
    not say, with its citation: the words from one new word to the last new word before a
    word of the question (function words between kept as written). Of several runs, the one
    the question's form asks for (`_FORMS`: a who a name, a when a date, a how many the
    first figure), else the one with most new words, the first of equals; a name is kept whole
    ("Rhine Gorge" for "Where does the Middle Rhine flow ...?", though the question says
    "Rhine"). The answer as it is when it says more than one sentence, the not-found
    sentence, or nothing the question does not say."""
    if answer.strip() in NOT_FOUND_SENTENCES.values():
        return answer
    cited = _CITATION.search(answer)
    text = answer[: cited.start()] if cited else answer
    if _ANOTHER_SENTENCE.search(text.strip()):
        return answer  # more than a sentence: an explanation, kept whole
    words = text.split()
    asked = {_root(token) for token in tokens(question)}
    if _written_as_phrase(words, text, asked):
        return answer  # "Brick-and-mortar community pharmacies [1]": the model's phrase
    found = _runs(words, asked)
    if not found:
        return answer  # nothing new: the echo check judges it
    form = _form(question)
    # the answer's first word is capitalized as any first word is: not a name for the form
    plain = [words[0].lower(), *words[1:]]
    fits = [run for run in found if form and form(plain[run[0] : run[1] + 1])]
    # "What type of fault boundary ...?": the first run the answer says "boundary" after; for
    # "What X ...?", only when no run fits the form ("Which city ...?": the name, not "his
    # home city"; "What year ...?": the date, not "its centenary year")
    kind = len(found) > 1 and bool(
        _ASKS_KIND.search(question) or (not fits and form not in (_has_figure, _has_time))
    )
    thing = [run for run in found if kind and _with_thing(words, run[1], question) > run[1]]
    if thing:
        first, last = thing[0][:2]
    elif fits and form is _has_figure:  # "28,000 students or 3.7% of ...": the count first
        first, last = fits[0][:2]
    else:
        first, last = max(fits or found, key=lambda run: len(run[2]))[:2]
    last = _with_numeral(words, last)
    first, last = _whole_name(words, first, _with_thing(words, last, question))
    if first > 0 and words[first - 1].lower() in _DEGREE:
        first -= 1
    said = _LINKING.sub("", _EDGE.sub("", " ".join(words[first : last + 1])))
    if not said:
        return answer
    return f"{said} [{cited.group(1)}]" if cited else said


def _written_as_phrase(words: list[str], text: str, asked: set[str]) -> bool:
    """Whether the model wrote a phrase, not a sentence: PHRASE_WORDS at most, no sentence's
    end, and not the question's words first ("The lamp burned paraffin" for "What did the
    lamp burn?" is a sentence whose full stop is missing)."""
    if len(words) > PHRASE_WORDS or _SENTENCE_END.search(text):
        return False
    said = [token for token in tokens(text) if _kind(token, asked) != "function"]
    return bool(said) and _kind(said[0], asked) == "new"


def _with_numeral(words: list[str], last: int) -> int:
    """The run's last word, after the Roman numeral that follows it ("MHC class" + "I")."""
    if last + 1 >= len(words) or not _NUMERAL.match(words[last + 1]):
        return last
    if words[last + 1].rstrip(",;:).") == "I" and not _NUMBERED.match(words[last]):
        return last  # "In 1952 I visited ...": the pronoun
    return last + 1


def _runs(words: list[str], asked: set[str]) -> list[tuple[int, int, list[int]]]:
    """The runs of `words` the question (`asked`, its words' roots) does not say, in order:
    (first, last, the new words' indexes), a run ending before a word of the question."""
    found: list[tuple[int, int, list[int]]] = []
    run: list[int] = []
    for index, word in enumerate(words):
        kinds = {_kind(token, asked) for token in tokens(word)}
        if "new" in kinds:
            run.append(index)
        elif "asked" in kinds and run:
            found.append((run[0], run[-1], run))
            run = []
    if run:
        found.append((run[0], run[-1], run))
    return found


def _form(question: str) -> Callable[[list[str]], bool] | None:
    """What the question's form asks a run to hold (`_FORMS`: a name, a date, a figure), read
    once a question; None when it asks for no form in particular."""
    for asks, fits in _FORMS:
        if asks.search(question):
            return fits
    return None


def _with_thing(words: list[str], last: int, question: str) -> int:
    """The run's last word, after the thing a "What (kind of) X ...?" asks for when the
    answer names it right after the run: "Killer T" + "cells" for "What type of immune
    cells ...?" ("Killer T cells"), "Regulatory" + "T cells" for "What kind of T cells
    ...?"."""
    asks = _ASKS_THING.search(question)
    if not asks:
        return last
    thing: set[str] = set()
    for token in tokens(question[asks.end() :]):
        if not is_content(token) or len(thing) == 4:
            break
        thing.add(_root(token))
    end = last
    while end + 1 < len(words) and end - last < len(thing):
        said = [token for token in tokens(words[end + 1]) if is_content(token)]
        if not said or any(_root(token) not in thing for token in said):
            break
        end += 1
        if _EDGE_END.search(words[end]) or words[end].endswith("."):
            break
    return end


def _whole_name(words: list[str], first: int, last: int) -> tuple[int, int]:
    """A run that begins or ends inside a name (capitalized words in a row, after the
    sentence's first word, capitalized as any first word is) widened to the whole name:
    "Gorge" of "the Rhine Gorge" is "Rhine Gorge"."""
    named_first = first > 0 and _CAPITALIZED.match(words[first])
    if not named_first and (last == 0 or not _CAPITALIZED.match(words[last])):
        return first, last
    if named_first:
        while first > 0 and _named(words[first - 1]) and not _EDGE_END.search(words[first - 1]):
            first -= 1
    if last > 0 and _CAPITALIZED.match(words[last]) and not _EDGE_END.search(words[last]):
        while last + 1 < len(words) and _named(words[last + 1]):
            last += 1
            if _EDGE_END.search(words[last]):
                break
    return first, last


def _named(word: str) -> bool:
    """Whether a word can be part of a name: capitalized, and no function word ("The")."""
    said = tokens(word)
    return bool(_CAPITALIZED.match(word) and said and all(is_content(t) for t in said))


def _root(token: str) -> str:
    return stem(token)[:_ROOT]


def _kind(token: str, asked: set[str]) -> str:
    """A token's part in an answer: a word of the question's (asked), a content word it does
    not say (new), or a function word (English or French)."""
    if not is_content(token) or token in FRENCH:
        return "function"
    return "asked" if _root(token) in asked else "new"


def _literal(text: str) -> str:
    """A GBNF string literal: quotes and backslashes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _held(words: frozenset[str], source: Source) -> int:
    """How many of `words` the source's sent text (and title) holds."""
    text = " ".join([source.document.title, *source.snippets])
    return len(words & content_words(text))

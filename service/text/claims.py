"""An answer as claims to check: its sentences, the sources each cites, and what must match
(text analysis, so that the chains and the grounding check read it alike, downward).

A sentence's content words (no stop words, crudely stemmed) are what a source must contain to
support it; its numbers and whether it negates must match the source's exactly, since a
changed figure or an added "not" keeps nearly every word and says the opposite.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from service.text.citations import CITATION, without_citations
from service.text.fold import folded

# a sentence ends at . ! ? (and the citations right after), before a space and the next one,
# which a citation never begins: "... retreat. [2]" at a line's end is the sentence's; the next
# one begins with a capital or a figure, accented, Greek or Cyrillic too ("Émile", "À", "Ça")
_OPENS = "A-Z0-9\u00c0-\u00d6\u00d8-\u00de\u0152\u0160\u017d\u0178\u0391-\u03a9\u0401\u0410-\u042f"
_QUOTE = "(?:[\"'(\u201c\u2018]|\u00ab[ \u00a0\u202f]?)"  # « with its French space
_END = re.compile(
    rf"(?<=[.!?])((?:\s*\[\d{{1,3}}\])*)\s+(?={_QUOTE}?[{_OPENS}]|\[(?!\d{{1,3}}\])[{_OPENS}])"
)
# an abbreviation a figure follows ends no sentence: "Vol. 2", "Fig. 3", "pp. 10-12"
_NUMBERED = re.compile(r"(?<![\w.])(?:[Vv]ol|Fig|Art|pp?|Ch)\.$")
# a number sign ("Symphony No. 7", "loi nº 2021", "№ 7", on its figure's line) ends no
# sentence either and is no word, so no negation: when a word comes right before it that is
# no verb of saying or voting ("they voted no. 12 abstained", "Open? No. 3 are": denials)
_NUMBER_SIGN = re.compile(r"(?<!\w)(?:[Nn][Oo][Ss]?\.|[Nn][º°]\.?|№\.?)[ \t\u00a0]*(?=[0-9])")
_WORD_BEFORE = re.compile(r"(\w+)[ \t\u00a0]+$")
_SAYING = frozenset(
    {"say", "says", "said", "saying", "answer", "answers", "answered", "reply", "replies",
     "replied", "respond", "responds", "responded", "vote", "votes", "voted", "voting", "is",
     "was", "are", "were", "be", "been",
     "dit", "disent", "repondu", "repond", "votent", "voterent", "est", "etait", "sont"}
)  # fmt: skip
_BEFORE_PUNCTUATION = re.compile(r"\s+([.,;:!?])")  # where a citation was cut out
_LINE = re.compile(r"^[^\n]*\S[^\n]*", re.M)  # from a line's start: a blank line read once
# a list item's or heading's marker at the start of a line: "- ", "* ", "2. ", "(b) ", "## "
_MARKER = re.compile(r"\s*(?:(?:[-*\u2022>]+|#{1,6}|\(?[0-9]{1,3}[.)]|\(?[a-z]\))\s+)?")
_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
_NUMBER = re.compile(r"^[0-9]+(?:[.,][0-9]+)*$")
# where a scale word stops reaching: "one million. Seven keepers" holds a 7
_SENTENCE_END = re.compile(r"(?<=[.!?;])(?<!\.\.)\s+")  # an ellipsis ends none
_NEGATION = frozenset(
    {"not", "no", "never", "none", "nor", "neither", "nothing", "nobody", "nowhere", "without",
     # "cannot", and contractions typed without their apostrophe ("n't" is read as "not")
     "cannot", "cant", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "wont",
     "wouldnt", "couldnt", "shouldnt", "hasnt", "havent", "hadnt", "mustnt", "neednt", "aint",
     # French: "ne ... pas", jamais, aucun(e), sans, ni, nullement, guère (accents folded);
     # not "plus" nor "personne", more often "more" and "person"
     "pas", "jamais", "aucun", "aucune", "sans", "ni", "nullement", "guere"}
)  # fmt: skip
# a figure said in words is the same word as in digits ("7 professional schools" of a source
# that says "seven"); left out: "one" and "un" (pronoun and article more often than figures),
# and the French words that are English ones too ("sept" of "11 Sept", "seize" the verb, "neuf")
FIGURES = (
    {
        word: str(value)
        for words in (
            "two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen twenty",
            "deux trois quatre cinq six - huit - dix onze douze treize quatorze quinze -",
        )
        for value, word in enumerate(words.split(), start=2)
        if word != "-"
    }
    | {
        word: str(10 * tens)
        for words in (
            "thirty forty fifty sixty seventy eighty ninety",
            "trente quarante cinquante soixante septante octante nonante",
        )
        for tens, word in enumerate(words.split(), start=3)
    }
    | {"vingt": "20", "huitante": "80"}
)
# the units a tens word takes after it ("twenty-five", "vingt-cinq", "vingt et un")
_UNITS = {
    word: value
    for words in (
        "one two three four five six seven eight nine",
        "un deux trois quatre cinq six sept huit neuf",
    )
    for value, word in enumerate(words.split(), start=1)
} | {"une": 1}
# French counts past sixty in twenties: "soixante-dix" 70, "soixante et onze" 71,
# "quatre-vingts" 80, "quatre-vingt-dix-sept" 97; and "dix-sept" 17 (Belgian and Swiss
# "septante", "octante", "huitante", "nonante" are tens of their own)
_TEENS = {"dix": 10, "onze": 11, "douze": 12, "treize": 13, "quatorze": 14, "quinze": 15,
          "seize": 16}  # fmt: skip
_FRENCH_TENS = {"vingt": 20, "trente": 30, "quarante": 40, "cinquante": 50, "soixante": 60,
                "septante": 70, "octante": 80, "huitante": 80, "nonante": 90}  # fmt: skip
# after a figure, a word that multiplies it: "two million" is no 2 (the figure left as written)
_SCALES = frozenset(
    {"hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion",
     "billions", "trillion", "cent", "cents", "mille", "milliard", "milliards"}
)  # fmt: skip
# English function words (stopwords.txt): what a sentence shares with any text
STOP_WORDS = frozenset(
    word
    for line in (Path(__file__).parent / "stopwords.txt").read_text().splitlines()
    if not line.startswith("#")
    for word in line.split()
)
# where a clause may begin that adds a claim of its own
_CLAUSE = re.compile(
    r"(?=[;:]\s)|(?=,\s+(?:and|but|or|which|who|whose|where|while|whereas|although|though|"
    r"because|since|so|thus|hence|meaning|means|making)\b)|(?=\s(?:but|whereas|although)\s)"
)
MIN_CLAUSE_WORDS = 3
MAX_SENTENCES = 200  # an answer longer than this is checked in its first sentences only


@dataclass(frozen=True)
class Claim:
    """One sentence of the answer, the source numbers it cites ([1], [2]...), and where it
    stands in the answer (`answer[start:end]`, its citations included)."""

    text: str
    cited: tuple[int, ...]
    start: int = 0
    end: int = 0

    @cached_property
    def words(self) -> frozenset[str]:
        return content_words(self.text)

    @property
    def checkable(self) -> bool:
        """A sentence with nothing a source could state ("Here is what I found:") is not
        counted either way."""
        return bool(self.words)

    @cached_property
    def clauses(self) -> tuple[Claim, ...]:
        """The sentence cut where it may add a claim of its own ("..., which means ...",
        "...; ...", "... but ..."): a sentence is supported when each clause is, so a source
        sentence copied and carried on with invented text is not. A clause of fewer than
        MIN_CLAUSE_WORDS content words stays with the one before it (or after, if first)."""
        pieces = [piece for piece in _CLAUSE.split(self.text) if piece and piece.strip(" ,;:")]
        merged: list[str] = []
        for piece in pieces:
            if merged and (_short(piece) or _short(merged[-1])):
                merged[-1] += piece
            else:
                merged.append(piece)
        if len(merged) <= 1:
            return (self,)
        return tuple(
            Claim(piece.strip(" ,;:"), self.cited, self.start, self.end) for piece in merged
        )


def _short(clause: str) -> bool:
    return len(content_words(clause)) < MIN_CLAUSE_WORDS


def claims_of(answer: str) -> list[Claim]:
    """The answer's sentences, each with the citations written in or right after it. A line
    break ends a sentence too (list items, headings), and a list marker ("- ", "2. ") is not
    part of it."""
    claims: list[Claim] = []
    for line in _LINE.finditer(answer):
        start = line.start() + len(_MARKER.match(line.group()).group())  # type: ignore[union-attr]
        for piece_start, piece_end in _pieces(answer, start, line.end()):
            piece = answer[piece_start:piece_end]
            cited = tuple(dict.fromkeys(int(n) for n in CITATION.findall(piece)))
            text = " ".join(without_citations(piece).split())
            sentence = _BEFORE_PUNCTUATION.sub(r"\1", text).strip()
            if sentence:
                claims.append(Claim(sentence, cited, piece_start, piece_end))
            if len(claims) == MAX_SENTENCES:
                return claims
    return claims


def _pieces(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the sentences of `text[start:end]`, trailing citations included."""
    spans = []
    signs = {sign.end() for sign in _number_signs(text, start, end)}  # where their figures are
    for match in _END.finditer(text, start, end):
        at = match.start()
        numbered = not match.group(1) and text[match.end()].isdigit()
        if numbered and (match.end() in signs or _NUMBERED.search(text, max(start, at - 5), at)):
            continue
        spans.append((start, match.end(1)))
        start = match.end()
    return [*spans, (start, end)]


def _number_signs(text: str, start: int = 0, end: int | None = None) -> Iterator[re.Match[str]]:
    """The number signs of `text[start:end]` (_NUMBER_SIGN, the word before it read)."""
    for sign in _NUMBER_SIGN.finditer(text, start, len(text) if end is None else end):
        before = _WORD_BEFORE.search(text, max(start, sign.start() - 40), sign.start())
        if before and folded(before.group(1)) not in _SAYING:
            yield sign


def _without_number_signs(text: str) -> str:
    pieces, at = [], 0
    for sign in _number_signs(text):
        pieces += [text[at : sign.start()], " "]
        at = sign.end()
    return "".join(pieces) + text[at:] if pieces else text


def without_spans(answer: str, spans: list[tuple[int, int]]) -> str:
    """`answer` without the sentences at `spans` (claims' start and end, in order): a line
    they emptied (or left with only its list marker) goes, the spaces they leave are closed."""
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(answer[position:start])
        position = end
    pieces.append(answer[position:])
    # sentences never span a line break, so the lines correspond one to one
    lines = []
    for before, after in zip(answer.split("\n"), "".join(pieces).split("\n"), strict=True):
        if before.strip() and _MARKER.fullmatch(after):
            continue
        indent = after[: len(after) - len(after.lstrip())]
        lines.append(indent + " ".join(after.split()))
    return "\n".join(lines).strip()


def sentences_of(text: str) -> list[str]:
    """A source's sentences (the same cut as an answer's)."""
    return [claim.text for claim in claims_of(text)]


def windows_of(text: str, size: int) -> list[str]:
    """Every run of `size` consecutive sentences of a source, in order; the text itself when it
    has no more sentences than that."""
    sentences = sentences_of(text)
    if len(sentences) <= size:
        return [text]
    return [" ".join(sentences[i : i + size]) for i in range(len(sentences) - size + 1)]


def tokens(text: str) -> list[str]:
    return _words_of(_without_number_signs(text))


def _words_of(text: str) -> list[str]:
    """`text`'s words, folded (no accents, lower case), "n't" read as "not"."""
    words = folded(text)
    return _WORD.findall(words.replace("n't", " not").replace("\u2019t", " not"))


@lru_cache(maxsize=16_384)
def facts(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """(content words, numbers, negated) of a text, tokenized once; remembered, as the same
    source sentences come back with every question about them."""
    found = figure_tokens(text)
    words = frozenset(stem(t) for t in found if t not in STOP_WORDS and t not in _NEGATION)
    figures = frozenset(t.replace(",", "") for t in found if _NUMBER.match(t))
    return words, figures, any(t in _NEGATION for t in found)


def figure_tokens(text: str) -> list[str]:
    """`text`'s tokens, its figures in words in digits (`in_figures`), sentence by sentence: a
    scale word does not reach across a sentence's end."""
    parts = _SENTENCE_END.split(_without_number_signs(text))  # once, as `tokens` does
    return [token for part in parts for token in in_figures(_words_of(part))]


def in_figures(found: list[str]) -> list[str]:
    """Tokens with each figure said in words in digits: "seven" 7, "twenty-five" 25,
    "soixante-dix" 70, "quatre-vingt-douze" 92 (one token for the words of one figure); a
    figure next to a scale word ("two million", "trois cent onze") left as written."""
    read: list[str] = []
    at = 0
    while at < len(found):
        figure = _french_count(found, at) or _figure(found, at)
        if figure is None:
            read.append(found[at])
            at += 1
            continue
        value, taken = figure
        if (at + taken < len(found) and found[at + taken] in _SCALES) or _scaled(found, at):
            read += found[at : at + taken]  # "two million", "trois cent onze": not 2, not 11
        else:
            read.append(str(value))
        at += taken
    return read


def _scaled(found: list[str], at: int) -> bool:
    """Whether the figure at `at` ends a larger number: a scale word before it ("cent
    vingt", "two hundred and twenty", "mille et un")."""
    before = found[at - 1] if at else ""
    if before in ("and", "et") and at > 1:
        before = found[at - 2]
    return before in _SCALES


def _figure(found: list[str], at: int) -> tuple[int, int] | None:
    """(the figure, its words) at `at`: a figure word, or a tens one and its unit."""
    value = FIGURES.get(found[at])
    if value is None:
        return None
    figure = int(value)
    if figure % 10 == 0 and figure > 10 and at + 1 < len(found):
        unit = _UNITS.get(found[at + 1])
        if unit is not None:
            return figure + unit, 2
    return figure, 1


def _french_count(found: list[str], at: int) -> tuple[int, int] | None:
    """(the figure, its words) of a French count in several words at `at` ("dix-sept",
    "vingt et un", "soixante-quinze", "quatre-vingts", "quatre-vingt-dix-neuf"), or None."""
    word = found[at]
    if word not in _FRENCH_TENS and word != "dix" and word != "quatre":
        return None  # most words: nothing to slice
    after = found[at + 1 : at + 2]
    if word == "dix":
        return (10 + _UNITS[after[0]], 2) if after[:1] in (["sept"], ["huit"], ["neuf"]) else None
    if word == "quatre" and after[:1] in (["vingt"], ["vingts"]):
        tens, taken = 80, 2
    elif word in _FRENCH_TENS:
        tens, taken = _FRENCH_TENS[word], 1
    else:
        return None
    rest = found[at + taken : at + taken + 3]
    # "vingt et un", "soixante et onze": "et" joins only those ("vingt et deux" is two figures)
    joined = 1 if rest[:1] == ["et"] and rest[1:2] in (["un"], ["une"], ["onze"]) else 0
    rest = rest[joined:]
    twenties = word in ("soixante", "quatre")  # 60 and 80 count on past ten
    if twenties and rest[:1] == ["dix"] and rest[1:2] in (["sept"], ["huit"], ["neuf"]):
        return tens + 10 + _UNITS[rest[1]], taken + joined + 2  # soixante-dix-sept
    if twenties and rest[:1] and rest[0] in _TEENS:
        return tens + _TEENS[rest[0]], taken + joined + 1  # soixante et onze, -douze...
    if rest[:1] and rest[0] in _UNITS:
        return tens + _UNITS[rest[0]], taken + joined + 1  # vingt-cinq, trente et un
    return (tens, taken) if word == "quatre" else None  # a lone tens word: FIGURES reads it


def content_words(text: str) -> frozenset[str]:
    """A text's content words, crudely stemmed, a figure in words by its digits."""
    return frozenset(stem(token) for token in figure_tokens(text) if is_content(token))


def is_content(token: str) -> bool:
    """Whether a token (as `tokens` gives it) is a content word: no stop word, no negation."""
    return token not in STOP_WORDS and token not in _NEGATION


def numbers(text: str) -> frozenset[str]:
    """A text's figures, in digits ("seven" is 7)."""
    found = figure_tokens(text)
    return frozenset(token.replace(",", "") for token in found if _NUMBER.match(token))


def negated(text: str) -> bool:
    return any(token in _NEGATION for token in tokens(text))


def stem(word: str) -> str:
    """Enough stemming to match a paraphrase's inflections (flows/flow, measured/measure)."""
    if _NUMBER.match(word) or len(word) <= 4:
        return word
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word

"""Scaffolding: what a small model copies from the prompt around its answer, taken out as the
answer is written, so that what a client is streamed is the answer the service keeps.

What goes: a label before the answer ("Answer:", "**Final answer:**"); the template's own
lines ("Question: ...", "Documents:", a "######" separator, the instructions' first words);
an earlier answer a refine or reduce request showed the model, when it copies it under its
heading ("The answer so far, ...:", "Answer so far:") before a label or a separator that
starts its own; a sentence that repeats the instruction's forms ("A lambda expression is
just the words that answer it", or the earlier "... is a name, a number or a short phrase
when that answers it"); the instruction's words before a citation ("... The number of the
document that says this is [1]").

The templates' lines, headings and instructions are read from the answer templates as loaded
(`Scaffolding.of`, which `PromptLibrary` does once per load): an operator who edits a template
has its new words taken out, not ours. The shapes a model writes by itself (labels, a
separator, a citation's words) and the wording of earlier releases' templates are known here.

`Unscaffolded` reads the answer piece by piece: it gives out what is decided and holds back
only what is still to judge: a line's first characters while they could begin a template
line or a label, a sentence's first `SENTENCE_HOLD` words (the instruction's forms come
early in a sentence: the whole sentence then goes), the words that could begin a citation's
scaffolding, an earlier answer's lines until it is known whether the model's own answer
follows them, and trailing whitespace. Its decisions never depend on what comes later, so
the pieces it gives out, put together, are exactly `without_scaffolding` of the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from itertools import islice
from pathlib import Path

# a sentence whose first words hold the instruction's forms goes whole; later in a sentence,
# from the forms to the sentence's end
SENTENCE_HOLD = 6

# the templates whose requests write an answer: the scaffolding is read from them
ANSWERING = ("stuff", "map", "reduce", "refine_initial", "refine_step", "again")
# variables that show the model an earlier answer, on their own line under a heading
_EARLIER_VARIABLES = frozenset({"previous_answer", "answers"})
# our own templates (prompts/), read when no library is given
SHIPPED = Path(__file__).resolve().parents[2] / "prompts"

# the wording of earlier releases' templates (an operator's copy, or answers a model learnt
# to write from them): taken out as the current templates' own lines are
_EARLIER_RELEASES_LINES = ("a name, a number or a short phrase",)
_EARLIER_RELEASES_HEADINGS = ("the answer so far", "answers to the same question")
_EARLIER_RELEASES_FORMS = ("a name, a number or a short phrase", "a sentence or two otherwise")


def _either_case(pattern: str) -> str:
    """`pattern` with each ASCII letter (not an escape's) matched in either case, as re.I
    would, but for those letters only: re.I also takes "ſ" for s, "K" (kelvin) for k and "İ"
    for i, which the holds, reading `str.lower()`, do not, and a stream would show what the
    whole reading takes out."""
    out, at = [], 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            out.append(pattern[at : at + 2])
            at += 2
            continue
        out.append(f"[{char.lower()}{char.upper()}]" if char.isascii() and char.isalpha() else char)
        at += 1
    return "".join(out)


# shapes a model writes by itself, whatever the templates say: a label before the answer
_LABEL = re.compile(
    _either_case(
        r"^[ \t*#>]*(?:(refined|final|combined|updated|improved|new)[ \t]+)?answer"
        r"([ \t]+so[ \t]+far)?[ \t*]*:[ \t*]*"
    )
)
_LABEL_FORMS = tuple(
    f"{kind}answer{far}:"
    for kind in ("", "refined ", "final ", "combined ", "updated ", "improved ", "new ")
    for far in ("", " so far")
)
# ... and the words before a citation ("The number of the document that says this is [1]";
# "This can be found in [1]", "This answer is found in [1]": issue 69; their French), from a
# word's start,
# as the forms are found
_CITATION_BODY = _either_case(
    # a run of blanks read whole, once (possessive, from its start: no backtracking over it)
    r"(?<![ \t])[ \t]*+(?<!\S)"
    r"(?:(?:the[ \t]+)?(?:number[ \t]+of[ \t]+the[ \t]+)?document[ \t]+that[ \t]+"
    r"says[ \t]+(?:it|this|that|so)[ \t]+is|this(?:[ \t]+answer|[ \t]+information)?[ \t]+"
    r"(?:can[ \t]+be|is)[ \t]+found[ \t]+in"
    # French alike ("Elle est disponible dans les documents [1]", "Cette information se
    # trouve dans [2]": issue 83)
    r"|(?:cette[ \t]+information|elle|ceci|cela)[ \t]+(?:se[ \t]+trouve|est[ \t]+disponible|"
    r"figure)[ \t]+dans(?:[ \t]+(?:les[ \t]+documents|le[ \t]+document))?)[ \t]*+:?[ \t]*+"
)
_CITATION_WORDS = re.compile(_CITATION_BODY + r"(?=\[\d{1,3}\])")
# the same words ending what is left of a sentence a form was cut from: they would cite
# whatever comes next, so they go with the form, whole and streamed alike
_CITATION_HEAD = re.compile(_CITATION_BODY + "$")
# what may come between the words and the citation, as _CITATION_WORDS reads it (blanks, a
# colon, blanks): " : [1]" held too, or the stream showed what the whole reading takes out
_COLONS = (" ", ": ", ":", "", " : ", " :")
_CITATION_FORMS = (
    tuple(
        f"{the}{number}document that says {what} is{colon}["
        for the in ("the ", "")
        for number in ("number of the ", "")
        for what in ("it", "this", "that", "so")
        for colon in _COLONS
    )
    + tuple(
        f"this{what} {can} found in{colon}["
        for what in ("", " answer", " information")
        for can in ("can be", "is")
        for colon in _COLONS
    )
    + tuple(
        f"{what} {verb} dans{where}{colon}["
        for what in ("cette information", "elle", "ceci", "cela")
        for verb in ("se trouve", "est disponible", "figure")
        for where in ("", " les documents", " le document")
        for colon in _COLONS
    )
)
_SENTENCE = re.compile(r"[^.!?\n]*[.!?]*[ \t]*\n?")
_WORD_START = re.compile(r"(?<!\S)\S")
_SPACES = re.compile(r"\s+")
# a character no citation words hold (they are ASCII letters, blanks and a colon), a blank next
_NO_CITATION_THEN_BLANK = re.compile(r"[^A-Za-z:\s](?=[ \t])")
_RUNS = re.compile(r"(\s+)|(\S+)")  # what _folded reads: blanks (one space), or words
_BLANK_LINES = re.compile(r"\n{3,}")

# reading a template's own words: its tags and comments out, its variables between them
_TAG = re.compile(r"{%.*?%}|{#.*?#}", re.S)
_VARIABLE = re.compile(r"{{\s*(\w+)[^}]*}}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END = re.compile(r"[,;:]\s*")
_LINE_WORDS = 4  # a line that begins with a template sentence's first words goes
_FORM_WORDS = 6  # an instruction's clause is known by its first words
_CITATIONS_IN_A_ROW = 4  # citation words before citation words, held together (bounded)
_CITATION_REACH = 200  # how far from its end a text's last citation words are looked for
_FORM_MIN = 5  # shorter clauses ("Keep it short") are words an answer may say


def _folded(text: str) -> str:
    return _SPACES.sub(" ", text.lower())


@dataclass(frozen=True)
class Scaffolding:
    """What the answer templates say that a model may copy around its answer: the beginnings
    of their lines (a line of the answer beginning so goes), the headings of an earlier answer
    they show, and their instructions' clauses (a sentence of the answer holding one goes).
    Read from the templates as loaded (`of`), so an operator's edited template is what is
    taken out; the shapes a model writes by itself (labels, a citation's words) are known.

    >>> scaffolding = Scaffolding.of({"stuff": Path("prompts/stuff.j2").read_text()})
    >>> scaffolding.without("Answer: 1952 [1]")  # "1952 [1]"
    """

    lines: tuple[str, ...]
    earlier: tuple[str, ...]
    forms: tuple[str, ...]
    _longest: int = field(init=False, repr=False, compare=False)
    _longest_line: int = field(init=False, repr=False, compare=False)  # of a line's beginnings
    _forms_at: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _any_form_at: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _form_words: int = field(init=False, repr=False, compare=False)  # the most a form has
    # every beginning of a form, and of a citation's words: what the end of a sentence being
    # written may be, asked of each of its last words at every piece (one lookup, not one a form)
    _form_starts: frozenset[str] = field(init=False, repr=False, compare=False)
    _citation_starts: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        forms = self.forms + _CITATION_FORMS
        object.__setattr__(self, "_longest", max(len(form) for form in forms))
        beginnings = self.lines + self.earlier + _LABEL_FORMS
        object.__setattr__(self, "_longest_line", max(len(line) for line in beginnings))
        object.__setattr__(self, "_forms_at", _pattern(self.forms))
        object.__setattr__(self, "_any_form_at", _pattern(forms))
        object.__setattr__(self, "_form_words", max(len(form.split()) for form in forms))
        object.__setattr__(self, "_form_starts", _beginnings(forms))
        object.__setattr__(self, "_citation_starts", _beginnings(_CITATION_FORMS))

    @classmethod
    def of(cls, templates: Mapping[str, str]) -> Scaffolding:
        """The scaffolding of the answer templates among `templates` (name: jinja2 source)."""
        lines: list[str] = []
        earlier: list[str] = []
        forms: list[str] = []
        for name in ANSWERING:
            heading = ""
            for line in _TAG.sub("", templates.get(name, "")).splitlines():
                variables = _VARIABLE.findall(line)
                if variables and not _VARIABLE.sub("", line).strip():
                    if heading and set(variables) <= _EARLIER_VARIABLES:
                        earlier.append(_words(heading, _LINE_WORDS))
                    continue
                for part in _VARIABLE.split(line)[::2]:  # the words between the variables
                    for sentence in _SENTENCE_END.split(part.strip()):
                        lines.append(_words(sentence, _LINE_WORDS))
                        for clause in _CLAUSE_END.split(sentence):
                            if len(clause.split()) >= _FORM_MIN:
                                forms.append(_words(clause, _FORM_WORDS).rstrip(".!?"))
                heading = line if line.strip() else heading
        return cls(
            _unique(line for line in lines if _telling(line)) + _EARLIER_RELEASES_LINES,
            _unique(earlier) + _EARLIER_RELEASES_HEADINGS,
            _unique(forms) + _EARLIER_RELEASES_FORMS,
        )

    @staticmethod
    @cache
    def shipped() -> Scaffolding:
        """The scaffolding of our own templates (prompts/)."""
        return Scaffolding.of(
            {name: (SHIPPED / f"{name}.j2").read_text(encoding="utf-8") for name in ANSWERING}
        )

    def without(self, text: str) -> str:
        """The answer without what the prompt around it said (the module's docstring)."""
        return _finished(_Reading(self, text).scan(final=True))


def _words(text: str, count: int) -> str:
    return _folded(" ".join(text.split()[:count]))


def _telling(line: str) -> bool:
    """Whether a line's first words tell a template line: words (not a fence, not a
    bracket), and two of them or a heading's colon."""
    return bool(re.search(r"[a-z]", line)) and (" " in line or line.endswith(":"))


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def without_scaffolding(text: str, scaffolding: Scaffolding | None = None) -> str:
    """The answer without what the prompt around it said (our templates' scaffolding unless
    `scaffolding` is given)."""
    return (scaffolding or Scaffolding.shipped()).without(text)


class Unscaffolded:
    """`without_scaffolding`, a piece at a time: `feed` each piece of the answer as the LLM
    writes it and show what it returns, then `flush` at the end."""

    def __init__(self, scaffolding: Scaffolding | None = None) -> None:
        self._scaffolding = scaffolding or Scaffolding.shipped()
        self._written = ""
        self._given = ""
        # the whole lines read for good (`_Reading.settled`): where the next reading starts,
        # and what they kept, so that each piece costs the lines still open, not the whole
        # answer: up to its last line break with a citation's words taken out (`_clean`;
        # they never run past a line break), the rest as written (`_tail`)
        self._start = 0
        self._in_line = False  # the next reading begins inside an answer's line
        self._clean = ""
        self._tail = ""
        self._uncited = _Uncited()  # the open line's citation words out, read once
        # the open sentence searched for forms, again only where its new end could complete one
        self._scans = _scans(self._scaffolding)

    def feed(self, piece: str) -> str:
        self._written += piece
        return self._give(self._decided(final=False))

    def flush(self) -> str:
        return self._give(self._decided(final=True))

    def _decided(self, *, final: bool) -> str:
        """`_finished` of what is decided so far, the lines settled before read once."""
        reading = _Reading(
            self._scaffolding,
            self._written[self._start :],
            in_line=self._in_line,
            scans=self._scans,
        )
        rest = reading.scan(final=final)
        decided = self._clean + self._uncited.of(self._tail + rest)
        position, length, in_line = reading.settled
        if position:
            self._in_line = in_line
        self._start += position
        self._tail += rest[:length]
        cut = self._tail.rfind("\n") + 1
        if cut:
            self._clean += _without_citation_words(self._tail[:cut])
            self._tail = self._tail[cut:]
        return _tidied(decided) if final else _held_citation(_tidied(decided))

    @property
    def given(self) -> str:
        """What was given out so far."""
        return self._given

    def _give(self, decided: str) -> str:
        if not decided.startswith(self._given):  # never: decisions do not look ahead
            return ""
        fresh = decided[len(self._given) :]
        self._given = decided
        return fresh


def _finished(decided: str) -> str:
    return _tidied(_without_citation_words(decided))


def _held_citation(decided: str) -> str:
    """`decided` without the citation's words it ends with, held: a `[n]` may follow them
    once what comes between is cut (a form), and then they go ("This can be found in <the
    instruction's forms> [1]"). Looked for in the end of the text only: each piece costs
    the same however long the answer."""
    for _ in range(_CITATIONS_IN_A_ROW):
        cited = _CITATION_HEAD.search(decided, max(0, len(decided) - _CITATION_REACH))
        if cited is None:
            break
        decided = decided[: cited.start()].rstrip()
    return decided


class _Uncited:
    """`_without_citation_words` of a text that grows at its end (the open line, at every
    piece), its beginning read once: the text is cut, and each part read alone, after a
    character no citation words hold (".", "]", a digit) with a blank next. That is the
    outcome of reading it whole: no words run across such a place; the "[n]" they need after
    them is no blank; and a blank begins them alike after that character or at a start."""

    def __init__(self) -> None:
        self._cut = 0  # where the text was last cut
        self._read = ""  # the text up to it, and the blank after it (the text may change)
        self._kept = ""  # what reading it up to the cut left

    def of(self, text: str) -> str:
        if not text.startswith(self._read):  # another line, or the line read again otherwise
            self._cut, self._read, self._kept = 0, "", ""
        cut = None
        for place in _NO_CITATION_THEN_BLANK.finditer(text, max(0, self._cut - 1)):
            cut = place.end()
        if cut is not None and cut > self._cut:
            self._kept += _without_citation_words(text[self._cut : cut])
            self._cut, self._read = cut, text[: cut + 1]
        return self._kept + _without_citation_words(text[self._cut :])


def _without_citation_words(text: str) -> str:
    # (they come before a "[": a text without one, as most open lines are, is not searched)
    return _CITATION_WORDS.sub(" ", text) if "[" in text else text


def _tidied(text: str) -> str:
    return (_BLANK_LINES.sub("\n\n", text) if "\n\n\n" in text else text).strip()


class _Reading:
    """One reading of an answer written so far, against a Scaffolding."""

    def __init__(
        self,
        scaffolding: Scaffolding,
        text: str,
        *,
        in_line: bool = False,
        scans: tuple[_Scan, _Scan] | None = None,
    ) -> None:
        self.scaffolding = scaffolding
        self.text = text
        # (the instruction's forms, every form) searched in the sentence still being written
        self.scans = scans or _scans(scaffolding)
        # `text` begins inside a line already read as an answer's (`settled`'s in_line)
        self.in_line = in_line
        # (where, how much of what scan kept, inside a line): the text before `where` is
        # decided for good (whole lines, or the ended sentences of an answer's line followed
        # by more of it), no earlier answer held, so a reading of text[where:] (in_line: its
        # first line known to be the answer's) goes on as this one
        self.settled: tuple[int, int, bool] = (0, 0, False)
        self._sentences_settled = (0, 0)  # within the line being read: (offset, kept length)

    def scan(self, *, final: bool) -> str:
        """The kept part of the text, as far as it is decided (all of it when `final`)."""
        text = self.text
        kept: list[str] = []
        length = 0  # of what `kept` holds
        earlier: list[str] | None = None  # an earlier answer's lines, held
        position = 0
        while position < len(text):
            end = text.find("\n", position)
            complete = end >= 0 or final
            line = text[position : end + 1] if end >= 0 else text[position:]
            starts, position = position, end + 1 if end >= 0 else len(text)
            if self.in_line and starts == 0:  # the rest of a line read as the answer's
                kind, content = "content", line
            else:
                kind, content = self._line(line, complete)
            if kind == "undecided":
                return "".join(kept)
            if kind == "template":
                continue
            if kind == "earlier":
                earlier = [content]
                continue
            if kind == "separator":
                earlier = None
                continue
            if kind == "label":
                earlier = None
                if not content.strip() and not text[position:].strip():
                    if not final:  # a bare label: the answer after it, or the label is the answer
                        return "".join(kept)
                    content = line
            if earlier is not None:
                earlier.append(line)
                continue
            sentences, done = self._sentences(content, complete)
            within, kept_within = self._sentences_settled
            if end < 0 and within:  # a line still written: its sentences ended before
                self.settled = (
                    starts + len(line) - len(content) + within,
                    length + kept_within,
                    True,
                )
            kept.append(sentences)
            length += len(sentences)
            if not done:
                return "".join(kept)
            if end >= 0:  # a whole line, decided: a later reading may begin after it
                self.settled = (position, length, False)
        if earlier is not None:
            if not final:
                return "".join(kept)
            kept.extend(self._sentences(line, True)[0] for line in earlier)  # it was the answer
        return "".join(kept)

    def _line(self, line: str, complete: bool) -> tuple[str, str]:
        """What a line is ("template", "earlier", "separator", "label", "content" or, while it
        could still be one of them, "undecided"), and its content."""
        lines, earlier = self.scaffolding.lines, self.scaffolding.earlier
        text = line.rstrip("\n")
        bare = text.strip(" \t")
        if not bare:
            return ("content", line) if complete else ("undecided", "")
        if set(bare) == {"#"}:
            if not complete:
                return "undecided", ""
            return ("separator", "") if len(bare) >= 6 else ("content", line)
        # a line's beginning is all that tells it, and an open line grows at every piece
        head = self.scaffolding._longest_line + 1
        folded = _folded_head(bare, head)
        if folded.startswith(earlier):
            return "earlier", ""
        if folded.startswith(lines):
            return "template", ""
        label = _LABEL.match(text)
        if label is not None:
            rest = line[label.end() :]
            return ("earlier", rest) if label.group(2) else ("label", rest)
        if not complete:
            start = _folded_head(text.lstrip(" \t*#>").replace("*", ""), head)
            if any(form.startswith(folded) for form in lines + earlier) or any(
                form.startswith(start) for form in _LABEL_FORMS
            ):
                return "undecided", ""
        return "content", line

    def _sentences(self, content: str, complete: bool) -> tuple[str, bool]:
        """The kept part of a line's content, and whether all of it is decided."""
        forms_at = self.scaffolding._forms_at
        kept: list[str] = []
        length = 0  # of what `kept` holds
        self._sentences_settled = (0, 0)
        for match in _SENTENCE.finditer(content):
            sentence = match.group()
            if not sentence:
                continue
            followed = match.end() < len(content)  # by more of the line: its end is known
            ended = complete or followed or bool(re.search(r"[.!?\n]", sentence))
            if ended:
                found = forms_at.search(sentence)
                form = found.start() if found is not None else None
            else:  # the same sentence, longer at every piece
                form = self.scans[0].first(sentence)
            if form is not None:  # the instruction's forms: the sentence, or its end, goes
                if _words_before(sentence, form) >= SENTENCE_HOLD:
                    head = sentence[:form]
                    cited = _CITATION_HEAD.search(head)
                    kept.append(head[: cited.start()] if cited else head)
                    length += len(kept[-1])
                if not ended:
                    return "".join(kept), False
                if followed:
                    self._sentences_settled = (match.end(), length)
                continue
            if ended:
                kept.append(sentence)
                length += len(sentence)
                if followed:
                    self._sentences_settled = (match.end(), length)
                continue
            # the sentence is still being written: what could yet be scaffolding waits
            first = [m.start() for m in islice(_WORD_START.finditer(sentence), SENTENCE_HOLD + 1)]
            if len(first) <= SENTENCE_HOLD or any(
                self._could_begin(sentence[at:], self.scaffolding.forms)
                for at in first[:SENTENCE_HOLD]
            ):
                return "".join(kept), False
            kept.append(sentence[: self._first_form(sentence)])
            return "".join(kept), False
        return "".join(kept), True

    def _first_form(self, sentence: str) -> int:
        """Where the first word that begins a form, or could yet, starts (the sentence's length
        when none does): a form written whole anywhere, found by one search; one being written,
        among the last words only (a form is shorter than what follows an earlier word)."""
        beginnings = self.scaffolding._form_starts
        whole = self.scans[1].first(sentence)
        cut = whole if whole is not None else len(sentence)
        for start in _word_starts_back(sentence, len(sentence)):
            tail = self._head(sentence[start:])
            if len(tail) > self.scaffolding._longest:
                break
            if start < cut and tail in beginnings:
                cut = start
        return self._before_citation(sentence, cut)

    def _before_citation(self, sentence: str, cut: int) -> int:
        """Where the words citing what is at `cut` begin (`cut` when none): they go if a form
        follows, so they are held with it; so are a citation's words cut short by a form's
        first word ("This answer is found | in as few words", "in" beginning a form)."""
        # (at the sentence's end, _first_form's own look at its last words did this already)
        starts = _word_starts_back(sentence, cut) if cut < len(sentence) else ()
        for start in starts:
            words = self._head(sentence[start:cut])
            if len(words) > self.scaffolding._longest:
                break
            if words in self.scaffolding._citation_starts:
                cut = start
        # (in its last _CITATION_REACH characters, as _held_citation looks: bounded a piece)
        cited = _CITATION_HEAD.search(sentence, max(0, cut - _CITATION_REACH), cut)
        return cited.start() if cited else cut

    def _could_begin(self, text: str, forms: tuple[str, ...]) -> bool:
        """Whether `text` (the end of what is written) could be the beginning of one of
        `forms`."""
        folded = self._head(text)
        return any(form.startswith(folded) or folded.startswith(form) for form in forms)

    def _head(self, text: str) -> str:
        """The beginning of `_folded(text)`, long enough to tell whether it begins with a form
        or a form begins with it (every form is shorter), without folding a long text whole:
        the test runs at every word of a sentence still being written."""
        return _folded_head(text, self.scaffolding._longest + 1)


def _folded_head(text: str, size: int) -> str:
    """`_folded(text)[:size]`, folding only as much of `text` as that needs: run by run, so
    that a long run of blanks (one space, folded) is read once, not again and again."""
    parts: list[str] = []
    length = 0
    for run in _RUNS.finditer(text):
        part = " " if run.group(1) is not None else run.group(2)[: size + 1].lower()
        parts.append(part)
        length += len(part)
        if length > size:
            break
    return "".join(parts)[:size]


def _word_starts_back(text: str, end: int) -> Iterator[int]:
    """Where `text`'s words before `end` start, the last first: read back a window at a time,
    so that a caller who stops after a few words has not listed a long text's."""
    size = 256
    while end > 0:
        begin = max(0, end - size)
        yield from reversed([m.start() for m in _WORD_START.finditer(text, begin, end)])
        end, size = begin, size * 2


class _Scan:
    """Where `pattern` (forms of at most `words` words, each from a word's start) first
    matches a text that grows at its end, as a sentence being written does: searched again
    only from where a form could have been cut short by the old end (a form that begins
    `words` words or more before it was found there, or not, for good)."""

    def __init__(self, pattern: re.Pattern[str], words: int) -> None:
        self._pattern = pattern
        self._words = words
        self._text = ""
        self._starts: list[int] = []  # where the text's words start
        self._found: int | None = None

    def first(self, text: str) -> int | None:
        if not text.startswith(self._text):  # another sentence: from its beginning
            self._text, self._starts, self._found = "", [], None
        elif len(text) == len(self._text) or text[len(self._text) :].isspace():
            return self._found  # a form ends in a word: blanks after the old end end none
        starts = self._starts
        settled = starts[-self._words - 1] if len(starts) > self._words else 0
        if self._found is None or self._found >= settled:
            match = self._pattern.search(text, settled)
            self._found = match.start() if match is not None else None
        resume = starts.pop() if starts else 0  # the last word may have grown
        starts.extend(m.start() for m in _WORD_START.finditer(text, resume))
        self._text = text
        return self._found


def _scans(scaffolding: Scaffolding) -> tuple[_Scan, _Scan]:
    """A reader's searches of its open sentence: for the instruction's forms, for every form."""
    words = scaffolding._form_words
    return _Scan(scaffolding._forms_at, words), _Scan(scaffolding._any_form_at, words)


def _beginnings(forms: tuple[str, ...]) -> frozenset[str]:
    """Every beginning of every form ("", "t", "th", ... "this answer is found in[")."""
    return frozenset(form[:end] for form in forms for end in range(len(form) + 1))


def _words_before(text: str, end: int) -> int:
    return sum(1 for _ in _WORD_START.finditer(text, 0, end))


def _pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """Where one of `forms` begins at a word, as `_folded` reads text: any white space
    between its words, its letters in either case."""

    def form_pattern(form: str) -> str:
        letters = (f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in form)
        return "".join(letters).replace(re.escape(" "), r"\s+")

    return re.compile(r"(?<!\S)(?:" + "|".join(form_pattern(f) for f in forms) + ")")

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
from itertools import islice

# a sentence whose first words hold the instruction's forms goes whole; later in a sentence,
# from the forms to the sentence's end
SENTENCE_HOLD = 6

# lines of the templates: the line goes, whatever follows on it
_TEMPLATE_LINES = (
    "question:",
    "documents:",
    "documents (",
    "more documents found",
    "answer the question from the documents",
    "keep it short: just the words",
    "just the words that answer it",
    "a name, a number or a short phrase",  # the instruction's words before issue 59
    "then give the number of the document",
    "write only the answer itself",
)
# headings of an earlier answer the refine and reduce templates show the model
_EARLIER = (
    "an answer written earlier",
    "the answer so far",
    "answers to the same question",
    "partial answers to the question",
)
_LABEL = re.compile(
    r"^[ \t*#>]*(?:(refined|final|combined|updated|improved|new)[ \t]+)?answer([ \t]+so[ \t]+far)?"
    r"[ \t*]*:[ \t*]*",
    re.I,
)
_LABEL_FORMS = tuple(
    f"{kind}answer{far}:"
    for kind in ("", "refined ", "final ", "combined ", "updated ", "improved ", "new ")
    for far in ("", " so far")
)
_INSTRUCTION = (
    "just the words that answer it",
    "otherwise a sentence or two",
    # the instruction's forms before issue 59 (an operator's templates may still hold them)
    "a name, a number or a short phrase",
    "a sentence or two otherwise",
)
_CITATION_WORDS = re.compile(
    r"[ \t]*(?:the[ \t]+)?(?:number[ \t]+of[ \t]+the[ \t]+)?document[ \t]+that[ \t]+says[ \t]+"
    r"(?:it|this|that|so)[ \t]+is[ \t]*:?[ \t]*(?=\[\d{1,3}\])",
    re.I,
)
_CITATION_FORMS = tuple(
    f"{the}{number}document that says {what} is{colon}["
    for the in ("the ", "")
    for number in ("number of the ", "")
    for what in ("it", "this", "that", "so")
    for colon in (" ", ": ", ":", "")
)
_LONGEST = max(len(form) for form in _INSTRUCTION + _CITATION_FORMS)
_SENTENCE = re.compile(r"[^.!?\n]*[.!?]*[ \t]*\n?")
_WORD_START = re.compile(r"(?<!\S)\S")
_SPACES = re.compile(r"\s+")


def _folded(text: str) -> str:
    return _SPACES.sub(" ", text.lower())


def _head(text: str) -> str:
    """The beginning of `_folded(text)`, long enough to tell whether it begins with a form
    or a form begins with it (every form is shorter), without folding a long text whole:
    the test runs at every word of a sentence still being written."""
    size = _LONGEST + 1
    raw = size
    while True:
        folded = _folded(text[:raw])
        if len(folded) > size or raw >= len(text):
            return folded[:size] if len(folded) > size else folded
        raw *= 2


def without_scaffolding(text: str) -> str:
    """The answer without what the prompt around it said (the module's docstring)."""
    return _finished(_scan(text, final=True))


class Unscaffolded:
    """`without_scaffolding`, a piece at a time: `feed` each piece of the answer as the LLM
    writes it and show what it returns, then `flush` at the end."""

    def __init__(self) -> None:
        self._written = ""
        self._given = ""

    def feed(self, piece: str) -> str:
        self._written += piece
        return self._give(_finished(_scan(self._written, final=False)))

    def flush(self) -> str:
        return self._give(_finished(_scan(self._written, final=True)))

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
    text = re.sub(r"\n{3,}", "\n\n", _CITATION_WORDS.sub(" ", decided))
    return text.strip()


def _scan(text: str, *, final: bool) -> str:
    """The kept part of `text`, as far as it is decided (all of it when `final`)."""
    kept: list[str] = []
    earlier: list[str] | None = None  # an earlier answer's lines, held
    position = 0
    while position < len(text):
        end = text.find("\n", position)
        complete = end >= 0 or final
        line = text[position : end + 1] if end >= 0 else text[position:]
        position = end + 1 if end >= 0 else len(text)
        kind, content = _line(line, complete)
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
        sentences, done = _sentences(content, complete)
        kept.append(sentences)
        if not done:
            return "".join(kept)
    if earlier is not None:
        if not final:
            return "".join(kept)
        kept.extend(_sentences(line, True)[0] for line in earlier)  # it was the answer
    return "".join(kept)


def _line(line: str, complete: bool) -> tuple[str, str]:
    """What a line is ("template", "earlier", "separator", "label", "content" or, while it
    could still be one of them, "undecided"), and its content."""
    text = line.rstrip("\n")
    bare = text.strip(" \t")
    if not bare:
        return ("content", line) if complete else ("undecided", "")
    if set(bare) == {"#"}:
        if not complete:
            return "undecided", ""
        return ("separator", "") if len(bare) >= 6 else ("content", line)
    folded = _folded(bare)
    if folded.startswith(_EARLIER):
        return "earlier", ""
    if folded.startswith(_TEMPLATE_LINES):
        return "template", ""
    label = _LABEL.match(text)
    if label is not None:
        rest = line[label.end() :]
        return ("earlier", rest) if label.group(2) else ("label", rest)
    if not complete:
        start = _folded(text.lstrip(" \t*#>").replace("*", ""))
        if any(form.startswith(folded) for form in _TEMPLATE_LINES + _EARLIER) or any(
            form.startswith(start) for form in _LABEL_FORMS
        ):
            return "undecided", ""
    return "content", line


def _sentences(content: str, complete: bool) -> tuple[str, bool]:
    """The kept part of a line's content, and whether all of it is decided."""
    kept: list[str] = []
    for match in _SENTENCE.finditer(content):
        sentence = match.group()
        if not sentence:
            continue
        ended = complete or match.end() < len(content) or bool(re.search(r"[.!?\n]", sentence))
        forms = _INSTRUCTION_AT.search(sentence)
        if forms is not None:  # the instruction's forms: the sentence, or its end, goes
            if _words_before(sentence, forms.start()) >= SENTENCE_HOLD:
                kept.append(sentence[: forms.start()])
            if not ended:
                return "".join(kept), False
            continue
        if ended:
            kept.append(sentence)
            continue
        # the sentence is still being written: what could yet be scaffolding waits
        first = [m.start() for m in islice(_WORD_START.finditer(sentence), SENTENCE_HOLD + 1)]
        if len(first) <= SENTENCE_HOLD or any(
            _could_begin(sentence[at:], _INSTRUCTION) for at in first[:SENTENCE_HOLD]
        ):
            return "".join(kept), False
        kept.append(sentence[: _first_form(sentence)])
        return "".join(kept), False
    return "".join(kept), True


def _words_before(text: str, end: int) -> int:
    return sum(1 for _ in _WORD_START.finditer(text, 0, end))


def _first_form(sentence: str) -> int:
    """Where the first word that begins a form, or could yet, starts (the sentence's length
    when none does): a form written whole anywhere, found by one search; one being written,
    among the last words only (a form is shorter than what follows an earlier word)."""
    whole = _FORM_AT.search(sentence)
    cut = whole.start() if whole is not None else len(sentence)
    for start in reversed([m.start() for m in _WORD_START.finditer(sentence)]):
        tail = _head(sentence[start:])
        if len(tail) > _LONGEST:
            break
        if start < cut and any(form.startswith(tail) for form in _INSTRUCTION + _CITATION_FORMS):
            cut = start
    return cut


def _could_begin(text: str, forms: tuple[str, ...]) -> bool:
    """Whether `text` (the end of what is written) could be the beginning of one of `forms`."""
    folded = _head(text)
    return any(form.startswith(folded) or folded.startswith(form) for form in forms)


def _pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """Where one of `forms` begins at a word, as `_folded` reads text: any white space
    between its words, its letters in either case."""

    def form_pattern(form: str) -> str:
        letters = (f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in form)
        return "".join(letters).replace(re.escape(" "), r"\s+")

    return re.compile(r"(?<!\S)(?:" + "|".join(form_pattern(f) for f in forms) + ")")


_INSTRUCTION_AT = _pattern(_INSTRUCTION)
_FORM_AT = _pattern(_INSTRUCTION + _CITATION_FORMS)

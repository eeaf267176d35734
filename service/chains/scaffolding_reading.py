"""The whole reading: an answer with its scaffolding (service.chains.scaffolding) taken out.

`without_scaffolding` reads an answer line by line (a template's line, a separator, a label,
an earlier answer's heading and the lines under it, when the model's own answer follows them,
go), then sentence by sentence (one whose first `SENTENCE_HOLD` words hold the instruction's
forms goes whole; later in a sentence, from the forms to its end; opening words that only
say where the answer comes from go, the rest of the sentence kept), then the words before a
citation. `Reading` reads a text written so far alike, and stops where what may follow could
still change what it keeps (`final`: nothing follows), so that the streamed reader
(service.chains.scaffolding_stream) gives out, piece by piece, exactly what this one keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice

from service.chains.scaffolding import (
    CITATION_HEAD,
    CITATION_WORDS,
    LABEL,
    LABEL_FORMS,
    LEAD,
    Scaffolding,
)

# a sentence whose first words hold the instruction's forms goes whole; later in a sentence,
# from the forms to the sentence's end
SENTENCE_HOLD = 6

CITATION_REACH = 200  # how far from its end a text's last citation words are looked for
_SENTENCE = re.compile(r"[^.!?\n]*[.!?]*[ \t]*\n?")
_WORD_START = re.compile(r"(?<!\S)\S")
_RUNS = re.compile(r"(\s+)|(\S+)")  # what _folded_head reads: blanks (one space), or words
_BLANK_LINES = re.compile(r"\n{3,}")


def without_scaffolding(text: str, scaffolding: Scaffolding | None = None) -> str:
    """The answer without what the prompt around it said (our templates' scaffolding unless
    `scaffolding` is given)."""
    reading = Reading(scaffolding or Scaffolding.shipped(), text)
    return tidied(without_citation_words(reading.scan(final=True)))


def without_citation_words(text: str) -> str:
    # (they come before a "[": a text without one, as most open lines are, is not searched)
    return CITATION_WORDS.sub(" ", text) if "[" in text else text


def tidied(text: str) -> str:
    return (_BLANK_LINES.sub("\n\n", text) if "\n\n\n" in text else text).strip()


class Reading:
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
        self.scans = scans or sentence_scans(scaffolding)
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
        head = self.scaffolding.longest_line + 1
        folded = _folded_head(bare, head)
        if folded.startswith(earlier):
            return "earlier", ""
        if folded.startswith(lines):
            return "template", ""
        label = LABEL.match(text)
        if label is not None:
            rest = line[label.end() :]
            return ("earlier", rest) if label.group(2) else ("label", rest)
        if not complete:
            start = _folded_head(text.lstrip(" \t*#>").replace("*", ""), head)
            if any(form.startswith(folded) for form in lines + earlier) or any(
                form.startswith(start) for form in LABEL_FORMS
            ):
                return "undecided", ""
        return "content", line

    def _sentences(self, content: str, complete: bool) -> tuple[str, bool]:
        """The kept part of a line's content, and whether all of it is decided."""
        forms_at = self.scaffolding.forms_at
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
                    cited = CITATION_HEAD.search(head)
                    kept.append(_without_lead(head[: cited.start()] if cited else head))
                    length += len(kept[-1])
                if not ended:
                    return "".join(kept), False
                if followed:
                    self._sentences_settled = (match.end(), length)
                continue
            if ended:
                kept.append(_without_lead(sentence))
                length += len(kept[-1])
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
            cut = self._first_form(sentence)
            lead = LEAD.match(sentence)
            if lead is not None and cut < lead.end():  # held until what follows it is known
                return "".join(kept), False
            kept.append(_without_lead(sentence[:cut]))
            return "".join(kept), False
        return "".join(kept), True

    def _first_form(self, sentence: str) -> int:
        """Where the first word that begins a form, or could yet, starts (the sentence's length
        when none does): a form written whole anywhere, found by one search; one being written,
        among the last words only (a form is shorter than what follows an earlier word)."""
        beginnings = self.scaffolding.form_starts
        whole = self.scans[1].first(sentence)
        cut = whole if whole is not None else len(sentence)
        for start in _word_starts_back(sentence, len(sentence)):
            tail = self._head(sentence[start:])
            if len(tail) > self.scaffolding.longest:
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
            if len(words) > self.scaffolding.longest:
                break
            if words in self.scaffolding.citation_starts:
                cut = start
        # (in its last CITATION_REACH characters, as the streamed reader's held citation is
        # looked for: bounded a piece)
        cited = CITATION_HEAD.search(sentence, max(0, cut - CITATION_REACH), cut)
        return cited.start() if cited else cut

    def _could_begin(self, text: str, forms: tuple[str, ...]) -> bool:
        """Whether `text` (the end of what is written) could be the beginning of one of
        `forms`."""
        folded = self._head(text)
        return any(form.startswith(folded) or folded.startswith(form) for form in forms)

    def _head(self, text: str) -> str:
        """The beginning of `text` folded (`_folded_head`), long enough to tell whether it
        begins with a form or a form begins with it (every form is shorter), without folding a
        long text whole: the test runs at every word of a sentence still being written."""
        return _folded_head(text, self.scaffolding.longest + 1)


def _without_lead(sentence: str) -> str:
    """`sentence` (or its beginning) without its opening words on where the answer comes from
    ("According to the documents provided, the lamp ..." -> "The lamp ..."), the word after
    them capitalised when it is all lower case."""
    lead = LEAD.match(sentence)
    if lead is None:
        return sentence
    rest = sentence[lead.end() :]
    word = rest.split(maxsplit=1)[0] if rest[:1].islower() else ""
    return lead.group(1) + (rest[0].upper() + rest[1:] if word.islower() else rest)


def _folded_head(text: str, size: int) -> str:
    """The first `size` characters of `text` folded as the scaffolding's words are (lower case,
    a run of blanks one space), folding only as much of `text` as that needs: run by run, so
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


def sentence_scans(scaffolding: Scaffolding) -> tuple[_Scan, _Scan]:
    """A reader's searches of its open sentence: for the instruction's forms, for every form."""
    words = scaffolding.form_words
    return _Scan(scaffolding.forms_at, words), _Scan(scaffolding.any_form_at, words)


def _words_before(text: str, end: int) -> int:
    return sum(1 for _ in _WORD_START.finditer(text, 0, end))

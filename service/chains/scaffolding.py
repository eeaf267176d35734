"""Scaffolding: what a small model copies from the prompt around its answer, known here so that
it can be taken out, the answer whole (service.chains.scaffolding_reading) or as it is written
(service.chains.scaffolding_stream), so that what a client is streamed is the answer the
service keeps.

What goes: a label before the answer ("Answer:", "**Final answer:**"); the template's own
lines ("Question: ...", "Documents:", a "######" separator, the instructions' first words);
an earlier answer a refine or reduce request showed the model, when it copies it under its
heading ("The answer so far, ...:", "Answer so far:") before a label or a separator that
starts its own; a sentence that repeats the instruction's forms ("A lambda expression is
just the words that answer it", or the earlier "... is a name, a number or a short phrase
when that answers it"); the instruction's words before a citation ("... The number of the
document that says this is [1]"); a sentence's opening words that only say where the
answer comes from ("According to the documents provided,", "Selon les documents fournis,"),
the sentence after them kept.

The templates' lines, headings and instructions are read from the answer templates as loaded
(`Scaffolding.of`, which `PromptLibrary` does once per load): an operator who edits a template
has its new words taken out, not ours. The shapes a model writes by itself (labels, a
separator, a citation's words) and the wording of earlier releases' templates are known here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

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
LABEL = re.compile(
    _either_case(
        r"^[ \t*#>]*(?:(refined|final|combined|updated|improved|new)[ \t]+)?answer"
        r"([ \t]+so[ \t]+far)?[ \t*]*:[ \t*]*"
    )
)
LABEL_FORMS = tuple(
    f"{kind}answer{far}:"
    for kind in ("", "refined ", "final ", "combined ", "updated ", "improved ", "new ")
    for far in ("", " so far")
)
# ... and the words before a citation ("The number of the document that says this is [1]";
# "This can be found in [1]", "This answer is found in [1]": issue 69; "It is available in the
# documents [1]" and their French: issue 83), from a word's start, as the forms are found
_CITATION_BODY = _either_case(
    # a run of blanks read whole, once (possessive, from its start: no backtracking over it)
    r"(?<![ \t])[ \t]*+(?<!\S)"
    r"(?:(?:the[ \t]+)?(?:number[ \t]+of[ \t]+the[ \t]+)?document[ \t]+that[ \t]+"
    r"says[ \t]+(?:it|this|that|so)[ \t]+is|(?:this(?:[ \t]+answer|[ \t]+information)?[ \t]+"
    r"(?:can[ \t]+be[ \t]+found|is[ \t]+found|is[ \t]+available)|it[ \t]+is[ \t]+available)"
    r"[ \t]+in(?:[ \t]+the[ \t]+documents?)?"
    # French alike ("Elle est disponible dans les documents [1]", "Cette information se
    # trouve dans [2]": issue 83)
    r"|(?:cette[ \t]+information|elle|ceci|cela)[ \t]+(?:se[ \t]+trouve|est[ \t]+disponible|"
    r"figure)[ \t]+dans(?:[ \t]+(?:les[ \t]+documents|le[ \t]+document))?)[ \t]*+:?[ \t]*+"
)
CITATION_WORDS = re.compile(_CITATION_BODY + r"(?=\[\d{1,3}\])")
# the same words ending what is left of a sentence a form was cut from: they would cite
# whatever comes next, so they go with the form, whole and streamed alike
CITATION_HEAD = re.compile(_CITATION_BODY + "$")
# what may come between the words and the citation, as CITATION_WORDS reads it (blanks, a
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
        f"{what} {verb} in{where}{colon}["
        for what in ("this", "this answer", "this information", "it")
        for verb in ("can be found", "is found", "is available")
        if what != "it" or verb == "is available"
        for where in ("", " the documents", " the document")
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
_SPACES = re.compile(r"\s+")

# ... and a sentence's opening words that only say where its answer comes from ("According to
# the documents provided, ...", "Selon les documents fournis, ...": issue 83): they go, the
# sentence after them stays. Each ends in its comma, and has at most LEAD_WORDS words: the
# stream holds a sentence's first SENTENCE_HOLD (6) words, so it knows the lead and the word
# after it whole before it shows any of them
LEAD_WORDS = 5
LEAD_FORMS = tuple(
    f"{by} {what},"
    for by in ("according to", "based on")
    for what in (
        *(f"the {which}" for which in ("documents", "document", "sources", "context")),
        *(f"the provided {which}" for which in ("documents", "document", "sources", "context")),
        *(f"the {which} provided" for which in ("documents", "document", "sources", "context")),
        "the documents above",
    )
) + tuple(
    f"{by} {what},"
    for by in ("selon", "d'après", "d’après")
    for what in (
        "les documents",
        "les documents fournis",
        "les documents ci-dessus",
        "le document",
        "le document fourni",
        "les sources",
        "les sources fournies",
        "le contexte",
        "le contexte fourni",
        "les informations fournies",
    )
)
LEAD = re.compile(
    r"([ \t]*+)(?:"
    + "|".join(_either_case(re.escape(form).replace(r"\ ", r"[ \t]+")) for form in LEAD_FORMS)
    + r")[ \t]*+"
)

# reading a template's own words: its tags and comments out, its variables between them
_TAG = re.compile(r"{%.*?%}|{#.*?#}", re.S)
_VARIABLE = re.compile(r"{{\s*(\w+)[^}]*}}")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END = re.compile(r"[,;:]\s*")
_LINE_WORDS = 4  # a line that begins with a template sentence's first words goes
_FORM_WORDS = 6  # an instruction's clause is known by its first words
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
    What the readers ask of it at every piece (its longest form, its forms' patterns and
    beginnings) is worked out once, here.

    >>> scaffolding = Scaffolding.of({"stuff": Path("prompts/stuff.j2").read_text()})
    >>> without_scaffolding("Answer: 1952 [1]", scaffolding)  # "1952 [1]": scaffolding_reading
    """

    lines: tuple[str, ...]
    earlier: tuple[str, ...]
    forms: tuple[str, ...]
    longest: int = field(init=False, repr=False, compare=False)
    longest_line: int = field(init=False, repr=False, compare=False)  # of a line's beginnings
    forms_at: re.Pattern[str] = field(init=False, repr=False, compare=False)
    any_form_at: re.Pattern[str] = field(init=False, repr=False, compare=False)
    form_words: int = field(init=False, repr=False, compare=False)  # the most a form has
    # every beginning of a form, and of a citation's words: what the end of a sentence being
    # written may be, asked of each of its last words at every piece (one lookup, not one a form)
    form_starts: frozenset[str] = field(init=False, repr=False, compare=False)
    citation_starts: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        forms = self.forms + _CITATION_FORMS
        object.__setattr__(self, "longest", max(len(form) for form in forms))
        beginnings = self.lines + self.earlier + LABEL_FORMS
        object.__setattr__(self, "longest_line", max(len(line) for line in beginnings))
        object.__setattr__(self, "forms_at", _pattern(self.forms))
        object.__setattr__(self, "any_form_at", _pattern(forms))
        object.__setattr__(self, "form_words", max(len(form.split()) for form in forms))
        object.__setattr__(self, "form_starts", _beginnings(forms))
        object.__setattr__(self, "citation_starts", _beginnings(_CITATION_FORMS))

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


def _words(text: str, count: int) -> str:
    return _folded(" ".join(text.split()[:count]))


def _telling(line: str) -> bool:
    """Whether a line's first words tell a template line: words (not a fence, not a
    bracket), and two of them or a heading's colon."""
    return bool(re.search(r"[a-z]", line)) and (" " in line or line.endswith(":"))


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _beginnings(forms: tuple[str, ...]) -> frozenset[str]:
    """Every beginning of every form ("", "t", "th", ... "this answer is found in[")."""
    return frozenset(form[:end] for form in forms for end in range(len(form) + 1))


def _pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """Where one of `forms` begins at a word, as `_folded` reads text: any white space
    between its words, its letters in either case."""

    def form_pattern(form: str) -> str:
        letters = (f"[{c}{c.upper()}]" if c.isalpha() else re.escape(c) for c in form)
        return "".join(letters).replace(re.escape(" "), r"\s+")

    return re.compile(r"(?<!\S)(?:" + "|".join(form_pattern(f) for f in forms) + ")")

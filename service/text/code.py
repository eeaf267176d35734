"""A source's code read as the prose that restates it, so that the grounding check's words
(service.text.support) find in `if not expression: raise AssertionError` what "If the
condition is false, it raises an `AssertionError`." says.

A line of code is read with an identifier's words beside it (`AssertionError`: assertion,
error; snake_case and dotted names are already split into words), a statement keyword's verb
(`raise` raises, `return` returns), `==` as equal, `!=` not equal, `!x` not x. A line that
tests a negated condition (`if not x:`, `while (!x)`) is read once more as that condition
being false ("x false", no negation: prose says "if x is false"), which only a claim saying
"false" restates ("If x is true, it raises" does not). `x is not None`, `k not in d` and `!=`
are negations alone: prose says them with a "not" too. A prose line is read as written, its
CamelCase identifiers' words beside them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# a line is code when it has what prose never writes: a statement's end (`;`, a brace), a
# comparison or logical operator, a prefix `!`, an assignment, or a statement keyword that
# opens the line and takes a `:`, `(` or `;` (a prose line wrapped before "if" has none)
_CODE_LINE = re.compile(
    r"[;{}]\s*$|==|!=|&&|\|\||(?<![\w!])![\w(]|^\s*[\w.\[\]]+\s*[-+*/]?=\s*[^=\s]"
    r"|^\s*(?:if|elif|while|for|return|raise|throw|assert|def|class|import|yield|del)\b"
    r"[^\n]*[:(;]"
)
# what a statement keyword does, as a sentence says it (kept beside the keyword)
_VERBS = {
    "raise": "raises",
    "throw": "throws",
    "return": "returns",
    "yield": "yields",
    "def": "defines",
    "del": "deletes",
    "import": "imports",
    "assert": "asserts",
}
_KEYWORD = re.compile(r"\b(" + "|".join(_VERBS) + r")\b")
_CAMEL = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+\b")  # AssertionError, isEmpty
_HUMP = re.compile(r"[A-Z]?[a-z0-9]+")
_OPERATORS = ((re.compile(r"!==?"), " not equal "), (re.compile(r"===?"), " equal "))
# a name, an attribute, a call, whole (not the start of a longer one)
_OPERAND = r"([\w.]+(?:\([^()\n]*\))?)(?![\w.(])"
# the boolean operator: `not x` where a condition opens (after `if`, `while`, `return`, `and`,
# `(`, `=`...; not `is not`, nor `not x in y`), and `!x`
_NOT = re.compile(
    rf"(\b(?:if|elif|while|return|assert|and|or)\s+|[(=,:`]\s*)not\s+{_OPERAND}(?!\s*in\b)"
)
# `!=` is read first ("not equal"): a `!` left is the operator
_BANG = re.compile(rf"(?<![\w!=])!\s*{_OPERAND}")


@dataclass(frozen=True)
class CodeReading:
    """A source text as prose words read it; `false`: it states a tested condition false."""

    text: str
    false: bool = False


def code_readings(text: str) -> tuple[CodeReading, ...]:
    """`text` (a source sentence, or two on two lines) read as prose: nothing when it holds
    no code nor identifier; else its code lines with their words spelled out, and the same
    with a negated condition read as false when it tests one."""
    lines = text.split("\n")
    code = [bool(_CODE_LINE.search(line)) for line in lines]
    if not any(code) and not _CAMEL.search(text):
        return ()
    read = list(zip(lines, code, strict=True))
    literal = [
        _BANG.sub(r"not \1", _spelled(line)) if is_code else _words(line) for line, is_code in read
    ]
    falsified = [_falsified(_spelled(line)) if is_code else _words(line) for line, is_code in read]
    if falsified == literal:
        return (CodeReading("\n".join(literal)),)
    return CodeReading("\n".join(literal)), CodeReading("\n".join(falsified), false=True)


def _falsified(line: str) -> str:
    """A line of code with its negated conditions read as false."""
    return _NOT.sub(r"\1\2 false", _BANG.sub(r"\1 false", line))


def _words(line: str) -> str:
    """A line with each CamelCase identifier followed by its words."""
    return _CAMEL.sub(lambda m: f"{m.group()} {' '.join(_HUMP.findall(m.group()))}", line)


def _spelled(line: str) -> str:
    """A line of code with its identifiers' words, its keywords' verbs and its comparison
    operators written out."""
    line = _KEYWORD.sub(lambda m: f"{m.group()} {_VERBS[m.group()]}", _words(line))
    for operator, words in _OPERATORS:
        line = operator.sub(words, line)
    return line

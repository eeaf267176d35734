"""Streaming only what is kept (issue 59, item 3): the pieces `Unscaffolded` gives out, put
together, are `without_scaffolding` of the whole answer, however the answer was cut."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.chains.scaffolding import Unscaffolded, without_scaffolding

FRAGMENTS = [
    "Answer:", "Refined answer:", "**Final answer:**", "Answer so far:", "Question: why?",
    "Documents:", "######", "The answer so far, from earlier parts:", "An answer written",
    "a name, a number or a short phrase", "a sentence or two otherwise", "A lambda is",
    "just the words that answer it", "otherwise a sentence or two", "Keep it short:",
    "The number of the document that says this is", "the document that says it is:", "[1]",
    "[2]", "In 1952", "It raises an AssertionError", "the lamp", "was lit", "at dusk", "Rollo",
    ".", ",", "?", " ", " ", "\n", "\n\n", "#", "-", "*", "\\n", "1.5", "Ans", "Doc",
]  # fmt: skip


def _streamed(text: str, cuts: list[int]) -> str:
    reader = Unscaffolded()
    pieces, start = [], 0
    for cut in [*sorted({c % (len(text) + 1) for c in cuts}), len(text)]:
        pieces.append(reader.feed(text[start:cut]))
        start = cut
    return "".join(pieces) + reader.flush()


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map(" ".join),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_what_streams_is_what_is_kept(text: str, cuts: list[int]) -> None:
    assert _streamed(text, cuts) == without_scaffolding(text)


def _given_while_written(text: str) -> list[str]:
    reader = Unscaffolded()
    return [reader.feed(character) for character in text]


def test_the_first_words_come_before_the_answer_ends() -> None:
    answer = "The lamp was electrified in 1952 by the harbour board, which ran it until 1990 [1]."
    given_out = _given_while_written(answer)
    first = next(i for i, piece in enumerate(given_out) if piece)
    # held until the sentence's first words are known not to be the instruction's forms
    assert answer[:first].count(" ") == 6
    assert first < len(answer) // 2


def test_scaffolding_never_reaches_the_screen() -> None:
    answer = "It raises an AssertionError. The number of the document that says this is [1]"
    shown = "".join(_given_while_written(answer))
    assert "number of the document" not in shown
    reader = Unscaffolded()
    assert "".join(reader.feed(c) for c in answer) + reader.flush() == (
        "It raises an AssertionError. [1]"
    )
    copied = "The answer so far:\nRollo [1]\n######\nRefined answer: The leader was Rollo [1]."
    assert "Rollo [1]\n" not in "".join(_given_while_written(copied))

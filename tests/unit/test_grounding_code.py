"""The grounding check reads a source's code as the prose that restates it (issue 83)."""

from __future__ import annotations

import pytest

from service.grounding import GroundingCheck
from service.text.code import CodeReading, code_readings

ASSERT = (
    1,
    'The simple form, "assert expression", is equivalent to\n\n'
    "   if __debug__:\n       if not expression: raise AssertionError\n",
)


async def supported(answer: str, *sources: tuple[int, str]) -> list[bool]:
    grounding = await GroundingCheck(None).run(answer, list(sources))
    return [s.supported for s in grounding.sentences]


async def test_prose_restating_a_code_line_is_supported_by_it() -> None:
    answer = "If the condition is false, it raises an `AssertionError` [1]."
    assert await supported(answer, ASSERT) == [True]
    # an identifier's words are its words: AssertionError is an assertion error
    assert await supported("If it is false, it raises an assertion error [1].", ASSERT) == [True]


async def test_prose_turning_the_code_round_is_not_supported() -> None:
    assert await supported("If the condition is true, it raises an AssertionError.", ASSERT) == [
        False
    ]
    # nor does "true" stand on what code states false
    assert await supported("If ready is true, it returns -1.", (1, "if (!ready) return -1;")) == [
        False
    ]
    # a mention of what it raises stands on it
    assert await supported("An `AssertionError` is raised [1].", ASSERT) == [True]


async def test_code_comparisons_keep_their_negation() -> None:
    source = (1, "    if (count != 0) {\n        return total / count;\n    }")
    assert await supported("It divides the total by the count if count is not 0.", source) == [True]
    assert await supported("It divides the total by the count if count is 0.", source) == [False]
    bang = (1, "if (!ready) {\n    return -1;\n}")
    assert await supported("If ready is not set, it returns -1.", bang) == [True]
    assert await supported("If ready is false, it returns -1.", bang) == [True]
    assert await supported("If ready is set, it returns -1.", bang) == [False]


FALSE = True


@pytest.mark.parametrize(
    ("text", "readings"),
    [
        (
            "if not expression: raise AssertionError",
            [
                ("if not expression: raise raises AssertionError Assertion Error", not FALSE),
                ("if expression false: raise raises AssertionError Assertion Error", FALSE),
            ],
        ),
        (
            "while not queue.closed:",
            [("while not queue.closed:", not FALSE), ("while queue.closed false:", FALSE)],
        ),
        (
            "if (!send(msg)) return -1;",
            [
                ("if (not send(msg)) return returns -1;", not FALSE),
                ("if (send(msg) false) return returns -1;", FALSE),
            ],
        ),
        # membership and identity tests say "not" in prose too: no reading as false
        ("if key not in mapping:", [("if key not in mapping:", not FALSE)]),
        (
            "if user is not None: return user",
            [("if user is not None: return returns user", not FALSE)],
        ),
        ("return list.length === 0;", [("return returns list.length  equal  0;", not FALSE)]),
        ("if (count != 0) {", [("if (count  not equal  0) {", not FALSE)]),
        # prose is read as written (a wrapped line starting with "if" included), an
        # identifier's words beside it
        ("if not, the keeper lit the lamp at dusk", []),
        ("The lamp is not lit.", []),
        (
            '"AssertionError" is built in.',
            [('"AssertionError Assertion Error" is built in.', not FALSE)],
        ),
    ],
)
def test_what_a_line_of_code_reads_as(text: str, readings: list[tuple[str, bool]]) -> None:
    assert code_readings(text) == tuple(CodeReading(*reading) for reading in readings)

"""The Gate (issue 67): one object decides what of an answer being written may be shown; what
it shows, then its rest, is the answer kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from service.chains.scaffolding_reading import without_scaffolding
from service.chains.short_answer import phrase
from service.llm.types import TokenChoice
from service.rag.gate import WHOLE, Gate
from service.rag.stages.confidence import Doubt
from service.rag.stages.echo import EchoCheck, EchoHold

NOT_FOUND = "I could not find the answer in the documents."
ANSWER = "Answer: The lamp was electrified in 1952 by the harbour board [1]."


def _shown(gate: Gate, text: str, tokens: Sequence[TokenChoice] = ()) -> list[str]:
    pieces = [gate.feed(text[i : i + 3], tokens) for i in range(0, len(text), 3)]
    return [*pieces, gate.flush(tokens)]


def test_what_is_shown_then_the_rest_is_the_kept_answer() -> None:
    gate = Gate()
    pieces = _shown(gate, ANSWER)
    kept = without_scaffolding(ANSWER)
    assert "".join(pieces) == kept == gate.shown
    assert not pieces[0], "'Answer:' is held until it is known to be a label"
    assert gate.rest(kept) == ""


@dataclass
class Until:
    """A hold that holds until the kept text holds `word`."""

    word: str

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        return self.word not in kept


def test_a_hold_keeps_everything_back_until_it_lets_go_then_never_again() -> None:
    gate = Gate(holds=[Until("electrified")])
    pieces = _shown(gate, ANSWER)
    first = next(i for i, piece in enumerate(pieces) if piece)
    assert "electrified" in pieces[first]  # what was held comes at once
    assert "".join(pieces) == without_scaffolding(ANSWER)


def test_the_doubt_and_the_echo_check_hold_a_streamed_answer() -> None:
    doubtful = [TokenChoice("I", -0.5, (("I", -0.5), ("The", -1.2)))]
    doubt = Doubt(NOT_FOUND, threshold=0.5)
    gate = Gate(holds=[doubt])
    assert "".join(_shown(gate, ANSWER, doubtful)) == ""
    assert gate.rest(NOT_FOUND) == NOT_FOUND  # the abstention, whole
    echo = EchoCheck.of("When was the lamp electrified?", ["The lamp burned paraffin."])
    gate = Gate(holds=[echo])
    assert "".join(_shown(gate, "The lamp was electrified. [1]")) == ""
    gate = Gate(holds=[echo])
    assert "paraffin" in "".join(_shown(gate, "It burned paraffin until 1952 [1]."))


def test_an_echo_held_long_is_read_a_few_times_not_at_every_piece() -> None:
    """An answer the echo check holds to its end (an echo looping on) is read again once it
    has grown by an eighth: a few readings of its words, not one a piece (issue 70: a 16 KB
    echo cost 30 s); an answer that says something is still shown as soon as it does."""
    read: list[int] = []

    @dataclass(frozen=True)
    class Counting(EchoCheck):
        def shown_yet(self, written: str) -> bool:
            read.append(len(written))
            return super().shown_yet(written)

    check = Counting.of("When was the lamp electrified?", ["The lamp burned paraffin."])
    echo = "The lamp was electrified when it was electrified. " * 80
    gate = Gate(holds=[EchoHold(check)])
    assert "".join(_shown(gate, echo)) == ""
    assert len(read) < 60, len(read)  # 1,334 pieces
    gate = Gate(holds=[EchoHold(check)])
    said = "It burned paraffin. It was lit at dusk until 1952, by the keeper [1]."
    shown = _shown(gate, said)
    assert "".join(shown) == said
    assert sum(1 for piece in shown if piece) > 1  # streamed, not held to its end


def test_a_short_answers_citation_waits_for_the_end() -> None:
    gate = Gate(citation_last=True)
    shown = "".join(_shown(gate, "until 1952 [1]"))
    assert shown == "until 1952"
    assert gate.rest("until 1952 [2]") == " [2]"


def test_an_answer_cut_to_its_phrase_is_shown_whole_at_the_end() -> None:
    """A short answer cut to its phrase (prompt.answer.phrase) is known only once written:
    nothing of the sentence the model wrote is shown, then the phrase whole."""
    written = "The lamp was electrified in 1952 [1]"
    gate = Gate(holds=[WHOLE], citation_last=True)
    assert "".join(_shown(gate, written)) == ""
    kept = phrase(written, "When was the lamp electrified?")
    assert kept == "1952 [1]"
    assert gate.rest(kept) == kept

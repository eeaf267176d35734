"""Streaming only what is kept (issue 59, item 3): the pieces `Unscaffolded` gives out, put
together, are `without_scaffolding` of the whole answer, however the answer was cut."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from service.chains import PromptLibrary, scaffolding_reading, scaffolding_stream
from service.chains.scaffolding import LEAD_FORMS, LEAD_WORDS, SHIPPED, Scaffolding
from service.chains.scaffolding_reading import SENTENCE_HOLD, without_scaffolding
from service.chains.scaffolding_stream import Unscaffolded

FRAGMENTS = [
    "Answer:", "Refined answer:", "**Final answer:**", "Answer so far:", "Question: why?",
    "Documents:", "######", "The answer so far, from earlier parts:", "An answer written",
    "a name, a number or a short phrase", "a sentence or two otherwise", "A lambda is",
    "just the words that answer it", "otherwise a sentence or two", "Keep it short:",
    "The number of the document that says this is", "the document that says it is:", "[1]",
    "This can be found in", "This answer is found in", "Elle est disponible dans les documents",
    "Cette information se trouve dans", "Elle", "It is available in the documents",
    "This can be found in the document", "Cette information se trouve dans le document",
    "Selon les documents fournis,", "According to the provided context,", "According to the",
    "Selon les documents de 2020,", "le délai", "d'après le contexte,", "iOS",
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
# found by hypothesis: the form cut out left citation words before the next sentence's [1]
@example("The number of the document that says this is a name, a number or a short phrase . [1]",
         [])  # fmt: skip
@example("The number of the document that says this is a name, a number or a short phrase", [46])
# the citation's words taken out whole from inside a word ("Answer:The"), where the stream
# (forms begin at a word) had shown that word
@example("Answer: Answer:The document that says this is [1] ", [])
def test_what_streams_is_what_is_kept(text: str, cuts: list[int]) -> None:
    assert _streamed(text, cuts) == without_scaffolding(text)


def _given_while_written(text: str, reader: Unscaffolded | None = None) -> list[str]:
    reader = reader or Unscaffolded()
    return [reader.feed(character) for character in text]


@pytest.mark.parametrize(
    "text",
    [
        # a citation's words cut short by a form's first word ("in" of "in as few words")
        "was lit This answer is found in a sentence or two otherwise",
        # citation words before citation words, a [n] after the form cut between
        "This can be found in The number of the document that says this is a sentence or two "
        "otherwise . [1] the lamp",
        "- \n This can be found in This can be found in just the words that answer it . [2] -",
        # a colon after blanks: the stream showed it, then could not go on (a review's)
        "The lamp was lit. This answer is found in : [3] at dusk.",
        # letters re.I took for ASCII ones ("ſ" s, "İ" i), the holds not: streamed, then stuck
        "The lamp was lit at dusk by Rollo thiſ can be found in [1]",
        "The lamp was lit by Rollo the keeper İN 1952 this İs found in [2]",
        # the open line cut where no citation words run across, then read otherwise
        "In 1952 [1] the document that says it is: a name, a number or a short phrase This can "
        "be found in a name, a number or a short phrase ? the document that says it is: [2] x",
    ],
)
def test_what_streams_a_character_at_a_time_is_what_is_kept(text: str) -> None:
    reader = Unscaffolded()
    assert "".join(_given_while_written(text, reader)) + reader.flush() == without_scaffolding(text)


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


def test_a_sentence_about_where_the_answer_is_never_reaches_the_screen() -> None:
    """Issue 69: "This can be found in [1]" after the answer is where, not what."""
    answer = "The type before Norman was Anglo-Saxon. This can be found in [1]"
    assert "found in" not in "".join(_given_while_written(answer))
    assert without_scaffolding(answer) == "The type before Norman was Anglo-Saxon. [1]"
    assert without_scaffolding("It is found in bones [1]") == "It is found in bones [1]"


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        (
            "La CNIL est une autorité indépendante. Elle est disponible dans les documents [1]",
            "La CNIL est une autorité indépendante. [1]",
        ),
        (
            "Le délai est de un mois. Cette information se trouve dans [2].",
            "Le délai est de un mois. [2].",
        ),
        (
            "Le délai est de un mois. Cette information se trouve dans le document [2]",
            "Le délai est de un mois. [2]",
        ),
        (
            "The lamp was lit in 1952. It is available in the documents [1]",
            "The lamp was lit in 1952. [1]",
        ),
        (
            "The lamp was lit in 1952. This can be found in the document [1]",
            "The lamp was lit in 1952. [1]",
        ),
        # a sentence that says where something is, not where the answer is, stays
        ("Elle se trouve dans la salle 3 [1].", "Elle se trouve dans la salle 3 [1]."),
        (
            "Elle se trouve dans le document rouge [1].",
            "Elle se trouve dans le document rouge [1].",
        ),
        ("The manual is available in French [1].", "The manual is available in French [1]."),
    ],
)
def test_a_french_sentence_about_where_the_answer_is_goes_as_the_english_one(
    answer: str, kept: str
) -> None:
    """Issue 83: "Elle est disponible dans les documents [1]" (and "It is available in the
    documents [1]") is where, not what."""
    _kept_whole_and_streamed(answer, kept)


def _kept_whole_and_streamed(answer: str, kept: str) -> None:
    """`answer` is `kept` read whole, and streamed a character at a time or in pieces cut
    anywhere (inside the words to take out, between them and their citation)."""
    assert without_scaffolding(answer) == kept
    reader = Unscaffolded()
    assert "".join(_given_while_written(answer, reader)) + reader.flush() == kept
    for size in (2, 3, 5, 7, 11):
        assert _streamed(answer, list(range(size, len(answer), size))) == kept, size


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ("Selon les documents fournis, le délai est d'un mois [1].", "Le délai est d'un mois [1]."),
        (
            "La CNIL contrôle les fichiers. D'après les documents, elle peut sanctionner [2].",
            "La CNIL contrôle les fichiers. Elle peut sanctionner [2].",
        ),
        (
            "Selon le contexte fourni, l'été à Marseille est chaud [1].",
            "L'été à Marseille est chaud [1].",
        ),
        ("According to the provided context, the lamp was lit [1].", "The lamp was lit [1]."),
        ("Based on the documents, iOS 17 added it [3].", "iOS 17 added it [3]."),
        # opening words that say more than where the answer comes from stay
        (
            "Selon les documents de 2020, le délai est d'un mois [1].",
            "Selon les documents de 2020, le délai est d'un mois [1].",
        ),
        (
            "Le document 3 précise que la CNIL est indépendante [1].",
            "Le document 3 précise que la CNIL est indépendante [1].",
        ),
        (
            "Selon les documents fournis par la mairie, le marché ouvre à 8 h [1].",
            "Selon les documents fournis par la mairie, le marché ouvre à 8 h [1].",
        ),
    ],
)
def test_opening_words_on_where_the_answer_comes_from_go_and_the_sentence_stays(
    answer: str, kept: str
) -> None:
    """Issue 83: "Selon les documents fournis, ..." (and "According to the documents, ...")
    says where, not what: the words go, the sentence after them stays, capitalised."""
    _kept_whole_and_streamed(answer, kept)


def test_opening_words_are_known_within_the_words_a_sentence_is_held_for() -> None:
    """The stream holds a sentence's first SENTENCE_HOLD words: a lead, and the word after it
    (capitalised or not), are whole by then."""
    assert max(len(form.split()) for form in LEAD_FORMS) <= LEAD_WORDS < SENTENCE_HOLD


# -- read from the templates as loaded (issue 67) ----------------------------------------------

SHORT = (
    "Keep it short: just the words that answer it if they are enough, otherwise a sentence or two."
)
EDITED = "Be brief and plain: name the year or the person asked about, nothing more."


def _edited(tmp_path: Path) -> PromptLibrary:
    folder = tmp_path / "prompts"
    shutil.copytree(SHIPPED, folder)
    stuff = folder / "stuff.j2"
    assert SHORT in stuff.read_text(encoding="utf-8")
    stuff.write_text(stuff.read_text(encoding="utf-8").replace(SHORT, EDITED), encoding="utf-8")
    return PromptLibrary(folder)


def test_an_edited_templates_own_sentence_is_taken_out_streamed_or_whole(tmp_path: Path) -> None:
    scaffolding = _edited(tmp_path).scaffolding
    copied = f"{EDITED}\nIt was electrified in 1952 [1]."
    assert without_scaffolding(copied) == copied  # our templates never said it
    assert without_scaffolding(copied, scaffolding) == "It was electrified in 1952 [1]."
    echoed = "The lamp was lit to name the year or the person asked about. In 1952 [1]."
    assert without_scaffolding(echoed, scaffolding) == "In 1952 [1]."
    for text in (copied, echoed):
        reader = Unscaffolded(scaffolding)
        streamed = "".join(reader.feed(character) for character in text) + reader.flush()
        assert streamed == without_scaffolding(text, scaffolding)


def test_the_shipped_templates_scaffolding_is_read_from_them() -> None:
    shipped = Scaffolding.shipped()
    assert PromptLibrary(SHIPPED).scaffolding == shipped
    assert "keep it short: just" in shipped.lines and "question:" in shipped.lines
    assert "an answer written earlier" in shipped.earlier  # the line above previous_answer
    assert "just the words that answer it" in shipped.forms


def test_each_piece_reads_the_lines_still_open_not_the_whole_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A streamed answer is read a piece at a time: each piece costs the lines not yet
    settled, so a long answer costs about its length, not its length squared (issue 70: a
    4,000-token answer cost 12 s of the event loop)."""
    read: list[int] = []
    reading = scaffolding_reading.Reading.__init__

    def counting(
        self: scaffolding_reading.Reading, of: Scaffolding, text: str, **given: bool
    ) -> None:
        read.append(len(text))
        reading(self, of, text, **given)

    monkeypatch.setattr(scaffolding_reading.Reading, "__init__", counting)
    said = "The lamp was lit at dusk and burned oil. Answer: it did."
    # lines, one line of sentences, then a hostile model's sentence that never ends: past
    # 1,000 characters it is read again only once it has grown a sixteenth (a review's: 22 KB
    # of it cost 5.8 s of the event loop, every piece reading it all)
    endless = "Zorb quux flim blah wibble " * 800
    for text in (f"{said}\n" * 150, f"{said} " * 150, endless):
        read.clear()
        reader = Unscaffolded()
        streamed = "".join(reader.feed(text[at : at + 4]) for at in range(0, len(text), 4))
        assert streamed + reader.flush() == without_scaffolding(text)
        assert sum(read) < 30 * len(text), sum(read) / len(text)  # whole rescans: 1,000x+


_CITING = ["This", "this", "is", "found", "in", "[1]", "]", ".", "7", ":", "x", " ", " ", "\t", ""]
_CITING += ["It", "available", "the", "documents"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_CITING), max_size=12).map("".join), max_size=8))
def test_the_open_line_read_once_takes_out_the_citation_words_as_read_whole(
    texts: list[str],
) -> None:
    """The open line is cut where no citation words run across (`_Uncited`): reading it in
    parts, as it grows or is read otherwise at every piece, leaves what reading it whole does."""
    uncited = scaffolding_stream._Uncited()
    line = ""
    for text in texts:
        line = line + text if len(text) % 3 else line[: len(line) // 2] + text  # grows, or not
        assert uncited.of(line) == scaffolding_reading.without_citation_words(line), line

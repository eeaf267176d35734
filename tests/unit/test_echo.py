"""The echo check (issue 59, item 2): an answer that only says the question back is refused."""

from __future__ import annotations

import pytest

from service.rag.stages.echo import echoes

AMAZON = (
    "The Amazon rainforest covers much of the Amazon basin of South America. Deforestation "
    "for cattle ranching and soy is the main threat it faces."
)
LIGHTHOUSE = "The lighthouse lamp was electrified in 1923 and automated in 1961."
CNIL = (
    "La Commission nationale de l'informatique et des libertés veille à la protection des "
    "données personnelles contenues dans les fichiers informatiques."
)


@pytest.mark.parametrize(
    ("question", "answer", "source"),
    [
        ("xylophonistzz qwertyuiop", "xylophonistzz qwertyuiop [1]", AMAZON),
        ("What are cnidarians commonly called?", "Cnidarians are commonly called cnidarians. [1]",
         AMAZON),
        # the question completed with words no source holds
        ("Hunting and population are the main threats facing what?",
         "Hunting and population are the main threats facing the coral reefs. [1]", AMAZON),
        ("Qu'est-ce que la CNIL ?", "La CNIL est la CNIL. [1]", CNIL),
        ("Quel est le rôle du délégué ?", "Le rôle du délégué est son rôle [1]", CNIL),
        ("[1]", "[1]", LIGHTHOUSE),
        # a "no" said back from the question is no answer
        ("Who had no influence on the lamp?", "No one had influence on the lamp. [1]",
         LIGHTHOUSE),
        ("the of and", "The of and. [1]", LIGHTHOUSE),
    ],
)  # fmt: skip
def test_an_answer_saying_nothing_the_sources_say_is_an_echo(
    question: str, answer: str, source: str
) -> None:
    assert echoes(answer, question, [source])


@pytest.mark.parametrize(
    ("question", "answer", "source"),
    [
        ("When was the lighthouse lamp electrified?", "In 1923 [1]", LIGHTHOUSE),
        ("When was the lighthouse lamp electrified?",
         "The lighthouse lamp was electrified in 1923. [1]", LIGHTHOUSE),
        ("What is the main threat the Amazon faces?", "Deforestation for cattle ranching [1]",
         AMAZON),
        ("Was the lighthouse automated?", "Yes [1]", LIGHTHOUSE),
        ("Qui veille à la protection des données ?",
         "La Commission nationale de l'informatique et des libertés [1]", CNIL),
        # a figure in digits where the source writes it in words, English or French
        ("How many professional schools does the University of Chicago have?",
         "The University of Chicago has 7 professional schools. [1]",
         "The University of Chicago has seven professional schools and a college."),
        ("Combien d'élus compte le collège de la CNIL ?", "Il en compte 12. [1]",
         "Le collège de la CNIL est composé de dix-huit membres : douze élus et six nommés."),
        # inflections of the sources' words
        ("What does the CNIL do?", "It protects personal data held in computer files. [1]",
         "The CNIL protects the personal data held in computer files."),
    ],
)  # fmt: skip
def test_an_answer_with_the_sources_words_is_not_an_echo(
    question: str, answer: str, source: str
) -> None:
    assert not echoes(answer, question, [source])


# issue 59: correct answers the 1.5B wrote with the question's words alone (SQuAD)
CAPABILITIES = (
    "Sen's capabilities approach sees growth and income as a means to an end rather than the "
    "end itself."
)
SCHOOLS = (
    "Religious schools teach religious education in addition to the secular curriculum of "
    "the state schools."
)


@pytest.mark.parametrize(
    ("question", "answer", "source"),
    [
        ("In the capabilities approach, growth and income are considered a means to an end "
         "rather than what?", "... a means to an end rather than the end itself. [1]",
         CAPABILITIES),
        ("What type of education is sometimes present at religious schools in addition to the "
         "secular curriculum?", "Religious education [1]", SCHOOLS),
    ],
)  # fmt: skip
def test_a_phrase_of_the_sources_made_of_the_questions_words_says_something(
    question: str, answer: str, source: str
) -> None:
    assert not echoes(answer, question, [source])
    # the same words in an order no source has are an echo
    shuffled = " ".join(reversed(answer.removesuffix(" [1]").split())) + " [1]"
    assert echoes(shuffled, question, [source])


def test_a_restated_question_stays_an_echo_beside_a_source_with_the_answer() -> None:
    source = "The Middle Rhine flows through the Rhine Gorge between Bingen and Bonn."
    question = "Where does the Middle Rhine flow between Bingen and Bonn?"
    assert echoes("The Middle Rhine flows between Bingen and Bonn. [1]", question, [source])
    assert echoes("Bonn is where the Middle Rhine flows between Bingen. [1]", question, [source])
    assert not echoes("Through the Rhine Gorge [1]", question, [source])


def test_the_words_may_come_from_any_source() -> None:
    answer = "Deforestation for cattle ranching [2]"
    assert not echoes(answer, "What threatens the forest?", [LIGHTHOUSE, AMAZON])
    assert echoes(answer, "What threatens the forest?", [LIGHTHOUSE])


def test_an_answer_in_another_language_than_its_sources_is_not_checked() -> None:
    question = "Quand la lampe du phare a-t-elle été électrifiée ?"
    assert not echoes("La lampe a été électrifiée en mille neuf cent cinquante-deux. [1]",
                      question, [LIGHTHOUSE])  # fmt: skip


# issue 69, item 3: a true answer whose word begins as a word of the question does (the same
# first five letters) was refused as the question said back
CATASTROPHISM = (
    "Catastrophism held that the Earth's features were shaped by sudden, short-lived, violent "
    "catastrophic events."
)
PHAGOCYTES = "The phagosome fuses with a lysosome, forming a phagolysosome that kills the microbe."


@pytest.mark.parametrize(
    ("question", "answer", "source"),
    [
        ("What theory says the Earth was shaped by catastrophic events?",
         "Catastrophism [1]", CATASTROPHISM),
        ("What does the phagosome fuse with a lysosome to form?", "A phagolysosome [1]",
         PHAGOCYTES),
    ],
)  # fmt: skip
def test_another_word_beginning_as_a_question_word_says_something(
    question: str, answer: str, source: str
) -> None:
    assert not echoes(answer, question, [source])


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        # the question's word inflected or derived is still the question's
        ("What theory says the Earth was shaped by catastrophic events?",
         "Catastrophically shaped events [1]"),
        ("When was the lighthouse lamp electrified?", "The electrification of the lamp [1]"),
    ],
)  # fmt: skip
def test_the_question_s_word_inflected_stays_an_echo(question: str, answer: str) -> None:
    source = CATASTROPHISM + " " + LIGHTHOUSE + " Electrification came late."
    assert echoes(answer, question, [source])


EMPIRES = "The Ethiopian Empire is far older than the British Empire, which came much later."


@pytest.mark.parametrize(
    "answer",
    ["Ethiopian [1]", "The Ethiopian Empire. [1]", "British [1]"],
)
def test_an_answer_choosing_one_of_the_question_s_alternatives_says_something(answer: str) -> None:
    question = "Which is older, the British Empire or the Ethiopian Empire?"
    assert not echoes(answer, question, [EMPIRES])


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        # both alternatives said back: no choice made
        ("Which is older, the British Empire or the Ethiopian Empire?",
         "The British Empire or the Ethiopian Empire is older. [1]"),
        ("Which is older, the British Empire or the Ethiopian Empire?", "Empire [1]"),
        # "or" between two sides of the same words offers no choice
        ("Which prime has p+1 or p-1 of a certain shape?", "p+1 or p-1 of a certain shape [1]"),
        # one side named with more of the question's words: the question said back
        ("What happens when water is heated or cooled?", "water is heated [1]"),
    ],
)  # fmt: skip
def test_an_answer_naming_both_alternatives_or_neither_stays_an_echo(
    question: str, answer: str
) -> None:
    assert echoes(answer, question, [EMPIRES + " A prime has p+1 of a certain shape."])


def test_a_question_of_many_ors_offers_its_first_alternatives_only() -> None:
    """Bounded work for a hostile question ("or or or ..."): the first _MAX_ORS "or"s are
    read; a choice offered after them is not one."""
    filler = " ".join(f"alpha{i} or beta{i}" for i in range(12))
    question = f"Which of {filler}, the British Empire or the Ethiopian Empire?"
    assert echoes("Ethiopian [1]", question, [EMPIRES])
    first = "Which is older, the British Empire or the Ethiopian Empire, " + filler + "?"
    assert not echoes("Ethiopian [1]", first, [EMPIRES])

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
        # inflections of the sources' words
        ("What does the CNIL do?", "It protects personal data held in computer files. [1]",
         "The CNIL protects the personal data held in computer files."),
    ],
)  # fmt: skip
def test_an_answer_with_the_sources_words_is_not_an_echo(
    question: str, answer: str, source: str
) -> None:
    assert not echoes(answer, question, [source])


def test_the_words_may_come_from_any_source() -> None:
    answer = "Deforestation for cattle ranching [2]"
    assert not echoes(answer, "What threatens the forest?", [LIGHTHOUSE, AMAZON])
    assert echoes(answer, "What threatens the forest?", [LIGHTHOUSE])


def test_an_answer_in_another_language_than_its_sources_is_not_checked() -> None:
    question = "Quand la lampe du phare a-t-elle été électrifiée ?"
    assert not echoes("La lampe a été électrifiée en mille neuf cent cinquante-deux. [1]",
                      question, [LIGHTHOUSE])  # fmt: skip

"""The short answer's form (issue 46, item 3): the grammar names only the sources sent, and a
citation is moved to the source that holds the answer's words. No sockets."""

from __future__ import annotations

import random
import re

import pytest

from service.chains.result import Source
from service.chains.short_answer import (
    NOT_FOUND,
    grammar,
    phrase,
    phrase_answers,
    true_citation,
)
from service.retrieval.base import RetrievedDocument


def source(number: int, title: str, text: str) -> Source:
    return Source(number, RetrievedDocument(f"d{number}", title, "", text), (text,))


SOURCES = [
    source(1, "Brannoch lighthouse", "The keeper lit the lamp every evening at dusk."),
    source(2, "Lamp history", "The lamp burned paraffin until 1952, when it was electrified."),
    source(3, "Harbour", "Fishing boats leave at dawn."),
]


def test_the_grammar_cites_only_the_sources_sent() -> None:
    text = grammar([3, 1, 3])
    assert 'number ::= "1" | "3"' in text
    assert f'notfound ::= "{NOT_FOUND}"' in text
    assert '{0,59} (" [" number "]")?' in text  # optional: a model may stop after its answer
    assert text.startswith("root ::= answer | notfound")
    with pytest.raises(ValueError):
        grammar([])


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("in 1952 [2]", "in 1952 [2]"),  # the cited source holds it
        ("in 1952 [1]", "in 1952 [2]"),  # it does not: the one that does is cited
        ("paraffin [3]", "paraffin [2]"),
        ("at dusk [1]", "at dusk [1]"),
        ("the moon [1]", "the moon [1]"),  # no source holds it: left for grounding
        ("It burned paraffin until 1952.", "It burned paraffin until 1952. [2]"),  # cited now
        ("the moon", "the moon"),  # none to cite: grounding judges it
        (NOT_FOUND, NOT_FOUND),
    ],
)
def test_a_citation_points_at_a_source_that_holds_the_answer(written: str, kept: str) -> None:
    assert true_citation(written, SOURCES) == kept


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When had the Six Ministries existed?", True),
        ("UChicago claims to have what kind of learning experience?", True),
        ("How many prime numbers exist?", True),
        ("Qui peut consulter les images ?", False),  # French FAQ answers: paragraphs
        ("Why did the river flood?", False),  # an explanation: a sentence or two
        ("How does the lamp work?", False),
        ("What does the assert statement do?", False),  # the README's: what it does
        ("What does Kwh mean?", False),
        ("To map faults, structural geologists do what with measurements?", False),  # an act
        ("What gender is less willing to relocate for work?", True),
        ("Is the lighthouse still lit?", False),  # yes or no, and why
        ("Pourquoi le phare a-t-il été électrifié ?", False),
        ("When did the lamp stop burning paraffin, and what did the orchard grow?", False),
        ("Tell me about the lighthouse.", False),  # no question word: as written
        ("What did the keepers' union do for the lighthouse?", False),  # an act, a sentence
        ("When did the keepers do their last watch?", True),  # a date, though "do" is said
        ("What does the DO-178C standard cover?", True),
        ("When does the keeper write the to-do list?", True),
    ],
)
def test_a_phrase_answers_who_what_when_not_why_how_or_whether(question: str, asks: bool) -> None:
    assert phrase_answers(question) is asks


@pytest.mark.parametrize(
    ("question", "written", "kept"),
    [
        # the question said back around the span: the span, its citation kept
        ("When had the Six Ministries existed?",
         "The Six Ministries existed since the Sui and Tang dynasties. [1]",
         "since the Sui and Tang dynasties [1]"),
        ("What are the stages in a compound engine called?",
         "Expansions are the stages in a compound engine called. [1]", "Expansions [1]"),
        ("What rituals did Kublai follow to help his image?",
         "Kublai evoked his public image as a sage emperor by following the rituals of "
         "Confucian propriety and ancestor veneration [2]",
         "Confucian propriety and ancestor veneration [2]"),  # the run with most new words
        ("Any even number larger than what cannot be considered prime?",
         "Any even number larger than 2 cannot be considered prime. [1]", "2 [1]"),
        ("What are the tasks of a pharmacist?",
         "The tasks of a pharmacist include providing advice and dispensing medications [1]",
         "providing advice and dispensing medications [1]"),  # not "include ..."
        ("What cell type is used for immune response?",
         "Phagocytic cells are used for immune response.", "Phagocytic cells"),  # none cited
        # kept as written: already the phrase, two sentences, nothing new, not found
        ("How many drugs were specialty drugs?", "19 [1]", "19 [1]"),
        ("What happened to the lamp?",
         "It was electrified in 1952. It stopped burning paraffin. [2]",
         "It was electrified in 1952. It stopped burning paraffin. [2]"),
        ("What is the lamp of the lighthouse?", "The lamp of the lighthouse. [1]",
         "The lamp of the lighthouse. [1]"),
        ("Who lit the lamp?", NOT_FOUND, NOT_FOUND),
        # written as a phrase (a few words, no sentence's end): whole, though the question
        # says its last word (the dev half, issue 83)
        ("Who often repairs harbour lighthouses?", "Local harbour lighthouses [1]",
         "Local harbour lighthouses [1]"),
        ("Besides 2 and 4, which lamps stayed lit?", "1, 7 [1]", "1, 7 [1]"),
        # ... but a short sentence without its full stop, the question's words first, is cut
        ("What did the lamp burn?", "The lamp burned paraffin [1]", "paraffin [1]"),
        ("Besides 2 and 4, which lamps stayed lit?", "2, 4, 7 [1]", "7 [1]"),
    ],
)  # fmt: skip
def test_the_phrase_is_the_answer_s_words_the_question_does_not_say(
    question: str, written: str, kept: str
) -> None:
    assert phrase(written, question) == kept


@pytest.mark.parametrize(
    ("question", "written", "kept"),
    [
        # how many: the run with a figure, not the longest ("fortresses from the Middle Ages")
        ("How many castles are on the Rhine?",
         "The Rhine has more than 40 castles and fortresses from the Middle Ages. [1]", "40 [1]"),
        # how many: the first figure, when two runs hold one (chosen on the dev half, issue 69)
        ("In April 2014, how many New Zealand students attended private schools?",
         "28,000 students or 3.7% of the entire student population [1]", "28,000 [1]"),
        # when: the run with a date
        ("When did the council change its mind about the statues?",
         "The council members changed their minds in 1931 after the statues' owners sued. [1]",
         "1931 [1]"),
        # who: the run with a name
        ("Who designed the statues in the square?",
         "Paul Landowski designed the statues in the square with bronze and granite from the "
         "quarry. [2]", "Paul Landowski [2]"),
        # what (kind of) X: X kept when the answer names it after the run
        ("What type of immune cells help to destroy abnormal cells in tumors?",
         "Killer T cells destroy abnormal cells in tumors. [1]", "Killer T cells [1]"),
        # a name the question says part of is kept whole
        ("Where does the Middle Rhine flow between Bingen and Bonn?",
         "The Middle Rhine flows through the Rhine Gorge. [1]", "Rhine Gorge [1]"),
        # which / what X: a name, when a run holds one (chosen on the dev half, issue 69)
        ("What stipend is geared to students enrolled in priority courses?",
         "The Tuition Fee Supplement is geared to students enrolled in priority courses in "
         "post-secondary and non-degree programmes. [1]", "Tuition Fee Supplement [1]"),
        # what (kind of) X: the first run the answer names X after, before the longest
        ("What kind of lens boundary marks the lamp's beam?",
         "A Fresnel boundary, made of the old Chance Brothers lens rings, marks the beam. [1]",
         "Fresnel boundary [1]"),
        # the degree word before the run and the Roman numeral after it are the phrase's
        ("What kind of keeper training does the service offer?",
         "The service offers the most demanding, thorough keeper training. [1]",
         "most demanding, thorough keeper training [1]"),
        ("What type of lens is in the lamp?", "An order I lens is in the lamp. [1]",
         "order I lens [1]"),
        ("What lens turns in the lamp?", "The lamp turns a lens of class I. [1]",
         "class I [1]"),  # the numeral that ends the sentence
        ("When did you visit the lighthouse?", "In 1952 I visited the lighthouse. [1]",
         "1952 [1]"),  # "I" the pronoun
        # the form before the thing when the question asks for no kind: a date, a name
        ("What year did the lighthouse open?",
         "In its centenary year the museum noted the lighthouse opened in 1870. [1]", "1870 [1]"),
        ("Which city did the keeper move to?",
         "The keeper left his home city for Brest in 1920. [1]", "Brest in 1920 [1]"),
        # no run of the form: the run with most new words, as for a question of no form
        ("When did the painters leave the village?",
         "The painters left the village after the quarrel with the mayor's office. [1]",
         "quarrel with the mayor's office [1]"),
    ],
)  # fmt: skip
def test_the_phrase_is_the_run_the_question_s_form_asks_for(
    question: str, written: str, kept: str
) -> None:
    assert phrase(written, question) == kept


def test_the_answer_s_first_word_is_no_name_for_a_where() -> None:
    """Capitalized as any first word is: "Historians" is not the place a where asks for."""
    answer = "Historians believe the treaty was signed in Versailles [1]"
    assert phrase(answer, "Where was the treaty signed?") == "Versailles [1]"


def test_a_hostile_answer_is_cut_without_raising_losing_its_citation_or_adding_a_word() -> None:
    """The model's text is anyone's (a crawled document it echoes): whatever it writes, the cut
    raises nothing, keeps the citation, and says only words the answer said."""
    pieces = ["I", "II", "most", "the", "lamp", "Lamp", "1952", "class", "type", "of", ".",
              ",", "!", "?", "-", "\u200b", "\u00e9t\u00e9", "\u706f", "\uff21", "(", ")",
              "  ", "\t", "\n", "[2]", "do", "to-do", "keeper", "Brannoch", "X."]  # fmt: skip
    questions = ["What type of lamp did the keeper light?", "When was the lamp lit?",
                 "Who lit the lamp?", "How many lamps are there?", "What did the keeper do?",
                 "Which class of lamp is it?", ""]  # fmt: skip
    chance = random.Random(83)
    for _ in range(3000):
        text = " ".join(chance.choice(pieces) for _ in range(chance.randint(0, 12)))
        written = f"{text} [1]" if chance.random() < 0.7 else text
        question = chance.choice(questions)
        kept = phrase(written, question)
        cited = re.search(r"\s*\[\d+\]\s*$", written)
        if cited:  # the citation kept as written, at the end
            assert kept.endswith(f" {cited.group().strip()}") or kept == written, (written, kept)
        said = kept[: re.search(r"\s*\[\d+\]\s*$", kept).start()] if cited else kept
        # the answer's own words, in their order: a stretch of it
        assert " ".join(said.split()) in " ".join(written.split()), (written, question, kept)

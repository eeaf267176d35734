"""`solr-rag eval`'s question file and scoring (service.evaluation): SQuAD's normalization,
what a reply of /ai/rag scores, and the file's errors naming the line and the fix."""

from __future__ import annotations

import pytest

from service.evaluation import (
    Answered,
    Expected,
    QuestionFileError,
    contains,
    exact_match,
    f1,
    normalized,
    read_questions,
    recall,
    score,
    scored,
    summary,
)


def reply(message: str, ids: list[str]) -> dict:
    return {
        "content": {"message": message, "documents": [{"id": i} for i in ids]},
        "usage": {"llm_calls": 1, "completion_tokens": 10},
        "timings": {"llm": 500.0},
    }


def test_squad_normalization_and_token_f1() -> None:
    assert f1("The Norse leader was Rollo.", "Rollo") == pytest.approx(2 * (1 / 4) / (1 + 1 / 4))
    assert f1("an apple", "Apple!") == 1.0
    assert f1("", "") == 1.0 and f1("x", "") == 0.0


def test_token_f1_counts_shared_tokens_with_their_repeats() -> None:
    # 2 shared of 3 predicted and 4 gold tokens: precision 2/3, recall 1/2, F1 4/7
    assert f1("red blue green", "red blue cyan teal") == pytest.approx(4 / 7)
    # "the" is no token; "paris" shared once although predicted twice: P 1/2, R 1, F1 2/3
    assert f1("Paris, Paris!", "the Paris") == pytest.approx(2 / 3)
    assert f1("Warsaw", "Kraków") == 0.0  # nothing shared
    assert f1("1952 [1]", "1952") < 1.0  # the citation is the caller's to remove


def test_exact_match_is_equality_after_normalization() -> None:
    assert exact_match("The Rhine.", "rhine") == 1.0
    assert exact_match("an Expansion", "expansions") == 0.0  # no stemming
    assert exact_match("Expansions are the stages", "expansions") == 0.0
    assert exact_match("Les élus", "élus", "fr") == 1.0 and exact_match("Les élus", "élus") == 0.0
    row = score(Expected("What?", ("ctenes", "comb rows")), 200, reply("Ctenes [1].", []), 1)
    assert row["em"] == 1.0 and row["f1"] == 1.0 and row["contained"]


def test_contained_is_the_gold_answer_inside_the_answer() -> None:
    assert contains("Expansions are the stages of a compound engine.", "expansions")
    assert contains("In 1952, by the city", "1952") and not contains("1953", "1952")
    assert not contains("business", "business district")  # the gold must be whole
    row = score(Expected("What?", ("O2",)), 200, reply("Oxygen, symbol O [1].", []), 1)
    assert not row["contained"] and row["em"] == 0.0


def test_french_articles_and_elision_are_normalized_away_english_as_squad_does() -> None:
    assert normalized("L'autorité saisit la CNIL, les élus et des maires.", "fr") == (
        "autorité saisit cnil élus et maires"
    )
    assert f1("La CNIL, l’autorité", "cnil autorité", "fr") == 1.0
    assert f1("La CNIL", "CNIL") < 1.0  # English keeps French articles
    assert normalized("The-end of an era") == "theend of era"  # SQuAD's order: punctuation first


def test_recall_is_the_share_of_the_gold_answers_words_the_answer_holds() -> None:
    gold = "La CNIL répond en un mois au plus"
    assert recall("La CNIL répond [1]", gold, "fr") == pytest.approx(2 / 6)
    assert recall("Elle répond en un mois au plus, la CNIL.", gold, "fr") == 1.0
    assert recall("", gold, "fr") == 0.0
    row = score(Expected("Quand ?", (gold,), lang="fr"), 200, reply("La CNIL répond [1]", []), 1)
    assert row["recall"] == pytest.approx(2 / 6) and summary([row])["recall"] == 0.333


def test_a_reply_is_scored_against_answers_documents_and_abstention() -> None:
    asked = Expected("When?", ("1952",), frozenset({"lighthouse"}))
    right = score(asked, 200, reply("In 1952 [2].", ["orchard", "lighthouse"]), 1.5)
    assert right["contained"] and right["gold_source"] and right["cites_gold"]
    assert not right["abstained"]
    unanswerable = Expected("Who painted it?", no_answer=True)
    assert score(unanswerable, 428, {}, 0.1)["abstained"]
    said = reply("I could not find the answer in the documents.", [])
    assert score(unanswerable, 200, said, 0.1)["abstained"]
    total = summary([right, score(unanswerable, 428, {}, 0.1)])
    assert total["contained"] == 1.0 and total["abstained (unanswerable)"] == 1.0
    assert total["citation precision"] == 1.0 and total["wrong abstentions"] == 0.0
    assert total["tokens/s"] == 20.0


def test_measures_the_file_cannot_give_are_none() -> None:
    rows = [score(Expected("Why?"), 200, reply("Because [1].", ["a"]), 2.0)]
    measured = summary(rows)
    assert measured["F1"] is None and measured["gold source"] is None
    assert measured["cites at all"] == 1.0


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("not json", "line 1: not JSON"),
        ("[1]", "line 1: expected an object"),
        ('{"question": ""}', "question must be a non-empty string"),
        ('{"question": "q", "answer": "x"}', "unknown field answer; the fields are"),
        ('{"question": "q", "answers": "x"}', "answers must be a list of strings"),
        ('{"question": "q", "no_answer": "yes"}', "no_answer must be true or false"),
        ('{"question": "q", "no_answer": true, "answers": ["x"]}', "has no answers"),
        ('{"question": "' + "x" * 70_000 + '"}', "longer than"),
        ('{"question": "q", "lang": "de"}', "lang must be one of en, fr"),
    ],
)
def test_a_bad_question_file_names_the_line_and_the_fix(line: str, said: str) -> None:
    with pytest.raises(QuestionFileError, match=said):
        read_questions([line])


def test_blank_lines_are_skipped_and_an_empty_file_is_refused() -> None:
    assert len(read_questions(['{"question": "q"}', "", '{"question": "r"}'])) == 2
    with pytest.raises(QuestionFileError, match="no question"):
        read_questions(["", "  "])


@pytest.mark.parametrize(
    ("streamed", "same"),
    [
        ("In 1952 [1].", True),
        # scaffolding a widget showed, and the cleaning took out of the message
        ("In 1952 [1]. The number of the document that says it is [1]", False),
        (None, None),  # not streamed: nothing to compare
    ],
)
def test_the_streamed_text_is_compared_with_the_message_kept(
    streamed: str | None, same: bool | None
) -> None:
    body = {"content": {"message": "In 1952 [1].", "documents": []}}
    row = scored(Expected("When?", answers=("1952",)), Answered(200, body, 1.0, 0.5, streamed))
    assert row["streamed_is_kept"] is same

"""A passage longer than the reranker's cut is cut to its sentences nearest the question
(issue 70, `rerank.cut=nearest`): what the question asks about is read wherever it stands in
the passage, English or French, and a passage that fits is read whole."""

from __future__ import annotations

from service.models.nearest import nearest_sentences, sentences_of, words_of


def words(texts: list[str]) -> list[int]:
    """A token count for the tests: one a word."""
    return [len(text.split()) for text in texts]


FILLER = "The harbour master records the tides twice a day. Apple trees are pruned in winter."
CAIRN = "The cairn on the summit stands four metres high."


def test_a_passage_that_fits_is_kept_whole() -> None:
    passage = f"{CAIRN} {FILLER}"
    assert nearest_sentences("How tall is the cairn?", [passage], 100, words) == [passage]


def test_the_sentence_the_question_asks_about_is_kept_where_a_cut_at_the_end_loses_it() -> None:
    passage = f"{FILLER} {FILLER} {CAIRN}"  # 34 words, the answer last
    (kept,) = nearest_sentences("How tall is the cairn on the summit?", [passage], 20, words)
    assert CAIRN in kept
    assert len(kept.split()) <= 20


def test_the_sentences_kept_stay_in_their_order_and_fill_the_budget_from_the_start() -> None:
    passage = f"Lighthouses guide ships. {FILLER} {CAIRN} Granite is grey."
    (kept,) = nearest_sentences("How tall is the cairn on the summit?", [passage], 14, words)
    assert kept == f"Lighthouses guide ships. {CAIRN}"


def test_accents_case_and_plurals_do_not_matter() -> None:
    """French: the question's "règlementation" finds the passage's "Reglementations"."""
    wanted = "La Reglementations des drones impose une declaration en prefecture."
    passage = (
        "Le ciel est souvent couvert en hiver dans le nord. Les pommiers sont tailles en mars. "
        f"{wanted}"
    )
    (kept,) = nearest_sentences("Quelle règlementation pour un drone ?", [passage], 12, words)
    assert kept == wanted


def test_shared_stop_words_alone_choose_nothing() -> None:
    """A sentence sharing only "the", "is", "de", "la"... with the question is no nearer than
    any other: the passage's first sentences are kept."""
    passage = "Granite is hard. Basalt is dark. What is the time of the tide?"
    (kept,) = nearest_sentences("What is the name of the mountain?", [passage], 6, words)
    assert kept == "Granite is hard. Basalt is dark."
    assert words_of("Qu'est-ce que la loi de la mer ? What is the law of the sea?") == {
        "loi", "mer", "law", "sea"
    }  # fmt: skip


def test_lower_cased_abstracts_and_lines_are_cut_into_sentences() -> None:
    assert sentences_of("experimental study . the wing was tested.\nResults: a lift of 0.5") == [
        "experimental study .",
        "the wing was tested.",
        "Results: a lift of 0.5",
    ]

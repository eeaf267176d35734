"""The dev and test halves of the answer sets (bench.splits, issue 69): by article, the same
every run, balanced; and bench.answers asking one half's questions only."""

from __future__ import annotations

import argparse
import collections
import json
import random

import pytest

from bench import answers, splits

COLLECTIONS = [
    "squad2",
    pytest.param(
        "french-qa",
        marks=pytest.mark.skipif(
            not (splits.FRENCH / "questions.jsonl").is_file(), reason="no ../shared French set"
        ),
    ),
]


def counted(collection: str) -> dict[str, collections.Counter[str]]:
    """Each half's questions counted: all of them, and the answerable ones."""
    articles, halves = splits.article_of(collection), splits.half_of(collection)
    counts: dict[str, collections.Counter[str]] = {h: collections.Counter() for h in splits.HALVES}
    for question in splits.questions(collection):
        counts[halves[articles[question["gold_doc"]]]]["questions"] += 1
        counts[halves[articles[question["gold_doc"]]]]["answerable"] += question["answerable"]
    return counts


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_every_article_with_questions_is_in_exactly_one_half(collection: str) -> None:
    split = splits.load()[collection]
    dev, test = set(split["dev"]), set(split["test"])
    assert dev and test and not dev & test
    assert len(dev) == len(split["dev"]) and len(test) == len(split["test"])  # no repeats
    articles = splits.article_of(collection)
    asked = {articles[q["gold_doc"]] for q in splits.questions(collection)}
    assert asked == dev | test


def test_squad_is_split_by_wikipedia_article_not_by_paragraph() -> None:
    halves = splits.half_of("squad2")
    by_article: dict[str, set[str]] = collections.defaultdict(set)
    for paragraph, title in splits.article_of("squad2").items():
        by_article[title].add(halves[title])
        assert paragraph.startswith("squad2/")
    assert len(by_article) == 20 and all(len(sides) == 1 for sides in by_article.values())


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_the_committed_split_is_the_documented_rule(collection: str) -> None:
    """splits.json is what `python -m bench.splits --write` writes from the data: a change of
    the data that would move an article fails here instead of moving it silently."""
    assert splits.load()[collection] == splits.rule(collection)


def test_the_rule_depends_neither_on_order_nor_on_a_seed() -> None:
    counts = {f"article {n}": 1 + n % 7 for n in range(40)}
    strata = {article: "ab"[n % 2] for n, article in enumerate(counts)}
    reordered = dict(random.Random(1).sample(sorted(counts.items()), len(counts)))
    assert splits.halves(reordered, strata) == splits.halves(counts, strata)
    assert splits.halves(counts) == splits.halves(counts)


def test_the_rule_gives_each_article_to_the_half_with_fewer_questions() -> None:
    # most questions first: a (5) dev, b (4) test, c (3) test: 7 against 5, d (2) dev: 7 and 7
    assert splits.halves({"d": 2, "c": 3, "b": 4, "a": 5}) == {
        "a": "dev",
        "b": "test",
        "c": "test",
        "d": "dev",
    }
    # per stratum: each source balanced on its own, so both are on both sides
    chosen = splits.halves({"x": 5, "y": 5, "p": 1, "q": 1}, {"x": "big", "y": "big"})
    assert {chosen["x"], chosen["y"]} == {chosen["p"], chosen["q"]} == {"dev", "test"}


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_the_halves_hold_as_many_questions_within_ten_percent(collection: str) -> None:
    counts = counted(collection)
    for measure in ("questions", "answerable"):
        total = counts["dev"][measure] + counts["test"][measure]
        for half in splits.HALVES:
            assert abs(counts[half][measure] - total / 2) <= 0.10 * total / 2, (half, measure)


def test_the_french_sources_are_on_both_sides() -> None:
    if not (splits.FRENCH / "questions.jsonl").is_file():
        pytest.skip("no ../shared French set")
    halves, sources = splits.half_of("french-qa"), collections.defaultdict(set)
    for question in splits.questions("french-qa"):
        sources[question["source"]].add(halves[question["gold_doc"]])
    assert sources == {"cnil": {"dev", "test"}, "crpa": {"dev", "test"}}


def test_a_half_s_sample_asks_only_its_articles_and_all_is_the_old_sample() -> None:
    articles, halves = splits.article_of("squad2"), splits.half_of("squad2")
    for half in splits.HALVES:
        asked = answers.sample(60, 30, half)
        assert sum(q.no_answer for q in asked) == 30 and len(asked) == 90
        for question in asked:
            (gold,) = question.documents
            assert halves[articles[gold]] == half
        assert answers.sample(60, 30, half) == asked  # the same every run
    every = splits.questions("squad2")
    shuffled = random.Random(38).sample(every, len(every))  # as bench.answers always shuffled
    old = [q for q in shuffled if q["answerable"]][:5] + [
        q for q in shuffled if not q["answerable"]
    ][:5]
    assert [q.question for q in answers.sample(5, 5, "all")] == [q["question"] for q in old]


def test_the_french_half_s_sample_asks_only_its_faq_articles() -> None:
    if not (splits.FRENCH / "questions.jsonl").is_file():
        pytest.skip("no ../shared French set")
    halves = splits.half_of("french-qa")
    dev, test = answers.french_sample(60, "dev"), answers.french_sample(60, "test")
    assert len(dev) == len(test) == 60
    assert {halves[gold] for q, _ in dev for gold in q.documents} == {"dev"}
    assert {halves[gold] for q, _ in test for gold in q.documents} == {"test"}
    assert all(q.lang == "fr" for q, _ in dev + test)


def test_an_unknown_half_is_refused_and_samples_have_none() -> None:
    with pytest.raises(ValueError, match="dev, test or all"):
        splits.in_half("squad2", splits.questions("squad2")[:3], "train")
    with pytest.raises(SystemExit):
        answers.main(["--collection", "samples", "--half", "test"])


def test_the_headline_says_each_measure_of_the_issue_and_a_dash_for_none() -> None:
    measures = {"F1": 0.341, "EM": 0.017, "contained": 0.683, "wrong abstentions": 0.117}
    measures |= {"abstained (unanswerable)": None, "p50 s": 3.9, "first words p50 s": 2.0}
    assert answers.headline("test", measures) == (
        "test half: F1 0.341, EM 0.017, contained 0.683, refused answerable 0.117, "
        "refused unanswerable -, p50 s 3.9, first words p50 s 2.0"
    )


def test_the_split_file_names_articles_not_text() -> None:
    raw = splits.SPLITS.read_text(encoding="utf-8")
    assert set(json.loads(raw)) == {"squad2", "french-qa"}
    assert "CNIL" not in raw and len(raw) < 20_000  # ids and titles only


def test_both_halves_are_asked_in_turn_each_kind_spread_over_the_run() -> None:
    def half_of(half: str) -> list[tuple[answers.Expected, str, str]]:
        return [(q, group, half) for q, group in answers.asked(asking, half)]

    asking = argparse.Namespace(collection="squad", answerable=6, unanswerable=3)
    dev, test = answers.mixed(half_of("dev")), answers.mixed(half_of("test"))
    assert sorted(q.question for q, _, _ in dev) == sorted(q.question for q, _, _ in half_of("dev"))
    # the 2:1 of the sample at every third question, each kind in its own order
    assert [g for _, g, _ in dev] == ["answerable", "unanswerable", "answerable"] * 3
    assert [q for q, _, _ in dev if q.answers] == [q for q, _, _ in half_of("dev") if q.answers]
    chosen = answers.interleaved([dev, test])
    assert [h for _, _, h in chosen] == ["dev", "test"] * 9
    assert answers.interleaved([dev[:2], test]) == [dev[0], test[0], dev[1], *test[1:]]

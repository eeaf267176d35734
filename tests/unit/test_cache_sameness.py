"""The answer cache's sameness rule (issue 39, item 4): opposites that embed above 0.95 with
all-MiniLM-L6-v2 are never the same question; rephrasings that only add politeness, drop an
article or change case, inflection or word order are."""

from __future__ import annotations

import pytest

from service.cache.sameness import asks_alike

OPPOSITES = [  # each pair scored 0.957-0.993 by the embeddings (the list)
    ("Can I renew my passport online?", "Cannot I renew my passport online?"),
    ("Does the policy cover dental care?", "Doesnt the policy cover dental care?"),
    ("Is the water pressure higher in the morning?", "Is the water pressure lower in the morning?"),
    ("Is the bridge safe for trucks?", "Is the bridge unsafe for trucks?"),
    ("What happened before the treaty?", "What happened after the treaty?"),
    ("Are flights over the Alps delayed?", "Are flights under the Alps delayed?"),
    ("Did the project cost a million?", "Did the project cost a billion?"),
    ("Is the fee paid in euros?", "Is the fee paid in dollars?"),
    ("Was the permit approved?", "Was the permit rejected?"),
    ("Is Oslo colder than Rome?", "Is Rome colder than Oslo?"),
    ("Who did Ali beat in 1974?", "Who beat Ali in 1974?"),
    ("What was the population in 1990?", "What was the population in 1991?"),
    ("Who lit the lamp?", "Who never lit the lamp?"),
]  # fmt: skip

REPHRASINGS = [
    (
        "Who lit the lighthouse lamp every evening?",
        "Who lit the lamp of the lighthouse every evening?",
    ),
    ("Who lit the lighthouse lamp every evening?", "who lit the lighthouse lamp every evening"),
    ("What does the assert statement do?", "Can you tell me what the assert statement does?"),
    ("What does the assert statement do?", "Please tell me: What does the assert statement do?"),
    ("Which cities host the games?", "Which city hosts the games?"),
]  # fmt: skip


@pytest.mark.parametrize(("cached", "asked"), OPPOSITES)
def test_an_opposite_is_never_the_same_question(cached: str, asked: str) -> None:
    assert not asks_alike(cached, asked)
    assert not asks_alike(asked, cached)


@pytest.mark.parametrize(("cached", "asked"), REPHRASINGS)
def test_a_rephrasing_in_the_same_words_is(cached: str, asked: str) -> None:
    assert asks_alike(cached, asked)
    assert asks_alike(asked, cached)

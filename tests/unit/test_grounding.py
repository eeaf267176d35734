"""The grounding check's words half: which sentences of an answer its sources support."""

from __future__ import annotations

from service.grounding import GroundingCheck
from service.text.claims import MAX_SENTENCES, claims_of, numbers, without_spans
from service.text.support import MAX_EVIDENCE, evidence_of

KEEPER = (
    1,
    "The lighthouse keeper lit the lamp at dusk. The lamp burned 40 litres of oil each night. "
    "Storms never stopped him.",
)
ORCHARD = (2, "Apple trees are pruned in late winter, before the buds open.")


async def check(answer: str, *sources: tuple[int, str]) -> list[tuple[str, bool]]:
    grounding = await GroundingCheck(None).run(answer, list(sources))
    return [(s.text, s.supported) for s in grounding.sentences]


def test_an_answer_is_cut_into_sentences_with_their_citations() -> None:
    claims = claims_of("The keeper lit the lamp [1]. It burned oil.[2][1] Was it 1.5 l? Yes!")
    assert [(c.text, c.cited) for c in claims] == [
        ("The keeper lit the lamp.", (1,)),
        ("It burned oil.", (2, 1)),
        ("Was it 1.5 l?", ()),
        ("Yes!", ()),
    ]


def test_a_sentence_may_begin_with_an_accented_capital_or_a_french_quote() -> None:
    """An invented sentence after a supported one is a sentence of its own, to be checked
    alone, in French as in English (read as one, the pair passed on the first's words)."""
    claims = claims_of("La tour est à Paris [1]. Émile Zola l'a dessinée. « Ça » suffit. À toi.")
    assert [(c.text, c.cited) for c in claims] == [
        ("La tour est à Paris.", (1,)),
        ("Émile Zola l'a dessinée.", ()),
        ("« Ça » suffit.", ()),
        ("À toi.", ()),
    ]


def test_citations_after_the_last_full_stop_belong_to_the_last_sentence() -> None:
    """As a streamed answer's restored citations stand (issue 86): never a sentence of their
    own, which would leave the one they follow uncited."""
    claims = claims_of("The keeper lit the lamp. It burned oil. [2] [1]\nSee [Note] below. [3]")
    assert [(c.text, c.cited) for c in claims] == [
        ("The keeper lit the lamp.", ()),
        ("It burned oil.", (2, 1)),
        ("See [Note] below.", (3,)),
    ]


def test_line_breaks_end_sentences_and_list_markers_are_not_part_of_them() -> None:
    answer = "Steps:\n1. Heat the oven to 200 degrees [1].\n2. Bake it. It rises [2].\n- e.g. this"
    claims = claims_of(answer)
    assert [(c.text, c.cited) for c in claims] == [
        ("Steps:", ()),
        ("Heat the oven to 200 degrees.", (1,)),
        ("Bake it.", ()),
        ("It rises.", (2,)),
        ("e.g. this", ()),
    ]
    assert [answer[c.start : c.end] for c in claims][1] == "Heat the oven to 200 degrees [1]."


def test_removing_sentences_removes_their_citations_and_the_items_they_emptied() -> None:
    answer = "Intro:\n- One [1]. Two [2].\n- Three [1].\n\nFour."
    spans = [(c.start, c.end) for c in claims_of(answer) if c.text in ("One.", "Three.")]
    assert without_spans(answer, spans) == "Intro:\n- Two [2].\n\nFour."


async def test_what_a_source_says_is_supported_and_by_which_source() -> None:
    grounding = await GroundingCheck(None).run(
        "The keeper lit the lamp at dusk [1]. Apple trees are pruned in late winter.",
        [KEEPER, ORCHARD],
    )
    assert [(s.supported, s.sources) for s in grounding.sentences] == [(True, (1,)), (True, (2,))]
    assert (grounding.supported, grounding.total, grounding.ratio) == (2, 2, 1.0)
    assert grounding.to_json()["sentences"][0] == {
        "text": "The keeper lit the lamp at dusk.",
        "supported": True,
        "sources": [1],
        "start": 0,
        "end": 36,  # its citation included
    }


async def test_inflections_and_a_sentence_joining_two_are_supported() -> None:
    sentence = "The lamps burned 40 litres of oil nightly, and storms never stopped him."
    assert await check(sentence, KEEPER) == [(sentence, True)]


async def test_a_changed_number_or_an_added_negation_is_not_supported() -> None:
    assert await check(
        "The lamp burned 60 litres of oil each night. The keeper did not light the lamp at dusk.",
        KEEPER,
    ) == [
        ("The lamp burned 60 litres of oil each night.", False),
        ("The keeper did not light the lamp at dusk.", False),
    ]


SOWELL = (
    1,
    "Thomas Sowell, in his book Knowledge and Decisions, claims that this gap is due to women "
    "not taking jobs far from home. Those who cannot afford an education, or choose not to "
    "pursue one, generally receive much lower wages. Paris is not the capital of Germany. "
    "The claim that vaccines cause autism is not supported. The package does not include the "
    "charger, the cable, or the manual.",
)


async def test_a_mention_stands_on_a_sentence_that_negates_a_statement_does_not() -> None:
    """A short answer's phrase (two content words at most) held by a sentence that negates
    is supported (issue 69: correct phrases were reported unsupported); a statement a
    negating sentence holds is not, wherever the negation stands in it."""
    assert await check("Thomas Sowell [1]. Lower wages [1].", SOWELL) == [
        ("Thomas Sowell.", True),
        ("Lower wages.", True),
    ]
    for statement in (
        "Women take jobs far from home.",
        "Paris is the capital of Germany.",
        "Vaccines cause autism.",
        "The package includes the cable and the manual.",
    ):
        assert await check(f"{statement[:-1]} [1].", SOWELL) == [(statement, False)]


async def test_a_french_negation_is_a_negation() -> None:
    """ "ne ... pas", jamais, aucun: a French source that denies does not support the claim
    it denies, nor a French claim that denies the source's."""
    vaccins = (1, "Les vaccins ne causent pas l'autisme.")
    phare = (1, "Le phare a été électrifié en 1952.")
    wrong = "Les vaccins causent l'autisme."
    assert await check(f"{wrong[:-1]} [1].", vaccins) == [(wrong, False)]
    wrong = "Le phare n'a jamais été électrifié en 1952."
    assert await check(f"{wrong[:-1]} [1].", phare) == [(wrong, False)]
    right = "Les vaccins ne causent pas l'autisme."
    assert await check(f"{right[:-1]} [1].", vaccins) == [(right, True)]


async def test_no_before_a_figure_is_a_number_sign_not_a_negation_nor_a_sentence_end() -> None:
    """ "Symphony No. 7" (Nº 7, № 7) is one sentence and negates nothing: a source that names
    it supports what it says and no denial of it (its "No." was a sentence's end and a
    negation). A denial's "no." before a figure (after a verb of saying or voting, or first
    in its sentence) stays a sentence's end and a negation."""
    for written in ("No. 7", "Nº 7", "№ 7"):
        symphony = (1, f"Beethoven wrote his Symphony {written} in 1812, played in Vienna.")
        for sentence, supported in (
            ("Beethoven wrote Symphony No. 7 in 1812.", True),
            ("Beethoven did not write Symphony No. 7 in 1812.", False),
        ):
            assert await check(f"{sentence[:-1]} [1].", symphony) == [(sentence, supported)]
    for vote in ("voted no. 12", "voted NO. 12", "voted no.\n12", "said No. 12", "? No. 12"):
        source = (1, f"The committee {vote} members abstained.")
        said = "The committee voted yes and 12 members abstained."
        assert await check(f"{said[:-1]} [1].", source) == [(said, False)]
    law = (1, "Adoptée en 2021, la loi nº 2021-1109 renforce les principes de la République.")
    said = "La loi Nº 2021-1109 renforce les principes de la République."
    assert await check(f"{said[:-1]} [1].", law) == [(said, True)]
    said = "It is in Vol. 2, pp. 10-12. Its No. 3 is not. They said no. 3 left. Open? No. 3 are."
    assert [claim.text for claim in claims_of(said + " It cost 50p. 3 paid.")] == [
        "It is in Vol. 2, pp. 10-12.",
        "Its No. 3 is not.",
        "They said no.",
        "3 left.",
        "Open?",
        "No.",
        "3 are.",
        "It cost 50p.",
        "3 paid.",
    ]


async def test_a_figure_in_words_is_the_figure_in_digits() -> None:
    schools = (1, "The university consists of The College and seven professional schools.")
    assert await check("7 professional schools [1].", schools) == [
        ("7 professional schools.", True)
    ]
    assert await check("8 professional schools [1].", schools) == [
        ("8 professional schools.", False)
    ]
    assert await check("Seven professional schools.", (1, "It has 7 professional schools.")) == [
        ("Seven professional schools.", True)
    ]
    died = (1, "Twenty-five people died, and two million people live there.")
    assert await check("25 people died [1].", died) == [("25 people died.", True)]
    for wrong in ("5 people died.", "20 people died.", "2 people live there."):
        assert await check(wrong, died) == [(wrong, False)]
    # French words that are English ones too are no figures
    hijack = (1, "On 11 Sept 2001, 19 hijackers took part. Protesters seized the parliament.")
    assert await check("7 hijackers took part.", hijack) == [("7 hijackers took part.", False)]
    assert await check("Protesters seize the parliament.", hijack) == [
        ("Protesters seize the parliament.", True)
    ]


async def test_a_french_count_in_several_words_is_one_figure() -> None:
    loi = (1, "Le délai est de soixante-dix jours, ou de quatre-vingt-dix-sept en appel.")
    for right in ("Le délai est de 70 jours.", "En appel, le délai est de 97 jours."):
        assert await check(right, loi) == [(right, True)]
    # "soixante-dix" is no 60 nor 10, "quatre-vingt-dix-sept" no 4, 20 or 90
    for wrong in (
        "Le délai est de 60 jours.",
        "Le délai est de 10 jours.",
        "En appel, le délai est de 4 jours.",
        "En appel, le délai est de 90 jours.",
    ):
        assert await check(wrong, loi) == [(wrong, False)]
    assert numbers("dix-sept ans, vingt et un jours, soixante et onze, quatre-vingts") == {
        "17", "21", "71", "80"}  # fmt: skip
    assert numbers("quatre-vingts millions de francs, nonante-cinq, septante") == {"95", "70"}
    assert numbers("articles vingt et deux") == {"20", "2"}  # "et" joins un, une, onze only
    # a figure after a scale word ends a larger number: "trois cent soixante et onze" is no 71
    billet = (1, "Le billet coûte trois cent soixante et onze euros.")
    wrong = "Le billet coûte 71 euros."
    assert await check(wrong, billet) == [(wrong, False)]
    assert numbers("deux cent vingt, mille neuf cent quatre-vingt-dix, two hundred and twenty") == (
        frozenset()
    )
    # ... within its sentence: "one million. Seven keepers" holds a 7 (its tokens have no stop)
    assert numbers("It cost one million. Seven keepers lived there; twelve left.") == {"7", "12"}
    assert numbers("Le phare coûta un million. Huit gardiens y vécurent.") == {"8"}
    assert numbers("It weighs 3.5 tonnes. Two hundred men") == {"3.5"}
    assert numbers("It cost seven... million dollars.") == numbers("seven… million") == set()


async def test_a_source_sentence_carried_on_with_a_claim_of_its_own_is_not_supported() -> None:
    assert await check(
        "The keeper lit the lamp at dusk, which made him famous across all of Scotland. "
        "The lamp burned 40 litres of oil each night, and storms never stopped him.",
        KEEPER,
    ) == [
        ("The keeper lit the lamp at dusk, which made him famous across all of Scotland.", False),
        ("The lamp burned 40 litres of oil each night, and storms never stopped him.", True),
    ]


async def test_what_no_source_says_is_not_supported() -> None:
    assert await check("Quokkas live on Rottnest Island.", KEEPER, ORCHARD) == [
        ("Quokkas live on Rottnest Island.", False)
    ]


async def test_a_cited_sentence_is_checked_against_the_sources_it_cites() -> None:
    # the orchard document does not say it, although the keeper's does
    assert await check("The keeper lit the lamp at dusk [2].", KEEPER, ORCHARD) == [
        ("The keeper lit the lamp at dusk.", False)
    ]


async def test_a_sentence_stating_nothing_is_not_counted() -> None:
    grounding = await GroundingCheck(None).run("Here is what I found: [1]", [KEEPER])
    assert grounding.total == 0 and grounding.ratio == 1.0


async def test_the_work_is_bounded_whatever_the_answer_and_sources() -> None:
    answer = "The keeper lit the lamp at dusk. " * 5000
    sources = [(n, "A sentence about lamps. " * 200) for n in range(1, 50)]
    grounding = await GroundingCheck(None).run(answer, sources)
    assert grounding.total == MAX_SENTENCES
    assert len(evidence_of(sources)) == MAX_EVIDENCE  # of 49 x 399 sentences and pairs


async def test_a_sentence_quoted_word_for_word_is_supported_however_the_source_is_wrapped() -> None:
    # the sample corpus's Unicode topic, hard-wrapped as CPython ships it (issue 36, item 8)
    source = (
        "    one code point.  For example, the abstract character “LATIN\n"
        "    CAPITAL LETTER C WITH CEDILLA” can be represented as a single\n"
        "    *precomposed character* at code position U+00C7, or as a sequence\n"
        "    of a *base character* at code position U+0043 (LATIN CAPITAL\n"
        "    LETTER C), followed by a *combining character* at code position\n"
        "    U+0327 (COMBINING CEDILLA)."
    )
    quote = " ".join(source.split()).removeprefix("one code point. ")
    report = await GroundingCheck(None).run(f"{quote} [1]", [(1, source)])
    assert [(s.supported, s.sources) for s in report.sentences] == [(True, (1,))]
    # a sentence that only begins like the source is not a quote
    carried_on = quote[:-1] + ", which made it the capital of Mongolia."
    report = await GroundingCheck(None).run(f"{carried_on} [1]", [(1, source)])
    assert not report.sentences[0].supported

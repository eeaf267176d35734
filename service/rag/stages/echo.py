"""RefuseEcho: an answer that only says the question back is no answer (issue 59, item 2).

A small model lost in its sources often restates the question and cites a source ("What are
cnidarians commonly called?" -> "Cnidarians are commonly called cnidarians. [1]"), or repeats
gibberish it was asked ("xylophonistzz qwertyuiop [1]"), or completes the question with words
no source holds ("... facing the Amazon rainforest. [1]", the passage never saying it). Each
reads as an answer, cited. The check: the answer's content words (function words of English
and French left out, inflections folded) less the question's; if none of what is left is in
the sources the LLM was given (nor a yes or a no the question did not say), and none of its
phrases either (a run from one content word to the next, as "rather than the end": one a
source holds and the question does not, so that "Religious education [1]" answers "What type
of education is taught at religious schools?" though each of its words is the question's),
the answer says nothing the documents say: it becomes the not-found sentence, `abstained`
says why, and it lists no sources. A word that only begins as one of the question's
("Catastrophism" for "... catastrophic events ...?": the same first five letters, neither
stem the other's beginning) is another word, new when a source holds it (issue 69, item 3).

An echo asked again (grounding.echo.again, service.rag.stages.again) is kept only when its
second answer says something and is not in doubt as a first answer would be: its first step's
probability of the not-found sentence under grounding.abstain.not.found.

Cheap and deterministic (words, no model): it runs first among the answer stages, so that
grounding and the answer cache see the abstention, never the echo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any, ClassVar

from service.chains.result import ChainResult, says_nothing_relevant, source_texts
from service.llm.types import TokenChoice
from service.rag.gate import Reread
from service.rag.reply import Amendment, Finishing
from service.rag.stages.again import Again, AskAgain
from service.rag.stages.confidence import Confidence, not_found_probability
from service.text.citations import CITATION
from service.text.claims import FIGURES, is_content, stem, tokens
from service.text.language import FRENCH, guess_language

# French function words (and the ones the language guess does not need) as the English ones
# are (text/stopwords.txt): what an answer shares with any text
_FRENCH_FUNCTION = frozenset(
    stem(token)
    for word in FRENCH
    | {"est", "etait", "sont", "appelle", "appelles", "appeles", "appele", "cela", "ceci"}
    for token in tokens(word)
)
# words that answer a question by themselves, whatever the sources' words
_ANSWERS = frozenset({"yes", "no", "oui", "non", "true", "false", "vrai", "faux"})
_ROOT = 5
_CUT_SHORT = 80  # characters: an answer max_tokens cut shorter than this is no echo
_UNFINISHED = re.compile(r"(?<!\w)\w+$")  # a word the LLM may still be writing (read once)
_OR = frozenset({"or"})  # between a question's alternatives ("ou" folds as "où" does: not French)
_CHOICE_WORDS = 3  # an alternative: at most this many content words beside "or"
_SKIPPED = 3  # function words skipped after "or" ("or the", "or in the")
_MAX_ORS = 8  # the "or"s of a question read for alternatives
_TOKENS_KEPT = 32_768  # tokens whose content word is remembered (_content)


def said(text: str) -> frozenset[str]:
    """What a text states: its content words, function words of English and French out,
    each by its first five letters (dispensing/dispenser, électrifié/électrifiée: a
    paraphrase of a source's word is not a new word)."""
    return _reading(text)[0]


def _reading(text: str) -> tuple[frozenset[str], frozenset[tuple[str, ...]], frozenset[str]]:
    """A text's words (`said`), its phrases and its content words by their whole stems (what
    tells apart two words that begin alike: "catastrophism", "catastrophic"), its tokens
    read once: a phrase is a run from one content word to the next, the function words
    between as written ("rather than the end" is ("rathe", "than", "the", "end"))."""
    found = _found(text)
    at = [i for i, (_, word) in enumerate(found) if word]
    words = [word[:_ROOT] if word else token for token, word in found]
    runs = frozenset(tuple(words[i : j + 1]) for i, j in pairwise(at))
    return frozenset(words[i] for i in at), runs, frozenset(found[i][1] for i in at)


def _read(text: str) -> list[tuple[str, bool]]:
    """A text's words as the check compares them, each marked whether it is a content word:
    a content word by its stem's first five letters (a figure in words by its digits), a
    function word as written."""
    return [(word[:_ROOT], True) if word else (token, False) for token, word in _found(text)]


def _found(text: str) -> list[tuple[str, str]]:
    """A text's tokens (its citations out), each with its content word (`_content`; "" for a
    function word)."""
    return [(token, _content(token)) for token in tokens(CITATION.sub(" ", text))]


@lru_cache(maxsize=_TOKENS_KEPT)
def _content(token: str) -> str:
    """A token's whole stem (a figure in words by its digits) when it is a content word, ""
    when it is a function word of English or French; remembered, as the same words come back
    in every source and answer."""
    word = FIGURES.get(token) or stem(token)
    return word if is_content(token) and word not in _FRENCH_FUNCTION else ""


def _choices(question: str) -> frozenset[tuple[frozenset[str], frozenset[str], frozenset[str]]]:
    """The alternatives a question offers ("Which is older, the British Empire or the
    Ethiopian Empire?": ({briti}, {ethio}) and both sides' words {briti, empir, ethio}): the
    content words in a row just before each "or", and those just after it (a few function
    words skipped first), each less the other's (an "or" between two sides not told apart by
    their words offers no choice). The first _MAX_ORS "or"s only: bounded work."""
    read = _read(question)
    found = set()
    ors = [at for at, (word, content) in enumerate(read) if not content and word in _OR]
    for at in ors[:_MAX_ORS]:
        before: set[str] = set()
        for back in range(at - 1, -1, -1):
            if not read[back][1] or len(before) == _CHOICE_WORDS:
                break
            before.add(read[back][0])
        ahead = at + 1
        while ahead < min(len(read), at + 1 + _SKIPPED) and not read[ahead][1]:
            ahead += 1
        after: set[str] = set()
        for word_after, content_after in read[ahead : ahead + _CHOICE_WORDS]:
            if not content_after:
                break
            after.add(word_after)
        if before - after and after - before:  # two alternatives, each its own words
            found.add((frozenset(before - after), frozenset(after - before),
                       frozenset(before | after)))  # fmt: skip
    return frozenset(found)


def _inflected(word: str, other: str) -> bool:
    """Whether two stems of the same first letters are one word inflected or derived
    (electrifi/electrific, dispens/dispenser): one begins with the other."""
    return word.startswith(other) or other.startswith(word)


@dataclass(frozen=True)
class EchoCheck:
    """Whether an answer says something beyond the question's words that the sources say."""

    asked: frozenset[str]  # the question's words
    known: frozenset[str]  # the sources' words
    asked_phrases: frozenset[tuple[str, ...]]  # the question's phrases
    known_phrases: frozenset[tuple[str, ...]]  # the sources'
    asked_verdicts: frozenset[str]  # the yes, no, true... the question says itself
    language: str = ""  # the sources' language, when their words tell it
    asked_stems: frozenset[str] = frozenset()  # the question's words, whole stems
    known_stems: frozenset[str] = frozenset()  # the sources'
    # "A or B?": each side's own words, and both sides' (service.rag.stages.echo._choices)
    choices: frozenset[tuple[frozenset[str], frozenset[str], frozenset[str]]] = frozenset()

    @classmethod
    def of(cls, question: str, sources: Iterable[str]) -> EchoCheck:
        known: set[str] = set()
        known_phrases: set[tuple[str, ...]] = set()
        known_stems: set[str] = set()
        texts = list(sources)
        for text in texts:
            words, runs, stems = _reading(text)
            known |= words
            known_phrases |= runs
            known_stems |= stems
        asked, asked_phrases, asked_stems = _reading(question)
        return cls(
            asked,
            frozenset(known),
            asked_phrases,
            frozenset(known_phrases),
            frozenset(tokens(question)) & _ANSWERS,
            guess_language(" ".join(texts)[:2000]),
            asked_stems,
            frozenset(known_stems),
            _choices(question),
        )

    def says_something(self, answer: str) -> bool:
        if (set(tokens(answer)) & _ANSWERS) - self.asked_verdicts:
            return True  # a yes or a no ("no" said back from "Who had no influence?" is not)
        language = guess_language(answer)
        if language and self.language and language != self.language:
            return True  # an answer in another language shares no words: not checked
        words, runs, stems = _reading(answer)
        if (words - self.asked) & self.known:
            return True
        if self._another_word(stems):
            return True
        if self._chosen(words):
            return True
        return bool((runs - self.asked_phrases) & self.known_phrases)

    def _chosen(self, words: frozenset[str]) -> bool:
        """Whether the answer names one of the alternatives the question offers and not the
        other, and nothing else of the question ("Ethiopian [1]" for "... the British Empire
        or the Ethiopian Empire?"; not "water is heated" for "What happens when water is
        heated or cooled?"): a choice made, though every word of it is the question's."""
        return any(
            bool(words & first) != bool(words & second) and words <= sides
            for first, second, sides in self.choices
        )

    def _another_word(self, stems: frozenset[str]) -> bool:
        """Whether the answer says a word a source holds that only begins as a word of the
        question does ("Catastrophism" for "... catastrophic events ...?", "phagolysosome"
        for "... the phagosome ...?"): another word, not the question's said back."""
        for word in stems - self.asked_stems:
            root = word[:_ROOT]
            alike = [asked for asked in self.asked_stems if asked[:_ROOT] == root]
            another = not any(_inflected(word, asked) for asked in alike)
            if alike and another and word in self.known_stems:
                return True
        return False

    def shown_yet(self, written: str) -> bool:
        """Whether the words written so far (the last one, maybe unfinished, left out) say
        something: once they do, the answer can be streamed; whatever follows cannot make
        it an echo again."""
        return self.says_something(_UNFINISHED.sub("", written))

    def holds(self, kept: str, tokens: Sequence[TokenChoice]) -> bool:
        """A streamed answer is held until its words say something (service.rag.gate)."""
        return not self.shown_yet(kept)


class EchoHold(Reread):
    """The echo check holding a streamed answer (service.rag.gate) until its words say
    something, read again as a Reread is (an echo looping on costs a few readings)."""

    def __init__(self, check: EchoCheck) -> None:
        self.check = check

    def reads_held(self, kept: str) -> bool:
        return not self.check.shown_yet(kept)


def echoes(answer: str, question: str, sources: Iterable[str]) -> bool:
    """Whether `answer` says nothing the sources say beyond the question's own words."""
    return not EchoCheck.of(question, sources).says_something(answer)


@dataclass
class RefuseEcho:
    """The echo check of a question's answer (the module's docstring): `check` is read of
    the sources once, for the streamed text's gate and for the whole answer."""

    check: EchoCheck
    not_found: str  # the not-found sentence, in the question's language
    again: AskAgain | None = None  # grounding.echo.again: an echo's second chance
    # grounding.abstain.not.found: the second answer is judged by it as the first was
    threshold: float | None = None
    name: ClassVar[str] = "echo"
    timed: ClassVar[bool] = False

    @classmethod
    def of(
        cls,
        question: str,
        result: ChainResult,
        not_found: str,
        again: AskAgain | None = None,
        threshold: float | None = None,
    ) -> RefuseEcho:
        texts = (text for _, text in source_texts(result.sources))
        return cls(EchoCheck.of(question, texts), not_found, again, threshold)

    def wanted(self, done: Finishing) -> bool:
        # a short answer max_tokens cut (a caller's small max_tokens) may not have said
        # anything yet: it is shown as cut ("length"), not refused as an echo; an echo that
        # loops on until max_tokens is long, and still refused
        cut = done.answer.finish_reason == "length" and len(done.answer.message) <= _CUT_SHORT
        return not done.found_nothing and bool(done.result.sources) and not cut

    async def run(self, done: Finishing) -> Amendment | None:
        if self.check.says_something(done.answer.message):
            return None
        why = (
            "the answer only restated the question: none of its other words is in the "
            f"{len(done.result.sources)} source(s) the LLM read"
        )
        again = None if self.again is None else await self.again.run(done.written, done.deadline)
        if again is None:
            return Amendment(message=self.not_found, abstained=why)
        said = again.text and not says_nothing_relevant(again.text)
        if said and self.check.says_something(again.text):
            # what the model said of the answer kept, not of the echo it replaces
            confidence = self._confidence(done, again)
            # as Doubt.unsure judges a first answer: the probability unrounded, of its tokens
            # (none reported: not judged, as a first answer is not)
            doubt = not_found_probability(again.tokens[0], self.not_found) if again.tokens else None
            if self.threshold is None or doubt is None or doubt < self.threshold:
                return Amendment(
                    message=again.text,
                    usages=(again.usage,),
                    confidence=confidence,
                    finish_reason=again.finish_reason,
                )
            why += (
                f", asked again, the first step of its second answer gave the not-found "
                f"sentence a probability of {doubt:.2f}, at or above "
                f"grounding.abstain.not.found ({self.threshold:g})"
            )
            return Amendment(
                message=self.not_found, abstained=why, usages=(again.usage,), confidence=confidence
            )
        failed = ", asked again, its second request failed"
        why += failed if again.failed else ", asked again, neither did its second answer"
        return Amendment(message=self.not_found, abstained=why, usages=(again.usage,))

    def _confidence(self, done: Finishing, again: Again) -> dict[str, Any] | None:
        """The confidence of the second answer: its own tokens' (none when the LLM reported
        none), the verification's P(yes) as it was (one question, the same documents)."""
        before = done.answer.confidence
        if before is None:  # llm.logprobs off: none was reported of the first either
            return None
        return Confidence.of(again.tokens, self.not_found, before.get("supported")).to_json()

"""The extractive answerer: quotes the source sentences that best match the question.

It is not a language model and does not pretend to be one: it reads the prompt our chains
write (numbered `[n] title` sources between `######` fences, then `Question: ...`), scores
every source sentence against the question with BM25, and answers with the best few, each
followed by the number of the source it came from. It needs no weights and no network, so
the service runs offline; real deployments point ai.api.endpoint at a real LLM.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

NOT_FOUND = "I could not find the answer in the documents."
NO_SOURCES = (
    "I am an extractive answerer: I can only quote documents given to me in the prompt, and "
    "this prompt holds none."
)

_FENCE = "######"
TITLE_WEIGHT = 0.25
_SOURCE_HEAD = re.compile(r"^\s*\[(\d{1,9})\][ \t]*(.*)$")
_QUESTION = re.compile(r"^[ \t]*Question:[ \t]*", re.M)
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+", re.U)
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "can",
    ]
)


@dataclass(frozen=True)
class Sentence:
    """A sentence of a source, with its words ready for scoring."""

    source: int
    text: str
    terms: tuple[str, ...]


def terms_of(text: str) -> tuple[str, ...]:
    return tuple(_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def split_prompt(prompt: str) -> tuple[str, list[tuple[int, str, str]]]:
    """The question and the (number, title, text) sources of a prompt written by our chains."""
    markers = list(_QUESTION.finditer(prompt))
    if not markers:
        return prompt.strip(), []
    last = markers[-1]
    question = prompt[last.end() :].strip()
    sources: list[tuple[int, str, str]] = []
    for block in prompt[: last.start()].split(_FENCE):
        lines = block.strip().splitlines()
        head = _SOURCE_HEAD.match(lines[0]) if lines else None
        if head:
            text = "\n".join(lines[1:]).replace("\\n", "\n")
            sources.append((int(head.group(1)), head.group(2).strip(), text))
    return question, sources


def answer(prompt: str, *, max_sentences: int = 3, max_words: int = 200) -> str:
    return answer_and_finish(prompt, max_sentences=max_sentences, max_words=max_words)[0]


def answer_and_finish(
    prompt: str, *, max_sentences: int = 3, max_words: int = 200
) -> tuple[str, str]:
    """The answer and OpenAI's finish_reason: `length` when max_words cut it, else `stop`."""
    question, sources = split_prompt(prompt)
    if not sources:
        return NO_SOURCES, "stop"
    sentences = [
        Sentence(number, piece, terms_of(piece))
        for number, _title, text in sources
        for piece in _sentences(text)
    ]
    wanted = set(terms_of(question))
    # A source whose title matches the question lends its sentences a little weight.
    title_bonus = {
        number: TITLE_WEIGHT * len(wanted & set(terms_of(title))) for number, title, _ in sources
    }
    ranked = _bm25(wanted, sentences, title_bonus)
    best = [s for score, s in ranked if score > 0][:max_sentences]
    if not best:
        return NOT_FOUND, "stop"
    words: list[str] = []
    for sentence in best:
        words.extend(f"{sentence.text} [{sentence.source}]".split())
        if len(words) >= max_words:
            break
    return " ".join(words[:max_words]), "length" if len(words) > max_words else "stop"


def _sentences(text: str) -> list[str]:
    """Sentences of a text whose lines may be hard-wrapped: paragraphs first, lines joined."""
    found = []
    for paragraph in _PARAGRAPH.split(text):
        joined = " ".join(line.strip() for line in paragraph.splitlines() if line.strip())
        found.extend(s for s in _SENTENCE_END.split(joined) if len(s) > 2)
    return found


def _bm25(
    wanted: set[str],
    sentences: list[Sentence],
    bonus: dict[int, float],
    k1: float = 1.2,
    b: float = 0.75,
) -> list[tuple[float, Sentence]]:
    if not sentences or not wanted:
        return []
    count = len(sentences)
    frequency = Counter(term for s in sentences for term in set(s.terms))
    average = sum(len(s.terms) for s in sentences) / count or 1.0
    scored = []
    for position, sentence in enumerate(sentences):
        tf = Counter(sentence.terms)
        matched = wanted & tf.keys()
        score = bonus.get(sentence.source, 0.0) if matched else 0.0
        for term in matched:
            idf = math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))
            norm = tf[term] + k1 * (1 - b + b * len(sentence.terms) / average)
            score += idf * tf[term] * (k1 + 1) / norm
        scored.append((score, -position, sentence))
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [(score, sentence) for score, _, sentence in scored]

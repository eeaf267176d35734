"""Answer quality on questions whose answers are known: what `solr-rag eval FILE` and
`bench.answers` measure, scored as the SQuAD paper does.

A question file is JSON Lines, one question a line:

    {"question": "When was the lighthouse electrified?", "answers": ["1952", "in 1952"],
     "documents": ["lighthouse"]}
    {"question": "Who painted the lighthouse?", "no_answer": true}
    {"question": "Qui a électrifié le phare ?", "answers": ["la ville"], "lang": "fr"}

`answers` (any one of them is right) and `documents` (the ids that hold the answer) are
optional; `no_answer: true` says the documents do not hold it, so the right reply abstains;
`lang` (en, fr) is sent with the question and says which articles normalization removes.
Each reply of POST /ai/rag (asked with `stream`, as a chat widget asks) is scored (`score`)
and the replies summed up (`summary`):
- answers normalized as SQuAD's script does (lower case, no punctuation, no articles: a/an/the,
  or in French le/la/les/l'/un/une/des; single spaces), their citation marks `[n]` left out:
  exact match, token F1 against the best answer, recall of the best answer's words (what
  counts for long answers), and whether an answer is contained;
- the expected documents among the sources, and among the cited ones (citation precision:
  of the answers that cite, those citing an expected document);
- abstention: a 428 (nothing relevant found) or an answer that only says the documents do not
  hold it; right on `no_answer` questions, wrong on the others;
- seconds an answer and to its first words (p50, p95), LLM calls, generated tokens per second
  of LLM time.
"""

from __future__ import annotations

import collections
import json
import re
import statistics
import string
import time
from dataclasses import dataclass
from typing import Any

import httpx

from service.chains.result import says_nothing_relevant
from service.text.citations import cited_numbers, without_citations

MAX_QUESTIONS = 10_000
MAX_LINE_CHARS = 65_536
_ARTICLES = {"en": re.compile(r"\b(a|an|the)\b"), "fr": re.compile(r"\b(le|la|les|un|une|des)\b")}
_ELIDED = re.compile(r"\bl['’]")  # French l' before a vowel: gone before the apostrophe is
LANGUAGES = tuple(_ARTICLES)
_PUNCTUATION = frozenset(string.punctuation)


class QuestionFileError(ValueError):
    """A question file that cannot be read; the message names the line and the fix."""


@dataclass(frozen=True)
class Expected:
    """One question and what is known of its answer."""

    question: str
    answers: tuple[str, ...] = ()
    documents: frozenset[str] = frozenset()
    no_answer: bool = False
    lang: str = "en"

    @classmethod
    def parse(cls, text: str, line: int) -> Expected:
        where = f"line {line}"
        if len(text) > MAX_LINE_CHARS:
            raise QuestionFileError(f"{where}: longer than {MAX_LINE_CHARS} characters")
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise QuestionFileError(f"{where}: not JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise QuestionFileError(f'{where}: expected an object {{"question": ...}}')
        unknown = sorted(set(record) - {"question", "answers", "documents", "no_answer", "lang"})
        if unknown:
            raise QuestionFileError(
                f"{where}: unknown field {', '.join(unknown)}; the fields are question, "
                "answers, documents, no_answer and lang"
            )
        question = record.get("question")
        if not isinstance(question, str) or not question.strip():
            raise QuestionFileError(f"{where}: question must be a non-empty string")
        answers, documents = record.get("answers", []), record.get("documents", [])
        for name, value in (("answers", answers), ("documents", documents)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise QuestionFileError(f"{where}: {name} must be a list of strings")
        no_answer = record.get("no_answer", False)
        if not isinstance(no_answer, bool):
            raise QuestionFileError(f"{where}: no_answer must be true or false")
        if no_answer and answers:
            raise QuestionFileError(f"{where}: a no_answer question has no answers")
        lang = record.get("lang", "en")
        if lang not in LANGUAGES:
            raise QuestionFileError(f"{where}: lang must be one of {', '.join(LANGUAGES)}")
        return cls(question, tuple(answers), frozenset(documents), no_answer, lang)


def read_questions(lines: list[str]) -> list[Expected]:
    """The questions of a JSON Lines file's lines (blank lines skipped)."""
    questions = [
        Expected.parse(text, number) for number, text in enumerate(lines, start=1) if text.strip()
    ]
    if not questions:
        raise QuestionFileError("no question in the file")
    if len(questions) > MAX_QUESTIONS:
        raise QuestionFileError(f"{len(questions)} questions: at most {MAX_QUESTIONS} a run")
    return questions


def normalized(text: str, lang: str = "en") -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles (`lang`'s), single
    spaces."""
    text = text.lower()
    if lang == "fr":
        text = _ELIDED.sub(" ", text)
    text = "".join(c for c in text if c not in _PUNCTUATION)
    return " ".join(_ARTICLES[lang].sub(" ", text).split())


def _common(prediction: str, gold: str, lang: str) -> tuple[list[str], list[str], int]:
    predicted, expected = normalized(prediction, lang).split(), normalized(gold, lang).split()
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    return predicted, expected, common


def exact_match(prediction: str, gold: str, lang: str = "en") -> float:
    """1.0 when the prediction is the gold answer once both are normalized, else 0.0."""
    return float(normalized(prediction, lang) == normalized(gold, lang))


def contains(prediction: str, gold: str, lang: str = "en") -> bool:
    """Whether the normalized prediction holds the normalized gold answer (as characters: "in
    1952" holds "1952"; an empty gold answer is held by anything)."""
    return normalized(gold, lang) in normalized(prediction, lang)


def f1(prediction: str, gold: str, lang: str = "en") -> float:
    """SQuAD's token F1: the harmonic mean of the shared tokens' share of the prediction and of
    the gold answer (tokens counted with repeats); 1.0 when both are empty."""
    predicted, expected, common = _common(prediction, gold, lang)
    if not predicted or not expected or not common:
        return float(predicted == expected)
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def recall(prediction: str, gold: str, lang: str = "en") -> float:
    """The share of the gold answer's words the prediction holds (counted as F1 counts)."""
    _, expected, common = _common(prediction, gold, lang)
    return common / len(expected) if expected else 0.0


@dataclass(frozen=True)
class Answered:
    """One reply of POST /ai/rag: its status, its body as /ai/rag without `stream` returns it,
    the seconds it took and those to its first words (None: no words came), and the text its
    token events carried."""

    status: int
    body: dict[str, Any]
    seconds: float
    first_words: float | None = None
    streamed: str | None = None  # the token events' text put together (None: not streamed)


def ask(http: httpx.Client, expected: Expected, **more: object) -> Answered:
    """POST /ai/rag `expected`'s question with `stream`, read as a chat widget reads it: the
    first words timed, the events put back together as the whole answer's body. An error
    before the stream (a 428, a 400) is a plain JSON reply, as without `stream`."""
    asked = {"query": expected.question, "lang": expected.lang, "stream": True, **more}
    started = time.perf_counter()
    first: float | None = None
    body: dict[str, Any] = {"content": {"message": "", "documents": []}}
    streamed: list[str] = []
    with http.stream("POST", "/ai/rag", json=asked) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.read()
            try:
                body = response.json()
            except ValueError:
                body = {}
            return Answered(response.status_code, body, time.perf_counter() - started)
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
                continue
            if not line.startswith("data:"):
                continue
            data = json.loads(line.removeprefix("data:"))
            if event == "token":
                streamed.append(str(data.get("text", "")))
            if event == "token" and first is None and str(data.get("text", "")).strip():
                first = time.perf_counter() - started
            elif event == "sources":
                body["content"]["documents"] = data.get("documents", [])
            elif event == "done":
                body["content"]["message"] = data.get("message", "")
                body.update(
                    usage=data.get("usage"),
                    timings=data.get("timings"),
                    confidence=data.get("confidence"),
                    abstained=data.get("abstained"),
                )
            elif event == "error":  # the stream had begun: the envelope is the event's
                status = int(data.get("content", {}).get("code", 500))
                return Answered(status, data, time.perf_counter() - started, first)
    seconds = time.perf_counter() - started
    return Answered(response.status_code, body, seconds, first, "".join(streamed))


def score(expected: Expected, status: int, body: dict[str, Any], seconds: float) -> dict:
    """One reply of POST /ai/rag (its status and JSON body) against what was expected."""
    content = body.get("content", {}) if status == 200 else {}
    message = content.get("message", "") if isinstance(content, dict) else ""
    documents = content.get("documents", []) if isinstance(content, dict) else []
    ids = [d.get("id") for d in documents if isinstance(d, dict)]
    cited = cited_numbers(message)
    cited_ids = {i for n, i in enumerate(ids, start=1) if n in cited}
    answered = bool(expected.answers)
    said = without_citations(message, " ")  # "[1]" is where the answer comes from, not the answer
    usage, timings = body.get("usage") or {}, body.get("timings") or {}
    lang = expected.lang
    return {
        "question": expected.question,
        "answerable": not expected.no_answer,
        "status": status,
        "seconds": seconds,
        "abstained": status == 428 or (status == 200 and says_nothing_relevant(message)),
        "gold_source": bool(expected.documents & set(ids)) if expected.documents else None,
        "cites": bool(cited_ids),
        "cites_gold": bool(expected.documents & cited_ids) if expected.documents else None,
        "f1": max(f1(said, a, lang) for a in expected.answers) if answered else None,
        "recall": max(recall(said, a, lang) for a in expected.answers) if answered else None,
        "em": max(exact_match(said, a, lang) for a in expected.answers) if answered else None,
        "contained": any(contains(said, a, lang) for a in expected.answers) if answered else None,
        "llm_calls": usage.get("llm_calls", 0),
        "completion_tokens": usage.get("completion_tokens", 0),
        "llm_seconds": timings.get("llm", 0.0) / 1000,
        "timings": timings,  # each stage's milliseconds, as the reply reports them
        "message": message[:300],
        "confidence": body.get("confidence") if status == 200 else None,
        "why": body.get("abstained") if status == 200 else None,
        "reason": body.get("content", {}).get("reason", "") if status != 200 else "",
    }


def scored(expected: Expected, answered: Answered) -> dict:
    """`score` of an `ask`, its first words' seconds with it."""
    row = score(expected, answered.status, answered.body, answered.seconds)
    content = answered.body.get("content") if answered.status == 200 else None
    kept = content.get("message") if isinstance(content, dict) else None
    same = None if answered.streamed is None or kept is None else answered.streamed == kept
    return {
        **row,
        "first_words": answered.first_words,
        # whether a widget showing the tokens showed exactly the answer kept
        "streamed_is_kept": same,
    }


def summary(rows: list[dict]) -> dict[str, float | int | None]:
    """The rows summed up; a measure no row has a value for is None."""
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    seconds = sorted(r["seconds"] for r in rows)
    firsts = sorted(r["first_words"] for r in rows if r.get("first_words") is not None)
    generating = sum(r["llm_seconds"] for r in rows)

    def mean(values: list[Any]) -> float | None:
        known = [float(v) for v in values if v is not None]
        return round(statistics.fmean(known), 3) if known else None

    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "gold source": mean([r["gold_source"] for r in answerable]),
        "F1": mean([r["f1"] for r in answerable]),
        "recall": mean([r["recall"] for r in answerable]),
        "EM": mean([r["em"] for r in answerable]),
        "contained": mean([r["contained"] for r in answerable]),
        "abstained (unanswerable)": mean([r["abstained"] for r in unanswerable]),
        "wrong abstentions": mean([r["abstained"] for r in answerable]),
        "citation precision": mean([r["cites_gold"] for r in answerable if r["cites"]]),
        "cites at all": mean([r["cites"] for r in answerable]),
        "p50 s": p50(seconds),
        "p95 s": p95(seconds),
        "streamed = kept": mean([r.get("streamed_is_kept") for r in rows]),
        "first words p50 s": p50(firsts),
        "first words p95 s": p95(firsts),
        "LLM calls": mean([r["llm_calls"] for r in rows]),
        # generated tokens per second of LLM time (its reading of the prompt included)
        "tokens/s": round(sum(r["completion_tokens"] for r in rows) / generating, 1)
        if generating
        else None,
    }


def p50(ordered: list[float], digits: int = 1) -> float | None:
    """The median of sorted values, rounded; None without values."""
    return round(statistics.median(ordered), digits) if ordered else None


def p95(ordered: list[float], digits: int = 1) -> float | None:
    """The 95th percentile of sorted values (the nearest rank below), rounded."""
    return round(ordered[int(0.95 * (len(ordered) - 1))], digits) if ordered else None


def table(measures: dict[str, float | int | None]) -> str:
    """The summary as aligned lines, "-" for what the questions did not allow measuring."""
    width = max(len(name) for name in measures)
    return "\n".join(
        f"{name:<{width}}  {'-' if value is None else value}" for name, value in measures.items()
    )

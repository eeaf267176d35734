"""The echo check on every question of SQuAD 2.0 and the French FAQ, no model: how often an
echo of the question passes for an answer, and how often a true answer is taken for an echo.

Each question is checked against its gold paragraph (service.rag.stages.echo), with the
shipped rule (the answer's words and its phrases) and with its words alone:
- echoes made by rule from the question (a lost model's forms, issue 59): the question said
  back ("Where does the Middle Rhine flow between Bingen and Bonn?" -> "the Middle Rhine flow
  between Bingen and Bonn [1]"), its last content word put first ("Wreaths is the polish
  word for wreaths [1]"), its first one put last, its words shuffled (seeded). Each one the
  check lets through is an echo shown as an answer;
- true answers: the gold answer alone ("the end itself [1]"), and the question's words
  followed by it ("In the capabilities approach, ... rather than the end itself [1]"). Each
  one the check refuses is an answer lost.

    python -m bench.echoes
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from bench.support import save_results
from service.rag.stages.echo import EchoCheck, said

SQUAD = Path(__file__).parent / "data" / "squad2"
FRENCH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "french-qa"
# the question's asking words, taken off to say it back as a statement
_ASKING = re.compile(
    r"^\s*(what|which|who|whom|whose|when|where|why|how(\s+(many|much|long|old))?|"
    r"qu['’]est-ce que|qu['’]est-ce qu['’]|quel(le)?s?|qui|quand|où|comment|pourquoi|combien)"
    r"\b\s*(is|are|was|were|did|does|do|est|sont)?\s*",
    re.I,
)


@dataclass(frozen=True)
class Question:
    text: str
    answers: tuple[str, ...]
    source: str


def questions(folder: Path, french: bool = False) -> Iterator[Question]:
    corpus = {}
    if not french:
        for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
            document = json.loads(line)
            corpus[document["id"]] = document["content"]
    for line in (folder / "questions.jsonl").open(encoding="utf-8"):
        asked = json.loads(line)
        answers = tuple(asked.get("answers") or ())
        # the FAQ's gold answer is its page's text: the source the answer is read from
        source = answers[0] if french and answers else corpus.get(asked["gold_doc"], "")
        if source:
            yield Question(asked["question"].strip(), answers if not french else (), source)


def _said_back(question: str) -> str:
    return _ASKING.sub("", question).rstrip(" ?")


Form = Callable[[str, list[str], random.Random], str]
ECHOES: dict[str, Form] = {
    "said back": lambda body, words, _: f"{body} [1]",
    "last word first": lambda body, words, _: f"{words[-1].capitalize()} is {body}. [1]",
    "first word last": lambda body, words, _: f"{body} {words[0]}. [1]",
    "shuffled": lambda body, words, rng: (
        " ".join(rng.sample(body.split(), len(body.split()))) + " [1]"
    ),
}


def measure(asked: list[Question]) -> dict[str, dict[str, float]]:
    rng = random.Random(59)
    counts: dict[str, list[int]] = {}  # form -> [cases, words alone, words and phrases]

    def count(form: str, passed_phrases: bool, passed_words: bool) -> None:
        row = counts.setdefault(form, [0, 0, 0])
        row[0] += 1
        row[1] += passed_words
        row[2] += passed_phrases

    for question in asked:
        check = EchoCheck.of(question.text, [question.source])
        words_only = replace(check, known_phrases=frozenset())
        body = _said_back(question.text)
        words = [w for w in body.split() if said(w)]
        if len(words) >= 2:
            for name, form in ECHOES.items():
                echo = form(body, words, rng)
                count(f"echo: {name}", check.says_something(echo),
                      words_only.says_something(echo))  # fmt: skip
        for answer in question.answers[:1]:
            for name, text in (
                ("alone", f"{answer} [1]"),
                ("after the question", f"{body} {answer} [1]"),
            ):
                count(f"answer: {name}", check.says_something(text),
                      words_only.says_something(text))  # fmt: skip
    return {
        form: {
            "cases": cases,
            # an echo: the share shown as an answer; a true answer: the share refused
            "words alone": round((alone if form.startswith("echo") else cases - alone) / cases, 4),
            "words and phrases (shipped)": round(
                (both if form.startswith("echo") else cases - both) / cases, 4
            ),
        }
        for form, (cases, alone, both) in counts.items()
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    result = {"squad": measure(list(questions(SQUAD)))}
    if (FRENCH / "questions.jsonl").exists():  # evaluation only: read from ../shared
        result["french FAQ"] = measure(list(questions(FRENCH, french=True)))
    for collection, rows in result.items():
        print(f"{collection}: echoes shown as answers / true answers refused")
        for form, row in rows.items():
            print(f"  {form:28} {row['cases']:6}  words alone {row['words alone']:.4f}  "
                  f"shipped {row['words and phrases (shipped)']:.4f}")  # fmt: skip
    save_results("echoes", result)


if __name__ == "__main__":
    main()

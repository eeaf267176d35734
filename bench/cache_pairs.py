"""The answer cache's hit rule on question pairs built by rule from SQuAD 2.0's questions:
paraphrases (the same question asked again: case, politeness, articles, a contraction, a
reordered "in what year") and opposites (a negation, an antonym, another number or unit).
A pair is a hit when its cosine (all-MiniLM-L6-v2, as the cache embeds) reaches
cache.min.similarity and the rule's sameness check passes; a hit on an opposite pair serves
the wrong answer.

    .venv/bin/python -m bench.cache_pairs [--sample 400] [--similarity 0.95]

Rows: cosine alone; the rule shipped before (same numbers, same negation by the old word
list); the rule now (service.cache.sameness). Precision = paraphrase hits / all hits.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from service.cache.sameness import asks_alike
from service.models.encoder import SentenceEncoder
from service.text.claims import numbers, tokens

QUESTIONS = Path(__file__).parent / "data" / "squad2" / "questions.jsonl"
_AUXILIARY = re.compile(r"\b(is|was|are|were|did|does|do|can|could|has|have|had|will|would)\b")
ANTONYMS = [
    ("higher", "lower"), ("before", "after"), ("over", "under"), ("more", "less"),
    ("most", "least"), ("first", "last"), ("largest", "smallest"), ("biggest", "smallest"),
    ("increase", "decrease"), ("north", "south"), ("east", "west"), ("earliest", "latest"),
    ("maximum", "minimum"), ("above", "below"), ("inside", "outside"), ("won", "lost"),
    ("approved", "rejected"), ("safe", "unsafe"), ("early", "late"), ("older", "younger"),
    ("oldest", "youngest"), ("best", "worst"), ("long", "short"), ("high", "low"),
    ("start", "end"), ("began", "ended"), ("male", "female"), ("private", "public"),
]  # fmt: skip
UNITS = [("million", "billion"), ("euros", "dollars"), ("percent", "degrees")]
_OLD_NEGATION = frozenset({"not", "no", "never", "none", "nor", "neither", "nothing", "without"})


def paraphrases(question: str) -> list[tuple[str, str]]:
    """(kind, a rephrasing that asks the same)."""
    bare = question.rstrip("?").strip()
    lower = bare[:1].lower() + bare[1:]
    found = [
        ("case and punctuation", bare.lower()),
        ("politeness", f"Please tell me: {question}"),
        ("can you tell me", f"Can you tell me {lower}?"),
        ("extra spaces", "  ".join(question.split()) + "?"),
    ]
    if re.search(r"\bthe\b", question):
        found.append(("an article dropped", re.sub(r"\bthe\s+", "", question, count=1)))
    if question.startswith("What is "):
        found.append(("what's", "What's " + question[len("What is ") :]))
    if question.startswith("In what year "):
        found.append(("when", "When " + question[len("In what year ") :]))
    return found


def opposites(question: str) -> list[tuple[str, str]]:
    """(kind, a question that asks something else, worded alike)."""
    found = []
    if _AUXILIARY.search(question):
        found.append(("not", _AUXILIARY.sub(lambda m: f"{m.group(1)} not", question, count=1)))
    if re.search(r"\bcan\b", question):
        found.append(("cannot", re.sub(r"\bcan\b", "cannot", question, count=1)))
    if re.search(r"\bdoes\b", question):
        found.append(("doesnt", re.sub(r"\bdoes\b", "doesnt", question, count=1)))
    for a, b in [*ANTONYMS, *UNITS]:
        for this, that in ((a, b), (b, a)):
            if re.search(rf"\b{this}\b", question):
                found.append(("antonym or unit", re.sub(rf"\b{this}\b", that, question, count=1)))
    number = re.search(r"\b\d{1,4}\b", question)
    if number:
        start, end = number.span()
        found.append(
            ("another number", f"{question[:start]}{int(number.group()) + 1}{question[end:]}")
        )
    return found


def old_rule(a: str, b: str) -> bool:
    def negated(text: str) -> bool:
        return any(token in _OLD_NEGATION for token in tokens(text))

    return numbers(a) == numbers(b) and negated(a) == negated(b)


RULES: dict[str, Callable[[str, str], bool]] = {
    "cosine alone": lambda a, b: True,
    "before: same numbers and negation": old_rule,
    "now: same words (service.cache.sameness)": asks_alike,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=400, help="questions drawn (seeded)")
    parser.add_argument("--similarity", type=float, default=0.95, help="cache.min.similarity")
    args = parser.parse_args()
    questions = [json.loads(line)["question"].strip() for line in QUESTIONS.open()]
    questions = random.Random(39).sample(questions, args.sample)
    pairs: list[tuple[str, str, str, str]] = []  # (same|opposite, kind, cached, asked)
    for question in questions:
        pairs += [("same", kind, question, text) for kind, text in paraphrases(question)]
        pairs += [("opposite", kind, question, text) for kind, text in opposites(question)]
    encoder = SentenceEncoder()
    texts = list(dict.fromkeys(text for pair in pairs for text in pair[2:]))
    vectors = dict(zip(texts, encoder.encode(texts), strict=True))
    cosine = [float(np.dot(vectors[a], vectors[b])) for _, _, a, b in pairs]
    near = [c >= args.similarity for c in cosine]
    counts = Counter(label for label, *_ in pairs)
    close = Counter(p[0] for n, p in zip(near, pairs, strict=True) if n)
    print(f"{len(questions)} SQuAD 2.0 questions (seed 39): {counts['same']} paraphrase pairs, "
          f"{counts['opposite']} opposite pairs; cosine >= {args.similarity}: "
          f"{close['same']} paraphrases, {close['opposite']} opposites\n")  # fmt: skip
    print("| rule | paraphrase hits | hit rate | opposite hits (wrong answers) | precision |")
    print("|---|---|---|---|---|")
    for name, rule in RULES.items():
        hits = Counter(
            pair[0] for pair, close in zip(pairs, near, strict=True) if close and rule(*pair[2:])
        )
        total = hits["same"] + hits["opposite"]
        precision = hits["same"] / total if total else 1.0
        print(f"| {name} | {hits['same']} | {hits['same'] / counts['same']:.3f} | "
              f"{hits['opposite']} | {precision:.4f} |")  # fmt: skip
    print("\nBy kind (now):\n\n| pair | kind | pairs | cosine >= threshold | hits |")
    print("|---|---|---|---|---|")
    kinds = Counter((label, kind) for label, kind, _, _ in pairs)
    for (label, kind), count in sorted(kinds.items()):
        close = [n for n, p in zip(near, pairs, strict=True) if (p[0], p[1]) == (label, kind)]
        hit = sum(
            1 for n, p in zip(near, pairs, strict=True)
            if (p[0], p[1]) == (label, kind) and n and asks_alike(p[2], p[3])
        )  # fmt: skip
        print(f"| {label} | {kind} | {count} | {sum(close)} | {hit} |")


if __name__ == "__main__":
    main()

"""What reranking a question costs the box (issue 70): the local cross-encoder's CPU time for
one question's passages, as the model server scores them, under each way of cutting the work.

Each question of a seeded SQuAD 2.0 sample comes with `--passages` passages of about 1,000
characters (hybrid retrieval's solr.topK=10 passages of vector.chunk.size=1000 as shipped:
its gold paragraph and others, each run on into the next paragraph up to 1,000 characters).
Per configuration: the process's CPU milliseconds a question (every onnxruntime thread
counted: what the box spends, whatever else runs on it) and the wall milliseconds (noisy on
a shared machine), over the same questions.

    python -m bench.rerank_cost [--questions 40] [--passages 10]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

from bench.support import save_results
from service.models.reranker import CrossEncoder

DATA = Path(__file__).resolve().parent / "data" / "squad2"
PASSAGE_CHARS = 1_000


@dataclass(frozen=True)
class Setup:
    """One way to score a question's passages."""

    name: str
    tokens: int = 512
    depth: int = 10
    threads: int | None = None
    spinning: bool = False
    asked_twice: bool = False  # every question asked again: the second from the cache


SETUPS = [
    Setup("before: 512 tokens, 10 passages, threads spinning", spinning=True),
    Setup("512 tokens, 10 passages"),
    Setup("512 tokens, 10 passages, 1 thread", threads=1),
    Setup("256 tokens, 10 passages", tokens=256),
    Setup("128 tokens, 10 passages", tokens=128),
    Setup("256 tokens, 5 passages", tokens=256, depth=5),
    Setup("128 tokens, 5 passages", tokens=128, depth=5),
    Setup("128 tokens, 5 passages, 1 thread", tokens=128, depth=5, threads=1),
    Setup("128 tokens, 5 passages, each question twice", tokens=128, depth=5, asked_twice=True),
]


def sample(questions: int, passages: int) -> list[tuple[str, list[str]]]:
    rows = [json.loads(line) for line in (DATA / "corpus.jsonl").open(encoding="utf-8")]
    by_id = {row["id"]: i for i, row in enumerate(rows)}
    asked = [json.loads(line) for line in (DATA / "questions.jsonl").open(encoding="utf-8")]
    chosen = random.Random(70).sample([q for q in asked if q["answerable"]], questions)

    def passage(i: int) -> str:
        text = rows[i]["content"]
        while len(text) < PASSAGE_CHARS:
            i = (i + 1) % len(rows)
            text += " " + rows[i]["content"]
        return text[:PASSAGE_CHARS]

    pick = random.Random(71)
    found = []
    for question in chosen:
        others = pick.sample(range(len(rows)), passages - 1)
        found.append(
            (
                question["question"],
                [passage(by_id[question["gold_doc"]])] + [passage(i) for i in others],
            )
        )
    return found


def measure(setup: Setup, questions: list[tuple[str, list[str]]]) -> dict[str, float]:
    encoder = CrossEncoder(threads=setup.threads, spinning=setup.spinning)
    encoder.scores("warm up", ["the session's first run allocates"], setup.tokens)
    encoder.pairs_scored = 0
    cpu, wall, asked = time.process_time(), time.perf_counter(), 0
    for _ in range(2 if setup.asked_twice else 1):
        for question, passages in questions:
            encoder.scores(question, passages[: setup.depth], setup.tokens)
            asked += 1
    return {
        "cpu_ms_a_question": round((time.process_time() - cpu) * 1000 / asked, 1),
        "wall_ms_a_question": round((time.perf_counter() - wall) * 1000 / asked, 1),
        "pairs_scored_a_question": round(encoder.pairs_scored / asked, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--passages", type=int, default=10)
    args = parser.parse_args(argv)
    questions = sample(args.questions, args.passages)
    table = {}
    print(f"{'setup':<52} {'CPU ms':>8} {'wall ms':>8} {'pairs':>6}")
    for setup in SETUPS:
        row = table[setup.name] = measure(setup, questions)
        print(f"{setup.name:<52} {row['cpu_ms_a_question']:>8} {row['wall_ms_a_question']:>8} "
              f"{row['pairs_scored_a_question']:>6}", flush=True)  # fmt: skip
    save_results("rerank_cost", table)


if __name__ == "__main__":
    main()

"""Questions that need two lookups: Datafari 7's action=agentic against action=rag (issue 47).

Each question joins two SQuAD 2.0 questions of one article whose answers are in two different
paragraphs ("Who ...? And when ...?"), a seeded sample, the same every run. Both actions are
asked through POST /ai of the service on the shipped settings (rag.properties), the embedded
model (or `--llm-url`), on the 708 paragraphs of bench/data/squad2. A question is answered
when the answer holds a gold answer of each half (SQuAD's normalization), half-answered when
it holds one. Reported per action: both / one / none, LLM calls, seconds p50/p95.

    python -m bench.agentic [--model qwen2.5-coder-1.5b-instruct] [--pairs 20]
                            [--solr-url URL --no-ingest] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import time

from bench.answers import SQUAD, served
from bench.support import (
    save_results,
)
from service.evaluation import normalized, p50, p95
from service.models import packaged

ACTIONS = ("rag", "agentic")


def pairs(count: int) -> list[dict]:
    """`count` two-part questions: two answerable questions of one article, from two of its
    paragraphs."""
    rows = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    by_article: dict[str, dict[str, list[dict]]] = collections.defaultdict(dict)
    for row in rows:
        if row["answerable"]:
            article = row["gold_doc"].rsplit("/", 1)[0]
            by_article[article].setdefault(row["gold_doc"], []).append(row)
    chooser = random.Random(47)
    made = []
    articles = sorted(a for a, paragraphs in by_article.items() if len(paragraphs) > 1)
    while len(made) < count:
        paragraphs = by_article[chooser.choice(articles)]
        first_doc, second_doc = chooser.sample(sorted(paragraphs), 2)
        first = chooser.choice(paragraphs[first_doc])
        second = chooser.choice(paragraphs[second_doc])
        tail = second["question"].strip()
        made.append(
            {
                "question": f"{first['question'].strip().rstrip('?')}? And {tail[0].lower()}"
                f"{tail[1:]}",
                "parts": [first["answers"], second["answers"]],
                "documents": [first_doc, second_doc],
            }
        )
    return made


def halves_answered(message: str, parts: list[list[str]]) -> int:
    said = f" {normalized(message)} "
    return sum(any(f" {normalized(a)} " in said for a in answers) for answers in parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url")
    parser.add_argument("--embeddings-url")
    parser.add_argument("--model", default=packaged.DEFAULT)
    parser.add_argument("--llm-url")
    parser.add_argument("--llm-model", default="")
    parser.add_argument("--context", type=int, default=packaged.CONTEXT_TOKENS)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--no-ingest", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    questions = pairs(args.pairs)
    rows = []
    overrides = {"agentic.enabled": "true", "conversations.enabled": "false"}
    with served(args, "squad", overrides) as (http, model):
        for number, asked in enumerate(questions, start=1):
            for action in ACTIONS:
                started = time.perf_counter()
                response = http.post("/ai", json={"query": asked["question"],
                                                  "action": action})  # fmt: skip
                seconds = time.perf_counter() - started
                body = response.json()
                content = body.get("content", {})
                message = content.get("message") or ""
                row = {
                    "action": action,
                    "question": asked["question"],
                    "status": response.status_code,
                    "message": message,
                    "halves": halves_answered(message, asked["parts"]),
                    "sources": [d.get("id") for d in content.get("documents", [])],
                    "gold_found": sum(
                        d in {s.get("id") for s in content.get("documents", [])}
                        for d in asked["documents"]
                    ),
                    "llm_calls": body.get("usage", {}).get("llm_calls"),
                    "seconds": round(seconds, 2),
                }
                rows.append(row)
                print(f"{number}/{len(questions)} {action:8} {seconds:5.1f}s "
                      f"halves={row['halves']} {message[:90]!r}", flush=True)  # fmt: skip
    result = {"model": model, "pairs": len(questions), "settings": args.set,
              "actions": {action: _summary([r for r in rows if r["action"] == action])
                          for action in ACTIONS}}  # fmt: skip
    print(json.dumps(result, indent=1))
    save_results(f"agentic-{model}", {"summary": result, "rows": rows})


def _summary(rows: list[dict]) -> dict[str, object]:
    seconds = sorted(r["seconds"] for r in rows)
    calls = [r["llm_calls"] for r in rows if r["llm_calls"] is not None]
    total = len(rows) or 1
    return {
        "both": round(sum(r["halves"] == 2 for r in rows) / total, 2),
        "one": round(sum(r["halves"] == 1 for r in rows) / total, 2),
        "none": round(sum(r["halves"] == 0 for r in rows) / total, 2),
        "both_gold_paragraphs_read": round(sum(r["gold_found"] == 2 for r in rows) / total, 2),
        "errors": sum(r["status"] != 200 for r in rows),
        "llm_calls_mean": round(sum(calls) / len(calls), 1) if calls else None,
        "seconds_p50": p50(seconds),
        "seconds_p95": p95(seconds),
    }


if __name__ == "__main__":
    main()

"""`solr-rag eval`: answer quality on your questions, through a running service."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import httpx

from service.cli.common import Commands


def add(commands: Commands) -> None:
    """eval."""
    what = "answer quality on your questions (JSON Lines), through a running service's /ai/rag"
    evaluate = commands.add_parser("eval", help=what, description=_eval_description())
    evaluate.add_argument("file", type=Path, help="the questions, JSON Lines")
    evaluate.add_argument(
        "--url",
        default=os.environ.get("SOLR_RAG_URL", "http://127.0.0.1:8000"),
        help="the service (default: $SOLR_RAG_URL or %(default)s)",
    )
    evaluate.add_argument(
        "--api-key",
        default=os.environ.get("SOLR_RAG_API_KEY", ""),
        help="one of api.keys, when set (default: $SOLR_RAG_API_KEY)",
    )
    evaluate.add_argument("--timeout", type=float, default=300, help="seconds a question")
    evaluate.add_argument("--rows", type=Path, help="also write each question's scores (JSON)")
    evaluate.set_defaults(run=_eval)


def _eval_description() -> str:
    from service import evaluation

    return evaluation.__doc__ or ""


def _eval(args: argparse.Namespace) -> int:
    from service import evaluation

    try:
        lines = args.file.read_text(encoding="utf-8").splitlines()
        questions = evaluation.read_questions(lines)
    except (evaluation.QuestionFileError, UnicodeDecodeError) as error:
        print(f"solr-rag eval: {args.file}: {error}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    rows = []
    with httpx.Client(base_url=args.url, headers=headers, timeout=args.timeout) as http:
        for number, question in enumerate(questions, start=1):
            try:
                answered = evaluation.ask(http, question)
            except (httpx.HTTPError, ValueError) as error:
                print(f"solr-rag eval: {args.url} did not answer: {error}", file=sys.stderr)
                return 2
            if answered.status in (401, 403):
                print(f"solr-rag eval: {args.url} refused the key: give one of api.keys "
                      "with --api-key", file=sys.stderr)  # fmt: skip
                return 2
            row = evaluation.scored(question, answered)
            rows.append(row)
            said = f"{answered.status} {row['message'][:70]!r}"
            first = f" (first words {row['first_words']:.1f}s)" if row["first_words"] else ""
            print(f"{number}/{len(questions)} {row['seconds']:.1f}s{first} {said}",
                  file=sys.stderr, flush=True)  # fmt: skip
    if args.rows:
        args.rows.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    print(evaluation.table(evaluation.summary(rows)))
    return 0

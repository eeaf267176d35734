"""Abstaining before the LLM: how far below the answerable questions' best reranker score do
the questions the documents do not answer fall?

Retrieval as shipped (hybrid, its similarity floor, `solr.topK` passages), then each hit scored
by the local cross-encoder (service.models.reranker, `--tokens` a pair), as the Rerank stage
sends them. A question's score is its best hit's (none found: retrieval already abstains).
For each threshold, the share of each question set that would be answered "not in the
documents" (`rerank.min.score`): unanswerable SQuAD 2.0 questions (on-topic, their paragraph
lacks the answer), off-topic ones (SQuAD questions asked of the Python sample corpus), and,
as wrong abstentions, answerable SQuAD questions and the French FAQ's questions (all
answerable; read from ../shared, never copied) when that folder is there.

The SQuAD questions are a seeded sample disjoint from bench.answers' (its first 200+100), so
a threshold chosen here is then measured there on other questions.

    python -m bench.abstention [--solr-url URL] [--embeddings-url URL] [--questions 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
from collections.abc import Sequence
from pathlib import Path

import httpx

from bench import answers, offtopic
from bench.retrieval import load_french
from bench.support import fresh_solr, given_or_started, model_server, save_results
from service.config import Settings, settings_from_mapping
from service.llm.embeddings import embeddings_client
from service.models.reranker import CrossEncoder
from service.retrieval import SolrClient
from service.retrieval.factory import build_retriever
from service.text import sanitize_query

THRESHOLDS = (-11.0, -10.0, -9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0)


def squad_questions(count: int) -> tuple[list[str], list[str]]:
    """(answerable, unanswerable): `count` of each, none of bench.answers' first 200+100."""
    taken = {q.question for q in answers.sample(200, 100)}
    rows = [json.loads(line) for line in (answers.SQUAD / "questions.jsonl").open()]
    rows = [r for r in random.Random(41).sample(rows, len(rows)) if r["question"] not in taken]
    answerable = [r["question"] for r in rows if r["answerable"]][:count]
    unanswerable = [r["question"] for r in rows if not r["answerable"]][:count]
    return answerable, unanswerable


async def best_scores(
    settings: Settings, encoder: CrossEncoder, questions: Sequence[str], tokens: int
) -> list[float | None]:
    """Each question's best hit's cross-encoder score; None when retrieval found nothing."""
    best: list[float | None] = []
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, settings.solr.url)
        retriever = build_retriever(
            settings.retrieval, settings.solr, solr, embeddings_client(http, settings)
        )
        for number, question in enumerate(questions, start=1):
            hits = await retriever.run(sanitize_query(question))
            texts = [f"{h.title}\n{h.content}" if h.title else h.content for h in hits]
            scored = encoder.scores(question, texts, tokens).scores if texts else []
            best.append(max(scored) if scored else None)
            if number % 50 == 0:
                print(f"  {number}/{len(questions)}", flush=True)
    return best


def abstained(scores: Sequence[float | None], threshold: float) -> float:
    """The share of questions abstained on: nothing found, or the best score below."""
    return sum(s is None or s < threshold for s in scores) / max(len(scores), 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--questions", type=int, default=150, help="of each SQuAD kind")
    parser.add_argument("--tokens", type=int, default=256, help="a pair's tokens at most")
    parser.add_argument("--french", type=int, default=300, help="French questions (0: none)")
    args = parser.parse_args(argv)
    encoder = CrossEncoder()
    answerable, unanswerable = squad_questions(args.questions)
    french = load_french() if args.french else None
    sets: dict[str, list[float | None]] = {}
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        shipped = {"solr.url": solr_url, "ai.embeddings.endpoint": embeddings_url,
                   "retrieval.method": "hybrid"}  # fmt: skip
        settings = settings_from_mapping(shipped, source="bench", env={})
        samples, _ = offtopic.sample_corpus(Path("/tmp") / "bench-abstention-samples")
        paragraphs, _, _ = offtopic.squad(0)
        corpora = [
            ("samples", samples, {"off-topic (SQuAD asked of the samples)": answerable[:100]}),
            ("squad", paragraphs, {"answerable (SQuAD)": answerable,
                                   "unanswerable (SQuAD)": unanswerable}),
        ]  # fmt: skip
        if french is not None:
            chosen = random.Random(41).sample(french.queries, min(args.french, len(french.queries)))
            corpora.append(
                ("french", french.documents, {"answerable (French)": [t for _, t in chosen]})
            )
        for corpus, documents, questions in corpora:
            print(f"indexing {corpus} ({len(documents)} documents)...", flush=True)
            asyncio.run(offtopic.index(settings, documents))
            for name, asked in questions.items():
                print(f"{name}: {len(asked)} questions", flush=True)
                sets[name] = asyncio.run(best_scores(settings, encoder, asked, args.tokens))
    save_results("abstention", sets)
    names = list(sets)
    print("\nbest cross-encoder score per question set (found: retrieval found something)")
    for name in names:
        found = [s for s in sets[name] if s is not None]
        quartiles = statistics.quantiles(found, n=4) if len(found) > 1 else [0, 0, 0]
        print(f"  {name:<40} n={len(sets[name]):>4} found={len(found):>4} "
              f"q1/median/q3 {quartiles[0]:.2f}/{quartiles[1]:.2f}/{quartiles[2]:.2f}")  # fmt: skip
    print("\nabstained (nothing found, or the best score below the threshold)")
    print(f"{'threshold':>10}" + "".join(f" {n[:24]:>25}" for n in names))
    for threshold in THRESHOLDS:
        cells = "".join(f" {abstained(sets[n], threshold):>25.3f}" for n in names)
        print(f"{threshold:>10.1f}{cells}")


if __name__ == "__main__":
    main()

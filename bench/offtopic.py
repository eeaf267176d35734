"""Off-topic questions: does retrieval find nothing when the documents do not hold the answer,
and still find the gold document when they do?

Two corpora, each indexed from empty into a Solr started for the run (or `--solr-url`), with
the local model server's all-MiniLM-L6-v2:
- the sample corpus `make run` indexes (79 Python reference topics): on-topic questions made
  by one rule from each topic's title ("What is <title>?", gold: that topic), off-topic
  questions the first answerable SQuAD 2.0 questions (Wikipedia: nothing in Python's docs);
- the SQuAD 2.0 paragraphs (bench/data/squad2): a seeded sample of answerable questions (gold:
  their paragraph) and of unanswerable ones (on-topic, but the paragraph lacks the answer:
  retrieval should still find it; the answerer must abstain).
Each retrieval configuration reports, per question set: gold found in the top `solr.topK`,
nothing found (an abstention before any LLM call).

    python -m bench.offtopic [--solr-url URL] [--embeddings-url URL] [--questions N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.support import fresh_solr, given_or_started, model_server, save_results
from service.config import Settings, settings_from_mapping
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.ingest.samples import export_samples
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from service.retrieval.factory import build_retriever
from service.text import sanitize_query

SQUAD = Path(__file__).parent / "data" / "squad2"
CONFIGURATIONS = {
    "bm25": {"retrieval.method": "bm25"},
    "vector (min 0.3)": {"retrieval.method": "vector"},
    "hybrid, BM25 alone may answer": {
        "retrieval.method": "hybrid",
        "hybrid.needs.meaning": "false",
    },
    "hybrid, needs a kNN hit (min 0.3)": {"retrieval.method": "hybrid"},
    "hybrid, needs a kNN hit (min 0.25)": {
        "retrieval.method": "hybrid",
        "retrieval.similarity.min": "0.25",
    },
    "hybrid, needs a kNN hit (min 0.2)": {
        "retrieval.method": "hybrid",
        "retrieval.similarity.min": "0.2",
    },
}


@dataclass(frozen=True)
class Question:
    text: str
    gold: str | None  # the document that answers it; None: none does (off-topic)


def sample_corpus(folder: Path) -> tuple[list[SourceDocument], list[Question]]:
    from service.ingest import extract

    export_samples(folder)
    documents = [extract(file, folder, source="") for file in sorted(folder.glob("*.txt"))]
    questions = [Question(f"What is {d.title}?", d.id) for d in documents]
    return documents, questions


def squad(count: int) -> tuple[list[SourceDocument], list[Question], list[Question]]:
    rows = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    documents = [SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"])
                 for r in rows]  # fmt: skip
    asked = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    chosen = random.Random(32).sample(asked, len(asked))
    answerable = [Question(q["question"], q["gold_doc"]) for q in chosen if q["answerable"]]
    unanswerable = [Question(q["question"], q["gold_doc"]) for q in chosen if not q["answerable"]]
    return documents, answerable[:count], unanswerable[:count]


async def index(settings: Settings, documents: Sequence[SourceDocument]) -> None:
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, settings.solr.url, read_timeout=300)
        for collection in ("FileShare", "VectorMain"):
            await solr.delete_by_query(collection, "*:*")
        await indexer_for(settings, solr, embeddings_client(http, settings)).run(documents)


async def score(settings: Settings, questions: Sequence[Question]) -> dict[str, float]:
    found = empty = 0
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, settings.solr.url)
        retriever = build_retriever(
            settings.retrieval, settings.solr, solr, embeddings_client(http, settings)
        )
        for question in questions:
            documents = await retriever.run(sanitize_query(question.text))
            empty += not documents
            found += question.gold in {d.source_id for d in documents}
    count = max(len(questions), 1)
    return {"gold found": round(found / count, 3), "nothing found": round(empty / count, 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--questions", type=int, default=150, help="of each SQuAD kind")
    args = parser.parse_args(argv)
    rows = []
    with (
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        base = {"solr.url": solr_url, "ai.embeddings.endpoint": embeddings_url, "solr.topK": "10",
                "chunking.maxFiles": "10"}  # fmt: skip
        plain = settings_from_mapping(base, source="bench", env={})
        samples, on_topic = sample_corpus(Path("/tmp") / "bench-offtopic-samples")
        paragraphs, answerable, unanswerable = squad(args.questions)
        off_topic = [Question(q.text, None) for q in answerable[:100]]
        corpora = [
            ("samples", samples, {"on-topic (rule)": on_topic, "off-topic (SQuAD)": off_topic}),
            ("squad", paragraphs, {"answerable": answerable, "unanswerable": unanswerable}),
        ]
        for corpus, documents, sets in corpora:
            print(f"indexing {corpus} ({len(documents)} documents)...", flush=True)
            asyncio.run(index(plain, documents))
            for name, overrides in CONFIGURATIONS.items():
                settings = settings_from_mapping({**base, **overrides}, source="bench", env={})
                for kind, questions in sets.items():
                    result = asyncio.run(score(settings, questions))
                    row = {"corpus": corpus, "retrieval": name, "questions": kind,
                           "count": len(questions), **result}  # fmt: skip
                    print(row, flush=True)
                    rows.append(row)
    print(f"\n{'corpus':<8} {'retrieval':<36} {'questions':<18} {'n':>4} {'gold':>6} {'none':>6}")
    for row in rows:
        print(
            f"{row['corpus']:<8} {row['retrieval']:<36} {row['questions']:<18} {row['count']:>4} "
            f"{row['gold found']:>6} {row['nothing found']:>6}"
        )
    save_results("offtopic", rows)


if __name__ == "__main__":
    main()

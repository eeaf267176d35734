"""Answer quality end to end on SQuAD 2.0: the whole /ai/rag pipeline against a real answerer.

The 708 paragraphs (bench/data/squad2) are ingested into a Solr started for the run (or
`--solr-url`); then a seeded sample of answerable and unanswerable questions (the same every
run) goes through /ai/rag of the service on the shipped settings, its LLM one of:
- `extractive`: the local model server's extractive answerer (`make run`'s default today);
- a GGUF served by our llama.cpp build (`--model qwen2.5-coder-0.5b-instruct`, assembled by
  models/answerer.py), or any OpenAI-compatible `--llm-url` with `--llm-model`.
Scored as the SQuAD paper does (lower case, no punctuation, no a/an/the, single spaces): exact
match and token F1 against the best gold answer, "gold answer contained"; the gold paragraph
among the sources; citation precision (the answer cites the gold paragraph, when it cites);
abstention on unanswerable questions (a 428, or an answer that only says the documents do not
hold it) and wrong abstentions on answerable ones; p50/p95 seconds an answer.

    python -m bench.answers [--model NAME | --llm-url URL --llm-model NAME]
                            [--answerable 20] [--unanswerable 10] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import random
import re
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.support import ROOT, fresh_solr, given_or_started, model_server, save_results
from service.api.app import create_app
from service.chains.result import says_nothing_relevant
from service.config import settings_from_mapping
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.llm.embeddings import embeddings_client
from service.retrieval import SolrClient
from testing.llama import llama_server
from testing.servers import serve_in_thread

SQUAD = Path(__file__).parent / "data" / "squad2"
ARTICLES = re.compile(r"\b(a|an|the)\b")
CITATION = re.compile(r"\[(\d{1,3})\]")


def normalized(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(ARTICLES.sub(" ", text).split())


def f1(prediction: str, gold: str) -> float:
    predicted, expected = normalized(prediction).split(), normalized(gold).split()
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if not predicted or not expected or not common:
        return float(predicted == expected)
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def sample(answerable: int, unanswerable: int) -> list[dict]:
    asked = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    shuffled = random.Random(38).sample(asked, len(asked))
    return [q for q in shuffled if q["answerable"]][:answerable] + [
        q for q in shuffled if not q["answerable"]
    ][:unanswerable]


async def ingest(solr_url: str, embeddings_url: str) -> None:
    rows = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    documents = [SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"])
                 for r in rows]  # fmt: skip
    settings = settings_from_mapping(
        {"solr.url": solr_url, "ai.embeddings.endpoint": embeddings_url}, source="bench", env={}
    )
    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, solr_url, read_timeout=300)
        for collection in ("FileShare", "VectorMain"):
            await solr.delete_by_query(collection, "*:*")
        await indexer_for(settings, solr, embeddings_client(http, settings)).run(documents)


@contextlib.contextmanager
def answerer(args: argparse.Namespace, folder: Path, embeddings_url: str) -> Iterator[tuple]:
    """(endpoint, model name) of the LLM the rows are about."""
    if args.llm_url:
        yield args.llm_url, args.llm_model
    elif args.model == "extractive":
        yield embeddings_url, "extractive"
    else:
        sys.path.insert(0, str(ROOT / "models"))
        import answerer as packaged  # models/answerer.py

        path = packaged.assemble(packaged.MODELS[args.model])
        with llama_server(path, folder / "llama.log", context_tokens=args.context) as server:
            yield server.url, args.model


def score(question: dict, status: int, content: dict, seconds: float) -> dict:
    message = content.get("message", "") if status == 200 else ""
    documents = content.get("documents", []) if status == 200 else []
    abstained = status == 428 or (status == 200 and says_nothing_relevant(message))
    cited = {int(n) for n in CITATION.findall(message)}
    cited_ids = {d["id"] for i, d in enumerate(documents, start=1) if i in cited}
    answers = question["answers"] or [""]
    return {
        "answerable": question["answerable"],
        "status": status,
        "seconds": seconds,
        "abstained": abstained,
        "gold_source": question["gold_doc"] in {d["id"] for d in documents},
        "cites": bool(cited_ids),
        "cites_gold": question["gold_doc"] in cited_ids,
        "f1": max(f1(message, a) for a in answers) if question["answerable"] else 0.0,
        "em": max(float(normalized(message) == normalized(a)) for a in answers),
        "contained": any(normalized(a) in normalized(message) for a in answers),
        "message": message[:300],
    }


def summary(rows: list[dict]) -> dict[str, float]:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    citing = [r for r in answerable if r["cites"]]
    seconds = sorted(r["seconds"] for r in rows)
    mean = lambda values: round(statistics.fmean(values), 3) if values else 0.0  # noqa: E731
    return {
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "gold source": mean([r["gold_source"] for r in answerable]),
        "F1": mean([r["f1"] for r in answerable]),
        "EM": mean([r["em"] for r in answerable]),
        "contained": mean([r["contained"] for r in answerable]),
        "abstained (unanswerable)": mean([r["abstained"] for r in unanswerable]),
        "wrong abstentions": mean([r["abstained"] for r in answerable]),
        "citation precision": mean([r["cites_gold"] for r in citing]),
        "cites at all": mean([r["cites"] for r in answerable]),
        "p50 s": round(statistics.median(seconds), 1) if seconds else 0.0,
        "p95 s": round(seconds[int(0.95 * (len(seconds) - 1))], 1) if seconds else 0.0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument(
        "--model", default="extractive", help="extractive, or a models/answerer.py name"
    )
    parser.add_argument("--llm-url", help="any OpenAI-compatible /v1 instead")
    parser.add_argument("--llm-model", default="", help="its model name")
    parser.add_argument("--context", type=int, default=8192, help="llama.cpp's context tokens")
    parser.add_argument("--answerable", type=int, default=20)
    parser.add_argument("--unanswerable", type=int, default=10)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-ingest", action="store_true", help="--solr-url holds SQuAD")
    args = parser.parse_args(argv)
    questions = sample(args.answerable, args.unanswerable)
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-answers-") as folder,
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        if not args.no_ingest:
            print("ingesting the SQuAD paragraphs ...", flush=True)
            asyncio.run(ingest(solr_url, embeddings_url))
        with answerer(args, Path(folder), embeddings_url) as (endpoint, model):
            properties = (ROOT / "rag.properties").read_text(encoding="utf-8")
            overrides = {
                "solr.url": solr_url,
                "ai.api.endpoint": endpoint,
                "ai.embeddings.endpoint": embeddings_url,
                "llm.model": model,
                "prompt.templates.dir": str(ROOT / "prompts"),
                **dict(item.split("=", 1) for item in args.set),
            }
            path = Path(folder) / "rag.properties"
            path.write_text(
                properties + "\n" + "\n".join(f"{k}={v}" for k, v in overrides.items()) + "\n"
            )
            with serve_in_thread(create_app(path), health_path="/health/live") as base:
                for number, question in enumerate(questions, start=1):
                    started = time.perf_counter()
                    response = httpx.post(
                        f"{base}/ai/rag", json={"query": question["question"]}, timeout=600
                    )
                    seconds = time.perf_counter() - started
                    row = score(question, response.status_code,
                                response.json().get("content", {}), seconds)  # fmt: skip
                    rows.append({"question": question["question"], **row})
                    said = row["message"][:80]
                    print(
                        f"{number}/{len(questions)} {seconds:.1f}s f1={row['f1']:.2f} "
                        f"abstained={row['abstained']} {said!r}",
                        flush=True,
                    )
    result = {"model": model, "settings": args.set, **summary(rows)}
    print(json.dumps(result, indent=1))
    save_results(f"answers-{model}", {"summary": result, "rows": rows})


if __name__ == "__main__":
    main()

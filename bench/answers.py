"""Answer quality end to end on SQuAD 2.0: the whole /ai/rag pipeline against a real answerer.

The 708 paragraphs (bench/data/squad2) are ingested into a Solr started for the run (or
`--solr-url`); then a seeded sample of answerable and unanswerable questions (the same every
run) goes through /ai/rag of the service on the shipped settings, its LLM one of:
- `extractive`: the local model server's extractive answerer (it quotes sentences);
- a GGUF served by our llama.cpp build (`--model qwen2.5-coder-0.5b-instruct`, assembled by
  service/models/packaged.py), or any OpenAI-compatible `--llm-url` with `--llm-model`.
Scored as the SQuAD paper does (lower case, no punctuation, no a/an/the, single spaces): exact
match and token F1 against the best gold answer, "gold answer contained"; the gold paragraph
among the sources; citation precision (the answer cites the gold paragraph, when it cites);
abstention on unanswerable questions (a 428, or an answer that only says the documents do not
hold it) and wrong abstentions on answerable ones; p50/p95 seconds an answer, and to its
first words (each question is asked with `stream`, read as a chat widget reads it).

`--collection french`: the French CNIL and CRPA FAQs instead (read from
../shared/datasets/french-qa, never copied; every question answerable, asked with `lang=fr`):
their gold answers are long passages, so the measure that counts is the recall of the gold
answer's words; rows are also summed up by question kind and source (`title/cnil`...).
`--half dev|test|both|all` (squad and french; dev by default): only the questions of that
half's articles are asked (bench.splits, bench/data/splits.json; issue 69): tune on dev, decide
on test; every document is still ingested, so retrieval faces them all. `both` asks the two
halves' samples in turn in one run (one ingestion, the same load on both); Ctrl-C (or `kill
-INT`) stops a run and sums up the questions answered. The last line sums the half up as issue
69 asks: F1, EM, contained, answerable and unanswerable questions refused,
answer and first words p50.
`--collection samples`: the sample corpus `make run` indexes (79 Python reference topics),
asked "What is <topic>?" of each (no gold answer: wrong abstentions are the measure), then
`--unanswerable` off-topic SQuAD questions.

`--action rag --action agentic`: each question asked of both, the agent (`--agent`, Datafari's
`generic` by default) through POST /ai with the body Datafari 7's MCP server sends; the rows
are summed up per action too.

    python -m bench.answers [--model NAME | --llm-url URL --llm-model NAME] [--rerank]
                            [--collection squad|french|samples] [--half dev|test|both|all]
                            [--answerable 20]
                            [--unanswerable 10] [--set KEY=VALUE ...]
                            [--action rag --action agentic [--agent generic]]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import logging
import random
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench import offtopic, splits
from bench.support import (
    ROOT,
    fresh_solr,
    given_or_started,
    model_server,
    save_results,
    shipped_properties,
)
from service.api.app import create_app
from service.config import settings_from_mapping
from service.evaluation import Answered, Expected, ask, scored, summary
from service.ingest import SourceDocument
from service.ingest.indexer import indexer_for
from service.llm.embeddings import embeddings_client
from service.models import packaged
from service.retrieval import SolrClient
from testing.llama import llama_server
from testing.servers import serve_in_thread

SQUAD = Path(__file__).parent / "data" / "squad2"
FRENCH = ROOT.parent / "shared" / "datasets" / "french-qa"


def sample(answerable: int, unanswerable: int, half: str = "all") -> list[Expected]:
    """The same seeded sample every run: `answerable` questions, then `unanswerable` ones, of
    `half`'s articles (bench.splits; "all": every article). A half's sample is the questions
    of its articles in the order the whole set is shuffled in, so `all` is the sample as it
    always was."""
    asked = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    shuffled = splits.in_half("squad2", random.Random(38).sample(asked, len(asked)), half)
    chosen = [q for q in shuffled if q["answerable"]][:answerable] + [
        q for q in shuffled if not q["answerable"]
    ][:unanswerable]
    return [
        Expected(q["question"], tuple(q["answers"]), frozenset([q["gold_doc"]]),
                 no_answer=not q["answerable"])
        for q in chosen
    ]  # fmt: skip


def french_sample(count: int, half: str = "all") -> list[tuple[Expected, str]]:
    """A seeded sample of the French FAQ's questions (all answerable; read from ../shared,
    never copied) of `half`'s FAQ articles (bench.splits), each with its group: `title` or
    `paraphrase`, and `cnil` or `crpa`. `all`: the sample as it always was."""
    asked = [json.loads(line) for line in (FRENCH / "questions.jsonl").open(encoding="utf-8")]
    if half == "all":
        chosen = random.Random(38).sample(asked, min(count, len(asked)))
    else:
        shuffled = random.Random(38).sample(asked, len(asked))
        chosen = splits.in_half("french-qa", shuffled, half, FRENCH)[:count]
    return [
        (Expected(q["question"], tuple(q["answers"]), frozenset([q["gold_doc"]]), lang="fr"),
         f"{q['kind']}/{q['source']}")
        for q in chosen
    ]  # fmt: skip


def samples_sample(offtopic: int, topics: int | None = None) -> list[Expected]:
    """The sample corpus `make run` indexes: "What is <topic>?" for each of its topics (or its
    first `topics`; all answerable: wrong abstentions are what is measured), then `offtopic`
    SQuAD questions (Wikipedia; nothing in Python's docs answers them), as bench.offtopic asks
    them."""
    documents = corpus("samples")[:topics]
    asked = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    chosen = random.Random(32).sample(asked, len(asked))
    away = [q["question"] for q in chosen if q["answerable"]][:offtopic]
    return [Expected(f"What is {d.title}?", documents=frozenset([d.id])) for d in documents] + [
        Expected(question, no_answer=True) for question in away
    ]


def corpus(collection: str) -> list[SourceDocument]:
    if collection == "samples":
        with tempfile.TemporaryDirectory(prefix="bench-samples-") as folder:
            return offtopic.sample_corpus(Path(folder))[0]
    folder, language = (FRENCH, "fr") if collection == "french" else (SQUAD, "")
    rows = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
    return [SourceDocument(id=r["id"], title=r["title"], url="", content=r["content"],
                           language=language) for r in rows]  # fmt: skip


async def ingest(
    solr_url: str,
    embeddings_url: str,
    documents: list[SourceDocument],
    chosen: dict[str, str] | None = None,
) -> None:
    """The documents in a fresh FileShare/VectorMain, embedded as `chosen` (the run's keys)
    says: its ai.embeddings.* and vector.chunk.* keys apply."""
    passages = {key: value for key, value in (chosen or {}).items()
                if key.startswith(("ai.embeddings.", "vector.chunk."))}  # fmt: skip
    settings = settings_from_mapping(
        {"solr.url": solr_url, **passages, "ai.embeddings.endpoint": embeddings_url},
        source="bench",
        env={},
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
        path = packaged.assemble(packaged.MODELS[args.model])
        with llama_server(path, folder / "llama.log", context_tokens=args.context) as server:
            yield server.url, args.model


@contextlib.contextmanager
def served(
    args: argparse.Namespace, collection: str, overrides: dict[str, str]
) -> Iterator[tuple[httpx.Client, str]]:
    """(a client of the service, the model name): the service on the shipped rag.properties and
    `overrides` (then the `--set`s), its Solr holding `collection` (ingested unless
    `--no-ingest`), its LLM the one the arguments name (--model, --llm-url)."""
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as folder,
        given_or_started(args.solr_url, fresh_solr) as solr_url,
        given_or_started(args.embeddings_url, model_server) as embeddings_url,
    ):
        chosen = {**overrides, **dict(item.split("=", 1) for item in args.set)}
        if not args.no_ingest:
            print(f"ingesting the {collection} documents ...", flush=True)
            asyncio.run(ingest(solr_url, embeddings_url, corpus(collection), chosen))
        with answerer(args, Path(folder), embeddings_url) as (endpoint, model):
            settings = {
                "solr.url": solr_url,
                "ai.api.endpoint": endpoint,
                "ai.embeddings.endpoint": embeddings_url,
                "llm.model": model,
                "prompt.templates.dir": str(ROOT / "prompts"),
                "rerank.endpoint": embeddings_url,  # the local cross-encoder, when on
                **chosen,
            }
            path = shipped_properties(Path(folder), settings)
            with (
                serve_in_thread(create_app(path), health_path="/health/live") as base,
                httpx.Client(base_url=base, timeout=900) as http,
            ):
                yield http, model


def ask_datafari(http: httpx.Client, expected: Expected, action: str, agent: str) -> Answered:
    """POST /ai `expected`'s question as Datafari 7's clients ask it (its MCP server: `action`,
    `agent`, empty filters and history), read as `ask`'s answer: a service error (HTTP 200,
    status ERROR) is its code's status, so a 428 is an abstention as /ai/rag's is."""
    asked = {"query": expected.question, "action": action, "filters": {}, "history": []}
    asked |= {"agent": agent} if agent else {}
    asked |= {"lang": expected.lang} if expected.lang else {}
    started = time.perf_counter()
    response = http.post("/ai", json=asked)
    seconds = time.perf_counter() - started
    try:
        body = response.json()
    except ValueError:
        return Answered(response.status_code, {}, seconds)
    content = body.get("content") or {}
    if body.get("status") != "OK":
        code = str((content.get("error") or {}).get("code", "500"))
        status = int(code) if code.isdigit() else 500
        return Answered(status, {"content": content.get("error") or {}}, seconds)
    return Answered(response.status_code, body, seconds)


HEADLINE = (
    ("F1", "F1"),
    ("EM", "EM"),
    ("contained", "contained"),
    ("refused answerable", "wrong abstentions"),
    ("refused unanswerable", "abstained (unanswerable)"),
    ("p50 s", "p50 s"),
    ("first words p50 s", "first words p50 s"),
)


def headline(half: str, measures: dict) -> str:
    """The measures issue 69 asks of every answer row, on one line: `half`'s token F1, exact
    match and contained (answerable questions), answerable and unanswerable questions refused,
    answer and first words p50 ("-": nothing to measure it on)."""
    said = [f"{name} {'-' if measures.get(key) is None else measures[key]}"
            for name, key in HEADLINE]  # fmt: skip
    return f"{half} half: " + ", ".join(said)


class _Warnings(logging.Handler):
    """Counts the service's warnings by logger: a fallback (an LLM's JSON that could not be
    used by multi-query, grading or the grounding judge) is one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: collections.Counter[str] = collections.Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[record.name] += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solr-url", help="a Solr with our configsets (default: start one)")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument(
        "--model", default="extractive", help="extractive, or a service/models/packaged.py name"
    )
    parser.add_argument("--llm-url", help="any OpenAI-compatible /v1 instead")
    parser.add_argument("--llm-model", default="", help="its model name")
    parser.add_argument(
        "--context", type=int, default=packaged.CONTEXT_TOKENS, help="llama.cpp's context tokens"
    )
    parser.add_argument(
        "--answerable", type=int, help="answerable questions (default 20; samples: every topic)"
    )
    parser.add_argument("--unanswerable", type=int, default=10)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--no-ingest", action="store_true", help="--solr-url holds the set")
    parser.add_argument(
        "--collection",
        choices=["squad", "french", "samples"],
        default="squad",
        help="SQuAD 2.0's paragraphs, the French FAQs (../shared, answerable only), or the "
        "sample corpus make run indexes (its topics, then --unanswerable off-topic questions)",
    )
    parser.add_argument(
        "--half",
        choices=["dev", "test", "both", "all"],
        help="squad and french: ask only the questions of that half's articles (bench.splits; "
        "every document is still ingested); dev (the default) to tune on, test to decide, "
        "both for each half's sample in one run (one ingestion; the halves' questions "
        "interleaved, answerable and unanswerable spread, so that a run stopped early with "
        "Ctrl-C still sums both halves up alike), all for every article (the sample as before "
        "the halves)",
    )
    parser.add_argument(
        "--rerank", action="store_true", help="rerank.enabled, by the local cross-encoder"
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="the ceiling row: each question asked of its gold paragraph alone (/ai/rag's id)",
    )
    parser.add_argument(
        "--action",
        action="append",
        choices=["rag", "agentic"],
        help="rag: /ai/rag, streamed (the default); agentic: POST /ai action agentic, as "
        "Datafari 7's MCP server asks it; given twice, each question is asked of both",
    )
    parser.add_argument(
        "--agent", default="generic", help="the agent action agentic names (Datafari's default)"
    )
    args = parser.parse_args(argv)
    actions = args.action or ["rag"]
    if args.collection == "samples" and args.half not in (None, "all"):
        parser.error("--half: the sample corpus has no halves (its topics are all asked)")
    args.half = args.half or ("all" if args.collection == "samples" else "dev")
    warnings = _Warnings()
    logging.getLogger("service").addHandler(warnings)
    if args.collection == "french" and not (FRENCH / "questions.jsonl").is_file():
        raise SystemExit(f"bench.answers: no French set at {FRENCH}")
    halves = list(splits.HALVES) if args.half == "both" else [args.half]
    per_half = [[(question, group, half) for question, group in asked(args, half)]
                for half in halves]  # fmt: skip
    # answerable and unanswerable spread over the run, one half or both: a run stopped early
    # sums up both kinds
    chosen = interleaved([mixed(questions) for questions in per_half])
    rows: list[dict] = []
    # `kill -INT` stops a run started in the background too (a shell without job control
    # starts its background jobs with SIGINT ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    overrides = {"rerank.enabled": "true"} if args.rerank else {}
    overrides |= {"agentic.enabled": "true"} if "agentic" in actions else {}
    with served(args, args.collection, overrides) as (http, model):
        try:
            for number, (question, group, half) in enumerate(chosen, start=1):
                for action in actions:
                    more = {"id": next(iter(question.documents))} if args.ceiling else {}
                    answered = (
                        ask(http, question, **more)
                        if action == "rag"
                        else ask_datafari(http, question, action, args.agent)
                    )
                    row = {**scored(question, answered), "group": group, "action": action}
                    row |= replayable(question, answered)
                    rows.append({**row, "half": half})
                    print(
                        f"{number}/{len(chosen)} {half} {action:7} {row['seconds']:.1f}s (first "
                        f"words {row['first_words'] or 0:.1f}s) f1={row['f1'] or 0:.2f} "
                        f"abstained={row['abstained']} calls={row['llm_calls']} "
                        f"status={row['status']} {(row['message'] or row['reason'])[:80]!r}",
                        flush=True,
                    )
                    print(f"row {json.dumps(row)}", flush=True)  # a run cut short is still read
        except KeyboardInterrupt:
            print(f"interrupted: the {len(rows)} questions answered are summed up", flush=True)
    settings = (["rerank (local cross-encoder)"] if args.rerank else []) + args.set
    settings += ["ceiling: the gold paragraph alone"] if args.ceiling else []
    settings += [f"agentic: agent {args.agent}"] if "agentic" in actions else []
    if len(rows) < len(chosen):
        settings += [f"interrupted after {len(rows)} of {len(chosen)} questions"]
    results = {}
    for half in halves:
        mine = [r for r in rows if r["half"] == half]
        groups = sorted({r["group"] for r in mine})
        by_group = {group: summary([r for r in mine if r["group"] == group]) for group in groups}
        results[half] = {"model": model, "collection": args.collection, "half": half,
                         "settings": settings, **summary(mine), "groups": by_group,
                         "warnings": dict(warnings.counts)}  # fmt: skip
        if len(actions) > 1:  # each action's rows apart (the questions are the same)
            results[half]["actions"] = {
                action: {**summary(its := [r for r in mine if r["action"] == action]),
                         "groups": {g: summary([r for r in its if r["group"] == g])
                                    for g in groups}}
                for action in actions
            }  # fmt: skip
        print(json.dumps(results[half], indent=1))
    for half in halves:
        print(headline(half, results[half]), flush=True)
    name = f"answers-{model}" + ("" if args.collection == "squad" else f"-{args.collection}")
    name += "" if args.half == "all" else f"-{args.half}"
    name += "" if actions == ["rag"] else "-" + "-".join(actions)
    summed = results[halves[0]] if len(halves) == 1 else results
    save_results(name, {"summary": summed, "rows": rows})


def replayable(question: Expected, answered: Answered) -> dict:
    """What a row needs for the answer stages to be replayed on it offline (issue 69: the
    phrase cut, the echo check): the gold answers and each source's text the LLM read."""
    content = answered.body.get("content") if answered.status == 200 else None
    documents = content.get("documents", []) if isinstance(content, dict) else []
    return {
        "golds": list(question.answers),
        "sources": [d.get("content", "") for d in documents if isinstance(d, dict)],
    }


def asked(args: argparse.Namespace, half: str) -> list[tuple[Expected, str]]:
    """The questions the arguments ask of `half`, each with its group in the report."""
    answerable = 20 if args.answerable is None else args.answerable
    if args.collection == "french":
        return french_sample(answerable, half)
    if args.collection == "samples":
        return [(q, "off-topic" if q.no_answer else "topic")
                for q in samples_sample(args.unanswerable, args.answerable)]  # fmt: skip
    return [(q, "answerable" if q.answers else "unanswerable")
            for q in sample(answerable, args.unanswerable, half)]  # fmt: skip


def mixed(questions: list[tuple[Expected, str, str]]) -> list[tuple[Expected, str, str]]:
    """`questions` with the answerable and unanswerable ones spread evenly (each kind's order
    kept), so that any first part of a run holds both kinds in their proportion."""
    kinds = [[q for q in questions if q[0].no_answer == no_answer] for no_answer in (False, True)]
    place = {id(q): (n + 0.5) / len(kind) for kind in kinds for n, q in enumerate(kind)}
    return sorted(questions, key=lambda q: place[id(q)])


def interleaved(lists: list[list[tuple[Expected, str, str]]]) -> list[tuple[Expected, str, str]]:
    """One of each list in turn (the halves asked alike, under the same load)."""
    return [item for items in itertools.zip_longest(*lists) for item in items if item is not None]


if __name__ == "__main__":
    main()

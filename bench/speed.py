"""How fast the embedded model answers a RAG prompt, by llama.cpp's serving options: time to
first words and to the whole answer, with the prompt cache on or off, with the 0.5B model as
a speculative-decoding draft, and by the sources' size.

Each prompt is what the stuff chain sends (prompts/ rendered by the service's PromptBuilder):
a SQuAD 2.0 question and `--sources` paragraphs of its article (its gold paragraph first),
asked once each, streamed, greedy, at most 40 tokens (a short answer's length). The same
seeded questions every run; each row with a llama-server of its own.

    python -m bench.speed [--questions 20] [--sources 1 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from bench.answers import SQUAD
from bench.support import ROOT, save_results
from service.chains import Chunk, PromptLibrary, Question, number_chunks
from service.chains.prompts import PromptBuilder
from service.evaluation import p50, p95
from service.models import packaged
from service.retrieval import RetrievedDocument
from testing.llama import llama_server

TARGET = packaged.MODELS["qwen2.5-coder-1.5b-instruct"]
DRAFT = packaged.MODELS["qwen2.5-coder-0.5b-instruct"]
ROWS: dict[str, list[str]] = {
    "prompt cache on (llama.cpp's default, shipped)": [],
    "prompt cache off": ["--no-cache-prompt"],
    "0.5B draft, speculative decoding": ["--model-draft", "{draft}"],
}


def prompts(count: int, sources: int) -> list[list[dict[str, str]]]:
    """`count` stuff requests: a seeded SQuAD question, its gold paragraph and the next
    paragraphs of its article, up to `sources`."""
    corpus = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    by_id = {row["id"]: row for row in corpus}
    asked = [json.loads(line) for line in (SQUAD / "questions.jsonl").open(encoding="utf-8")]
    chosen = random.Random(51).sample([q for q in asked if q["answerable"]], count)
    library = PromptLibrary(ROOT / "prompts")
    requests = []
    for question in chosen:
        gold = by_id[question["gold_doc"]]
        article = [row for row in corpus if row["title"] == gold["title"] and row is not gold]
        documents = [gold, *article[: sources - 1]]
        chunks = number_chunks(
            [Chunk(RetrievedDocument(d["id"], d["title"], "", d["content"]), d["content"])
             for d in documents]
        )  # fmt: skip
        builder = PromptBuilder(library, Question(question["question"]))
        blocks = "".join(builder.block(chunk) for chunk in chunks)
        messages = builder.messages("stuff", sources=blocks)
        requests.append([{"role": m.role, "content": m.content} for m in messages])
    return requests


def ask(url: str, messages: list[dict[str, str]]) -> tuple[float, float, int]:
    """(seconds to the first words, seconds in all, prompt tokens) of one streamed answer."""
    body = {"messages": messages, "stream": True, "temperature": 0, "max_tokens": 40,
            "stream_options": {"include_usage": True}}  # fmt: skip
    started = time.perf_counter()
    first, prompt_tokens = 0.0, 0
    with httpx.stream("POST", f"{url}chat/completions", json=body, timeout=300) as response:
        for line in response.iter_lines():
            if not line.startswith("data:") or line.endswith("[DONE]"):
                continue
            chunk = json.loads(line.removeprefix("data:"))
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"].get("prompt_tokens", 0)
            for choice in chunk.get("choices", []):
                if not first and ((choice.get("delta") or {}).get("content") or "").strip():
                    first = time.perf_counter() - started
    return first, time.perf_counter() - started, prompt_tokens


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--sources", type=int, nargs="*", default=[1, 3])
    parser.add_argument("--only", nargs="*", choices=list(ROWS), help="these rows")
    args = parser.parse_args(argv)
    target = packaged.assemble(TARGET)
    draft = packaged.assemble(DRAFT)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-speed-") as folder:
        for name in args.only or ROWS:
            extra = [part.replace("{draft}", str(draft)) for part in ROWS[name]]
            log = Path(folder) / "llama.log"
            with llama_server(target, log, context_tokens=packaged.CONTEXT_TOKENS,
                              extra=extra) as server:  # fmt: skip
                for sources in args.sources:
                    timed = [ask(server.url, m) for m in prompts(args.questions, sources)]
                    firsts = sorted(t[0] for t in timed)
                    totals = sorted(t[1] for t in timed)
                    row = {
                        "row": name,
                        "sources": sources,
                        "prompt tokens": round(statistics.fmean(t[2] for t in timed)),
                        "first words p50 s": p50(firsts, 2),
                        "first words p95 s": p95(firsts, 2),
                        "answer p50 s": p50(totals, 2),
                        "answer p95 s": p95(totals, 2),
                    }
                    print(row, flush=True)
                    results.append(row)
    save_results("speed", results)
    print(
        f"\n{'row':<48} {'sources':>7} {'tokens':>6} {'first p50/p95 s':>16} {'all p50/p95 s':>14}"
    )
    for r in results:
        print(f"{r['row']:<48} {r['sources']:>7} {r['prompt tokens']:>6} "
              f"{r['first words p50 s']:>7}/{r['first words p95 s']:<8} "
              f"{r['answer p50 s']:>6}/{r['answer p95 s']}")  # fmt: skip


if __name__ == "__main__":
    main()

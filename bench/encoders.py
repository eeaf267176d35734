"""The local sentence encoders' speed, in process: passages a second, and one question's
milliseconds (p50/p95), on the same texts for each model.

The passages are Cranfield abstracts cut as ingestion cuts them (1,000 characters at most);
the questions are Cranfield's. A model is warmed up on a few texts before it is timed.

    python -m bench.encoders [--passages 256] [--questions 50] [--models NAME ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import cranfield
from bench.support import save_results
from service.models.encoder import MODELS, load_encoder
from service.text.chunk import Chunker


def passages(count: int) -> list[str]:
    chunker = Chunker(1000, 100)
    found: list[str] = []
    for document in cranfield.load_documents():
        found += [f"{document.title}\n{piece}" for piece in chunker.run(document.content)]
        if len(found) >= count:
            break
    return found[:count]


def measure(model: str, texts: list[str], questions: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    encoder = load_encoder(model)
    loaded = time.perf_counter() - started
    prefix, question_prefix = ("passage: ", "query: ") if MODELS[model].engine == "e5" else ("", "")
    encoder.encode([prefix + text for text in texts[:8]])  # warm up
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        encoder.encode([prefix + text for text in texts[start : start + 32]])
    seconds = time.perf_counter() - started
    single = []
    for question in questions:
        started = time.perf_counter()
        encoder.encode([question_prefix + question])
        single.append((time.perf_counter() - started) * 1000)
    single.sort()
    return {
        "load_s": round(loaded, 2),
        "passages_per_s": round(len(texts) / seconds, 1),
        "question_ms_p50": round(statistics.median(single), 1),
        "question_ms_p95": round(single[int(0.95 * (len(single) - 1))], 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=256)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument(
        "--models", nargs="*", default=["all-MiniLM-L6-v2", "multilingual-e5-small"]
    )
    args = parser.parse_args(argv)
    texts = passages(args.passages)
    questions = [q.text for q in cranfield.load_queries()][: args.questions]
    rows = {model: measure(model, texts, questions) for model in args.models}
    save_results("encoders", rows)
    print(f"{len(texts)} passages, {len(questions)} questions")
    for model, row in rows.items():
        print(f"{model:<24} {row}")


if __name__ == "__main__":
    main()

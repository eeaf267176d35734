"""Grounding check: precision and recall of "unsupported" on sentences built from Cranfield.

Each item is one answer sentence and the abstract sent as its source. Supported sentences are
taken from the abstract or rewritten from it by rule (its first clause; two consecutive
sentences joined; nouns' number changed); unsupported ones are a sentence of another abstract
(far away in the collection), one of the abstract's own sentences with a number changed, one
with a negation added, and one with another abstract's claim added as a clause (what a
fluent model that copies a source sentence and goes on does). Abstracts are sentence-cased
first (Cranfield's are lower case, with " ." between sentences). Built by rule, never tuned
on: the check's thresholds are its defaults. Then code-bearing sources
(bench/data/grounding-code/pairs.json, written by hand, never tuned on): prose restating a code
line ("code restated", supported) and prose the code does not say ("code contradicted").

    python -m bench.grounding [--documents 150] [--embeddings-url URL]
                              [--llm-url URL --llm-model NAME --llm-items 200]

Reports, for words alone, the default (words, then embeddings) and, given an LLM, method llm
(on an even sample of the sentences), precision and recall of "unsupported", and the cost
per answer (ms, embeddings and LLM calls).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from bench.cranfield import load_documents
from bench.support import ROOT, given_or_started, model_server, save_results
from service.chains import PromptLibrary
from service.config import Settings
from service.grounding import GroundingCheck, LlmGroundingCheck
from service.llm import ChatClient, EmbeddingsClient, LLMOptions
from service.llm.embeddings import Kind
from service.llm.size import request_size
from service.text.claims import numbers, sentences_of

CODE_PAIRS = ROOT / "bench" / "data" / "grounding-code" / "pairs.json"
_AUXILIARY = re.compile(r"\b(is|are|was|were|can|has|have|does|do|will|may)\b")


@dataclass(frozen=True)
class Item:
    sentence: str
    source: str
    supported: bool
    rule: str


def sentence_cased(text: str) -> str:
    """Cranfield's "a study . the results ." as "A study. The results."."""
    parts = [part.strip() for part in re.split(r"\s+\.(?:\s+|$)", text) if part.strip()]
    return " ".join(part[0].upper() + part[1:] + "." for part in parts)


def first_clause(sentence: str) -> str | None:
    clause = sentence.split(",")[0].rstrip(".")
    words = clause.split()
    return " ".join(words[:20]) + "." if len(words) >= 6 else None


def number_changed(sentence: str) -> str | None:
    found = sorted(numbers(sentence))
    if not found or not found[0].isdigit():
        return None
    changed = str(int(found[0]) * 2 + 1)
    written = re.sub(rf"\b{re.escape(found[0])}\b", changed, sentence, count=1)
    return written if written != sentence else None  # a figure in words ("two"): not changed


def negation_added(sentence: str) -> str | None:
    if _AUXILIARY.search(sentence) is None:
        return None
    return _AUXILIARY.sub(lambda m: f"{m.group(1)} not", sentence, count=1)


def clause_added(sentence: str, other: str) -> str | None:
    """A source sentence with a claim of another abstract tacked on: "..., which <claim>."."""
    clause = first_clause(other)
    if clause is None:
        return None
    return f"{sentence.rstrip('.')}, which means that {clause[0].lower()}{clause[1:]}"


def plural_swapped(sentence: str) -> str:
    """Every word of 6+ letters ending in s loses it; the others of 6+ letters gain one."""

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        return word[:-1] if word.endswith("s") else word + "s"

    return re.sub(r"\b[a-z]{6,}\b", swap, sentence)


def build_items(count: int) -> list[Item]:
    abstracts = [sentence_cased(d.content) for d in load_documents() if d.content]
    abstracts = [a for a in abstracts if len(sentences_of(a)) >= 3]
    chosen = abstracts[:: max(len(abstracts) // count, 1)][:count]
    items: list[Item] = []
    for position, abstract in enumerate(chosen):
        sentences = sentences_of(abstract)
        taken = sentences[position % len(sentences)]
        items.append(Item(taken, abstract, True, "taken"))
        rewritten = [
            ("first clause", first_clause(sentences[0])),
            ("joined", f"{sentences[0].rstrip('.')}; {sentences[1][0].lower()}{sentences[1][1:]}"),
            ("number of nouns", plural_swapped(sentences[1])),
        ][position % 3]
        if rewritten[1]:
            items.append(Item(rewritten[1], abstract, True, rewritten[0]))
        far = chosen[(position + len(chosen) // 2) % len(chosen)]
        items.append(Item(sentences_of(far)[0], abstract, False, "another abstract"))
        changed = next(filter(None, (number_changed(s) for s in sentences)), None)
        negated = next(filter(None, (negation_added(s) for s in sentences)), None)
        added = clause_added(taken, sentences_of(far)[-1])
        for rule, sentence in (
            ("number changed", changed),
            ("negation added", negated),
            ("clause added", added),
        ):
            if sentence:
                items.append(Item(sentence, abstract, False, rule))
    return items + code_items()


def code_items() -> list[Item]:
    """The code-bearing sources' sentences: restating a code line, or not said by it."""
    items = []
    for pair in json.loads(CODE_PAIRS.read_text(encoding="utf-8")):
        items += [Item(s, pair["source"], True, "code restated") for s in pair["supported"]]
        items += [Item(s, pair["source"], False, "code contradicted") for s in pair["unsupported"]]
    return items


async def evaluate(
    items: list[Item], check: GroundingCheck | LlmGroundingCheck, calls: list[int]
) -> dict[str, object]:
    flagged: list[bool] = []  # "unsupported", as the check decides
    methods: list[str] = []
    started = time.perf_counter()
    for item in items:
        grounding = await check.run(item.sentence, [(1, item.source)])
        flagged.append(grounding.supported < grounding.total)
        methods.append(grounding.method)
    seconds = time.perf_counter() - started
    truth = [not item.supported for item in items]
    hits = sum(1 for f, t in zip(flagged, truth, strict=True) if f and t)
    code = [i for i, item in enumerate(items) if item.rule.startswith("code")]
    code_hits = sum(1 for i in code if flagged[i] and truth[i])
    by_rule: dict[str, list[int]] = {}
    for item, flag in zip(items, flagged, strict=True):
        right = flag != item.supported
        by_rule.setdefault(item.rule, [0, 0])[0] += right
        by_rule[item.rule][1] += 1
    return {
        "sentences": len(items),
        "precision": hits / max(sum(flagged), 1),
        "recall": hits / max(sum(truth), 1),
        # the code-bearing sources alone
        "code_precision": code_hits / max(sum(flagged[i] for i in code), 1),
        "code_recall": code_hits / max(sum(truth[i] for i in code), 1),
        "ms_per_answer": seconds * 1000 / len(items),
        "embedding_calls_per_answer": sum(calls) / len(items),
        "llm_calls_per_answer": len(check.usages) / len(items),
        # method llm: the answers its verdicts decided (the others fell to the default check)
        "judged_by_llm": methods.count("llm") / len(items),
        "right_by_rule": {rule: f"{right}/{total}" for rule, (right, total) in by_rule.items()},
    }


class CountingEmbeddings(EmbeddingsClient):
    """The embeddings client, counting its calls."""

    def __init__(self, http: httpx.AsyncClient, endpoint: str, calls: list[int]) -> None:
        super().__init__(http, LLMOptions(endpoint=endpoint, model="all-MiniLM-L6-v2"))
        self._calls = calls

    async def embed(self, texts: Sequence[str], *, kind: Kind = "passage") -> list[list[float]]:
        self._calls.append(1)
        return await super().embed(texts, kind=kind)


async def run(
    items: list[Item], endpoint: str, llm_url: str | None, llm_model: str, llm_items: int
) -> dict[str, dict[str, object]]:
    results = {}
    async with httpx.AsyncClient(timeout=120) as http:
        for method in ("words", "words + embeddings"):
            calls: list[int] = []
            embeddings = CountingEmbeddings(http, endpoint, calls) if "emb" in method else None
            results[method] = await evaluate(items, GroundingCheck(embeddings), calls)
        if llm_url:
            calls = []
            fallback = GroundingCheck(CountingEmbeddings(http, endpoint, calls))
            llm = ChatClient(http, LLMOptions(endpoint=llm_url, model=llm_model, max_tokens=200))
            settings = Settings()
            judge = LlmGroundingCheck(
                llm, PromptLibrary(ROOT / "prompts"), request_size(settings, llm_model), fallback
            )
            sample = items[:: max(len(items) // llm_items, 1)][:llm_items]
            results[f"llm ({llm_model})"] = await evaluate(sample, judge, calls)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=150, help="abstracts to build from")
    parser.add_argument("--embeddings-url", help="an OpenAI-compatible /v1 (default: ours)")
    parser.add_argument("--llm-url", help="an OpenAI-compatible /v1: also measure method llm")
    parser.add_argument("--llm-model", default="default", help="the model it judges with")
    parser.add_argument("--llm-items", type=int, default=200, help="sentences it judges")
    args = parser.parse_args(argv)
    items = build_items(args.documents)
    supported = sum(item.supported for item in items)
    print(f"{len(items)} sentences: {supported} supported, {len(items) - supported} unsupported")
    with given_or_started(args.embeddings_url, model_server) as endpoint:
        results = asyncio.run(run(items, endpoint, args.llm_url, args.llm_model, args.llm_items))
    print(
        f"\n{'method':<28} {'sentences':>9} {'precision':>9} {'recall':>6} {'ms/answer':>9} "
        f"{'embeddings calls':>16} {'LLM calls':>9}"
    )
    for method, row in results.items():
        print(
            f"{method:<28} {row['sentences']:>9} {row['precision']:>9.3f} {row['recall']:>6.3f} "
            f"{row['ms_per_answer']:>9.1f} {row['embedding_calls_per_answer']:>16.2f} "
            f"{row['llm_calls_per_answer']:>9.2f}"
        )
        if "llm" in method:
            print(f"{'':<20} verdicts the LLM gave (not its fallback): {row['judged_by_llm']:.0%}")
        print(
            f"{'':<20} code-bearing sources: precision {row['code_precision']:.3f}, "
            f"recall {row['code_recall']:.3f}"
        )
        print(f"{'':<20} right by rule: {row['right_by_rule']}")
    save_results("grounding", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Two more looks at an answer, replayed on bench.answers' rows (issue 69, item 3): the answer
checked after it is written (prompts/verify.j2 with the answer: "does a document above say
this answer?") and an
echo asked again (prompts/again.j2), against a llama.cpp server, offline.

A row of `bench.answers ... --set prompt.answer.phrase=false --set grounding.abstain.unsupported=
--set grounding.echo=false` holds the question, the answer as the model wrote it, the text of
each source it read (in their numbers' order), the verification's P(yes) before the answer and
the gold answers. Each row's requests are rebuilt with the service's own PromptBuilder and
templates (the sources' titles read from bench/data/squad2), so what is asked here is what the
service would ask; the answer stages (the phrase cut, the echo check) are the service's code.

    python -m bench.rechecks bench/results/answers-...-dev.json [--llm-url URL] [--out F]
    python -m bench.rechecks ROWS --scores [--rerank-url URL]
    python -m bench.rechecks ROWS --variants [--llm-url URL]
    python -m bench.rechecks ROWS --leans|--examples bench/data/verify-examples.txt [--llm-url URL]

Writes each row's `checked` (P(yes) of the check) and, for an answer the echo check refuses,
`again` (the answer asked again, cut) into F (default: the input's name with -rechecks).
`--scores` writes instead each row's `rerank_best`: the reranker's best score of the
question against the sources the LLM read (the model server's cross-encoder, the pairs cut
as the shipped rag.properties cuts them: 256 tokens, nearest sentences), a signal to combine
with the verification's P(yes) in `--table`. `--variants` writes each row's `variants`: the
verification's P(yes) for other wordings of its question (VARIANTS; a wording that asks
whether the answer is missing counts its P(no)), each the verify request with its last line
replaced, so that after the first the prompt cache makes each a few tokens of work.
`--leans` writes each row's `prior` (P(yes) with no document: how far the documents move the
model is the calibrated signal `--table` calls moved) and, for a row with several sources,
`each` (P(yes) of each alone); `--examples F` each row's `fewshot` (P(yes) with F's worked
examples at the end of the system message).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
from pathlib import Path

import httpx

from service.chains import NumberedChunk, PromptBuilder, Question
from service.chains.prompts import FORMAT_INSTRUCTIONS, PromptLibrary, not_found_sentence
from service.chains.result import Chunk
from service.chains.short_answer import grammar, phrase, phrase_answers
from service.llm.types import ChatMessage, TokenChoice
from service.rag.stages.confidence import yes_probability
from service.rag.stages.echo import echoes
from service.retrieval import RetrievedDocument
from service.text import normalize_question

CORPUS = Path("bench/data/squad2/corpus.jsonl")
RERANK_TOKENS = 256  # rag.properties' rerank.max.tokens


def titles() -> dict[str, tuple[str, str]]:
    """Each SQuAD paragraph's text -> its (id, title)."""
    found = {}
    with CORPUS.open() as lines:
        for line in lines:
            row = json.loads(line)
            found[row["content"]] = (row["id"], row["title"])
    return found


def builder_of(row: dict, prompts: PromptLibrary, known: dict) -> tuple[PromptBuilder, str, int]:
    """The row's PromptBuilder, its sources rendered as the stuff request has them, and how
    many there are."""
    question = Question(
        text=normalize_question(row["question"]),
        format_instruction=FORMAT_INSTRUCTIONS["default"],
        not_found=not_found_sentence("en"),
    )
    builder = PromptBuilder(prompts, question)
    blocks = []
    for number, text in enumerate(row["sources"], start=1):
        doc_id, title = known.get(text, (f"unknown-{number}", ""))
        document = RetrievedDocument(doc_id, title, "", text)
        blocks.append(builder.block(NumberedChunk(number, Chunk(document, text))))
    return builder, "".join(blocks), len(row["sources"])


async def ask(client: httpx.AsyncClient, messages: list[ChatMessage], payload: dict) -> dict:
    body = {"messages": [m.as_dict() for m in messages], "temperature": 0} | payload
    response = await client.post("/chat/completions", json=body, timeout=600)
    response.raise_for_status()
    return response.json()["choices"][0]


def first_token(choice: dict) -> list[TokenChoice]:
    content = (choice.get("logprobs") or {}).get("content") or []
    if not content:
        return []
    step = content[0]
    top = tuple((t["token"], t["logprob"]) for t in step.get("top_logprobs", []))
    return [TokenChoice(step["token"], step["logprob"], top)]


async def recheck(
    row: dict, client: httpx.AsyncClient, prompts: PromptLibrary, known: dict, synthetic: bool
) -> dict:
    if not row.get("sources"):
        return row
    if row["message"].startswith("I could not find") and not synthetic:
        return row
    builder, sources, count = builder_of(row, prompts, known)
    answer = row["message"]
    if not synthetic:
        check = builder.messages("verify", sources=sources)
        asked_verify = "Does a document above say the answer to this question?"
        said = f"Answer: {answer}\n\nDoes a document above say this answer to the question?"
        check[-1] = ChatMessage("user", reworded(check[-1].content, asked_verify, said))
        asked = {"max_tokens": 1, "logprobs": True, "top_logprobs": 10}
        row["checked"] = yes_probability(first_token(await ask(client, check, asked)))
    question = row["question"]
    cut = phrase(answer, question) if phrase_answers(question) else answer
    row["cut"] = cut
    if echoes(cut, question, row["sources"]) or synthetic:
        if synthetic:  # the question said back, as a lost small model writes it
            answer = question.rstrip(" ?") + ". [1]"
        stuff = builder.messages("stuff", sources=sources)
        again = builder.messages("again")[-1]
        messages = [*stuff, ChatMessage("assistant", answer), again]
        form = {"grammar": grammar(range(1, count + 1), not_found=not_found_sentence("en"))}
        choice = await ask(client, messages, form | {"max_tokens": 64})
        text = choice["message"]["content"]
        row["again_raw"] = text
        row["again"] = phrase(text, question) if phrase_answers(question) else text
        row["again_echoes"] = echoes(row["again"], question, row["sources"])
    return row


ASKED_VERIFY = "Does a document above say the answer to this question? Reply only yes or no."
# other wordings of the verification's question (issue 69, item 3); "-": P(no) is the support
VARIANTS = {
    "say": ASKED_VERIFY,
    "written": "Is the answer to this question written in the documents above? Reply only yes "
    "or no.",
    "alone": "Can this question be answered from the documents above alone? Reply only yes or no.",
    "-missing": "Is the answer to this question missing from the documents above? Reply only "
    "yes or no.",
    "exact": "Do the documents above say exactly what this question asks, not only something "
    "close to it? Reply only yes or no.",
}


def reworded(prompt: str, asked: str, instead: str) -> str:
    """The verification's prompt with its question worded otherwise; prompts/verify.j2 no
    longer asking `asked` stops the run (each wording would be the shipped one, unseen)."""
    if asked not in prompt:
        raise SystemExit(f"prompts/verify.j2 no longer asks {asked!r}: update bench.rechecks")
    return prompt.replace(asked, instead)


async def variants(
    row: dict, client: httpx.AsyncClient, prompts: PromptLibrary, known: dict
) -> dict:
    """The row with `variants`: P(yes) of each wording of the verification (VARIANTS)."""
    if not row.get("sources"):
        return row
    builder, sources, _ = builder_of(row, prompts, known)
    found = {}
    for name, asked in VARIANTS.items():
        check = builder.messages("verify", sources=sources)
        check[-1] = ChatMessage("user", reworded(check[-1].content, ASKED_VERIFY, asked))
        payload = {"max_tokens": 1, "logprobs": True, "top_logprobs": 10}
        said = yes_probability(first_token(await ask(client, check, payload)))
        found[name] = None if said is None else (1 - said if name[0] == "-" else said)
    row["variants"] = found
    return row


async def leans(row: dict, client: httpx.AsyncClient, prompts: PromptLibrary, known: dict) -> dict:
    """The row with `prior`, the verification's P(yes) with no document (the model's own lean
    on the question, for a calibrated signal: how far the documents move it), and, when the
    LLM read more than one source, `each`: the verification's P(yes) of each source alone."""
    if not row.get("sources"):
        return row
    builder, _, count = builder_of(row, prompts, known)
    payload = {"max_tokens": 1, "logprobs": True, "top_logprobs": 10}
    row["prior"] = yes_probability(
        first_token(await ask(client, builder.messages("verify", sources="(none)\n"), payload))
    )
    if count > 1:
        each = []
        for text in row["sources"]:
            alone, sources, _ = builder_of(row | {"sources": [text]}, prompts, known)
            check = alone.messages("verify", sources=sources)
            each.append(yes_probability(first_token(await ask(client, check, payload))))
        row["each"] = each
    return row


async def with_examples(
    row: dict, client: httpx.AsyncClient, prompts: PromptLibrary, known: dict, examples: str
) -> dict:
    """The row with `fewshot`: the verification's P(yes) with `examples` (worked examples of
    what a document does and does not say) at the end of the system message, where the prompt
    cache would keep them across questions."""
    if not row.get("sources"):
        return row
    builder, sources, _ = builder_of(row, prompts, known)
    check = builder.messages("verify", sources=sources)
    check[0] = ChatMessage("system", check[0].content.rstrip("\n") + "\n" + examples)
    payload = {"max_tokens": 1, "logprobs": True, "top_logprobs": 10}
    row["fewshot"] = yes_probability(first_token(await ask(client, check, payload)))
    return row


async def scored(row: dict, client: httpx.AsyncClient) -> dict:
    """The row with `rerank_best`: the reranker's best score of its question against the
    sources the LLM read (None: no source)."""
    if not row.get("sources"):
        return row
    body = {
        "query": normalize_question(row["question"]),
        "documents": row["sources"],
        "top_n": 1,
        "max_tokens_per_doc": RERANK_TOKENS,
        "passage_cut": "nearest",
    }
    response = await client.post("/rerank", json=body, timeout=600)
    response.raise_for_status()
    row["rerank_best"] = response.json()["results"][0]["relevance_score"]
    return row


async def main_async(args: argparse.Namespace) -> None:
    text = Path(args.rows).read_text()
    if args.rows.endswith(".log"):  # a run's log: its "row {...}" lines
        rows = [json.loads(line[4:]) for line in text.splitlines() if line.startswith("row {")]
        data = {"rows": rows}
    else:
        data = json.loads(text)
    prompts = PromptLibrary(Path("prompts"))
    known = titles()
    out = Path(args.out or args.rows.rsplit(".", 1)[0] + "-rechecks.json")
    if args.scores:
        async with httpx.AsyncClient(base_url=args.rerank_url) as client:
            for index, row in enumerate(data["rows"]):
                await scored(row, client)
                print(index, row.get("rerank_best"), flush=True)
        out.write_text(json.dumps(data, indent=1))
        return
    # the offline signals: (what the file is called, the coroutine, the row's fields printed)
    modes = {
        "examples": ("fewshot", with_examples, ("fewshot",)),
        "leans": ("leans", leans, ("prior", "each")),
        "variants": ("variants", variants, ("variants",)),
    }
    for mode, (suffix, asked, fields) in modes.items():
        if not getattr(args, mode):
            continue
        out = Path(args.out or args.rows.rsplit(".", 1)[0] + f"-{suffix}.json")
        extra = (Path(args.examples).read_text(encoding="utf-8"),) if mode == "examples" else ()
        async with httpx.AsyncClient(base_url=args.llm_url) as client:
            for index, row in enumerate(data["rows"]):
                await asked(row, client, prompts, known, *extra)
                supported = (row.get("confidence") or {}).get("supported")
                print(index, supported, *(row.get(field) for field in fields), flush=True)
                out.write_text(json.dumps(data, indent=1))
        return
    async with httpx.AsyncClient(base_url=args.llm_url) as client:
        for index, row in enumerate(data["rows"]):
            await recheck(row, client, prompts, known, args.synthetic)
            print(index, row.get("supported"), row.get("checked"), row.get("again"), flush=True)
            out.write_text(json.dumps(data, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows")
    parser.add_argument("--llm-url", default="http://127.0.0.1:8091/v1")
    parser.add_argument("--out")
    parser.add_argument("--scores", action="store_true", help="the reranker's best score a row")
    parser.add_argument("--rerank-url", default="http://127.0.0.1:8001/v1")
    parser.add_argument("--table", action="store_true", help="replay a rechecks file's rows")
    parser.add_argument("--variants", action="store_true", help="other verification wordings")
    parser.add_argument(
        "--examples", help="P(yes) with this file's worked examples in the system message"
    )
    parser.add_argument(
        "--leans", action="store_true", help="P(yes) with no document, and of each source alone"
    )
    parser.add_argument(
        "--synthetic", action="store_true", help="ask every row again after its question said back"
    )
    args = parser.parse_args()
    if args.table:
        table(args.rows)
    else:
        asyncio.run(main_async(args))


# -- the replay: each configuration's refusals and scores on the rows ------------------------------


def kept(row: dict, rule: dict) -> str | None:
    """The answer a configuration keeps for the row (None: refused), replayed in the order the
    service runs its stages: the verification before the answer, the model's own not-found,
    the phrase cut, the echo check (and its second asking), the check after the answer."""
    supported = signal(row, rule.get("signal"))
    if row["status"] != 200 or row["abstained"]:
        return None
    if supported is not None and supported < rule["unsupported"]:
        return None
    question = row["question"]
    answer = phrase(row["message"], question) if phrase_answers(question) else row["message"]
    if echoes(answer, row["question"], row["sources"]):
        again = row.get("again")
        if not rule.get("again") or not again or row.get("again_echoes"):
            return None
        if again.startswith("I could not find"):
            return None
        answer = again
    band = rule.get("band")  # (top, the check's threshold): the check asked below top
    if band and supported is not None and supported < band[0]:
        checked = row.get("checked")
        if checked is not None and checked < band[1]:
            return None
    weak = rule.get("weak")  # (top, score): below top, refused when the reranker's best is low
    if weak and supported is not None and supported < weak[0]:
        best = row.get("rerank_best")
        if best is not None and best < weak[1]:
            return None
    moved = rule.get("moved")  # (top, level): below top, refused when the documents move less
    if moved and supported is not None and supported < moved[0]:
        shift = signal(row, ("moved",))
        if shift is not None and shift < moved[1]:
            return None
    sure = rule.get("sure")  # (top, mean logprob): below top, the answer's own probabilities
    if sure and supported is not None and supported < sure[0]:
        mean = (row.get("confidence") or {}).get("mean_logprob")
        if mean is not None and mean < sure[1]:
            return None
    return answer


def signal(row: dict, names: tuple[str, ...] | None) -> float | None:
    """The verification's P(yes) a rule refuses by: the service's (None), or the mean, in
    log-odds, of the named wordings' (`--variants`)."""
    supported = (row.get("confidence") or {}).get("supported")
    if names is None:
        return supported
    if names == ("each",):  # the best source alone (one source: the verification itself)
        each = [p for p in row.get("each") or [] if p is not None]
        return max(each) if each else supported
    if names == ("fewshot",):
        return row.get("fewshot", supported)
    if names == ("moved",):  # how far the documents move the model's lean, in log-odds
        prior = row.get("prior")
        if supported is None or prior is None:
            return supported
        return 1 / (1 + math.exp(-(logit(supported) - logit(prior))))
    found = [(row.get("variants") or {}).get(name) for name in names]
    if any(value is None for value in found):
        return None
    odds = [logit(p) for p in found]
    return 1 / (1 + math.exp(-sum(odds) / len(odds)))


def logit(p: float) -> float:
    return math.log(max(p, 1e-6) / max(1 - p, 1e-6))


def auc(rows: list[dict], names: tuple[str, ...] | None) -> float:
    """How often an answerable row's signal is above an unanswerable one's (ties half)."""
    high = [signal(r, names) for r in rows if r["answerable"]]
    low = [signal(r, names) for r in rows if not r["answerable"]]
    high, low = [v for v in high if v is not None], [v for v in low if v is not None]
    pairs = sum((a > b) + 0.5 * (a == b) for a in high for b in low)
    return round(pairs / max(len(high) * len(low), 1), 3)


def variants_table(rows: list[dict]) -> None:
    """Each wording's (and each pair's, and all's) AUC, and its refusals at each threshold
    (the service's other stages as shipped: its rows' answers are what it kept, an echo's
    second asking included)."""
    names = list(VARIANTS)
    signals = [(n,) for n in names] + list(itertools.combinations(names, 2)) + [tuple(names)]
    for names_ in signals:
        print(f"{'+'.join(names_):24s} AUC {auc(rows, names_)}")
        for low in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
            rule = {"unsupported": low, "signal": names_}
            shown = "  ".join(f"{k} {v}" for k, v in measures(rows, rule).items())
            print(f"    < {low:<5}", shown)


def leans_table(rows: list[dict]) -> None:
    """The verification against the best source alone, how far the documents move the
    model's lean, and the verification shown worked examples (whichever the rows hold): each
    signal's AUC, refusals by each alone at each threshold, and the shipped threshold with the
    moved lean deciding inside a band below it."""
    signals = [None] + [(name,) for name in ("each", "moved", "fewshot") if _has(rows, name)]
    for names in signals:
        print(f"{'+'.join(names or ('shipped',)):10s} AUC {auc(rows, names)}")
        for low in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
            rule = {"unsupported": low, "signal": names, "again": True}
            shown = "  ".join(f"{k} {v}" for k, v in measures(rows, rule).items())
            print(f"    < {low:<5}", shown)
    for low in (0.3, 0.4, 0.45, 0.5) if _has(rows, "moved") else ():
        for top in (0.55, 0.6, 0.65, 0.7):
            for moved in (0.3, 0.4, 0.5, 0.6, 0.7):
                rule = {"unsupported": low, "moved": (top, moved), "again": True}
                shown = "  ".join(f"{k} {v}" for k, v in measures(rows, rule).items())
                print(f"< {low}; [{low}, {top}) moved < {moved}", shown)


def _has(rows: list[dict], name: str) -> bool:
    return any(name in row or (name == "moved" and "prior" in row) for row in rows)


def measures(rows: list[dict], rule: dict) -> dict:
    from service.evaluation import contains, exact_match, f1
    from service.text.citations import without_citations

    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    f1s, ems, held, refused = [], [], 0, 0
    for row in answerable:
        answer = kept(row, rule)
        if answer is None:
            refused += 1
            f1s.append(0.0)
            ems.append(0.0)
            continue
        said = without_citations(answer, " ")
        f1s.append(max(f1(said, gold) for gold in row["golds"]))
        ems.append(max(exact_match(said, gold) for gold in row["golds"]))
        held += any(contains(said, gold) for gold in row["golds"])
    refused_un = sum(kept(r, rule) is None for r in unanswerable)
    n = max(len(answerable), 1)
    return {
        "n": f"{len(answerable)}+{len(unanswerable)}",
        "F1": round(sum(f1s) / n, 3),
        "EM": round(sum(ems) / n, 3),
        "contained": round(held / n, 3),
        "refused answ.": f"{refused}/{len(answerable)}",
        "refused unans.": f"{refused_un}/{len(unanswerable)}",
    }


def table(path: str) -> None:
    """Each configuration replayed on a file's rows: the verification's threshold, the echo
    asked again, and below a band's top the check after the answer or the answer's mean
    token log-probability as a second signal."""
    rows = json.loads(Path(path).read_text())["rows"]
    if any("variants" in row for row in rows):
        variants_table(rows)
        return
    if any("prior" in row or "fewshot" in row for row in rows):
        leans_table(rows)
        return
    rules = [("shipped: < 0.55, echo refused", {"unsupported": 0.55})]
    for low in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
        rules.append((f"< {low}, echo asked again", {"unsupported": low, "again": True}))
    for low in (0.3, 0.4, 0.45, 0.5):
        for top in (0.55, 0.6, 0.65):
            for check in (0.5, 0.6, 0.7, 0.8):
                rule = {"unsupported": low, "band": (top, check), "again": True}
                rules.append((f"< {low}; [{low}, {top}) checked < {check}", rule))
            for mean in (-0.2, -0.3, -0.4, -0.5):
                rule = {"unsupported": low, "sure": (top, mean), "again": True}
                rules.append((f"< {low}; [{low}, {top}) mean logprob < {mean}", rule))
    if any("rerank_best" in row for row in rows):
        for low in (0.3, 0.4, 0.45, 0.5, 0.55):
            for top in (0.55, 0.6, 0.65, 0.7, 0.75):
                for score in (0, 1, 2, 3, 4, 5, 6):
                    rule = {"unsupported": low, "weak": (top, score), "again": True}
                    if top > low:
                        rules.append((f"< {low}; [{low}, {top}) rerank < {score}", rule))
    for name, rule in rules:
        print(f"{name:40s}", "  ".join(f"{k} {v}" for k, v in measures(rows, rule).items()))


if __name__ == "__main__":
    main()

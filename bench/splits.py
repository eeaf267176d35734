"""Dev and test halves of the answer sets (issue 69): every threshold, prompt and grammar is
chosen on `dev`; a change ships when `test` improves.

A question goes with its article, so that no article is read on both sides: SQuAD 2.0's by its
Wikipedia article (the paragraph's `title`), the French FAQ's by its FAQ article (`gold_doc`:
the page whose title and other wordings are its questions). bench/data/splits.json lists each
half's articles (titles and ids, no text; the French set is read from ../shared, never copied)
and is the split: committed, so a given article is always in the same half.

It was written by the rule `halves` (`python -m bench.splits --write`): articles ordered by
their question count, most first, ties by the SHA-256 of their key; each goes to the half with
fewer questions so far (dev on a tie), per source for the French set (`cnil`, `crpa`), so
both sources are on both sides. The rule depends neither on the files' order nor on a seed.

    python -m bench.splits [--write]    # each half's articles and question counts
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from bench.support import ROOT

Half = Literal["dev", "test"]
HALVES: tuple[Half, ...] = ("dev", "test")
SPLITS = Path(__file__).parent / "data" / "splits.json"
SQUAD = Path(__file__).parent / "data" / "squad2"
FRENCH = ROOT.parent / "shared" / "datasets" / "french-qa"
COLLECTIONS = ("squad2", "french-qa")


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def article_of(collection: str, folder: Path | None = None) -> dict[str, str]:
    """Each document id of `collection` ("squad2", "french-qa") -> its article's key: the
    SQuAD paragraph's title, the French FAQ's own id."""
    if collection == "squad2":
        return {r["id"]: r["title"] for r in _rows((folder or SQUAD) / "corpus.jsonl")}
    return {r["id"]: r["id"] for r in _rows((folder or FRENCH) / "corpus.jsonl")}


def questions(collection: str, folder: Path | None = None) -> list[dict]:
    """The questions of `collection`, in the file's order."""
    return _rows((folder or (SQUAD if collection == "squad2" else FRENCH)) / "questions.jsonl")


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def halves(counts: Mapping[str, int], strata: Mapping[str, str] | None = None) -> dict[str, Half]:
    """Each article (its question count in `counts`) -> its half, balanced by question count
    within each stratum (`strata`: article -> group; one group when None)."""
    grouped: dict[str, list[str]] = collections.defaultdict(list)
    for article in counts:
        grouped[(strata or {}).get(article, "")].append(article)
    chosen: dict[str, Half] = {}
    for group in sorted(grouped):
        sizes = {"dev": 0, "test": 0}
        for article in sorted(grouped[group], key=lambda a: (-counts[a], _sha(a))):
            half: Half = "dev" if sizes["dev"] <= sizes["test"] else "test"
            chosen[article] = half
            sizes[half] += counts[article]
    return chosen


def rule(collection: str, folder: Path | None = None) -> dict[Half, list[str]]:
    """The halves `halves` gives `collection`'s articles that have questions, each sorted."""
    articles = article_of(collection, folder)
    asked = questions(collection, folder)
    counts = collections.Counter(articles[q["gold_doc"]] for q in asked)
    strata = None
    if collection == "french-qa":
        strata = {articles[q["gold_doc"]]: q["source"] for q in asked}
    chosen = halves(counts, strata)
    return {half: sorted(a for a, h in chosen.items() if h == half) for half in HALVES}


def load(path: Path = SPLITS) -> dict[str, dict[Half, list[str]]]:
    """The committed split: collection -> half -> its articles."""
    return json.loads(path.read_text(encoding="utf-8"))


def half_of(collection: str, path: Path = SPLITS) -> dict[str, Half]:
    """Each article of `collection` -> its half, as the committed split says."""
    split = load(path)[collection]
    return {article: half for half in HALVES for article in split[half]}


def in_half(
    collection: str, asked: Iterable[dict], half: str, folder: Path | None = None
) -> list[dict]:
    """The questions of `asked` whose article is in `half` ("all": every one), order kept."""
    asked = list(asked)
    if half == "all":
        return asked
    if half not in HALVES:
        raise ValueError(f"half must be dev, test or all, not {half!r}")
    articles, halves_ = article_of(collection, folder), half_of(collection)
    return [q for q in asked if halves_.get(articles[q["gold_doc"]]) == half]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {SPLITS.name} by the rule")
    args = parser.parse_args(argv)
    present = [c for c in COLLECTIONS if c == "squad2" or (FRENCH / "corpus.jsonl").is_file()]
    split = {collection: rule(collection) for collection in present}
    for collection, sides in split.items():
        articles = article_of(collection)
        asked = questions(collection)
        for half, listed in sides.items():
            mine = set(listed)
            chosen = [q for q in asked if articles[q["gold_doc"]] in mine]
            answerable = sum(bool(q["answerable"]) for q in chosen)
            print(f"{collection} {half}: {len(listed)} articles, {len(chosen)} questions "
                  f"({answerable} answerable)")  # fmt: skip
    if args.write:
        if len(split) < len(COLLECTIONS):
            raise SystemExit(f"bench.splits: no French set at {FRENCH}: {SPLITS.name} not written")
        SPLITS.write_text(json.dumps(split, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {SPLITS}")


if __name__ == "__main__":
    main()

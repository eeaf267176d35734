"""The same million vectors in other HNSW fields (issue 82): float32 as shipped, a denser
graph, and scalar-quantized (our plugin's field), on one Solr 9.10.1 node beside the one
bench.scale measures. Only what kNN reads is written (id, parent, ACLs, the vector): the
vectors and ACLs bench.scale made (vectors.f32, groups.u8, needles.npz in its --data).

Per variant: the vector files on disk (what the page cache must hold: the floats, or the
quantized bytes the search reads; the graph), kNN recall@10 against exact search under each
ACL filter at several depths (bench.scale.recall), and Solr's kNN p50/p95 (the query vector
given: Solr's time alone). Resumable: progress.json in --data; a variant built is not built
again.

    python -m bench.scale_vectors [--size 1000000] [--variants float,dense,quantized]
                                  [--depths 100,400] [--version 9.10.1] [--again]
                                  [--merge 1]

--merge N force-merges each variant's collection to N segments first (what an index a
crawler filled for months, or an operator's optimize, ends as; a fresh build holds ~100
segments, each searched on its own) and measures it as `<variant>-merged<N>`.

Variants: float (Lucene's graph, 16 / 100), dense (M 32, beam 200), quantized (7-bit integers,
Lucene's graph), sharded (the float graph in 8 shards), dense-capped (the dense graph,
Lucene's merges capped at 256 MB a segment: `--variants dense-capped --merge 8` gives 8 graphs
of ~125k),
quantized-capped (the same in the quantized field), and `-rescored` beside a quantized variant
(its collection searched again with `knn.rescore`: the floats rescore the integers' neighbours).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

from bench.scale import (
    _NEEDLE_IDS,
    DATA,
    DIMENSIONS,
    PASSAGES_PER_DOCUMENT,
    SCOPES,
    questions,
    recall,
    rescored,
)
from bench.scale_layout import DENSE, SPARSE, Layout, force_merge
from bench.support import percentile
from service.models.encoder import load_encoder
from service.retrieval.scope import EVERYTHING, Scope
from service.retrieval.vector import vector_literal
from testing.solr import LocalSolr, create_collection, upload_configset

# variant: its layout (the configset and its edits: the graph; the largest segment Lucene's
# merges may write, 0 for Lucene's 5 GB, a vectors-only passage taking ~1.65 KB), and the
# collection's CREATE parameters
VARIANTS: dict[str, tuple[Layout, dict[str, str | int]]] = {
    "float": (Layout(graph=SPARSE, segment_mb=0), {}),
    "dense": (Layout(graph=DENSE, segment_mb=0), {}),
    # the 7-bit field in Lucene's graph (16 / 100), as its 1M rows were measured
    "quantized": (Layout("VectorMainQuantized", graph=SPARSE, segment_mb=0), {}),
    # the same float graph cut in 8 shards on the one node: 8 smaller searches, merged
    "sharded": (
        Layout(graph=SPARSE, segment_mb=0),
        {"numShards": 8, "router.field": "parent_id"},
    ),
    # the dense graph in segments Lucene stops merging at ~150k vectors
    "dense-capped": (Layout(graph=DENSE, segment_mb=256), {}),
    # the same layout in the quantized field (VectorMainQuantized's graph since 2026-12-07)
    "quantized-capped": (Layout("VectorMainQuantized", graph=DENSE, segment_mb=256), {}),
}
# measured on another variant's collection, its neighbours rescored (knn.rescore)
RESCORED = {
    "quantized-rescored": "quantized",
    "float-rescored": "float",
    "quantized-capped-rescored": "quantized-capped",
}
BATCH = 1000
SENDERS = 2


def configset_of(variant: str, into: Path) -> str:
    """The variant's configset written in `into`/<variant> (to upload as `scale-<variant>`);
    its name."""
    VARIANTS[variant][0].write(into / variant)
    return f"scale-{variant}"


def documents(size: int, folder: Path, start: int, stop: int) -> list[dict]:
    """Passages start..stop of the distractors as vectors-only Solr documents."""
    vectors = np.memmap(folder / "vectors.f32", dtype=np.float32, mode="r")
    bits = np.memmap(folder / "groups.u8", dtype=np.uint8, mode="r")
    out = []
    for row in range(start, stop):
        number, k = divmod(row, PASSAGES_PER_DOCUMENT)
        b = int(bits[number])
        allowed = ["everyone"] + [g for g, m in (("g1", 1), ("g10", 2), ("g50", 4)) if b & m]
        denied = [g for g, m in (("g10", 8), ("g50", 16)) if b & m]
        vector = vectors[row * DIMENSIONS : (row + 1) * DIMENSIONS]
        out.append(
            {
                "id": f"scale-{number}_{k}",
                "parent_id": f"scale-{number}",
                "allowed_groups": allowed,
                **({"denied_groups": denied} if denied else {}),
                "vector_384": [round(float(x), 6) for x in vector],
            }
        )
    return out


def needle_documents(folder: Path) -> list[dict]:
    needles = np.load(folder / "needles.npz")
    return [
        {
            "id": f"needle-{row}",
            "parent_id": str(parent),
            "allowed_groups": ["everyone"],
            "vector_384": [round(float(x), 6) for x in vector],
        }
        for row, (parent, vector) in enumerate(
            zip(needles["parents"], needles["vectors"], strict=True)
        )
    ]


def build(solr_url: str, name: str, size: int, folder: Path, progress: dict, save) -> None:
    done = progress.setdefault(name, {"passages": 0, "seconds": 0.0})
    with httpx.Client(timeout=600) as http, ThreadPoolExecutor(SENDERS) as maker:
        if done["passages"] == 0:
            http.post(f"{solr_url}/{name}/update", json=needle_documents(folder)).raise_for_status()
        # SENDERS batches at a time: Lucene builds each writing thread's graph on its own core
        with ThreadPoolExecutor(SENDERS) as senders:
            for start in range(done["passages"], size, BATCH * SENDERS):
                stops = [min(start + BATCH * (k + 1), size) for k in range(SENDERS)]
                spans = sorted(
                    {(min(start + BATCH * k, size), stop) for k, stop in enumerate(stops)}
                )
                bodies = list(maker.map(lambda span: documents(size, folder, *span), spans))
                began = time.perf_counter()
                sent = [
                    senders.submit(http.post, f"{solr_url}/{name}/update", json=body)
                    for body in bodies
                    if body
                ]
                for response in sent:
                    response.result().raise_for_status()
                done["seconds"] += time.perf_counter() - began
                done["passages"] = stops[-1]
                save()
                if stops[-1] % 50_000 < BATCH * SENDERS or stops[-1] == size:
                    rate = stops[-1] / max(done["seconds"], 1e-9)
                    print(
                        f"  {name}: {stops[-1]:,}/{size:,} ({rate:.0f}/s)",
                        file=sys.stderr,
                        flush=True,
                    )
        began = time.perf_counter()
        http.get(f"{solr_url}/{name}/update", params={"commit": "true"}).raise_for_status()
        done["commit_seconds"] = round(time.perf_counter() - began, 1)
        done["built"] = True
        save()


def merge(solr_url: str, name: str, segments: int, progress: dict, save) -> None:
    """Force-merge `name` to `segments` segments, timed in `progress`."""
    print(f"scale_vectors: merging {name} to {segments} segment(s)", file=sys.stderr, flush=True)
    progress[name]["merge_seconds"] = round(force_merge(solr_url, name, segments), 1)
    progress[name]["merged"] = segments
    save()


def vector_files(solr_folder: Path, name: str) -> dict:
    """MB of the vector files of `name`'s cores: floats (.vec), quantized (.veq), graph
    (.vex), and the whole index."""
    cores = [p for p in solr_folder.rglob("index") if p.is_dir() and f"{name}_shard" in str(p)]
    files = [f for core in cores for f in core.iterdir() if f.is_file()]

    def mb(*suffixes: str) -> float:
        return round(sum(f.stat().st_size for f in files if f.suffix in suffixes) / 1e6, 1)

    return {
        "floats_mb": mb(".vec"),
        "quantized_mb": mb(".veq"),
        "graph_mb": mb(".vex"),
        "index_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
        "segments": len({f.stem.split("_")[1] for f in files if f.name.startswith("_")}),
    }


async def latency(
    solr_url: str, name: str, vectors: np.ndarray, depth: int, rescore: bool = False
) -> dict[str, dict[str, float]]:
    """Solr's kNN wall time (query vector given), p50/p95 ms, under each filter."""

    def knn(literal: str) -> dict[str, str]:
        query = {"q": f"{{!knn f=vector_384 topK={depth}}}{literal}"}
        return query | (rescored(depth, literal) if rescore else {})

    return await timed(solr_url, name, vectors, knn)


async def timed(
    solr_url: str, name: str, vectors: np.ndarray, query: Callable[[str], dict[str, str]]
) -> dict[str, dict[str, float]]:
    """The wall time of `query(vector literal)` for each vector, p50/p95 ms, under each
    filter (Solr's time alone: the query vector given)."""
    out = {}
    async with httpx.AsyncClient(timeout=120) as http:
        for scope_name, groups in SCOPES.items():
            scope = EVERYTHING if groups is None else Scope(groups=groups, security="groups")
            ms = []
            for vector in vectors:
                params = {
                    **query(vector_literal(vector)),
                    "defType": "lucene",
                    "rows": 10,
                    "fl": "id",
                    **scope.params(),
                }
                began = time.perf_counter()
                (await http.post(f"{solr_url}/{name}/select", data=params)).raise_for_status()
                ms.append((time.perf_counter() - began) * 1000)
            out[scope_name] = {
                "p50_ms": round(statistics.median(ms), 1),
                "p95_ms": round(percentile(ms, 0.95), 1),
            }
    return out


def solr_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the vector collections live (--data, --size, --version) and their Solr."""
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--port", type=int, default=8994)
    parser.add_argument("--heap", default="3g")
    parser.add_argument("--version", default="9.10.1")


def solr_of(args: argparse.Namespace) -> tuple[Path, LocalSolr]:
    """The folder of `solr_arguments`' collections, and its Solr (not started)."""
    here = args.data / f"vectors-{args.version}-{args.size}"
    heap = f"-Xms{args.heap} -Xmx{args.heap}"
    return here, LocalSolr(args.port, here / "solr", java_opts=heap, version=args.version)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    solr_arguments(parser)
    parser.add_argument("--variants", default="float,dense,quantized")
    parser.add_argument("--depths", default="100,400")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument(
        "--again", action="store_true", help="measure a measured variant again (other depths)"
    )
    parser.add_argument("--merge", type=int, default=0, help="force-merge to N segments first")
    args = parser.parse_args(argv)
    folder, size = args.data, args.size
    variants = args.variants.split(",")
    depths = tuple(int(d) for d in args.depths.split(","))
    here, solr = solr_of(args)
    here.mkdir(exist_ok=True)
    progress_file = here / "progress.json"
    progress = json.loads(progress_file.read_text()) if progress_file.is_file() else {}

    def save() -> None:
        progress_file.write_text(json.dumps(progress, indent=1))

    (here / "solr").mkdir(exist_ok=True)
    solr.start()
    needles = np.load(folder / "needles.npz")
    _NEEDLE_IDS.update({row: f"needle-{row}" for row in range(len(needles["parents"]))})
    asked = questions(300)[: args.questions]
    out = here / f"results-{size}.json"
    results = json.loads(out.read_text()) if out.is_file() else {}  # a variant measured stays
    try:
        for variant in variants:
            name = f"Scale_{RESCORED.get(variant, variant)}"
            if not progress.get(name, {}).get("created"):
                built = RESCORED.get(variant, variant)
                with tempfile.TemporaryDirectory() as made:
                    configset = configset_of(built, Path(made))
                    upload_configset(solr.url, configset, Path(made) / built)
                create_collection(solr.url, name, configset, **VARIANTS[built][1])
                progress.setdefault(name, {"passages": 0, "seconds": 0.0})["created"] = True
                save()
            if not progress[name].get("built"):
                print(f"scale_vectors: building {name}", file=sys.stderr, flush=True)
                build(solr.url, name, size, folder, progress, save)
            if args.merge and progress[name].get("merged") != args.merge:
                merge(solr.url, name, args.merge, progress, save)
        for built_variant in variants:
            name = f"Scale_{RESCORED.get(built_variant, built_variant)}"
            rescore = built_variant in RESCORED
            variant = f"{built_variant}-merged{args.merge}" if args.merge else built_variant
            if variant in results and not args.again:
                continue
            result = {"variant": variant, **vector_files(here / "solr", name)}
            done = progress[name]
            result["passages_per_s"] = round(done["passages"] / max(done["seconds"], 1e-9))
            if args.merge:
                result["merge_seconds"] = done["merge_seconds"]

            async def measured(
                name: str = name, rescore: bool = rescore
            ) -> tuple[dict, dict, dict]:
                async with httpx.AsyncClient(timeout=120) as http:
                    recalls, selectivity = await recall(
                        http, solr.url, folder, size, asked, depths, name, rescore
                    )
                vectors = load_encoder().encode([q["text"] for q in asked])
                return (
                    recalls,
                    selectivity,
                    {str(d): await latency(solr.url, name, vectors, d, rescore) for d in depths},
                )

            result["recall"], result["selectivity"], result["latency"] = asyncio.run(measured())
            if variant in results:  # --again: the depths measured before kept beside these
                for key in ("recall", "latency"):
                    earlier = results[variant][key]
                    for inner, values in result[key].items():
                        if isinstance(values, dict) and isinstance(earlier.get(inner), dict):
                            values = {**earlier[inner], **values}
                        earlier[inner] = values
                    result[key] = earlier
            results[variant] = result
            print(f"scale_vectors: {json.dumps(result)}", file=sys.stderr, flush=True)
            out.write_text(json.dumps(results, indent=1))
    finally:
        solr.stop()
    print(table(results, depths))


def table(results: dict, depths: tuple[int, ...]) -> str:
    lines = [
        "| variant | floats MB | quantized MB | graph MB | index MB | passages/s | depth | "
        + " | ".join(f"recall {s}" for s in SCOPES)
        + " | p95 ms none | p95 ms g50 |",
        "|---" * (9 + len(SCOPES)) + "|",
    ]
    for variant, r in results.items():
        for d in depths:
            if str(d) not in r["latency"]:
                continue  # not measured at this depth
            recalls = " | ".join(str(r["recall"][s][f"topK{d}"]) for s in SCOPES)
            lat = r["latency"][str(d)]
            lines.append(
                f"| {variant} | {r['floats_mb']} | {r['quantized_mb']} | {r['graph_mb']} | "
                f"{r['index_mb']} | {r['passages_per_s']} | {d} | {recalls} | "
                f"{lat['none']['p95_ms']} | {lat['g50']['p95_ms']} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()

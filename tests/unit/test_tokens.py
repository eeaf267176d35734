"""Token counts as the model counts them, and request sizes within both budgets: the OpenAI
encodings shipped in bpe-openai, a local model's tokenizer.json, the characters fallback."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from service.chains.packing import Packer
from service.chains.result import Chunk, number_chunks
from service.config import settings_from_mapping
from service.errors import ConfigError
from service.llm.size import RequestSize, request_size
from service.models.pinned import models_dir
from service.retrieval import RetrievedDocument
from service.text.tokens import (
    TOKENIZER_BYTES,
    CharacterEstimate,
    OpenAIEncoding,
    TokenizerFile,
    encoding_of_model,
    token_counter,
)
from tests.unit.test_chains import builder

MINILM_TOKENIZER = models_dir() / "all-minilm-l6-v2-tokenizer.json"


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1-nano", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("GPT-35-Turbo", "cl100k_base"),  # Azure's spelling
        ("llama3.1:8b", None),
        ("extractive", None),
        ("", None),
    ],
)
def test_openai_models_have_their_encoding(model: str, encoding: str | None) -> None:
    assert encoding_of_model(model) == encoding


def test_auto_counts_an_openai_models_tokens_and_estimates_the_others() -> None:
    gpt4o = token_counter("auto", "gpt-4o")
    assert isinstance(gpt4o, OpenAIEncoding) and gpt4o.name == "o200k_base"
    assert gpt4o.count("hello world") == 2  # 11 characters: 3 by the estimate
    assert token_counter("auto", "gpt-3.5-turbo").name == "cl100k_base"
    assert isinstance(token_counter("auto", "smollm2"), CharacterEstimate)
    assert token_counter("chars", "gpt-4o").count("hello world") == 3


def test_the_two_encodings_count_differently() -> None:
    hindi = "हिन्दी भाषा में एक वाक्य"
    o200k, cl100k = token_counter("o200k_base", ""), token_counter("cl100k_base", "")
    assert o200k.count(hindi) < cl100k.count(hindi)  # o200k_base has Indic tokens
    assert cl100k.count(hindi) > CharacterEstimate().count(hindi)  # the estimate is far off


def test_a_local_models_tokenizer_json_counts_its_tokens() -> None:
    counter = token_counter(str(MINILM_TOKENIZER), "anything")
    assert isinstance(counter, TokenizerFile)
    assert counter.count("hello world") == 2  # no [CLS]/[SEP]: the text's own tokens
    assert counter.count("word " * 1000) == 1000  # never truncated at the model's 256


@pytest.mark.parametrize(
    "value",
    ["/no/such/tokenizer.json", "p50k_turbo", "README.md", "/etc/passwd", "/proc/self/environ"],
)
def test_a_tokenizer_that_cannot_be_used_stops_the_configuration(value: str) -> None:
    with pytest.raises(ConfigError, match=r"llm\.tokenizer"):
        settings_from_mapping({"llm.tokenizer": value}, source="test", env={})


def test_a_json_file_too_large_for_a_tokenizer_is_not_read(tmp_path: Path) -> None:
    huge = tmp_path / "tokenizer.json"
    with huge.open("wb") as file:
        file.truncate(TOKENIZER_BYTES + 1)  # sparse: nothing written
    with pytest.raises(ConfigError, match=r"llm\.tokenizer.*larger than a tokenizer\.json"):
        settings_from_mapping({"llm.tokenizer": str(huge)}, source="test", env={})


def test_a_file_that_is_no_tokenizer_is_refused_without_its_content(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"version": "hunter2-SECRET"}')
    with pytest.raises(ConfigError, match=r"llm\.tokenizer") as refused:
        settings_from_mapping({"llm.tokenizer": str(secret)}, source="test", env={})
    assert "hunter2" not in str(refused.value)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opened, never waited on: no writer will come
    with pytest.raises(ConfigError, match=r"llm\.tokenizer"):
        settings_from_mapping({"llm.tokenizer": str(fifo)}, source="test", env={})


def test_settings_reloaded_on_the_event_loop_read_no_tokenizer_and_a_broken_one_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review's: a rag.properties reloaded on the event loop (a hand edit, another
    worker's admin edit) parsed a new tokenizer.json there (3.6 s for 55 MB), and a file
    broken after its check was parsed again at every question. On the loop the settings
    only look at the file; one found broken is said at once, never parsed again."""
    import asyncio

    from service.text import tokens

    parsed: list[str] = []

    class Counted(tokens.TokenizerFile):
        def __init__(self, path: Path, text: str) -> None:
            parsed.append(path.name)
            super().__init__(path, text)

    monkeypatch.setattr(tokens, "TokenizerFile", Counted)
    good = tmp_path / "good.json"
    good.write_bytes(MINILM_TOKENIZER.read_bytes())

    async def reloaded() -> None:
        settings_from_mapping({"llm.tokenizer": str(good)}, source="test", env={})
        with pytest.raises(ConfigError, match=r"llm\.tokenizer"):  # what a look says, at once
            settings_from_mapping({"llm.tokenizer": str(tmp_path / "x.txt")}, source="t", env={})

    asyncio.run(reloaded())
    assert parsed == []  # read by the first question, in a worker thread
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": "1.0", "model": ')
    for _ in range(3):
        with pytest.raises(ValueError, match=r"not a tokenizer\.json"):
            token_counter(str(broken), "")
    assert parsed == ["broken.json"]


def test_the_settings_count_with_the_model_in_force() -> None:
    settings = settings_from_mapping(
        {"llm.model": "gpt-4o", "prompt.max.request.tokens": "1000"}, source="test", env={}
    )
    assert request_size(settings).counter.name == "o200k_base"
    assert request_size(settings, "gpt-4").counter.name == "cl100k_base"
    assert request_size(settings, "mistral").counter.name == "chars"
    assert request_size(settings).tokens == 1000


TEXTS = ["English words, plain. ", "हिन्दी भाषा ", "日本語の文章です。", "1234567890 ", "  \n"]


@pytest.mark.parametrize("tokens", [500, 3000, 20000])
def test_what_fits_one_size_fits_both_budgets(tokens: int) -> None:
    size = RequestSize(10_000, tokens=tokens, counter=token_counter("cl100k_base", ""))
    rng = random.Random(tokens)
    for _ in range(30):
        parts = ["".join(rng.choices(TEXTS, k=rng.randint(1, 40))) for _ in range(8)]
        if sum(size.of(part) for part in parts) <= size.limit:
            whole = "".join(parts)
            assert len(whole) <= size.limit
            # concatenation can merge tokens across parts, never add any
            assert size.counter.count(whole) <= tokens


def test_a_character_budget_alone_measures_characters() -> None:
    size = RequestSize(1000)
    assert size.of("日本語" * 10) == 30
    assert size.of_answer(200) == 800  # llm.maxTokens at 4 characters a token


def test_cut_keeps_the_longest_start_that_fits() -> None:
    size = RequestSize(1000, tokens=100, counter=token_counter("cl100k_base", ""))
    text = "The turbine is inspected every spring by two engineers. " * 20
    cut = size.cut(text, 300)
    assert text.startswith(cut) and size.of(cut) <= 300 < size.of(text[: len(cut) + 1])


def test_the_packer_keeps_every_pack_within_the_token_budget() -> None:
    counter = token_counter("cl100k_base", "")
    size = RequestSize(40_000, tokens=600, counter=counter)
    document = RetrievedDocument("hi", "हिन्दी", "", "हिन्दी भाषा में एक वाक्य। " * 400)
    packer = Packer(builder(), size)
    packs = packer.pack(number_chunks([Chunk(document, document.content)]), packer.room("stuff"))
    assert len(packs) > 1
    for pack in packs:
        request = builder().messages("stuff", sources=pack.sources)
        # 4 tokens a message for its role and delimiters, as the LLM's chat format counts
        assert sum(counter.count(message.content) + 4 for message in request) <= 600


def test_the_stuff_selection_passes_over_what_does_not_fit() -> None:
    packer = Packer(builder(), 3000)
    room = packer.room("stuff")
    document = RetrievedDocument("d", "D", "", "")
    texts = ["a" * (room // 2), "b" * room, "c" * (room // 4)]  # b no longer fits after a
    chosen = packer.select(number_chunks([Chunk(document, t) for t in texts]), room)
    assert [item.chunk.text[0] for item in chosen.items] == ["a", "c"]
    assert len(chosen.sources) <= room


def test_model_names_a_client_invents_do_not_grow_any_cache() -> None:
    from service.text import tokens

    before = len(tokens._files), len(tokens._names)
    for n in range(1000):
        assert token_counter("auto", f"invented-model-{n}") is tokens.CHARACTERS
        assert token_counter("auto", f"gpt-4o-{n}").name == "o200k_base"
    after = len(tokens._files), len(tokens._names)
    assert len(tokens._encodings) <= len(tokens.ENCODINGS) and after == before
    assert not hasattr(token_counter, "cache_info")  # nothing keyed by the model name

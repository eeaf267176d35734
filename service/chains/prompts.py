"""Everything a prompt is made of: the jinja2 templates of prompts/ (sandboxed, their
variables checked at load), the instructions added to them (language, form), and the builder
that renders a request's messages and measures them against prompt.max.request.size."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

from service.chains.result import NumberedChunk
from service.chains.scaffolding import SHIPPED, Scaffolding
from service.errors import PromptTemplateError
from service.llm.size import RequestSize
from service.llm.types import ChatMessage
from service.text.clean import clean_context

# -- the templates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateSpec:
    """The variables a template may use, and those it must use."""

    provided: frozenset[str]
    required: frozenset[str] = frozenset()


_COMMON = frozenset({"language", "history", "format_instruction", "not_found"})


def _spec(*provided: str, required: tuple[str, ...] = ()) -> TemplateSpec:
    return TemplateSpec(_COMMON | set(provided) | set(required), frozenset(required))


SPECS: dict[str, TemplateSpec] = {
    "system": _spec(),
    "source": _spec("number", "title", "url", required=("content",)),
    "stuff": _spec(required=("sources", "question")),
    "verify": _spec(required=("sources", "question")),
    "again": _spec(required=("question",)),
    "map": _spec(required=("sources", "question", "no_answer")),
    "reduce": _spec(required=("answers", "question")),
    "refine_initial": _spec(required=("sources", "question")),
    "refine_step": _spec(required=("sources", "question", "previous_answer")),
    "rewrite": _spec(required=("question",)),
    "multiquery": _spec(required=("question", "count")),
    "grade": _spec(required=("question", "passages")),
    "ground": _spec(required=("statements",)),
    "summarize_system": _spec(),
    "summarize": _spec("part", required=("sources",)),
    "summarize_reduce": _spec(required=("answers",)),
    "agent": _spec("tools"),
    "synthesis": _spec(required=("summaries", "question")),
}
# templates added after a release: a folder of an operator's own templates that lacks them
# takes ours, so that an upgrade never stops a service whose prompts were customised
ADDED_LATER = frozenset({"agent", "verify", "synthesis", "again"})


class PromptLibrary:
    """The loaded templates of one folder.

    >>> prompts = PromptLibrary(Path("prompts"))
    >>> prompts.render("source", number=1, title="T", url="", content="text")
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._env = SandboxedEnvironment(
            undefined=StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        self._sources: dict[str, str] = {}
        self._templates = {name: self._load(name, spec) for name, spec in SPECS.items()}
        # what the templates say, hashed: answers made with other wording are not reused
        self.fingerprint = hashlib.sha256(
            "\0".join(self._sources[name] for name in sorted(SPECS)).encode()
        ).hexdigest()[:16]
        # what the answer templates say, as a model may copy it around its answer
        self.scaffolding = Scaffolding.of(self._sources)

    def render(self, name: str, **variables: object) -> str:
        return self._templates[name].render(**variables)

    def _load(self, name: str, spec: TemplateSpec):
        path = self.folder / f"{name}.j2"
        if name in ADDED_LATER and not path.exists():
            path = SHIPPED / f"{name}.j2"
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as error:
            raise PromptTemplateError(f"prompt template {path} cannot be read: {error}") from None
        self._sources[name] = source
        try:
            used = meta.find_undeclared_variables(self._env.parse(source))
            template = self._env.from_string(source)
        except TemplateError as error:
            raise PromptTemplateError(f"prompt template {path} does not parse: {error}") from None
        unknown = sorted(used - spec.provided)
        if unknown:
            raise PromptTemplateError(
                f"prompt template {path} uses {', '.join(unknown)}, which nobody provides; "
                f"it may use: {', '.join(sorted(spec.provided))}"
            )
        missing = sorted(spec.required - used)
        if missing:
            raise PromptTemplateError(
                f"prompt template {path} must show {', '.join(missing)} but never uses it"
            )
        return template


# a template folder's version: each template's name, modification time (ns) and size
Stamp = tuple[tuple[str, int, int], ...]


def _loaded_library(folder: Path, stamp: Stamp | None) -> PromptLibrary:
    """The PromptLibrary of `folder` at `stamp` (its _folder_stamp, just read), loaded once
    per version of its files (and of the shipped templates it falls back to) and shared by
    every app of a process: a library is never changed once loaded. A folder that cannot be
    read is loaded anew (its error said), never from the cache."""
    if stamp is None:
        return PromptLibrary(folder)
    present = {name for name, *_ in stamp}
    fallbacks = _folder_stamp(SHIPPED, {f"{name}.j2" for name in ADDED_LATER} - present)
    return _library(folder, (stamp, fallbacks))


@lru_cache(maxsize=8)
def _library(folder: Path, version: object) -> PromptLibrary:
    return PromptLibrary(folder)


class PromptStore:
    """The PromptLibrary of a folder, loaded again when a template file changes.

    A change that breaks a template keeps the previous library in service and logs why; only
    the first load raises, so a broken template stops the service at startup.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._stamp = _folder_stamp(folder)
        self._library = _loaded_library(folder, self._stamp)

    def current(self, folder: Path | None = None) -> PromptLibrary:
        folder = folder or self._folder
        stamp = _folder_stamp(folder)
        if folder != self._folder or stamp != self._stamp:
            try:
                library = _loaded_library(folder, stamp)
            except PromptTemplateError as error:
                logging.getLogger(__name__).error("prompt templates not reloaded: %s", error)
            else:
                self._library = library
            self._folder, self._stamp = folder, stamp
        return self._library


def _folder_stamp(folder: Path, names: set[str] | None = None) -> Stamp | None:
    """Each template's name, modification time and size (of `names` only, when given), read
    on every request: by os.scandir, a quarter cheaper than pathlib's glob (issue 70). A file
    that cannot be read (an editor's lock, a broken link) is left out, its change seen when it
    can be; None when the folder cannot be read."""
    stamps = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(".j2") or (
                    names is not None and entry.name not in names
                ):
                    continue
                with suppress(OSError):
                    stat = entry.stat()
                    stamps.append((entry.name, stat.st_mtime_ns, stat.st_size))
    except OSError:
        return None
    return tuple(sorted(stamps))


# -- instructions: the answer's language and form --------------------------------------------------

# ISO 639-1 codes of the languages a search UI most often asks for; others are named by code.
LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "fi": "Finnish", "fr": "French", "he": "Hebrew",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "nl": "Dutch", "no": "Norwegian", "pl": "Polish", "pt": "Portuguese",
    "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "th": "Thai", "tr": "Turkish",
    "uk": "Ukrainian", "vi": "Vietnamese", "zh": "Chinese",
}  # fmt: skip

LANGUAGE_CODE = re.compile(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$")

# Datafari's `format` values.
FORMAT_INSTRUCTIONS = {
    "default": "",
    "text": "Write the answer as plain paragraphs of text, without lists.",
    "bulletpoint": "Write the answer as a list of bullet points, one idea per point.",
    "stepbystep": "Write the answer as numbered steps, in the order they should be done.",
}


# The sentence an answer is when the documents do not hold it, in the answer's language (the
# short answer's grammar allows exactly it; result.py recognises both as "not found").
NOT_FOUND_SENTENCES = {
    "en": "I could not find the answer in the documents.",
    "fr": "Je n'ai pas trouvé la réponse dans les documents.",
}


def not_found_sentence(code: str | None) -> str:
    """The not-found sentence in the language of `code` ('fr', 'fr-CA'), English otherwise."""
    base = re.split(r"[-_]", code or "")[0].lower()
    return NOT_FOUND_SENTENCES.get(base, NOT_FOUND_SENTENCES["en"])


def language_name(code: str | None) -> str:
    """'fr' -> 'French'; '' or None -> '' (answer in the question's language)."""
    if not code:
        return ""
    base = re.split(r"[-_]", code)[0].lower()
    return LANGUAGE_NAMES.get(base, f"the language whose ISO code is {code}")


# -- the builder: a request's messages and their size ----------------------------------------------

FENCE = "######"
# A title as the prompt shows it: long enough to name a document, short enough that a block's
# head never crowds out its text (a source block keeps at least MIN_ROOM / 2 for text)
MAX_PROMPT_TITLE = 200


@dataclass(frozen=True)
class Question:
    """What every request of a chain carries besides its sources."""

    text: str
    history: tuple[ChatMessage, ...] = ()
    language: str = ""
    format_instruction: str = ""
    not_found: str = NOT_FOUND_SENTENCES["en"]


class PromptBuilder:
    """Builds [system, *history, user] for any user template; sizes are in characters.

    The size of a request is the sum of its message contents (Datafari's measure). Sources and
    partial answers reach templates already rendered, each as one block, so a request's size is
    exactly its size without them plus the size of each block it holds.

    >>> builder = PromptBuilder(prompts, Question("When are apple trees pruned?"))
    >>> builder.messages("stuff", sources=builder.block(chunk))
    """

    def __init__(
        self, prompts: PromptLibrary, question: Question, *, system_template: str = "system"
    ) -> None:
        self._prompts = prompts
        self.question = question
        self._common = {
            "language": question.language,
            "history": [message.as_dict() for message in question.history],
            "format_instruction": question.format_instruction,
            "not_found": question.not_found,
        }
        self._system = prompts.render(system_template, **self._common)
        self.scaffolding = prompts.scaffolding  # cleaned out of what the LLM answers

    def block(self, item: NumberedChunk) -> str:
        document = item.chunk.document
        rendered = self._prompts.render(
            "source",
            number=item.number,
            title=clean_context(document.title[:MAX_PROMPT_TITLE]),
            url=document.url,
            content=clean_context(item.chunk.text),
            **self._common,
        )
        return rendered + "\n"

    @staticmethod
    def answer_block(text: str) -> str:
        """A partial answer, fenced like a source (and unable to forge a fence)."""
        return f"{FENCE}\n{text.replace(FENCE, '').strip()}\n"

    def messages(self, template: str, **variables: object) -> list[ChatMessage]:
        user = self._prompts.render(
            template, question=self.question.text, **self._common, **variables
        )
        return [
            ChatMessage("system", self._system),
            *self.question.history,
            ChatMessage("user", user),
        ]

    def size(self, template: str, measure: RequestSize, **variables: object) -> int:
        """The size of a request of `template`, as `measure` counts it."""
        return measure.of_messages(self.messages(template, **variables))

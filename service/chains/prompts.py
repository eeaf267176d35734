"""Prompt templates: jinja2 files in `prompts/`, rendered in a sandbox, checked when loaded.

Each template has a fixed set of variables it may use. A template that uses a variable nobody
provides, or that leaves out one it must show (the question, the sources), fails at load with
a message naming the file and the variables, not in the middle of a request.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

from service.errors import PromptTemplateError


@dataclass(frozen=True)
class TemplateSpec:
    """The variables a template may use, and those it must use."""

    provided: frozenset[str]
    required: frozenset[str] = frozenset()


_COMMON = frozenset({"language", "history"})


def _spec(*provided: str, required: tuple[str, ...] = ()) -> TemplateSpec:
    return TemplateSpec(_COMMON | set(provided) | set(required), frozenset(required))


SPECS: dict[str, TemplateSpec] = {
    "system": _spec("format_instruction"),
    "source": _spec("number", "title", "url", required=("content",)),
    "stuff": _spec(required=("sources", "question")),
    "map": _spec(required=("sources", "question", "no_answer")),
    "reduce": _spec(required=("answers", "question")),
    "refine_initial": _spec(required=("sources", "question")),
    "refine_step": _spec(required=("sources", "question", "previous_answer")),
    "rewrite": _spec(required=("question",)),
    "multiquery": _spec(required=("question", "count")),
    "grade": _spec(required=("question", "passages")),
    "summarize_system": _spec(),
    "summarize": _spec("part", required=("sources",)),
    "summarize_reduce": _spec(required=("answers",)),
}


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
        self._templates = {name: self._load(name, spec) for name, spec in SPECS.items()}

    def render(self, name: str, **variables: object) -> str:
        return self._templates[name].render(**variables)

    def _load(self, name: str, spec: TemplateSpec):
        path = self.folder / f"{name}.j2"
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as error:
            raise PromptTemplateError(f"prompt template {path} cannot be read: {error}") from None
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


class PromptStore:
    """The PromptLibrary of a folder, loaded again when a template file changes.

    A change that breaks a template keeps the previous library in service and logs why; only
    the first load raises, so a broken template stops the service at startup.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._stamp = _folder_stamp(folder)
        self._library = PromptLibrary(folder)

    def current(self, folder: Path | None = None) -> PromptLibrary:
        folder = folder or self._folder
        stamp = _folder_stamp(folder)
        if folder != self._folder or stamp != self._stamp:
            try:
                library = PromptLibrary(folder)
            except PromptTemplateError as error:
                logging.getLogger(__name__).error("prompt templates not reloaded: %s", error)
            else:
                self._library = library
            self._folder, self._stamp = folder, stamp
        return self._library


def _folder_stamp(folder: Path) -> tuple[tuple[str, int], ...]:
    try:
        return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*.j2")))
    except OSError:
        return ()

"""Prompt templates: checked when loaded, so a broken one stops the service at startup."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from jinja2.exceptions import SecurityError

from service.api.app import create_app
from service.chains import PromptLibrary, PromptStore
from service.errors import PromptTemplateError
from testing.service import write_properties

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    shutil.copytree(PROMPTS, folder)
    return folder


def test_shipped_templates_load() -> None:
    library = PromptLibrary(PROMPTS)
    block = library.render("source", number=3, title="T", url="", content="text", language="")
    assert block.startswith("######\n[3] T\ntext")


def test_a_template_that_does_not_parse_is_named(prompts: Path) -> None:
    (prompts / "map.j2").write_text("{% if %}")
    with pytest.raises(PromptTemplateError, match=r"map\.j2 does not parse"):
        PromptLibrary(prompts)


def test_a_variable_nobody_provides_is_named(prompts: Path) -> None:
    (prompts / "stuff.j2").write_text("{{ sources }} {{ question }} {{ secret_sauce }}")
    with pytest.raises(PromptTemplateError, match="secret_sauce, which nobody provides"):
        PromptLibrary(prompts)


def test_a_template_that_forgets_the_question_is_refused(prompts: Path) -> None:
    (prompts / "stuff.j2").write_text("Sources: {{ sources }}")
    with pytest.raises(PromptTemplateError, match="must show question"):
        PromptLibrary(prompts)


def test_a_missing_template_is_named(prompts: Path) -> None:
    (prompts / "reduce.j2").unlink()
    with pytest.raises(PromptTemplateError, match=r"reduce\.j2 cannot be read"):
        PromptLibrary(prompts)


def test_the_service_refuses_to_start_with_a_broken_template(prompts: Path, tmp_path: Path) -> None:
    (prompts / "system.j2").write_text("{{ unknown_thing }}")
    config = write_properties(tmp_path / "rag.properties", {"prompt.templates.dir": prompts})
    with pytest.raises(PromptTemplateError, match="unknown_thing"):
        create_app(config)


def test_templates_are_sandboxed(prompts: Path) -> None:
    (prompts / "source.j2").write_text("{{ content.__class__.__mro__ }}")
    library = PromptLibrary(prompts)
    with pytest.raises(SecurityError):
        library.render("source", number=1, title="", url="", content="x", language="")


def test_an_edited_template_is_used_and_a_broken_edit_is_ignored(prompts: Path) -> None:
    store = PromptStore(prompts)
    (prompts / "stuff.j2").write_text("NEW {{ sources }} {{ question }}")
    edited = store.current().render("stuff", sources="S", question="Q", language="", history=[])
    assert edited == "NEW S Q"
    (prompts / "stuff.j2").write_text("{{ broken")
    again = store.current().render("stuff", sources="S", question="Q", language="", history=[])
    assert again == "NEW S Q"


def test_an_edit_is_seen_beside_a_file_that_cannot_be_read(prompts: Path) -> None:
    """An editor's lock (Emacs' `.#stuff.j2`, a dangling link) in the folder: each edit is
    still seen, never a library loaded for an earlier version of the folder (the templates
    are loaded once per version and shared)."""
    store = PromptStore(prompts)
    lock = prompts / ".#stuff.j2"
    for edit in ("FIRST", "SECOND", "FIRST"):
        lock.symlink_to("user@host.1234:1700000000")
        (prompts / "stuff.j2").write_text(f"{edit} {{{{ sources }}}} {{{{ question }}}}")
        shown = store.current().render("stuff", sources="S", question="Q", language="", history=[])
        assert shown == f"{edit} S Q"
        lock.unlink()
        store.current()
        (prompts / "stuff.j2").write_text(f"{edit}, {{{{ sources }}}} {{{{ question }}}}")
        shown = store.current().render("stuff", sources="S", question="Q", language="", history=[])
        assert shown == f"{edit}, S Q"

"""The house's layers (docs/architecture.md).

- Only retrieval/ and ingest/ speak to Solr; the answer cache asks retrieval/ (issue 49, step
  2), the kept conversations their own records module (conversations/records.py, issue 67),
  and nothing else of theirs does.
- The edges (api, cli, web) may import the domain, never the other way round; api/ holds
  transport only.
- Arrows run one way (issue 84): no two top-level packages of service/ import each other (every
  import counted, in a function or under TYPE_CHECKING too), so each sits above or below the
  other; the ground floor (config, text, errors, observability, tracing) imports nothing else
  of the service.
- No file of service/ over 500 lines but config/settings.py (issue 84): a longer one is split by
  concept.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from testing.imports import Edge, circles, import_graph

SERVICE = Path(__file__).resolve().parents[2] / "service"
SPEAKS_TO_SOLR = re.compile(
    r"\b(?:solr|_solr)\.(?:select|add|update|delete_by_query|get|schema_fields|config)\("
)
ALLOWED = ("retrieval", "ingest")
RECORDS = ("conversations/records.py",)  # a package's own collection, behind one module


def test_only_retrieval_and_ingestion_speak_to_solr() -> None:
    speaking = sorted(
        str(path.relative_to(SERVICE))
        for path in SERVICE.rglob("*.py")
        if path.relative_to(SERVICE).parts[0] not in ALLOWED
        and path.relative_to(SERVICE).as_posix() not in RECORDS
        and SPEAKS_TO_SOLR.search(path.read_text(encoding="utf-8"))
    )
    assert speaking == []


# the edges: they may import the domain, never the other way round
EDGES = ("service.api", "service.cli", "service.web")
# what only the domain does: an LLM call, a prompt rendered, a Solr query
DOMAIN_WORK = re.compile(
    r"\bllm\.(?:complete|with_tools|stream|chat)\w*\(|prompts\.render\(|documents_matching\("
)


def test_the_domain_never_imports_the_edges() -> None:
    inward = sorted(
        f"{edge.source} -> {edge.target}"
        for edge in import_graph()
        if not edge.source.startswith(EDGES) and edge.target.startswith(EDGES)
    )
    assert inward == []


def test_api_holds_transport_only() -> None:
    """api/ validates, identifies and renders: no LLM call, no prompt, no Solr query of its
    own (issue 67); the OpenAI relay (openai.passthrough) is a proxy's and is allowed."""
    working = sorted(
        str(path.relative_to(SERVICE))
        for path in (SERVICE / "api").rglob("*.py")
        if DOMAIN_WORK.search(path.read_text(encoding="utf-8"))
        or SPEAKS_TO_SOLR.search(path.read_text(encoding="utf-8"))
    )
    assert working == []


# -- arrows one way (issue 84) -----------------------------------------------------------------

# the ground floor: what every other room may read, importing nothing of theirs
GROUND = ("config", "text", "errors", "observability", "tracing")


def package_of(module: str) -> str:
    """The top-level package (or module) of service/ that `module` is in: service.rag.stages.echo
    -> rag, service.snapshot -> snapshot; "" for service itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_imports(edges: list[Edge], root: Path = SERVICE) -> dict[tuple[str, str], set[str]]:
    """(importing package, imported package) -> the files whose imports make that arrow."""
    arrows: dict[tuple[str, str], set[str]] = defaultdict(set)
    for edge in edges:
        source, target = package_of(edge.source), package_of(edge.target)
        if source and target and source != target:
            arrows[source, target].add(_file(edge.source, root))
    return arrows


def two_way_ties(edges: list[Edge], root: Path = SERVICE) -> list[str]:
    """Each pair of packages that import each other, with the files of both directions."""
    arrows = package_imports(edges, root)
    return [
        f"{low} <-> {high}\n"
        f"    {low} -> {high}: {', '.join(sorted(arrows[low, high]))}\n"
        f"    {high} -> {low}: {', '.join(sorted(arrows[high, low]))}"
        for low, high in sorted(arrows)
        if low < high and (high, low) in arrows
    ]


def _file(module: str, root: Path) -> str:
    """The file of a module of `root` (service.config.settings -> service/config/settings.py)."""
    path = root.parent.joinpath(*module.split("."))
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return str(file.relative_to(root.parent))


def test_no_two_packages_import_each_other() -> None:
    edges = import_graph()
    ties = two_way_ties(edges)
    assert not ties, (
        "packages of service/ that import each other (cut the tie where the concept lives: move "
        "it down, or hand it in from above):\n" + "\n".join(ties)
    )
    # nor round a longer circle (a -> b -> c -> a): then too no package is above the other
    arrows = [Edge(source, target, "module") for source, target in package_imports(edges)]
    assert circles(arrows) == []


def test_the_ground_floor_imports_nothing_of_the_domain() -> None:
    upward = sorted(
        f"{source} -> {target}: {', '.join(sorted(files))}"
        for (source, target), files in package_imports(import_graph()).items()
        if source in GROUND and target not in GROUND
    )
    assert upward == []


@pytest.mark.parametrize("kind", ["module", "function", "typing"])
def test_a_tie_is_seen_through_every_kind_of_import(tmp_path: Path, kind: str) -> None:
    imported = {
        "module": "from pkg.high import H\n",
        "function": "def f() -> None:\n    from pkg.high import H\n",
        "typing": "import typing\nif typing.TYPE_CHECKING:\n    from pkg.high import H\n",
    }[kind]
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/base.py": "B = 1\n",
        "low/uses.py": imported,
        "high.py": "from pkg.low.base import B\nH = B\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    edges = import_graph(package)
    assert two_way_ties(edges, package) == [
        "high <-> low\n    high -> low: pkg/high.py\n    low -> high: pkg/low/uses.py"
    ]
    (package / "low/uses.py").write_text("from pkg.low.base import B\n")
    assert two_way_ties(import_graph(package), package) == []


# -- files a reader can hold (issue 84) ----------------------------------------------------------

LONGEST = 500  # lines
# the settings' parts, each a few lines of keys, read best in one place
LONGER_ALLOWED = ("config/settings.py",)


def test_no_file_over_500_lines_but_the_settings() -> None:
    longer = sorted(
        f"{path.relative_to(SERVICE).as_posix()}: {lines} lines"
        for path in SERVICE.rglob("*.py")
        if path.relative_to(SERVICE).as_posix() not in LONGER_ALLOWED
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > LONGEST
    )
    assert longer == [], (
        "split by concept (what a reader does while streaming vs to a whole answer), "
        "not by line count"
    )

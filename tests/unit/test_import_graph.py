"""service/ has no import circle but the ones known here, and these only shrink (issue 67): a
new circle fails, naming its imports; a known one that shrank or went must be written anew."""

from __future__ import annotations

from pathlib import Path

from testing.imports import Edge, circles, import_graph

# every circle left, by its members; remove one when it is broken, never add one
KNOWN_CIRCLES: list[frozenset[str]] = []  # none left (issue 67): a new one fails


def test_no_new_import_circle() -> None:
    edges = import_graph()
    found = circles(edges)
    new = [circle for circle in found if not any(circle <= known for known in KNOWN_CIRCLES)]
    assert not new, "new import circles (move the shared piece to the module it belongs to):\n" + (
        "\n".join(_described(circle, edges) for circle in new)
    )
    stale = [known for known in KNOWN_CIRCLES if known not in found]
    assert not stale, (
        "a known circle shrank or went: in KNOWN_CIRCLES, write it as it is now "
        f"({[sorted(c) for c in found if any(c <= k for k in stale)]}) or remove it"
    )


def test_a_circle_is_seen_through_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "import os\nfrom pkg.sub import b\n",
        "sub/__init__.py": "from pkg.sub.c import C\n",
        "sub/b.py": "def f():\n    from pkg.sub import C\n",
        "sub/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from ..a import x\nC = 1\n",
        "d.py": "import pkg.a\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    edges = import_graph(package)
    assert edges == [
        Edge("pkg.a", "pkg.sub.b", "module"),
        Edge("pkg.d", "pkg.a", "module"),
        Edge("pkg.sub", "pkg.sub.c", "module"),
        Edge("pkg.sub.b", "pkg.sub", "function"),
        Edge("pkg.sub.c", "pkg.a", "typing"),
    ]
    assert circles(edges) == [frozenset({"pkg.a", "pkg.sub", "pkg.sub.b", "pkg.sub.c"})]
    assert circles(edges[:2]) == []


def _described(circle: frozenset[str], edges: list[Edge]) -> str:
    inside = [e for e in edges if e.source in circle and e.target in circle]
    return "\n".join(
        [" <-> ".join(sorted(circle))]
        + [f"    {e.source} -> {e.target} ({e.kind})" for e in inside]
    )

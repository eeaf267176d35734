"""The import graph of service/: which module imports which, read from the source (ast, nothing
imported), and its circles.

    $ python -m testing.imports            # every circle, with the kind of each edge in it
    >>> circles(import_graph(Path("service")))

An edge is one module naming another in an import: at module level (`module`), under
`if TYPE_CHECKING:` (`typing`), or inside a function (`function`). `from service.x import y`
is an edge to service.x.y when y is a module, else to service.x (its `__init__`). A circle is
a strongly connected set of modules, whatever the kinds of its edges: a circle held open by
type-only or in-function imports is still one (the modules cannot be read apart).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

Kind = str  # "module", "typing" or "function"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Edge:
    """One module importing another: where, and how."""

    source: str
    target: str
    kind: Kind


def import_graph(package: Path = ROOT / "service") -> list[Edge]:
    """Every import between the modules of `package` (a folder of .py files)."""
    modules = {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    edges: set[Edge] = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, kind in _imports(tree):
            for target in _targets(node, name, path, modules):
                if target != name:
                    edges.add(Edge(name, target, kind))
    return sorted(edges, key=lambda e: (e.source, e.target, e.kind))


def circles(edges: list[Edge]) -> list[frozenset[str]]:
    """The graph's circles: each set of modules that import one another, round and round
    (Tarjan's strongly connected components of more than one module)."""
    following: dict[str, set[str]] = {}
    for edge in edges:
        following.setdefault(edge.source, set()).add(edge.target)
        following.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(module: str) -> None:  # recursive: service/ is a few hundred modules deep at most
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(following[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.add(member)
                if member == module:
                    break
            if len(members) > 1:
                found.append(frozenset(members))

    for module in sorted(following):
        if module not in index:
            visit(module)
    return sorted(found, key=sorted)


def _module_name(path: Path, package: Path) -> str:
    parts = [package.name, *path.relative_to(package).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, Kind]]:
    """Each import statement of a module, with its kind."""
    found: list[tuple[ast.Import | ast.ImportFrom, Kind]] = []

    def walk(node: ast.AST, kind: Kind) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, kind))
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                walk(child, "function")
            elif isinstance(child, ast.If) and kind == "module" and _is_type_checking(child.test):
                for statement in child.body:
                    walk(ast.Module(body=[statement], type_ignores=[]), "typing")
                for statement in child.orelse:
                    walk(ast.Module(body=[statement], type_ignores=[]), kind)
            else:
                walk(child, kind)

    walk(tree, "module")
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, path: Path, modules: dict[str, Path]
) -> list[str]:
    """The package's modules an import statement names."""
    if isinstance(node, ast.Import):
        return [_known(alias.name, modules) for alias in node.names if _known(alias.name, modules)]
    base = node.module or ""
    if node.level:  # relative: from the module's package, up level - 1
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        here = here[: len(here) - node.level + 1]
        base = ".".join([*here, base] if base else here)
    targets = []
    for alias in node.names:
        target = _known(f"{base}.{alias.name}", modules) or _known(base, modules)
        if target:
            targets.append(target)
    return targets


def _known(dotted: str, modules: dict[str, Path]) -> str:
    """`dotted` if it is one of the package's modules, else its nearest package that is."""
    parts = dotted.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return ""


def main() -> int:
    edges = import_graph()
    kinds = Counter(edge.kind for edge in edges)
    modules = {edge.source for edge in edges} | {edge.target for edge in edges}
    print(f"{len(modules)} modules, {len(edges)} imports: " + ", ".join(
        f"{kinds[kind]} {kind}" for kind in ("module", "typing", "function")))  # fmt: skip
    found = circles(edges)
    print(f"{len(found)} circles")
    for circle in found:
        print("\n" + " <-> ".join(sorted(circle)))
        for edge in edges:
            if edge.source in circle and edge.target in circle:
                print(f"    {edge.source} -> {edge.target} ({edge.kind})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""The imports between the modules of ``cdk_gpu_share``, read from the source with :mod:`ast`.

Every import counts: at the top of a module, inside a function, under ``TYPE_CHECKING``. An
import names the module it loads: ``from cdk_gpu_share.core import errors`` the module
``core.errors``, ``from cdk_gpu_share.core.errors import Problem`` the same, ``from
cdk_gpu_share import SharedGpuQuota`` (a name of a package) the package's ``__init__``. The
packages a module sits in are not counted: Python runs them first, but they are not what the
module asked for.

``python tools/import_graph.py`` prints the cycles among the modules (none, when the house is in
order) and the imports between the packages.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cdk_gpu_share"


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by another."""

    source: str
    target: str
    line: int
    #: True when it is inside a function (a lazy import).
    lazy: bool


def module_name(path: Path, src: Path) -> str:
    """``cdk_gpu_share.core.errors`` for ``src/cdk_gpu_share/core/errors.py`` (a package: its name)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(src: Path = ROOT / "src") -> dict[str, Path]:
    """Every module of the package by its dotted name."""
    return {module_name(p, src): p for p in sorted((src / PACKAGE).rglob("*.py"))}


def _base(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
    return inside


def imports(name: str, path: Path, known: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """``(line, imported name, lazy)`` for each import of the package in ``path``: the imported
    name is a module of ``known`` or, when it names none, what the source says (a broken import)."""
    known = set(known)
    tree = ast.parse(path.read_text(), str(path))
    inside = _function_nodes(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(name, path, node)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield node.lineno, target, id(node) in inside


def graph(src: Path = ROOT / "src") -> tuple[dict[str, Path], list[Import]]:
    """The modules of the package and every import of one by another."""
    found = modules(src)
    edges = [Import(name, target, line, lazy)
             for name, path in found.items()
             for line, target, lazy in imports(name, path, found)
             if target != name]
    return found, edges


def cycles(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, without
    recursion), each sorted, in sorted order: a component is a set of modules that import
    each other, directly or through one another."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(succ):
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def describe_cycle(component: list[str], edges: Iterable[Import]) -> str:
    """The imports inside one component, one per line (``a:12 -> b``)."""
    members = set(component)
    inner = sorted({f"{e.source}:{e.line} -> {e.target}{' (in a function)' if e.lazy else ''}"
                    for e in edges if e.source in members and e.target in members})
    return "; ".join(inner)


def package_of(module: str, found: Mapping[str, Path], depth: int) -> str:
    """The package ``module`` belongs to, cut to ``depth`` parts below ``cdk_gpu_share``."""
    parts = module.split(".")
    if module in found and found[module].name != "__init__.py":
        parts = parts[:-1]
    return ".".join(parts[: depth + 1])


#: The base modules of ``core``: what every part reads (one part of the picture).
CORE_BASE = ("errors", "quoting", "validation", "text", "_moved", "frozen")
#: The level of each module of a package split by layer (as ``tests/test_layers.py`` has it).
SPLIT_LEVELS = {"construct": "constructs", "status": "cli", "cli": "cli", "handler": "lambdas"}


def part_of(module: str) -> str | None:
    """The part of the picture ``module`` belongs to: a package of ``core`` (its base modules are one
    part, ``plan`` and ``scenario`` each their own) or a layer of the package. A backend's package and
    MIG inference are split by layer: their specs are ``backends`` and ``inference``, their
    constructs, Lambda handler and commands belong to ``constructs``, ``lambdas`` and ``cli``. None:
    the package's root (lazy names only)."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    if parts[0] == "core":
        if len(parts) == 1 or parts[1] in CORE_BASE:
            return "core (base)"
        return f"core.{parts[1]}"
    if parts[0] in ("backends", "inference"):
        return next((SPLIT_LEVELS[p] for p in parts[1:] if p in SPLIT_LEVELS), parts[0])
    return parts[0]


def part_edges(edges: Iterable[Import]) -> dict[str, set[str]]:
    """Each part and the parts it imports."""
    out: dict[str, set[str]] = {}
    for e in edges:
        a, b = part_of(e.source), part_of(e.target)
        if a is None:
            continue
        out.setdefault(a, set())
        if b is not None and b != a:
            out[a].add(b)
            out.setdefault(b, set())
    return out


def diagram(edges: Iterable[Import]) -> str:
    """The parts of the package, the highest first, each with the parts it imports: every arrow
    points to a line further down (a part with no import is at the bottom)."""
    succ = part_edges(edges)
    depth: dict[str, int] = {}

    def level(part: str, seen: tuple[str, ...] = ()) -> int:
        if part not in depth:
            below = [level(b, seen + (part,)) for b in succ[part] if b not in seen]
            depth[part] = 1 + max(below, default=-1)
        return depth[part]

    for part in succ:
        level(part)
    width = max(map(len, succ))
    lines = []
    for part in sorted(succ, key=lambda p: (-depth[p], p)):
        targets = sorted(succ[part], key=lambda p: (-depth[p], p))
        lines.append(f"{part:<{width}}  -> {', '.join(targets)}" if targets else part)
    return "\n".join(lines)


def main() -> int:
    found, edges = graph()
    components = cycles(found, [(e.source, e.target) for e in edges])
    for component in components:
        print("cycle:", describe_cycle(component, edges))
    print(diagram(edges))
    print(f"{len(found)} modules, {len(edges)} imports, {len(components)} cycles")
    return 1 if components else 0


if __name__ == "__main__":
    sys.exit(main())

"""Count ``Any`` in the public typed surface of ``src/cdk_gpu_share``.

Counts each ``Any`` (``typing.Any``) in the annotations of public functions and methods
(parameters and return) and of dataclass fields, plus unannotated parameters and
returns of public functions (implicitly ``Any``). Public: no path component and no
name starting with ``_`` (``__init__`` methods count). Usage::

    python tools/count_any.py [--list] [SRC]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _any_in(node: ast.AST | None) -> int:
    if node is None:
        return 0
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval")
        except SyntaxError:
            return 0
    return sum(
        1
        for n in ast.walk(node)
        if (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
    )


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__init__"


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


def count(src: Path) -> tuple[int, int, list[str]]:
    """(Any in annotations, unannotated parameters and returns, where)."""
    explicit = implicit = 0
    where: list[str] = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src.parent)
        if any(part.startswith("_") and part != "__init__.py" for part in rel.parts):
            continue
        tree = ast.parse(path.read_text())

        def visit_function(fn: ast.FunctionDef | ast.AsyncFunctionDef, owner: str, rel: Path = rel) -> None:
            nonlocal explicit, implicit
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            if fn.args.vararg:
                args.append(fn.args.vararg)
            if fn.args.kwarg:
                args.append(fn.args.kwarg)
            if owner and args and args[0].arg in ("self", "cls"):
                args = args[1:]
            label = f"{rel}:{fn.lineno} {owner}{fn.name}"
            for a in args:
                n = _any_in(a.annotation)
                explicit += n
                if a.annotation is None:
                    implicit += 1
                    where.append(f"{label}({a.arg}) unannotated")
                elif n:
                    where.append(f"{label}({a.arg}) Any x{n}")
            if fn.name != "__init__":
                n = _any_in(fn.returns)
                explicit += n
                if fn.returns is None:
                    implicit += 1
                    where.append(f"{label} -> unannotated")
                elif n:
                    where.append(f"{label} -> Any x{n}")

        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(node.name):
                visit_function(node, "")
            elif isinstance(node, ast.ClassDef) and _public(node.name):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(item.name):
                        visit_function(item, f"{node.name}.")
                    elif isinstance(item, ast.AnnAssign) and _is_dataclass(node):
                        n = _any_in(item.annotation)
                        explicit += n
                        if n:
                            where.append(f"{rel}:{item.lineno} {node.name}.{ast.unparse(item.target)} Any x{n}")
    return explicit, implicit, where


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--list"]
    src = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "src" / "cdk_gpu_share"
    explicit, implicit, where = count(src)
    if "--list" in argv:
        print("\n".join(where))
    print(f"Any in public annotations: {explicit}; unannotated public parameters and returns: {implicit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

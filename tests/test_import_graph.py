"""No circles among the package's modules, and no import hidden in a function to dodge one.

The graph is read from the source with :mod:`ast` (``tools/import_graph.py``): every import
counts, those under ``TYPE_CHECKING`` and those inside functions too, so a type that two
modules both need has to live below both, and a lazy import that closes a circle is still a
circle. An import inside a function is allowed only where it saves start-up time: in the
modules of the ``gpu-share`` command, which imports every command module to build its
``--help`` and loads what one command runs (the simulator, the planner, the AWS readers) when
that command runs.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import import_graph  # noqa: E402

sys.path.remove(str(ROOT / "tools"))

#: Where an import inside a function is allowed, and why (patterns of module names).
LAZY_ALLOWED: dict[str, str] = {
    "cdk_gpu_share.cli": "builds the parser of `gpu-share`, which imports every command module",
    "cdk_gpu_share.cli.*": "a command module: it loads what the command runs when it runs, not for --help",
    "cdk_gpu_share.inference.cli": "the `mig` commands: loaded for --help with the others",
    "cdk_gpu_share.backends.*.cli": "a backend's commands: loaded for --help with the others",
    "cdk_gpu_share.backends.*.status": "a backend's reader for `gpu-share status`, loaded by the command",
}

FOUND, EDGES = import_graph.graph()


def _lazy_allowed(module: str) -> bool:
    return any(fnmatch.fnmatchcase(module, pattern) for pattern in LAZY_ALLOWED)


def test_no_module_imports_itself_back():
    components = import_graph.cycles(FOUND, [(e.source, e.target) for e in EDGES])
    assert [import_graph.describe_cycle(c, EDGES) for c in components] == []


def test_an_import_inside_a_function_only_saves_start_up_time():
    hidden = sorted(f"{e.source}:{e.line} imports {e.target}" for e in EDGES if e.lazy and not _lazy_allowed(e.source))
    assert hidden == [], "import it at the top of the module (a circle it closed is a circle: break that instead)"


def test_every_import_of_the_package_names_one_of_its_modules():
    """An old module path (kept importable for users, with a deprecation warning) is never
    used by the package itself, nor any path that does not exist."""
    assert sorted(f"{e.source}:{e.line} imports {e.target}" for e in EDGES if e.target not in FOUND) == []


def test_every_pattern_of_the_allow_list_names_a_module():
    assert [p for p in LAZY_ALLOWED if not any(fnmatch.fnmatchcase(m, p) for m in FOUND)] == []


# ---------------------------------------------------------------------------
# The check itself, on a small package of its own.


def _package(tmp_path: Path, files: dict[str, str]) -> tuple[dict[str, Path], list[import_graph.Import]]:
    for name, text in files.items():
        path = tmp_path / "cdk_gpu_share" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph.graph(tmp_path)


def _cycles(found, edges) -> list[list[str]]:
    return import_graph.cycles(found, [(e.source, e.target) for e in edges])


def test_the_check_sees_a_circle_closed_in_a_function_or_for_typing(tmp_path):
    found, edges = _package(tmp_path, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "from cdk_gpu_share.core.b import B\n",
        "core/b.py": "def f():\n    from cdk_gpu_share.core import a\n",
        "core/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
        "core/d.py": "from . import c\n",
        "core/e.py": "from cdk_gpu_share.core import a\n",
    })
    assert _cycles(found, edges) == [["cdk_gpu_share.core.a", "cdk_gpu_share.core.b"],
                                     ["cdk_gpu_share.core.c", "cdk_gpu_share.core.d"]]
    assert [(e.source, e.line, e.lazy) for e in edges if e.lazy] == [("cdk_gpu_share.core.b", 2, True)]
    assert "cdk_gpu_share.core.b:2 -> cdk_gpu_share.core.a (in a function)" in import_graph.describe_cycle(
        ["cdk_gpu_share.core.a", "cdk_gpu_share.core.b"], edges)


def test_the_check_counts_a_name_of_a_package_as_its_init(tmp_path):
    found, edges = _package(tmp_path, {
        "__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cdk_gpu_share.parts.x import X\n",
        "parts/__init__.py": "",
        "parts/x.py": "import cdk_gpu_share\nfrom cdk_gpu_share import parts\nfrom cdk_gpu_share.gone import Y\n",
    })
    assert {(e.source, e.target) for e in edges} == {
        ("cdk_gpu_share", "cdk_gpu_share.parts.x"), ("cdk_gpu_share.parts.x", "cdk_gpu_share"),
        ("cdk_gpu_share.parts.x", "cdk_gpu_share.parts"), ("cdk_gpu_share.parts.x", "cdk_gpu_share.gone")}
    assert _cycles(found, edges) == [["cdk_gpu_share", "cdk_gpu_share.parts.x"]]
    assert "cdk_gpu_share.gone" not in found


@pytest.mark.parametrize(("module", "allowed"), [
    ("cdk_gpu_share.cli.simulate_cmd", True), ("cdk_gpu_share.backends.fairshare.status", True),
    ("cdk_gpu_share.core.configuration.parse", False), ("cdk_gpu_share.backends.fairshare.construct", False),
])
def test_lazy_imports_are_allowed_in_the_command_line_modules_only(module, allowed):
    assert _lazy_allowed(module) is allowed


# ---------------------------------------------------------------------------
# The house: core/ by domain, the old module paths kept for one release.

CORE = ROOT / "src" / "cdk_gpu_share" / "core"


def test_core_holds_its_domains_and_at_most_eight_modules():
    modules = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= 8, modules
    packages = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())
    assert packages == ["advise", "catalog", "configuration", "eta", "policy", "records", "simulate"]


def test_every_package_of_core_says_what_lives_there_and_what_it_may_import():
    for package in sorted(p for p in CORE.iterdir() if (p / "__init__.py").is_file()):
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        assert "import" in doc, package.name


def test_an_old_module_path_is_the_new_module_with_a_deprecation_warning():
    from cdk_gpu_share.core._moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
            f"{old} is deprecated: import {new} (the old path goes in the next release)"]
        assert old not in FOUND and new in FOUND


def test_python_c_import_of_an_old_path_works_and_warns():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    result = subprocess.run([sys.executable, "-c", "import cdk_gpu_share.core.config as c; print(c.load_config.__module__)"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "cdk_gpu_share.core.configuration.parse\n"
    assert ("DeprecationWarning: cdk_gpu_share.core.config is deprecated: import "
            "cdk_gpu_share.core.configuration.parse") in result.stderr


def test_the_parts_of_the_picture_import_downwards_only():
    """The picture in docs/development.md: between the parts (core's domains, the layers) no
    circle either, so every arrow points to a part further down."""
    parts = import_graph.part_edges(EDGES)
    assert import_graph.cycles(parts, [(a, b) for a, targets in parts.items() for b in targets]) == []
    lines = import_graph.diagram(EDGES).splitlines()
    order = [line.split("  ->")[0].strip() for line in lines]
    assert order[0] == "stacks" and order[-1] == "core (base)"
    assert order.index("core.policy") < order.index("core.configuration") < order.index("core.catalog")


def test_no_module_is_over_a_thousand_lines_and_the_config_and_the_planner_under_eight_hundred():
    lengths = {name: len(path.read_text().splitlines()) for name, path in FOUND.items()}
    assert {name: n for name, n in lengths.items() if n > 1000} == {}
    assert lengths["cdk_gpu_share.core.configuration.parse"] < 800
    assert lengths["cdk_gpu_share.core.policy.reclaim"] < 800

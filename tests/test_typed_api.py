"""The public API is typed: type checkers see every exported name, and mypy checks an app."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import cdk_gpu_share
from tests.helpers import ROOT

INIT = Path(cdk_gpu_share.__file__)


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` in ``cdk_gpu_share/__init__.py``."""
    tree = ast.parse(INIT.read_text())
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                out.update({alias.name: imp.module for alias in imp.names})
    return out


def test_every_lazy_name_is_imported_for_type_checkers_from_its_module():
    imports = _type_checking_imports()
    assert imports == cdk_gpu_share._LAZY
    assert cdk_gpu_share.__all__ == sorted(cdk_gpu_share._LAZY)


def test_every_exported_name_resolves_at_run_time_to_what_type_checkers_see():
    import importlib

    for name, module in cdk_gpu_share._LAZY.items():
        assert getattr(cdk_gpu_share, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        cdk_gpu_share.Nope  # noqa: B018


def _public_constructs() -> dict[str, str]:
    """name -> module of every construct class a module of the package lists in its ``__all__``."""
    import importlib
    import pkgutil

    import constructs

    out: dict[str, str] = {}
    for info in pkgutil.walk_packages(cdk_gpu_share.__path__, "cdk_gpu_share."):
        if ".lambdas" in info.name or info.name.endswith("__main__"):  # Lambda code; the CLI's entry point
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, constructs.Construct) and value.__module__ == info.name:
                out[name] = info.name
    return out


def test_every_public_construct_is_exported_from_the_package_root():
    found = _public_constructs()
    assert {"SharedGpuQuota", "KueueQueues", "MigInferenceEndpoint", "ShareMonitor"} <= set(found)
    missing = {name: module for name, module in found.items() if name not in cdk_gpu_share.__all__}
    assert not missing, f"export these from cdk_gpu_share (_LAZY, the TYPE_CHECKING imports, __all__): {missing}"
    for name in found:
        assert getattr(cdk_gpu_share, name).__name__ == name


def test_kueue_is_importable_from_the_package_root():
    from cdk_gpu_share import KueueConfig, KueueQueues  # noqa: F401  (what the issue asked for, literally)
    from cdk_gpu_share.backends.kueue.construct import KueueQueues as Direct

    assert KueueQueues is Direct


def test_importing_the_package_loads_no_construct_library():
    code = "import sys, cdk_gpu_share; print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}).stdout
    assert out.strip() == "[]"


# -- mypy on the README's Python example


def readme_example() -> str:
    """The README's Python example of ``SharedGpuQuota`` (a whole app, as a user copies it)."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if "SharedGpuQuota(" in b)


def documented_examples() -> list[str]:
    """The Python blocks of the README and the documentation that use the library."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    blocks = [b for page in pages for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.S)]
    return [b for b in blocks if "cdk_gpu_share" in b]


def mypy(tmp_path: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-error-summary", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=900,
        env={**os.environ, "MYPYPATH": str(ROOT / "src")},
    )
    assert result.returncode in (0, 1), result.stderr
    return [line for line in result.stdout.splitlines() if ": error:" in line]


@pytest.mark.slow
def test_mypy_checks_the_readme_example_and_names_a_wrong_argument(tmp_path):
    example = readme_example()
    assert "TeamConfig(name=t," in example
    assert "SharedGpuQuota, Sharing" in example
    good = example
    bad = example.replace("TeamConfig(name=t,", "TeamConfig(name=3,")
    # An unknown name is an error too, not Any.
    typo = example.replace("SharedGpuQuota, Sharing", "SharedGpuQuota, SharedGpuQuotta, Sharing")
    # Every other Python example a user reads type-checks too (each is a whole app).
    documented = {f"doc_{i}.py": block for i, block in enumerate(documented_examples())}
    errors = mypy(tmp_path, {"good_app.py": good, "bad_app.py": bad, "typo_app.py": typo, **documented})
    assert [e for e in errors if e.startswith(("good_app.py", "doc_"))] == []
    bad_errors = [e for e in errors if e.startswith("bad_app.py")]
    assert len(bad_errors) == 1, errors
    assert 'Argument "name" to "TeamConfig" has incompatible type "int"; expected "str"' in bad_errors[0]
    typo_errors = [e for e in errors if e.startswith("typo_app.py")]
    assert len(typo_errors) == 1 and "SharedGpuQuotta" in typo_errors[0], errors

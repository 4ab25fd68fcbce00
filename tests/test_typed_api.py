"""The public API is typed: type checkers see every exported name, and mypy checks an app."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
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


def test_importing_the_package_loads_no_construct_library():
    code = "import sys, cdk_gpu_share; print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}).stdout
    assert out.strip() == "[]"


# -- mypy on the README's Python example


def readme_example() -> str:
    """The Python block of the README's "The constructs in Python" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## The constructs in Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def app(example: str) -> str:
    """A user's app around the example: a stack with the ``role`` it grants to."""
    imports = [line for line in example.splitlines() if line.startswith(("from ", "import "))]
    body = [line for line in example.splitlines() if not line.startswith(("from ", "import "))]
    return "\n".join([
        "import aws_cdk as cdk",
        "from aws_cdk import aws_iam as iam",
        "from constructs import Construct",
        *imports,
        "",
        "",
        "class TrainingStack(cdk.Stack):",
        "    def __init__(self, scope: Construct, id: str) -> None:",
        "        super().__init__(scope, id)",
        '        role = iam.Role(self, "Submitter", assumed_by=iam.AccountRootPrincipal())',
        textwrap.indent("\n".join(body).strip("\n"), " " * 8),
        "",
        "",
        'TrainingStack(cdk.App(), "Training")',
        "",
    ])


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
    good = app(example)
    bad = app(example.replace("TeamConfig(name=t,", "TeamConfig(name=3,"))
    # An unknown name is an error too, not Any.
    typo = app(example.replace("from cdk_gpu_share import SharedGpuQuota",
                               "from cdk_gpu_share import SharedGpuQuota, SharedGpuQuotta"))
    errors = mypy(tmp_path, {"good_app.py": good, "bad_app.py": bad, "typo_app.py": typo})
    assert [e for e in errors if e.startswith("good_app.py")] == []
    bad_errors = [e for e in errors if e.startswith("bad_app.py")]
    assert len(bad_errors) == 1, errors
    assert 'Argument "name" to "TeamConfig" has incompatible type "int"; expected "str"' in bad_errors[0]
    typo_errors = [e for e in errors if e.startswith("typo_app.py")]
    assert len(typo_errors) == 1 and "SharedGpuQuotta" in typo_errors[0], errors

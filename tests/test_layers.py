"""The layers import downwards only: core -> aws -> constructs, lambdas, cli -> stacks -> app.

A backend's package is split the same way: its ``__init__`` (the spec: parser, rules, plan,
scenario, schema) is core-level, its ``construct`` construct-level and its ``status`` and ``cli``
command-line level. MIG inference (``inference/``) is split the same way: ``config`` and ``fit`` are
core-level, ``construct`` construct-level, the ``handler`` package Lambda-level and ``cli``
command-line level; every module of it has a level. Imports inside functions count too: a lazy
import up is still an arrow up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "src" / "cdk_gpu_share"
#: The core-level modules of MIG inference: the config parser and rules, the sizing and packing.
INFERENCE_CORE = ("cdk_gpu_share.inference.config", "cdk_gpu_share.inference.fit", "cdk_gpu_share.inference.model")
#: What each layer may import of the package and of the CDK and AWS SDKs.
ALLOWED: dict[str, tuple[str, ...]] = {
    "core": ("cdk_gpu_share.core", *INFERENCE_CORE),
    "spec": ("cdk_gpu_share.core", *INFERENCE_CORE),
    "aws": ("cdk_gpu_share.core", *INFERENCE_CORE, "cdk_gpu_share.aws", "boto3", "botocore"),
    "lambdas": ("cdk_gpu_share.core", *INFERENCE_CORE, "cdk_gpu_share.aws", "cdk_gpu_share.lambdas",
                "cdk_gpu_share.inference.handler", "boto3", "botocore"),
    "constructs": ("cdk_gpu_share.core", *INFERENCE_CORE, "cdk_gpu_share.aws", "cdk_gpu_share.constructs",
                   "cdk_gpu_share.backends", "cdk_gpu_share.inference.construct", "cdk_gpu_share.lambdas",
                   "aws_cdk", "constructs", "jsii", "cdk_gpu_share"),
    "cli": ("cdk_gpu_share.core", *INFERENCE_CORE, "cdk_gpu_share.aws", "cdk_gpu_share.cli", "cdk_gpu_share.backends",
            "cdk_gpu_share.inference.cli", "boto3", "botocore"),
}
#: The level of each module of ``inference/`` (its ``handler`` package is Lambda-level).
INFERENCE_LEVELS = {"__init__.py": "spec", "config.py": "spec", "model.py": "spec", "fit.py": "spec", "construct.py": "constructs",
                    "cli.py": "cli"}
#: Modules outside the package that only some layers may import.
GUARDED = ("cdk_gpu_share", "aws_cdk", "constructs", "jsii", "boto3", "botocore", "cdk_nag")


def layer_of(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    if parts[0] == "backends" and len(parts) == 3:
        return {"__init__.py": "spec", "construct.py": "constructs", "status.py": "cli", "cli.py": "cli"}.get(parts[2])
    if parts[0] == "inference":
        return "lambdas" if parts[1] == "handler" else INFERENCE_LEVELS.get(parts[1], "unknown")
    return parts[0] if parts[0] in ALLOWED else None


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def arrows_up(path: Path, layer: str | None = None) -> list[str]:
    """Each import of ``path`` its layer may not make (the package's root, a lazy facade, it may)."""
    layer = layer or layer_of(path)
    if layer is None:
        return []
    if layer not in ALLOWED:
        return [f"{path.name}: no layer (add it to INFERENCE_LEVELS)"]
    allowed = ("cdk_gpu_share",) + ALLOWED[layer]
    bad = []
    for line, name in imports(path):
        guarded = any(name == g or name.startswith(g + ".") for g in GUARDED)
        ok = name in allowed or any(name.startswith(a + ".") for a in allowed if a != "cdk_gpu_share")
        if guarded and not ok:
            bad.append(f"{path.name}:{line} ({layer}) imports {name}")
    return bad


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if layer_of(p) is not None)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_arrow_points_up(path):
    assert arrows_up(path) == []


def test_the_check_sees_an_arrow_up(tmp_path):
    module = tmp_path / "plan.py"
    module.write_text("import json\nfrom cdk_gpu_share.core import instances\n\n\ndef f():\n"
                      "    from cdk_gpu_share.cli._table import format_table\n    import aws_cdk\n")
    assert arrows_up(module, "core") == ["plan.py:6 (core) imports cdk_gpu_share.cli._table",
                                         "plan.py:7 (core) imports aws_cdk"]
    assert arrows_up(module, "cli") == ["plan.py:7 (cli) imports aws_cdk"]


def test_every_inference_module_has_a_level():
    modules = sorted((PACKAGE / "inference").rglob("*.py"))
    assert {p.relative_to(PACKAGE).as_posix(): layer_of(p) for p in modules} == {
        "inference/__init__.py": "spec", "inference/config.py": "spec", "inference/model.py": "spec", "inference/fit.py": "spec",
        "inference/construct.py": "constructs", "inference/cli.py": "cli",
        "inference/handler/__init__.py": "lambdas", "inference/handler/_vendor.py": "lambdas",
        "inference/handler/index.py": "lambdas",
    }


def test_the_check_sees_an_inference_arrow_up(tmp_path):
    config = PACKAGE / "inference" / "config.py"
    module = tmp_path / "config.py"
    module.write_text("from cdk_gpu_share.inference.construct import MigInferenceEndpoint\n"
                      "from cdk_gpu_share.inference.fit import plan\n")
    assert arrows_up(module, layer_of(config)) == [
        "config.py:1 (spec) imports cdk_gpu_share.inference.construct"]
    assert arrows_up(module, layer_of(PACKAGE / "inference" / "construct.py")) == []
    assert arrows_up(module, "unknown") == ["config.py: no layer (add it to INFERENCE_LEVELS)"]
